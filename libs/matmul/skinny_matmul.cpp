// The generated matmul's skinny (GEMV-like) form, for products of few rows:
// bandwidth-bound, it streams B once.
//
// A block owns lanesN x vectorN columns of C and rowsPerBlock rows, for
// one K-slice. The lanes of a warp form 32 / lanesN groups ("row slots");
// lane l of a group holds the columns l*vectorN.., for all of the block's
// rows, in registers; slot s takes rows s, s+slots, ... of the slice, so a
// group reads a segment of a row of B (coalesced, 128-bit; the whole row of
// the block's columns) straight into registers, each element of B once.
// The slice of A is staged in shared memory ([k][row]) and read as
// broadcasts. At the end the warps add their partial sums through shared
// memory, and one thread per output vector writes C (when K is split, its
// split's slab of the partial products, partialSumsType, which a second
// kernel adds up, or with lastSplitCompletes the last of the column tile's
// splits to finish: codegen/split_completion.h).
//
// On chips with programmatic dependent launch the block first brings its
// slice of B into L2, then waits for the kernel before it
// (kSkinnyPrefetchesB). Where no kernel writes B (a weight), each thread
// instead loads its rows of B into registers before the wait, all of them
// where they fit (kSkinnyLoadsBBeforeWait).
//
// With a row prologue (MatmulRowPrologue), A's one row is not read: every
// block computes it into the staged slice while its first rows of B load.
//
// 16-bit A and B (bf16, f16) stay 16-bit in memory, in the staged slice
// and in the registers of the rows in flight (a 128-bit load is 8 of them);
// each is widened to f32 as it is multiplied, the sums and the cross-warp
// reduction are f32, and C is rounded once, as it is stored.
#include "matmul/matmul_building.h"

#include "codegen/debug.h"
#include "codegen/l2_prefetch.h"
#include "codegen/split_completion.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace mlpipe::emitters::generated_matmul {

namespace {

// The body of one skinny kernel, built in the order it runs: the block's
// place in the grid, the first rows of B issued, the slice of A staged (or
// A's row computed), the chunks of B rows accumulated, then the warps'
// partial sums added and C written.
class SkinnyBody {
public:
  // `whole`: the product with C and its epilogue, where `p` computes
  // split K's partial products.
  SkinnyBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p, const Problem &whole,
             const SkinnyConfig &cfg, bool cVector)
      : b(b), f(f), loc(f.getLoc()), ix{b, loc}, p(p), whole(whole), cfg(cfg), cVector(cVector), element(p.element),
        storage(p.storage), eb(p.elementBytes), accumulatorBytes(p.accumulatorBytes), a(f.getArgument(0), eb),
        bm(f.getArgument(1), eb), c(f.getArgument(2), bytesOfElement(p.cType)), threads(cfg.threads()),
        rows(cfg.rowsPerBlock), vn(cfg.vectorN), slots(cfg.rowSlots()) {}

  mlir::LogicalResult build() {
    alignWorkgroupBuffers(b, f);
    f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(kSkinnyBlocksPerSm)));
    size_t prologueCount = p.prologue ? p.prologue->hostOperands.size() : 0;
    // C and the epilogue's operands follow the partial products where the
    // last split completes.
    unsigned firstOperand = cfg.lastSplitCompletes ? 4 : 3;
    for (unsigned i = firstOperand; i < f.getNumArguments(); ++i)
      (i + prologueCount < f.getNumArguments() ? epilogueOperands : prologueOperands).push_back(f.getArgument(i));
    sharedA = f.getWorkgroupAttributions()[0];
    sharedReduction = f.getWorkgroupAttributions()[1];
    placeBlock();
    llvm::SmallVector<Value> first;
    if (cfg.prefetchB || cfg.loadsBBeforeWait) {
      // A B no kernel writes: the thread's first chunk of it into registers
      // (its whole slice where that is one chunk).
      if (cfg.loadsBBeforeWait)
        first = loadB(ix.c(0), cfg.rowsInFlight);
      // The block's (rest of its) slice of B into L2 while the kernel before
      // this one finishes; nothing below may read or write before the wait.
      if (cfg.prefetchB && (cfg.chunks() > 1 || !cfg.loadsBBeforeWait)) {
        Value colBegin = ix.mul(blockX, cfg.blockN);
        RowsToPrefetch rows;
        rows.matrix = f.getArgument(1);
        if (mlir::cast<mlir::MemRefType>(rows.matrix.getType()).getRank() == 3)
          rows.outer.push_back(batch);
        rows.rowBegin = kStart;
        rows.rowEnd = ix.min(ix.add(kStart, cfg.kPerSplit), p.k);
        rows.maxRows = cfg.kPerSplit;
        rows.colBegin = colBegin;
        rows.colEnd = ix.min(ix.add(colBegin, cfg.blockN), p.n);
        rows.maxColumns = cfg.blockN;
        rows.elementBytes = eb;
        prefetchRowsToL2(ix.b, ix.loc, rows, tid, threads);
      }
      waitForKernelBefore(ix);
    }

    // B's first rows go out before A is staged.
    if (first.empty())
      first = loadB(ix.c(0), cfg.rowsInFlight);
    if (p.prologue) {
      if (mlir::failed(computeRowOfA()))
        return mlir::failure();
    } else {
      stageSliceOfA();
    }
    llvm::SmallVector<Value> acc = accumulate(first);
    addWarpsAndWriteC(acc);
    if (cfg.lastSplitCompletes) {
      Value blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
      int64_t columnBlocks = llvm::divideCeilSigned(p.n, cfg.blockN);
      completeInLastBlock(b, loc, f, f.getWorkgroupAttributions()[2], tid, ix.add(ix.mul(blockZ, columnBlocks), blockX),
                          columnBlocks * p.batch * cfg.rowGroups, ix.c(cfg.splitK), [&] { addSplitsAndWriteC(); });
    }
    return mlir::success();
  }

