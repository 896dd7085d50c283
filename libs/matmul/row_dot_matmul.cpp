// The generated matmul's row-dot form, for products of few rows whose B is
// stored transposed ([N, K], K contiguous: GPT-2's tied logits, x·wteᵀ).
// Each element of C is the dot product of a row of A with a row of that
// storage, so the form streams B's storage once, row by row, each row read
// whole by a group of lanes in 128-bit vectors.
//
// A group of kRowDotLanes lanes owns `columns` consecutive columns of C
// (rows of B's storage) for all of A's rows. At each step a lane loads its
// vector of each of its columns' rows (`stepsInFlight` steps' vectors in
// flight before any is used), then, row by row of A, its vector of that row
// (A is small: it stays in L1), and adds the products into one f32 sum per
// row and column. The group's lanes then add their sums by butterfly
// shuffles, and lane l writes C's rows l, l + kRowDotLanes, ... of its
// columns through the epilogue, rounded once to C's type.
//
// With a row prologue (MatmulRowPrologue: a decode step's final layer norm
// before its logits), A is not read: every block computes A's rows into
// shared memory after its wait, and the lanes read their vectors of A
// there. Where B is a weight, each lane's first round of B is loaded before
// the wait (kRowDotLoadsBBeforeWait).
//
// The skinny form (skinny_matmul.cpp) reads B along N instead, where B's
// rows are contiguous.
#include "matmul/matmul_building.h"

#include "codegen/debug.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlpipe::emitters::generated_matmul {

namespace {

class RowDotBody {
public:
  RowDotBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p, const RowDotConfig &cfg)
      : b(b), f(f), loc(f.getLoc()), ix{b, loc}, p(p), cfg(cfg), a(f.getArgument(0), p.elementBytes),
        bm(f.getArgument(1), p.elementBytes), c(f.getArgument(2), bytesOfElement(p.cType)) {}

  mlir::LogicalResult build() {
    f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(kRowDotBlocksPerSm)));
    size_t prologueCount = p.prologue ? p.prologue->hostOperands.size() : 0;
    for (unsigned i = 3; i < f.getNumArguments(); ++i)
      (i + prologueCount < f.getNumArguments() ? epilogueOperands : prologueOperands).push_back(f.getArgument(i));
    if (p.prologue) {
      alignWorkgroupBuffers(b, f);
      a = Matrix(f.getWorkgroupAttributions()[0], p.elementBytes);
    }
    Value tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
    batch = p.rank == 3 ? Value(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z)) : ix.c(0);
    laneInGroup = ix.rem(tid, kRowDotLanes);
    Value group = ix.div(tid, kRowDotLanes);
    Value firstColumn = ix.add(ix.mul(blockX, cfg.columnsPerBlock()), ix.mul(group, cfg.columns));
    for (int64_t j = 0; j < cfg.columns; ++j) {
      Value column = ix.add(firstColumn, j);
      columns.push_back(column);
      // Loads stay inside B; a column past N is computed and not written.
      clamped.push_back(ix.min(column, p.n - 1));
    }

    // One sum per row of A and column, a vector of one f32.
    llvm::SmallVector<Value> sums(static_cast<size_t>(p.m * cfg.columns), zeroVector(ix, p.element, 1));
    int64_t rounds = llvm::divideCeilSigned(cfg.steps(p.k), cfg.stepsInFlight);
    // The first round's B before the wait: that round is peeled off the loop.
    int64_t firstLooped = 0;
    std::optional<RoundOfB> first;
    if (cfg.loadsBBeforeWait) {
      first = loadRound(ix.c(0));
      waitForKernelBefore(ix);
      firstLooped = 1;
    }
    if (p.prologue && mlir::failed(computeRowsOfA()))
      return mlir::failure();
    if (first)
      useRound(*first, sums);
    auto loop = buildLoop(ix, ix.c(rounds - firstLooped), sums, [&](Value round, llvm::SmallVector<Value> carried) {
      useRound(loadRound(ix.add(round, firstLooped)), carried);
      return carried;
    });
    keepRolled(loop);
    sums.assign(loop.getResults().begin(), loop.getResults().end());
    for (Value &sum : sums)
      sum = addAcrossGroup(extract(ix, sum, 0));
    writeC(sums);
    return mlir::success();
  }

