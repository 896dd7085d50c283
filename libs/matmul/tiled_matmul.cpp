// The generated matmul's tiled form: a register-tiled SIMT GEMM with
// double-buffered shared-memory K-slices (one thread block per
// blockM x blockN tile of C):
//
//   stage tile 0 of A and B into shared stage 0; barrier
//   for t in tiles:                      (one K-slice of blockK per step)
//     registers <- global tile t+1       (issued first: its latency hides
//                                          behind the arithmetic below)
//     acc += A_s[t&1] x B_s[t&1]         (each thread a threadM x threadN
//                                          tile of outer products from
//                                          128-bit shared loads)
//     shared stage (t+1)&1 <- registers
//     barrier
//   C <- epilogue(acc [+ C])             (128-bit stores where C allows)
//
// One barrier per step is enough with two stages: step t writes the stage
// that step t-1 read, and every thread has passed step t-1's barrier, so
// has finished reading it, before any thread writes it; the stage step t
// reads was written before that same barrier.
//
// A shared tile is stored K-major ([k][m] for A, [k][n] for B) so that a
// thread's fragment of 4 consecutive rows (or columns) is one 128-bit load.
// Each row is padded by 16 bytes: where a tile is loaded along K and stored
// transposed, the threads of a warp then hit distinct banks.
//
// Global reads go along whichever axis of the operand has unit stride, as
// 128-bit vectors where the extent, offset and strides keep every vector
// aligned (a transposed view, such as the tied logits' wte^T, is read along
// K). Rows of A and columns of B past the edge are clamped to the last one:
// they only feed elements of C that are never stored. K past the edge reads
// as zero.
#include "matmul/matmul_building.h"

#include "codegen/debug.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <utility>

namespace mlpipe::emitters::generated_matmul {

namespace {

// Global-to-shared slots of one operand: which (outer, k) each thread's
// vectors cover, fixed for the whole loop.
struct Slot {
  Value outer, kk, valid; // valid: null when every thread has this slot
};

// The body of one tiled kernel, built in the order it runs: the block's
// place in the grid, the first K-slice staged, the pipelined loop over the
// K-slices, then C written.
class TiledBody {
public:
  TiledBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p, const TiledConfig &cfg, const LoadPlan &planA,
            const LoadPlan &planB)
      : b(b), f(f), loc(f.getLoc()), ix{b, loc}, p(p), cfg(cfg), planA(planA), planB(planB), element(p.element),
        eb(p.elementBytes), a(f.getArgument(0), eb), bm(f.getArgument(1), eb), c(f.getArgument(2), eb) {}

  void build(int64_t widthCAllowed) {
    alignWorkgroupBuffers(b, f);
    if (cfg.blocksPerSm > 1)
      f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(cfg.blocksPerSm)));
    for (unsigned i = 3; i < f.getNumArguments(); ++i)
      epilogueOperands.push_back(f.getArgument(i));
    sharedA = f.getWorkgroupAttributions()[0];
    sharedB = f.getWorkgroupAttributions()[1];
    placeBlock();
    slotsA = slotsFor(planA, cfg.blockM);
    slotsB = slotsFor(planB, cfg.blockN);
    placeFragments();
    stageFirstSlice();
    mlir::scf::ForOp loop = pipeline();
    writeC(loop, widthCAllowed);
  }