private:
  // The thread and block ids: the lane's columns, its row slot, the
  // block's rows and K-slice.
  void placeBlock() {
    tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
    // `lane` within the row segment, `warp` the row slot (a warp when lanesN
    // is 32).
    lane = ix.rem(tid, cfg.lanesN);
    warp = ix.div(tid, cfg.lanesN);
    blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
    split = cfg.splitK > 1 ? Value(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y)) : ix.c(0);
    Value blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
    batch = ix.div(blockZ, cfg.rowGroups);
    m0 = ix.mul(ix.rem(blockZ, cfg.rowGroups), rows);
    Value col = ix.add(ix.mul(blockX, cfg.blockN), ix.mul(lane, vn));
    colClamped = ix.min(col, p.n - vn);
    kStart = ix.mul(split, cfg.kPerSplit);
    maskK = cfg.kPerSplit * cfg.splitK != p.k;
  }

  // Rows j of chunk `chunk` (a dynamic index): slice rows (chunk*R + j)*warps + warp.
  Value sliceRow(Value chunk, int64_t j) {
    return ix.add(ix.mul(ix.add(ix.mul(chunk, cfg.rowsInFlight), j), slots), warp);
  }

  llvm::SmallVector<Value> loadB(Value chunk, int64_t count) {
    llvm::SmallVector<Value> values;
    for (int64_t j = 0; j < count; ++j) {
      // Rows past K (and prefetched rows past the slice) stay in bounds;
      // A reads as zero there, or they are not used.
      Value k = ix.min(ix.add(kStart, sliceRow(chunk, j)), p.k - 1);
      values.push_back(bm.load(ix, batch, k, colClamped, /*alongRows=*/false, vn));
    }
    return values;
  }

  llvm::SmallVector<Value> fmaChunk(Value chunk, llvm::ArrayRef<Value> bValues, llvm::SmallVector<Value> acc) {
    // The staged A ([k][row]) is read 128 bits at a time where its rows allow.
    const int64_t aVector = rows % kFragment == 0 ? std::min<int64_t>(kFragment, kVectorBytes / eb) : 1;
    for (auto [j, bv] : llvm::enumerate(bValues)) {
      Value kk = sliceRow(chunk, static_cast<int64_t>(j));
      llvm::SmallVector<Value> aValues;
      for (int64_t r = 0; r < rows; r += aVector) {
        if (aVector == 1) {
          Value v = mlir::memref::LoadOp::create(b, loc, sharedA, mlir::ValueRange{kk, ix.c(r)});
          aValues.push_back(convertFloat(ix, v, element));
          continue;
        }
        Value v = mlir::vector::LoadOp::create(b, loc, mlir::VectorType::get({aVector}, storage), sharedA,
                                               mlir::ValueRange{kk, ix.c(r)}, false, llvm::MaybeAlign(aVector * eb));
        for (int64_t i = 0; i < aVector; ++i)
          aValues.push_back(convertFloat(ix, extract(ix, v, i), element));
      }
      Value widened = convertFloat(ix, bv, element);
      for (int64_t r = 0; r < rows; ++r)
        acc[r] = fma(ix, broadcast(ix, aValues[r], vn), widened, acc[r]);
    }
    return acc;
  }

  // A's one row, computed by the block (while B's first rows load): its
  // elements k < K go to the staged slice, the slice's rows past K are
  // zero.
  mlir::LogicalResult computeRowOfA() {
    for (int64_t j = 0; (j * threads) + p.k < cfg.kPerSplit; ++j) {
      Value k = ix.add(tid, p.k + j * threads);
      Value valid = ix.lt(k, cfg.kPerSplit);
      guarded(ix, valid, [&] {
        mlir::memref::StoreOp::create(b, loc, zeroScalar(ix, storage), sharedA, mlir::ValueRange{k, ix.c(0)});
      });
    }
    auto store = [&](Value /*row: the one*/, Value k, llvm::ArrayRef<Value> values) {
      for (auto [u, value] : llvm::enumerate(values))
        mlir::memref::StoreOp::create(b, loc, convertFloat(ix, value, storage), sharedA,
                                      mlir::ValueRange{ix.add(k, static_cast<int64_t>(u)), ix.c(0)});
    };
    if (mlir::failed(p.prologue->build(b, loc, prologueOperands, f.getWorkgroupAttributions()[2], threads, store)))
      return mlir::failure();
    mlir::gpu::BarrierOp::create(b, loc);
    return mlir::success();
  }

  // Stage A's slice: element q is (row q / kPerSplit, k q % kPerSplit), so
  // consecutive threads read consecutive k.
  void stageSliceOfA() {
    int64_t count = cfg.kPerSplit * rows;
    for (int64_t j = 0; j < llvm::divideCeilSigned(count, threads); ++j) {
      Value q = ix.add(tid, j * threads);
      Value valid;
      if ((j + 1) * threads > count) {
        valid = ix.lt(q, count);
        q = ix.min(q, count - 1);
      }
      Value kk = ix.rem(q, cfg.kPerSplit), r = ix.div(q, cfg.kPerSplit);
      Value row = ix.min(ix.add(m0, r), p.m - 1);
      Value k = ix.add(kStart, kk);
      Value kInside;
      if (maskK) {
        kInside = ix.lt(k, p.k);
        k = ix.min(k, p.k - 1);
      }
      Value v = a.loadScalar(ix, batch, row, k);
      if (kInside)
        v = mlir::arith::SelectOp::create(b, loc, kInside, v, zeroScalar(ix, storage));
      guarded(ix, valid, [&] { mlir::memref::StoreOp::create(b, loc, v, sharedA, mlir::ValueRange{kk, r}); });
    }
    mlir::gpu::BarrierOp::create(b, loc);
  }

  // The lane's sums over its rows of the slice, from the `first` chunk of
  // B rows on.
  llvm::SmallVector<Value> accumulate(llvm::ArrayRef<Value> first) {
    const int64_t chunks = cfg.chunks();
    llvm::SmallVector<Value> acc(rows, zeroVector(ix, element, vn));
    llvm::SmallVector<Value> current(first.begin(), first.end());
    if (chunks > 1) {
      // Chunks 0 .. chunks-2, each loading the next one's rows first.
      llvm::SmallVector<Value> init(acc);
      init.append(first.begin(), first.end());
      auto loop = buildLoop(ix, ix.c(chunks - 1), init, [&](Value chunk, llvm::SmallVector<Value> carried) {
        llvm::SmallVector<Value> next = loadB(ix.add(chunk, 1), cfg.rowsInFlight);
        llvm::SmallVector<Value> sums(carried.begin(), carried.begin() + rows);
        llvm::SmallVector<Value> loaded(carried.begin() + rows, carried.end());
        sums = fmaChunk(chunk, loaded, sums);
        sums.append(next.begin(), next.end());
        return sums;
      });
      for (int64_t r = 0; r < rows; ++r)
        acc[r] = loop.getResult(r);
      current.assign(loop.getResults().begin() + rows, loop.getResults().end());
    }
    // The last chunk may be partial: only its first rows belong to the slice.
    int64_t lastRows = cfg.rowsPerWarp() - (chunks - 1) * cfg.rowsInFlight;
    return fmaChunk(ix.c(chunks - 1), llvm::ArrayRef<Value>(current).take_front(lastRows), acc);
  }

  // Cross-warp reduction, reductionRows rows of C at a time.
  void addWarpsAndWriteC(llvm::ArrayRef<Value> acc) {
    OutputWriter writer{p, c, epilogueOperands};
    const int64_t perRound = cfg.reductionRows;
    for (int64_t first = 0; first < rows; first += perRound) {
      int64_t count = std::min(perRound, rows - first);
      if (first > 0)
        mlir::gpu::BarrierOp::create(b, loc); // the previous round's reads are done
      for (int64_t i = 0; i < count; ++i)
        mlir::vector::StoreOp::create(b, loc, acc[first + i], sharedReduction,
                                      mlir::ValueRange{warp, ix.c(i), ix.mul(lane, vn)}, false,
                                      llvm::MaybeAlign(vn * accumulatorBytes));
      mlir::gpu::BarrierOp::create(b, loc);
      int64_t outputs = count * cfg.lanesN;
      for (int64_t j = 0; j < llvm::divideCeilSigned(outputs, threads); ++j) {
        Value q = ix.add(tid, j * threads);
        Value valid = (j + 1) * threads > outputs ? ix.lt(q, outputs) : Value();
        Value i = ix.div(q, cfg.lanesN), l = ix.rem(q, cfg.lanesN);
        Value row = ix.add(ix.add(m0, i), first);
        Value outCol = ix.add(ix.mul(blockX, cfg.blockN), ix.mul(l, vn));
        Value inside = ix.both(valid, ix.both(ix.lt(row, p.m), ix.lt(outCol, p.n)));
        guarded(ix, inside, [&] { writeOutputVector(writer, i, l, row, outCol); });
      }
    }
  }

  // The sum of the row slots' partial vectors at (i, l) of this round,
  // stored to the split's slab of the partial products (split K) or written
  // through the epilogue.
  void writeOutputVector(const OutputWriter &writer, Value i, Value l, Value row, Value outCol) {
    Value sum = zeroVector(ix, element, vn);
    for (int64_t w = 0; w < slots; ++w) {
      Value part = mlir::vector::LoadOp::create(b, loc, mlir::VectorType::get({vn}, element), sharedReduction,
                                                mlir::ValueRange{ix.c(w), i, ix.mul(l, vn)}, false,
                                                llvm::MaybeAlign(vn * accumulatorBytes));
      sum = w == 0 ? part : Value(mlir::arith::AddFOp::create(b, loc, sum, part));
    }
    if (cfg.splitK > 1) {
      c.storeRowVector(ix, sum, ix.add(ix.mul(split, p.batch), batch), row, outCol, vn);
      return;
    }
    int64_t widthC = cVector ? vn : 1;
    for (int64_t part = 0; part < vn; part += widthC)
      writer.write(ix, slice(ix, sum, part, widthC), batch, row, ix.add(outCol, part), widthC, cVector);
  }

  // The last split's completion: each of the block's output vectors is
  // the sum of the splits' partial products, in the order of the splits
  // (as the second kernel adds them), written through the epilogue.
  void addSplitsAndWriteC() {
    Matrix partials(f.getArgument(2), accumulatorBytes);
    Matrix wholeC(f.getArgument(3), bytesOfElement(whole.cType));
    OutputWriter writer{whole, wholeC, epilogueOperands};
    int64_t outputs = rows * cfg.lanesN;
    for (int64_t j = 0; j < llvm::divideCeilSigned(outputs, threads); ++j) {
      Value q = ix.add(tid, j * threads);
      Value valid = (j + 1) * threads > outputs ? ix.lt(q, outputs) : Value();
      Value i = ix.div(q, cfg.lanesN), l = ix.rem(q, cfg.lanesN);
      Value row = ix.add(m0, i);
      Value outCol = ix.add(ix.mul(blockX, cfg.blockN), ix.mul(l, vn));
      Value inside = ix.both(valid, ix.both(ix.lt(row, p.m), ix.lt(outCol, p.n)));
      guarded(ix, inside, [&] {
        Value sum = sumOfSplits(ix, partials, batch, row, outCol, vn, cfg.splitK, p.batch);
        int64_t widthC = cVector ? vn : 1;
        for (int64_t part = 0; part < vn; part += widthC)
          writer.write(ix, slice(ix, sum, part, widthC), batch, row, ix.add(outCol, part), widthC, cVector);
      });
    }
  }

  mlir::OpBuilder &b;
  mlir::gpu::GPUFuncOp f;
  mlir::Location loc;
  Ix ix;
  const Problem &p;
  const Problem &whole;
  const SkinnyConfig &cfg;
  bool cVector;
  mlir::Type element; // the accumulator's type
  mlir::Type storage; // A's and B's (and the staged slice's)
  int64_t eb, accumulatorBytes;
  Matrix a, bm, c;
  const int64_t threads, rows, vn, slots;
  llvm::SmallVector<Value> epilogueOperands, prologueOperands;
  Value sharedA, sharedReduction;
  // placeBlock: ids, the block's first row (m0), the lane's columns
  // (clamped inside N), the K-slice and its index.
  Value tid, lane, warp, blockX, batch, m0, colClamped, kStart, split;
  bool maskK = false;
};

} // namespace