private:
  // The rounds stay a loop in the PTX (`.pragma "nounroll"`): unrolled,
  // ptxas hoists the loads of every round and runs out of registers (an
  // f32 product of one row took 255 and still spilled).
  void keepRolled(mlir::scf::ForOp loop) {
    mlir::MLIRContext *context = b.getContext();
    auto unroll = mlir::LLVM::LoopUnrollAttr::get(context, b.getBoolAttr(true), {}, {}, {}, {}, {}, {});
    auto annotation =
        mlir::LLVM::LoopAnnotationAttr::get(context, {}, {}, {}, unroll, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});
    loop->setAttr("loop_annotation", annotation);
  }

  // Sums index: row of A, then column.
  size_t at(int64_t row, int64_t j) const { return static_cast<size_t>(row * cfg.columns + j); }

  // A's rows computed by the block's `threads` into its shared stage, each
  // element rounded to A's type as the product would have read it.
  mlir::LogicalResult computeRowsOfA() {
    Value stage = f.getWorkgroupAttributions()[0];
    auto store = [&](Value row, Value k, llvm::ArrayRef<Value> values) {
      for (auto [u, value] : llvm::enumerate(values))
        mlir::memref::StoreOp::create(b, loc, convertFloat(ix, value, p.storage), stage,
                                      mlir::ValueRange{row, ix.add(k, static_cast<int64_t>(u))});
    };
    if (mlir::failed(
            p.prologue->build(b, loc, prologueOperands, f.getWorkgroupAttributions()[1], kRowDotThreads, store)))
      return mlir::failure();
    mlir::gpu::BarrierOp::create(b, loc);
    return mlir::success();
  }

  // A round of `stepsInFlight` steps: each step's K, whether it is inside
  // K, and the lane's vector of each of its columns' rows of B.
  struct RoundOfB {
    llvm::SmallVector<Value> ks, inside;
    llvm::SmallVector<llvm::SmallVector<Value>> rowsOfB; // per step, per column
  };

  // The lane's vectors of a round's steps, all loaded before any is used.
  RoundOfB loadRound(Value round) {
    int64_t width = cfg.vectorK;
    RoundOfB r;
    for (int64_t s = 0; s < cfg.stepsInFlight; ++s) {
      Value step = ix.add(ix.mul(round, cfg.stepsInFlight), s);
      Value k = ix.mul(ix.add(ix.mul(step, kRowDotLanes), laneInGroup), width);
      Value within = cfg.maskK(p.k) ? ix.lt(k, p.k) : Value();
      // A vector past K reads the last one (inside B) and counts as zero.
      Value kLoaded = within ? ix.min(k, p.k - width) : k;
      llvm::SmallVector<Value> vectors;
      for (int64_t j = 0; j < cfg.columns; ++j)
        vectors.push_back(bm.load(ix, batch, kLoaded, clamped[static_cast<size_t>(j)], /*alongRows=*/true, width));
      r.ks.push_back(kLoaded);
      r.inside.push_back(within);
      r.rowsOfB.push_back(vectors);
    }
    return r;
  }

  // A round's vectors of B multiplied by A's rows, into the sums.
  void useRound(const RoundOfB &r, llvm::SmallVector<Value> &sums) {
    int64_t width = cfg.vectorK;
    const auto &ks = r.ks;
    const auto &inside = r.inside;
    const auto &rowsOfB = r.rowsOfB;
    for (int64_t s = 0; s < cfg.stepsInFlight; ++s) {
      llvm::SmallVector<Value> widened;
      for (Value vector : rowsOfB[static_cast<size_t>(s)]) {
        Value v = convertFloat(ix, vector, p.element);
        if (inside[static_cast<size_t>(s)])
          v = mlir::arith::SelectOp::create(b, loc, inside[static_cast<size_t>(s)], v,
                                            zeroVector(ix, p.element, width));
        widened.push_back(v);
      }
      for (int64_t row = 0; row < p.m; ++row) {
        Value rowOfA = convertFloat(
            ix, a.load(ix, batch, ix.c(row), ks[static_cast<size_t>(s)], /*alongRows=*/false, width), p.element);
        for (int64_t j = 0; j < cfg.columns; ++j) {
          Value &sum = sums[at(row, j)];
          for (int64_t e = 0; e < width; ++e)
            sum = fma(ix, slice(ix, rowOfA, e, 1), slice(ix, widened[static_cast<size_t>(j)], e, 1), sum);
        }
      }
    }
  }

  // The sum of `value` over the group's lanes (every lane gets it).
  Value addAcrossGroup(Value value) {
    Value width = mlir::arith::ConstantIntOp::create(b, loc, b.getI32Type(), 32);
    for (int64_t offset = kRowDotLanes / 2; offset >= 1; offset /= 2) {
      Value distance = mlir::arith::ConstantIntOp::create(b, loc, b.getI32Type(), offset);
      Value other =
          mlir::gpu::ShuffleOp::create(b, loc, value, distance, width, mlir::gpu::ShuffleMode::XOR).getShuffleResult();
      value = mlir::arith::AddFOp::create(b, loc, value, other);
    }
    return value;
  }

  // Lane l writes rows l, l + kRowDotLanes, ... of its columns inside N.
  void writeC(llvm::ArrayRef<Value> sums) {
    OutputWriter writer{p, c, epilogueOperands};
    for (int64_t row = 0; row < p.m; ++row) {
      Value mine =
          mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, laneInGroup, ix.c(row % kRowDotLanes));
      for (int64_t j = 0; j < cfg.columns; ++j) {
        Value column = columns[static_cast<size_t>(j)];
        guarded(ix, ix.both(mine, ix.lt(column, p.n)), [&] {
          writer.write(ix, broadcast(ix, sums[at(row, j)], 1), batch, ix.c(row), column, 1, /*vectorC=*/false);
        });
      }
    }
  }

  mlir::OpBuilder &b;
  mlir::gpu::GPUFuncOp f;
  mlir::Location loc;
  Ix ix;
  const Problem &p;
  const RowDotConfig &cfg;
  Matrix a, bm, c;
  llvm::SmallVector<Value> epilogueOperands, prologueOperands;
  Value batch, laneInGroup;
  llvm::SmallVector<Value> columns, clamped;
};

} // namespace