private:
  // The thread and block ids, the block's tile of C and its K-slice.
  void placeBlock() {
    tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockY = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y);
    Value tileM = cfg.mFastest ? blockX : blockY;
    Value tileN = cfg.mFastest ? blockY : blockX;
    if (p.rank == 3 || cfg.splitK > 1) {
      Value blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
      batch = ix.div(blockZ, cfg.splitK);
      split = ix.rem(blockZ, cfg.splitK);
    }
    m0 = ix.mul(tileM, cfg.blockM);
    n0 = ix.mul(tileN, cfg.blockN);
    kStart = cfg.splitK > 1 ? ix.mul(split, cfg.kPerSplit) : ix.c(0);
    // Steps of this block's K-slice (the last split may be shorter).
    if (cfg.splitK > 1) {
      Value length = ix.min(ix.sub(ix.c(p.k), kStart), cfg.kPerSplit);
      steps = ix.div(ix.add(length, cfg.blockK - 1), cfg.blockK);
    } else {
      steps = ix.c(llvm::divideCeilSigned(p.k, cfg.blockK));
    }
    maskK = p.k % cfg.blockK != 0;
    tx = ix.rem(tid, cfg.threadsN());
    ty = ix.div(tid, cfg.threadsN());
  }

  llvm::SmallVector<Slot> slotsFor(const LoadPlan &plan, int64_t blockOuter) {
    const int64_t threads = cfg.threads();
    int64_t vectors = blockOuter * cfg.blockK / plan.width;
    int64_t perRow = (plan.alongK ? cfg.blockK : blockOuter) / plan.width;
    llvm::SmallVector<Slot> slots;
    for (int64_t j = 0; j < llvm::divideCeilSigned(vectors, threads); ++j) {
      Value q = ix.add(tid, j * threads);
      Slot slot;
      if ((j + 1) * threads > vectors) {
        slot.valid = ix.lt(q, vectors);
        q = ix.min(q, vectors - 1);
      }
      Value major = ix.div(q, perRow), minor = ix.mul(ix.rem(q, perRow), plan.width);
      slot.outer = plan.alongK ? major : minor;
      slot.kk = plan.alongK ? minor : major;
      slots.push_back(slot);
    }
    return slots;
  }

  // Global loads of one operand's tile at K offset `k0`.
  llvm::SmallVector<Value> loadTile(Matrix &matrix, const LoadPlan &plan, llvm::ArrayRef<Slot> slots, Value outer0,
                                    int64_t outerExtent, int64_t blockOuter, bool isA, Value k0) {
    llvm::SmallVector<Value> values;
    for (const Slot &slot : slots) {
      Value outer = ix.add(outer0, slot.outer);
      if (outerExtent % blockOuter != 0)
        outer = ix.min(outer, outerExtent - (plan.alongK ? 1 : plan.width));
      Value k = ix.add(k0, slot.kk);
      Value kInside;
      if (maskK) {
        kInside = ix.lt(k, p.k);
        k = ix.min(k, p.k - (plan.alongK ? plan.width : 1));
      }
      // A is [M, K] (K along columns), B is [K, N] (K along rows).
      Value v = isA ? matrix.load(ix, batch, outer, k, /*alongRows=*/!plan.alongK, plan.width)
                    : matrix.load(ix, batch, k, outer, /*alongRows=*/plan.alongK, plan.width);
      if (kInside)
        v = mlir::arith::SelectOp::create(b, loc, kInside, v, zeroVector(ix, element, plan.width));
      values.push_back(v);
    }
    return values;
  }

  void storeTile(Value shared, const LoadPlan &plan, llvm::ArrayRef<Slot> slots, llvm::ArrayRef<Value> values,
                 Value stage) {
    for (auto [slot, v] : llvm::zip(slots, values)) {
      guarded(ix, slot.valid, [&] {
        if (plan.alongK) {
          for (int64_t i = 0; i < plan.width; ++i)
            mlir::memref::StoreOp::create(b, loc, extract(ix, v, i), shared,
                                          mlir::ValueRange{stage, ix.add(slot.kk, i), slot.outer});
        } else {
          mlir::vector::StoreOp::create(b, loc, v, shared, mlir::ValueRange{stage, slot.kk, slot.outer}, false,
                                        llvm::MaybeAlign(plan.width * eb));
        }
      });
    }
  }

  // Both operands' tiles of pipeline step `step`, loaded into registers.
  std::pair<llvm::SmallVector<Value>, llvm::SmallVector<Value>> loadBoth(Value step) {
    Value k0 = ix.add(kStart, ix.mul(step, cfg.blockK));
    auto va = loadTile(a, planA, slotsA, m0, p.m, cfg.blockM, /*isA=*/true, k0);
    auto vb = loadTile(bm, planB, slotsB, n0, p.n, cfg.blockN, /*isA=*/false, k0);
    return std::make_pair(va, vb);
  }

  // The fragment each thread reads: rows ty*4 + g*groupStrideM.
  void placeFragments() {
    const int64_t groupsM = cfg.threadM / kFragment, groupsN = cfg.threadN / kFragment;
    const int64_t groupStrideM = cfg.blockM / groupsM, groupStrideN = cfg.blockN / groupsN;
    for (int64_t g = 0; g < groupsM; ++g)
      fragmentRow.push_back(ix.add(ix.mul(ty, kFragment), g * groupStrideM));
    for (int64_t g = 0; g < groupsN; ++g)
      fragmentCol.push_back(ix.add(ix.mul(tx, kFragment), g * groupStrideN));
  }

  Value loadFragment(Value shared, Value stage, int64_t kk, Value at) {
    // 4 elements as 128-bit loads (one for f32, two for f64).
    const int64_t fragmentVector = std::min<int64_t>(kFragment, kVectorBytes / eb);
    Value whole = zeroVector(ix, element, kFragment);
    for (int64_t part = 0; part < kFragment; part += fragmentVector) {
      Value v = mlir::vector::LoadOp::create(b, loc, mlir::VectorType::get({fragmentVector}, element), shared,
                                             mlir::ValueRange{stage, ix.c(kk), ix.add(at, part)}, false,
                                             llvm::MaybeAlign(fragmentVector * eb));
      if (fragmentVector == kFragment)
        return v;
      for (int64_t i = 0; i < fragmentVector; ++i)
        whole = insert(ix, extract(ix, v, i), whole, part + i);
    }
    return whole;
  }

  // One K-slice's outer products from shared stage `stage`.
  // acc[r * groupsN + g]: row r of the thread tile, column fragment g.
  llvm::SmallVector<Value> compute(Value stage, llvm::SmallVector<Value> acc) {
    const int64_t groupsN = cfg.threadN / kFragment;
    for (int64_t kk = 0; kk < cfg.blockK; ++kk) {
      llvm::SmallVector<Value> fa, fb;
      for (Value row : fragmentRow)
        fa.push_back(loadFragment(sharedA, stage, kk, row));
      for (Value col : fragmentCol)
        fb.push_back(loadFragment(sharedB, stage, kk, col));
      for (int64_t r = 0; r < cfg.threadM; ++r) {
        Value av = broadcast(ix, extract(ix, fa[r / kFragment], r % kFragment), kFragment);
        for (int64_t g = 0; g < groupsN; ++g)
          acc[r * groupsN + g] = fma(ix, av, fb[g], acc[r * groupsN + g]);
      }
    }
    return acc;
  }

  // Prologue: step 0 into stage 0.
  void stageFirstSlice() {
    auto [va, vb] = loadBoth(ix.c(0));
    storeTile(sharedA, planA, slotsA, va, ix.c(0));
    storeTile(sharedB, planB, slotsB, vb, ix.c(0));
    mlir::gpu::BarrierOp::create(b, loc);
  }

  // The loop over the K-slices, carrying the thread's register tile.
  mlir::scf::ForOp pipeline() {
    const int64_t groupsN = cfg.threadN / kFragment;
    llvm::SmallVector<Value> init(cfg.threadM * groupsN, zeroVector(ix, element, kFragment));
    return buildLoop(ix, steps, init, [&](Value step, llvm::SmallVector<Value> acc) {
      // Next step's tiles first (the last step reloads its own: harmless, and
      // no branch).
      Value next = ix.min(ix.add(step, 1), ix.sub(steps, ix.c(1)));
      auto [va, vb] = loadBoth(next);
      Value stage = b.createOrFold<mlir::arith::AndIOp>(loc, step, ix.c(1));
      Value other = b.createOrFold<mlir::arith::XOrIOp>(loc, stage, ix.c(1));
      acc = compute(stage, acc);
      storeTile(sharedA, planA, slotsA, va, other);
      storeTile(sharedB, planB, slotsB, vb, other);
      mlir::gpu::BarrierOp::create(b, loc);
      return acc;
    });
  }

  // Epilogue: each thread writes its tile.
  // With a vector C, N is a multiple of the vector: each vector is wholly
  // inside or wholly outside. At a ragged right edge a fragment (4 columns)
  // is tested as a whole first, so that only the last column tile tests
  // each column (and the tests stay inside their branch, not live across the
  // whole epilogue).
  void writeC(mlir::scf::ForOp loop, int64_t widthCAllowed) {
    const int64_t groupsN = cfg.threadN / kFragment;
    OutputWriter writer{p, c, epilogueOperands};
    const int64_t widthC = std::min(kFragment, widthCAllowed);
    const bool rowEdge = p.m % cfg.blockM != 0, colEdge = p.n % cfg.blockN != 0;
    auto writePart = [&](Value acc, Value row, Value col, int64_t part) {
      if (cfg.splitK > 1 && widthC > 1)
        c.storeRowVector(ix, slice(ix, acc, part, widthC), ix.add(ix.mul(split, p.batch), batch), row, col, widthC);
      else if (cfg.splitK > 1)
        c.storeScalar(ix, extract(ix, acc, part), ix.add(ix.mul(split, p.batch), batch), row, col);
      else
        writer.write(ix, slice(ix, acc, part, widthC), batch, row, col, widthC, widthC > 1);
    };
    for (int64_t r = 0; r < cfg.threadM; ++r) {
      Value row = ix.add(ix.add(m0, fragmentRow[r / kFragment]), r % kFragment);
      Value rowInside = rowEdge ? ix.lt(row, p.m) : Value();
      for (int64_t g = 0; g < groupsN; ++g) {
        Value acc = loop.getResult(r * groupsN + g);
        Value col0 = ix.add(n0, fragmentCol[g]);
        auto writeWhole = [&] {
          for (int64_t part = 0; part < kFragment; part += widthC)
            writePart(acc, row, ix.add(col0, part), part);
        };
        if (!colEdge) {
          guarded(ix, rowInside, writeWhole);
          continue;
        }
        guarded(ix, rowInside, [&] {
          Value whole = ix.lt(ix.add(col0, kFragment - 1), p.n);
          if (widthC == kFragment) {
            guarded(ix, whole, writeWhole);
            return;
          }
          branch(ix, whole, writeWhole, [&] {
            for (int64_t part = 0; part < kFragment; part += widthC) {
              Value col = ix.add(col0, part);
              guarded(ix, ix.lt(col, p.n), [&] { writePart(acc, row, col, part); });
            }
          });
        });
      }
    }
  }

  mlir::OpBuilder &b;
  mlir::gpu::GPUFuncOp f;
  mlir::Location loc;
  Ix ix;
  const Problem &p;
  const TiledConfig &cfg;
  const LoadPlan &planA, &planB;
  mlir::Type element;
  int64_t eb;
  Matrix a, bm, c;
  llvm::SmallVector<Value> epilogueOperands;
  Value sharedA, sharedB;
  // placeBlock: ids, the tile's origin (m0, n0), the K-slice.
  Value tid, tx, ty, batch, split, m0, n0, kStart, steps;
  bool maskK = false;
  llvm::SmallVector<Slot> slotsA, slotsB;
  llvm::SmallVector<Value> fragmentRow, fragmentCol;
};