mlir::LogicalResult emitSkinnyMatmul(const ProductLaunch &launch, const Problem &p, const SkinnyConfig &cfg) {
  mlir::Location loc = launch.loc;
  const DeviceDescription &device = launch.device;
  Problem q = productProblem(p, cfg.splitK);
  bool cVector = launch.widthC >= cfg.vectorN;
  int64_t shared = skinnySharedBytes(p, cfg);
  if (shared > device.sharedMemoryPerBlock)
    return mlir::emitError(loc, "generated matmul: the skinny form needs ")
           << shared << " bytes of shared memory; a block has " << device.sharedMemoryPerBlock;
  int64_t aRow = cfg.rowsPerBlock >= kFragment ? roundUp(cfg.rowsPerBlock, kFragment) : cfg.rowsPerBlock;
  KernelSignature signature;
  signature.name = launch.name;
  signature.arguments = argumentTypes(q, /*withAB=*/true);
  if (cfg.lastSplitCompletes)
    signature.arguments.append(argumentTypes(p, /*withAB=*/false));
  signature.workgroupBuffers = {workgroupType({cfg.kPerSplit, aRow}, p.storage),
                                workgroupType({cfg.rowSlots(), cfg.reductionRows, cfg.blockN}, p.element)};
  if (p.prologue)
    signature.workgroupBuffers.push_back(workgroupType({std::max<int64_t>(1, p.prologue->slots)}, p.element));
  if (cfg.lastSplitCompletes)
    signature.workgroupBuffers.push_back(completionFlagType(launch.host.getContext()));
  signature.bytesMoved = launch.bytes;
  signature.flops = launch.flops;
  signature.blockSize = {static_cast<int32_t>(cfg.threads()), 1, 1};
  LaunchDims dims;
  dims.grid = {llvm::divideCeilSigned(p.n, cfg.blockN), cfg.splitK, p.batch * cfg.rowGroups};
  dims.block = {cfg.threads(), 1, 1};
  if (dims.grid[1] > 65535 || dims.grid[2] > 65535)
    return mlir::emitError(loc, "generated matmul: the grid is too large for this product");
  MLPIPE_DEBUG(kDebugEmitters,
               os << launch.name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x" << p.k
                  << " (batch x M x N x K), skinny form: " << cfg.rowsPerBlock << " rows x " << cfg.blockN
                  << " columns per block (" << cfg.lanesN << " lanes per B row segment, kSkinnyMinSegmentBytes), "
                  << cfg.threads() << " threads, B vectors " << cfg.vectorN << " along N, split-K " << cfg.splitK
                  << " (" << cfg.kPerSplit << " rows each, " << cfg.rowsInFlight << " in flight per thread"
                  << (cfg.lastSplitCompletes ? "; the last split adds them, kSkinnySplitsToHoldB" : "") << "), C "
                  << (cVector ? "vectors" : "scalars") << ", grid (" << dims.grid[0] << ", " << dims.grid[1] << ", "
                  << dims.grid[2] << "), " << shared << " B shared"
                  << (p.prologue ? ", A's row computed by every block (a row reduction before it)" : "")
                  << (cfg.loadsBBeforeWait
                          ? (cfg.chunks() == 1 ? ", B's slice into registers before the wait (kSkinnyLoadsBBeforeWait)"
                             : cfg.prefetchB   ? ", B's first rows into registers and the rest into L2 before the "
                                                 "wait (kSkinnyLoadsBBeforeWait)"
                                               : ", B's first rows into registers before the wait "
                                                 "(kSkinnyLoadsBBeforeWait)")
                      : cfg.prefetchB ? ", B's slice into L2 before the wait (kSkinnyPrefetchesB)"
                                      : "")
                  << "\n");
  return launchProduct(
      launch, p, cfg.splitK, signature, dims,
      [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) { return SkinnyBody(b, f, q, p, cfg, cVector).build(); },
      /*dynamicSharedBytes=*/0, cfg.lastSplitCompletes);
}

} // namespace mlpipe::emitters::generated_matmul