mlir::LogicalResult emitRowDotMatmul(const ProductLaunch &launch, const Problem &p, const RowDotConfig &cfg) {
  mlir::Location loc = launch.loc;
  KernelSignature signature;
  signature.name = launch.name;
  signature.arguments = argumentTypes(p, /*withAB=*/true);
  signature.bytesMoved = launch.bytes;
  signature.flops = launch.flops;
  signature.blockSize = {static_cast<int32_t>(kRowDotThreads), 1, 1};
  if (p.prologue) {
    // A's rows, as the product reads them, and the prologue's slots.
    int64_t stageBytes = p.m * p.k * p.elementBytes + std::max<int64_t>(1, p.prologue->slots) * p.accumulatorBytes;
    if (stageBytes > launch.device.sharedMemoryPerBlock)
      return mlir::emitError(loc, "generated matmul: the row-dot form's rows of A need ")
             << stageBytes << " bytes of shared memory; a block has " << launch.device.sharedMemoryPerBlock;
    signature.workgroupBuffers = {workgroupType({p.m, p.k}, p.storage),
                                  workgroupType({std::max<int64_t>(1, p.prologue->slots)}, p.element)};
  }
  LaunchDims dims;
  dims.grid = {llvm::divideCeilSigned(p.n, cfg.columnsPerBlock()), 1, p.batch};
  dims.block = {kRowDotThreads, 1, 1};
  if (dims.grid[2] > 65535)
    return mlir::emitError(loc, "generated matmul: the grid is too large for this product");
  MLPIPE_DEBUG(kDebugEmitters,
               os << launch.name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x" << p.k
                  << " (batch x M x N x K), row-dot form (B stored [N, K]): " << cfg.columns << " columns per group of "
                  << kRowDotLanes << " lanes (" << p.m * cfg.columns << " sums a lane, kRowDotSums), "
                  << cfg.columnsPerBlock() << " columns per block, vectors of " << cfg.vectorK << " along K, "
                  << cfg.steps(p.k) << " steps, " << cfg.stepsInFlight << " in flight, grid (" << dims.grid[0]
                  << ", 1, " << dims.grid[2] << ")"
                  << (cfg.loadsBBeforeWait ? ", the first round of B into registers before the wait "
                                             "(kRowDotLoadsBBeforeWait)"
                                           : "")
                  << (p.prologue ? ", A's rows computed by every block (a row reduction before it)" : "") << "\n");
  return launchProduct(launch, p, /*splits=*/1, signature, dims,
                       [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) { return RowDotBody(b, f, p, cfg).build(); });
}

} // namespace mlpipe::emitters::generated_matmul