std::string describePlan(const LoadPlan &plan, const char *outer) {
  return std::to_string(plan.width) + (plan.alongK ? " along K" : std::string(" along ") + outer);
}

} // namespace

mlir::LogicalResult emitTiledMatmul(const ProductLaunch &launch, const Problem &p) {
  std::string error;
  auto chosen = chooseTiled(p, launch.options, launch.device, launch.splitAllowed, error);
  if (mlir::failed(chosen))
    return mlir::emitError(launch.loc, "generated matmul: ") << error;
  TiledConfig cfg = *chosen;
  Problem q = productProblem(p, cfg.splitK);
  LoadPlan planA = planOperand(p, p.aType, /*isA=*/true, cfg.blockK, cfg.blockM);
  LoadPlan planB = planOperand(p, p.bType, /*isA=*/false, cfg.blockK, cfg.blockN);
  KernelSignature signature;
  signature.name = launch.name;
  signature.arguments = argumentTypes(q, /*withAB=*/true);
  signature.workgroupBuffers = {workgroupType({2, cfg.blockK, paddedRow(cfg.blockM, p.elementBytes)}, p.element),
                                workgroupType({2, cfg.blockK, paddedRow(cfg.blockN, p.elementBytes)}, p.element)};
  signature.bytesMoved = launch.bytes;
  signature.flops = launch.flops;
  signature.blockSize = {static_cast<int32_t>(cfg.threads()), 1, 1};
  int64_t tilesM = llvm::divideCeilSigned(p.m, cfg.blockM), tilesN = llvm::divideCeilSigned(p.n, cfg.blockN);
  LaunchDims dims;
  dims.grid = {cfg.mFastest ? tilesM : tilesN, cfg.mFastest ? tilesN : tilesM, p.batch * cfg.splitK};
  dims.block = {cfg.threads(), 1, 1};
  if (dims.grid[1] > 65535 || dims.grid[2] > 65535)
    return mlir::emitError(launch.loc, "generated matmul: the grid is too large for this product");
  // C's vectors, or with split K those of the partial products' slabs
  // (contiguous rows of N).
  int64_t widthC = cfg.splitK > 1 ? vectorWidthAlong(q.cType, 2, p.maxVector) : launch.widthC;
  MLPIPE_DEBUG(kDebugEmitters, os << launch.name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x"
                                  << p.k << " (batch x M x N x K), tiled " << cfg.blockM << "x" << cfg.blockN << "x"
                                  << cfg.blockK << ", thread tile " << cfg.threadM << "x" << cfg.threadN << ", "
                                  << cfg.threads() << " threads, split-K " << cfg.splitK << " (" << cfg.kPerSplit
                                  << " rows each), A vectors " << describePlan(planA, "M") << ", B vectors "
                                  << describePlan(planB, "N") << ", C vectors " << std::min(kFragment, widthC)
                                  << (cfg.splitK > 1 ? " (partial products)" : "") << ", grid (" << dims.grid[0] << ", "
                                  << dims.grid[1] << ", " << dims.grid[2] << ") with " << (cfg.mFastest ? "M" : "N")
                                  << " tiles fastest, " << tiledSharedBytes(p, cfg) << " B shared, cost "
                                  << static_cast<int64_t>(cfg.cost) << "\n");
  return launchProduct(launch, p, cfg.splitK, signature, dims, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
    TiledBody(b, f, q, cfg, planA, planB).build(widthC);
    return mlir::success();
  });
}

} // namespace mlpipe::emitters::generated_matmul
