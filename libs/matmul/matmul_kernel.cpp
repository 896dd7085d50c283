// The generated matmul: a register-tiled SIMT GEMM with double-buffered
// shared-memory K-slices, a GEMV-like form for skinny products, and the two
// small elementwise kernels that split-K needs (zeroing C, and applying the
// epilogue afterwards).
//
// The tiled kernel (one thread block per blockM x blockN tile of C):
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
#include "matmul/matmul_kernel.h"

#include "codegen/debug.h"
#include "codegen/type_sizes.h"
#include "fusion/fusion_graph.h"
#include "matmul/matmul_building.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace mlpipe::emitters {

namespace {

using namespace generated_matmul;
using mlir::Value;

// The elementwise kernels (zeroing C, the split-K epilogue): one element per
// thread.
constexpr int64_t kElementwiseThreads = 256;

//===----------------------------------------------------------------------===//
// The tiled kernel.
//===----------------------------------------------------------------------===//

void buildTiledBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p, const TiledConfig &cfg,
                    const LoadPlan &planA, const LoadPlan &planB, int64_t widthCAllowed) {
  alignWorkgroupBuffers(b, f);
  if (cfg.blocksPerSm > 1)
    f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(cfg.blocksPerSm)));
  mlir::Location loc = f.getLoc();
  Ix ix{b, loc};
  mlir::Type element = p.element;
  int64_t eb = p.elementBytes;
  Matrix a(f.getArgument(0), eb), bm(f.getArgument(1), eb), c(f.getArgument(2), eb);
  llvm::SmallVector<Value> epilogueOperands;
  for (unsigned i = 3; i < f.getNumArguments(); ++i)
    epilogueOperands.push_back(f.getArgument(i));
  Value sharedA = f.getWorkgroupAttributions()[0];
  Value sharedB = f.getWorkgroupAttributions()[1];

  const int64_t threads = cfg.threads();
  const int64_t threadsN = cfg.threadsN();
  const int64_t groupsM = cfg.threadM / kFragment, groupsN = cfg.threadN / kFragment;
  const int64_t groupStrideM = cfg.blockM / groupsM, groupStrideN = cfg.blockN / groupsN;

  Value tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
  Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
  Value blockY = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y);
  Value tileM = cfg.mFastest ? blockX : blockY;
  Value tileN = cfg.mFastest ? blockY : blockX;
  Value batch, split;
  if (p.rank == 3 || cfg.splitK > 1) {
    Value blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
    batch = ix.div(blockZ, cfg.splitK);
    split = ix.rem(blockZ, cfg.splitK);
  }
  Value m0 = ix.mul(tileM, cfg.blockM);
  Value n0 = ix.mul(tileN, cfg.blockN);
  Value kStart = cfg.splitK > 1 ? ix.mul(split, cfg.kPerSplit) : ix.c(0);
  // Steps of this block's K-slice (the last split may be shorter).
  Value steps;
  if (cfg.splitK > 1) {
    Value length = ix.min(ix.sub(ix.c(p.k), kStart), cfg.kPerSplit);
    steps = ix.div(ix.add(length, cfg.blockK - 1), cfg.blockK);
  } else {
    steps = ix.c(llvm::divideCeilSigned(p.k, cfg.blockK));
  }
  const bool maskK = p.k % cfg.blockK != 0;
  Value tx = ix.rem(tid, threadsN);
  Value ty = ix.div(tid, threadsN);

  // Global-to-shared slots of one operand: which (outer, k) each thread's
  // vectors cover, fixed for the whole loop.
  struct Slot {
    Value outer, kk, valid; // valid: null when every thread has this slot
  };
  auto slotsFor = [&](const LoadPlan &plan, int64_t blockOuter) {
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
  };
  llvm::SmallVector<Slot> slotsA = slotsFor(planA, cfg.blockM);
  llvm::SmallVector<Slot> slotsB = slotsFor(planB, cfg.blockN);

  // Global loads of one operand's tile at K offset `k0`.
  auto loadTile = [&](Matrix &matrix, const LoadPlan &plan, llvm::ArrayRef<Slot> slots, Value outer0,
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
  };
  auto storeTile = [&](Value shared, const LoadPlan &plan, llvm::ArrayRef<Slot> slots, llvm::ArrayRef<Value> values,
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
  };
  auto loadBoth = [&](Value step) {
    Value k0 = ix.add(kStart, ix.mul(step, cfg.blockK));
    auto va = loadTile(a, planA, slotsA, m0, p.m, cfg.blockM, /*isA=*/true, k0);
    auto vb = loadTile(bm, planB, slotsB, n0, p.n, cfg.blockN, /*isA=*/false, k0);
    return std::make_pair(va, vb);
  };

  // The fragment each thread reads: rows ty*4 + g*groupStrideM.
  llvm::SmallVector<Value> fragmentRow, fragmentCol;
  for (int64_t g = 0; g < groupsM; ++g)
    fragmentRow.push_back(ix.add(ix.mul(ty, kFragment), g * groupStrideM));
  for (int64_t g = 0; g < groupsN; ++g)
    fragmentCol.push_back(ix.add(ix.mul(tx, kFragment), g * groupStrideN));

  int64_t fragmentVector = std::min<int64_t>(kFragment, kVectorBytes / eb);
  auto loadFragment = [&](Value shared, Value stage, int64_t kk, Value at) {
    // 4 elements as 128-bit loads (one for f32, two for f64).
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
  };
  // acc[r * groupsN + g]: row r of the thread tile, column fragment g.
  auto compute = [&](Value stage, llvm::SmallVector<Value> acc) {
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
  };

  // Prologue: step 0 into stage 0.
  {
    auto [va, vb] = loadBoth(ix.c(0));
    storeTile(sharedA, planA, slotsA, va, ix.c(0));
    storeTile(sharedB, planB, slotsB, vb, ix.c(0));
    mlir::gpu::BarrierOp::create(b, loc);
  }
  llvm::SmallVector<Value> init(cfg.threadM * groupsN, zeroVector(ix, element, kFragment));
  auto loop = buildLoop(ix, steps, init, [&](Value step, llvm::SmallVector<Value> acc) {
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

  // Epilogue: each thread writes its tile.
  OutputWriter writer{p, c, epilogueOperands};
  // With a vector C, N is a multiple of the vector: each vector is wholly
  // inside or wholly outside. At a ragged right edge a fragment (4 columns)
  // is tested as a whole first, so that only the last column tile tests
  // each column (and the tests stay inside their branch, not live across the
  // whole epilogue).
  const int64_t widthC = cfg.splitK > 1 ? 1 : std::min(kFragment, widthCAllowed);
  const bool rowEdge = p.m % cfg.blockM != 0, colEdge = p.n % cfg.blockN != 0;
  auto writePart = [&](Value acc, Value row, Value col, int64_t part) {
    if (cfg.splitK > 1)
      c.atomicAdd(ix, extract(ix, acc, part), batch, row, col);
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

//===----------------------------------------------------------------------===//
// The skinny (GEMV-like) kernel.
//
// A block owns lanesN x vectorN columns of C and rowsPerBlock rows, for
// one K-slice. The lanes of a warp form 32 / lanesN groups ("row slots");
// lane l of a group holds the columns l*vectorN.., for all of the block's
// rows, in registers; slot s takes rows s, s+slots, ... of the slice, so a
// group reads a segment of a row of B (coalesced, 128-bit; the whole row of
// the block's columns) straight into registers, each element of B once.
// The slice of A is staged in shared memory ([k][row]) and read as
// broadcasts. At the end the warps add their
// partial sums through shared memory, and one thread per output vector
// writes C (atomically when K is split).
//===----------------------------------------------------------------------===//

mlir::LogicalResult buildSkinnyBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p,
                                    const SkinnyConfig &cfg, bool cVector) {
  alignWorkgroupBuffers(b, f);
  f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(kSkinnyBlocksPerSm)));
  mlir::Location loc = f.getLoc();
  Ix ix{b, loc};
  mlir::Type element = p.element;
  int64_t eb = p.elementBytes;
  Matrix a(f.getArgument(0), eb), bm(f.getArgument(1), eb), c(f.getArgument(2), eb);
  llvm::SmallVector<Value> epilogueOperands, prologueOperands;
  size_t prologueCount = p.prologue ? p.prologue->hostOperands.size() : 0;
  for (unsigned i = 3; i < f.getNumArguments(); ++i)
    (i + prologueCount < f.getNumArguments() ? epilogueOperands : prologueOperands).push_back(f.getArgument(i));
  Value sharedA = f.getWorkgroupAttributions()[0];
  Value sharedReduction = f.getWorkgroupAttributions()[1];

  const int64_t threads = cfg.threads();
  const int64_t rows = cfg.rowsPerBlock;
  const int64_t vn = cfg.vectorN;
  Value tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
  // `lane` within the row segment, `warp` the row slot (a warp when lanesN
  // is 32).
  Value lane = ix.rem(tid, cfg.lanesN);
  Value warp = ix.div(tid, cfg.lanesN);
  const int64_t slots = cfg.rowSlots();
  Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
  Value split = cfg.splitK > 1 ? Value(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y)) : ix.c(0);
  Value blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
  Value batch = ix.div(blockZ, cfg.rowGroups);
  Value m0 = ix.mul(ix.rem(blockZ, cfg.rowGroups), rows);
  Value col = ix.add(ix.mul(blockX, cfg.blockN), ix.mul(lane, vn));
  Value colClamped = ix.min(col, p.n - vn);
  Value kStart = ix.mul(split, cfg.kPerSplit);
  const bool maskK = cfg.kPerSplit * cfg.splitK != p.k;

  // Rows j of chunk `chunk` (a dynamic index): slice rows (chunk*R + j)*warps + warp.
  auto sliceRow = [&](Value chunk, int64_t j) {
    return ix.add(ix.mul(ix.add(ix.mul(chunk, cfg.rowsInFlight), j), slots), warp);
  };
  auto loadB = [&](Value chunk, int64_t count) {
    llvm::SmallVector<Value> values;
    for (int64_t j = 0; j < count; ++j) {
      // Rows past K (and prefetched rows past the slice) stay in bounds;
      // A reads as zero there, or they are not used.
      Value k = ix.min(ix.add(kStart, sliceRow(chunk, j)), p.k - 1);
      values.push_back(bm.load(ix, batch, k, colClamped, /*alongRows=*/false, vn));
    }
    return values;
  };
  // The staged A ([k][row]) is read 128 bits at a time where its rows allow.
  const int64_t aVector = rows % kFragment == 0 ? std::min<int64_t>(kFragment, kVectorBytes / eb) : 1;
  auto fmaChunk = [&](Value chunk, llvm::ArrayRef<Value> bValues, llvm::SmallVector<Value> acc) {
    for (auto [j, bv] : llvm::enumerate(bValues)) {
      Value kk = sliceRow(chunk, static_cast<int64_t>(j));
      llvm::SmallVector<Value> aValues;
      for (int64_t r = 0; r < rows; r += aVector) {
        if (aVector == 1) {
          aValues.push_back(mlir::memref::LoadOp::create(b, loc, sharedA, mlir::ValueRange{kk, ix.c(r)}));
          continue;
        }
        Value v = mlir::vector::LoadOp::create(b, loc, mlir::VectorType::get({aVector}, element), sharedA,
                                               mlir::ValueRange{kk, ix.c(r)}, false, llvm::MaybeAlign(aVector * eb));
        for (int64_t i = 0; i < aVector; ++i)
          aValues.push_back(extract(ix, v, i));
      }
      for (int64_t r = 0; r < rows; ++r)
        acc[r] = fma(ix, broadcast(ix, aValues[r], vn), bv, acc[r]);
    }
    return acc;
  };

  // B's first rows go out before A is staged.
  const int64_t chunks = cfg.chunks();
  llvm::SmallVector<Value> first = loadB(ix.c(0), cfg.rowsInFlight);

  if (p.prologue) {
    // A's one row, computed by the block (while B's first rows load): its
    // elements k < K go to the staged slice, the slice's rows past K are
    // zero.
    for (int64_t j = 0; (j * threads) + p.k < cfg.kPerSplit; ++j) {
      Value k = ix.add(tid, p.k + j * threads);
      Value valid = ix.lt(k, cfg.kPerSplit);
      guarded(ix, valid, [&] {
        mlir::memref::StoreOp::create(b, loc, zeroScalar(ix, element), sharedA, mlir::ValueRange{k, ix.c(0)});
      });
    }
    auto store = [&](Value k, llvm::ArrayRef<Value> values) {
      for (auto [u, value] : llvm::enumerate(values))
        mlir::memref::StoreOp::create(b, loc, value, sharedA,
                                      mlir::ValueRange{ix.add(k, static_cast<int64_t>(u)), ix.c(0)});
    };
    if (mlir::failed(p.prologue->build(b, loc, prologueOperands, f.getWorkgroupAttributions()[2], threads, store)))
      return mlir::failure();
    mlir::gpu::BarrierOp::create(b, loc);
  } else {
    // Stage A's slice: element q is (row q / kPerSplit, k q % kPerSplit), so
    // consecutive threads read consecutive k.
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
        v = mlir::arith::SelectOp::create(b, loc, kInside, v, zeroScalar(ix, element));
      guarded(ix, valid, [&] { mlir::memref::StoreOp::create(b, loc, v, sharedA, mlir::ValueRange{kk, r}); });
    }
    mlir::gpu::BarrierOp::create(b, loc);
  }

  llvm::SmallVector<Value> acc(rows, zeroVector(ix, element, vn));
  llvm::SmallVector<Value> current = first;
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
  acc = fmaChunk(ix.c(chunks - 1), llvm::ArrayRef<Value>(current).take_front(lastRows), acc);

  // Cross-warp reduction, reductionRows rows of C at a time.
  OutputWriter writer{p, c, epilogueOperands};
  const int64_t perRound = cfg.reductionRows;
  for (int64_t first = 0; first < rows; first += perRound) {
    int64_t count = std::min(perRound, rows - first);
    if (first > 0)
      mlir::gpu::BarrierOp::create(b, loc); // the previous round's reads are done
    for (int64_t i = 0; i < count; ++i)
      mlir::vector::StoreOp::create(b, loc, acc[first + i], sharedReduction,
                                    mlir::ValueRange{warp, ix.c(i), ix.mul(lane, vn)}, false,
                                    llvm::MaybeAlign(vn * eb));
    mlir::gpu::BarrierOp::create(b, loc);
    int64_t outputs = count * cfg.lanesN;
    for (int64_t j = 0; j < llvm::divideCeilSigned(outputs, threads); ++j) {
      Value q = ix.add(tid, j * threads);
      Value valid = (j + 1) * threads > outputs ? ix.lt(q, outputs) : Value();
      Value i = ix.div(q, cfg.lanesN), l = ix.rem(q, cfg.lanesN);
      Value row = ix.add(ix.add(m0, i), first);
      Value outCol = ix.add(ix.mul(blockX, cfg.blockN), ix.mul(l, vn));
      Value inside = ix.both(valid, ix.both(ix.lt(row, p.m), ix.lt(outCol, p.n)));
      guarded(ix, inside, [&] {
        Value sum = zeroVector(ix, element, vn);
        for (int64_t w = 0; w < slots; ++w) {
          Value part = mlir::vector::LoadOp::create(b, loc, mlir::VectorType::get({vn}, element), sharedReduction,
                                                    mlir::ValueRange{ix.c(w), i, ix.mul(l, vn)}, false,
                                                    llvm::MaybeAlign(vn * eb));
          sum = w == 0 ? part : Value(mlir::arith::AddFOp::create(b, loc, sum, part));
        }
        if (cfg.splitK > 1) {
          for (int64_t e = 0; e < vn; ++e)
            c.atomicAdd(ix, extract(ix, sum, e), batch, row, ix.add(outCol, e));
          return;
        }
        int64_t widthC = cVector ? vn : 1;
        for (int64_t part = 0; part < vn; part += widthC)
          writer.write(ix, slice(ix, sum, part, widthC), batch, row, ix.add(outCol, part), widthC, cVector);
      });
    }
  }
  return mlir::success();
}

//===----------------------------------------------------------------------===//
// Elementwise kernels over C: zeroing it before split-K, applying the
// epilogue after.
//===----------------------------------------------------------------------===//

enum class Elementwise { Zero, Epilogue };

mlir::LogicalResult emitElementwise(mlir::OpBuilder &host, mlir::Location loc, const Problem &p, Value c,
                                    llvm::ArrayRef<Value> epilogueOperands, Elementwise what, KernelFactory &kernels,
                                    const std::string &name) {
  int64_t total = p.batch * p.m * p.n;
  const char *suffix = what == Elementwise::Zero ? "_zero" : "_epilogue";
  KernelSignature signature;
  signature.name = name + suffix;
  Problem q = p;
  if (what == Elementwise::Zero)
    q.epilogue = nullptr;
  signature.arguments = argumentTypes(q, /*withAB=*/false);
  signature.bytesMoved = bytesOf(p.cType) * (what == Elementwise::Epilogue ? 2 : 1);
  signature.blockSize = {static_cast<int32_t>(kElementwiseThreads), 1, 1};
  auto kernel = kernels.build(signature, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
    mlir::Location kloc = f.getLoc();
    Ix ix{b, kloc};
    Matrix matrix(f.getArgument(0), p.elementBytes);
    llvm::SmallVector<Value> operands;
    for (unsigned i = 1; i < f.getNumArguments(); ++i)
      operands.push_back(f.getArgument(i));
    Value tid = mlir::gpu::ThreadIdOp::create(b, kloc, mlir::gpu::Dimension::x);
    Value block = mlir::gpu::BlockIdOp::create(b, kloc, mlir::gpu::Dimension::x);
    Value linear = ix.add(ix.mul(block, kElementwiseThreads), tid);
    guarded(ix, total % kElementwiseThreads != 0 ? ix.lt(linear, total) : Value(), [&] {
      Value col = ix.rem(linear, p.n);
      Value row = ix.rem(ix.div(linear, p.n), p.m);
      Value batch = ix.div(linear, p.n * p.m);
      Value v = what == Elementwise::Epilogue ? matrix.loadScalar(ix, batch, row, col) : zeroScalar(ix, p.element);
      if (what != Elementwise::Zero) {
        OutputWriter writer{q, matrix, operands};
        v = writer.finish(ix, v, batch, row, col);
      }
      matrix.storeScalar(ix, v, batch, row, col);
    });
  });
  LaunchDims dims;
  dims.grid = {llvm::divideCeilSigned(total, kElementwiseThreads), 1, 1};
  dims.block = {kElementwiseThreads, 1, 1};
  llvm::SmallVector<Value> arguments{c};
  if (what != Elementwise::Zero)
    arguments.append(epilogueOperands.begin(), epilogueOperands.end());
  kernels.launch(host, loc, kernel, dims, arguments);
  return mlir::success();
}

std::string describePlan(const LoadPlan &plan, const char *outer) {
  return std::to_string(plan.width) + (plan.alongK ? " along K" : std::string(" along ") + outer);
}

} // namespace

mlir::LogicalResult emitGeneratedMatmul(mlir::OpBuilder &host, mlir::Location loc, const MatmulOperands &operands,
                                        bool accumulate, const MatmulEpilogue *epilogue, KernelFactory &kernels,
                                        const DeviceDescription &device, const std::string &name,
                                        const GeneratedMatmulOptions &options, const MatmulRowPrologue *prologue) {
  auto aType = mlir::dyn_cast<mlir::MemRefType>(operands.a.getType());
  auto bType = mlir::dyn_cast<mlir::MemRefType>(operands.b.getType());
  auto cType = mlir::dyn_cast<mlir::MemRefType>(operands.c.getType());
  if (!aType || !bType || !cType)
    return mlir::emitError(loc, "generated matmul: the operands must be memrefs");
  int64_t rank = cType.getRank();
  if ((rank != 2 && rank != 3) || aType.getRank() != rank || bType.getRank() != rank)
    return mlir::emitError(loc, "generated matmul: the operands must all be of rank 2, or all of rank 3");
  if (!aType.hasStaticShape() || !bType.hasStaticShape() || !cType.hasStaticShape())
    return mlir::emitError(loc, "generated matmul: the shapes must be static");
  mlir::Type element = cType.getElementType();
  if (!(element.isF32() || element.isF64()) || aType.getElementType() != element || bType.getElementType() != element)
    return mlir::emitError(loc, "generated matmul: the operands must all be f32, or all f64");
  if (aType.getMemorySpace() || bType.getMemorySpace() || cType.getMemorySpace())
    return mlir::emitError(loc, "generated matmul: the operands must be in the default memory space");

  Problem p;
  p.rank = rank;
  p.batch = rank == 3 ? cType.getDimSize(0) : 1;
  p.m = cType.getDimSize(rank - 2);
  p.n = cType.getDimSize(rank - 1);
  p.k = aType.getDimSize(rank - 1);
  p.element = element;
  p.elementBytes = element.isF64() ? 8 : 4;
  p.aType = aType;
  p.bType = bType;
  p.cType = cType;
  p.accumulate = accumulate;
  p.epilogue = epilogue;
  p.prologue = prologue;
  p.maxVector = kVectorBytes / p.elementBytes;
  if (options.vectorWidth > 0) {
    if ((options.vectorWidth & (options.vectorWidth - 1)) != 0)
      return mlir::emitError(loc, "generated matmul: the vector width must be a power of two");
    p.maxVector = std::min(p.maxVector, options.vectorWidth);
  }
  bool shapesAgree = aType.getDimSize(rank - 2) == p.m && bType.getDimSize(rank - 2) == p.k &&
                     bType.getDimSize(rank - 1) == p.n &&
                     (rank == 2 || (aType.getDimSize(0) == p.batch && bType.getDimSize(0) == p.batch));
  if (!shapesAgree)
    return mlir::emitError(loc, "generated matmul: A, B and C have mismatched shapes");
  if (options.form != "auto" && options.form != "tiled" && options.form != "skinny")
    return mlir::emitError(loc, "generated matmul: the form must be auto, tiled or skinny, not '")
           << options.form << "'";

  llvm::SmallVector<Value> epilogueOperands;
  if (epilogue)
    epilogueOperands.assign(epilogue->hostOperands.begin(), epilogue->hostOperands.end());

  if (p.batch == 0 || p.m == 0 || p.n == 0)
    return mlir::success();
  if (p.k == 0) {
    // No product: C keeps its value (or becomes zero) and goes through the
    // epilogue.
    MLPIPE_DEBUG(kDebugEmitters, os << name << ": generated matmul with K = 0: elementwise only\n");
    if (!accumulate && mlir::failed(emitElementwise(host, loc, p, operands.c, {}, Elementwise::Zero, kernels, name)))
      return mlir::failure();
    if (epilogue)
      return emitElementwise(host, loc, p, operands.c, epilogueOperands, Elementwise::Epilogue, kernels, name);
    return mlir::success();
  }

  // Split-K adds into C atomically and runs the epilogue afterwards over C:
  // not possible when an epilogue operand may be C itself.
  bool splitAllowed = !prologue; // every block computes the whole row of A
  if (epilogue)
    for (Value operand : epilogue->hostOperands)
      if (rootBuffer(operand) == rootBuffer(operands.c))
        splitAllowed = false;

  int64_t flops = 2 * p.batch * p.m * p.n * p.k;
  int64_t bytes = bytesOf(aType) + bytesOf(bType) + bytesOf(cType) * (accumulate ? 2 : 1);
  for (Value operand : epilogueOperands)
    bytes += bytesOf(operand.getType());
  // C takes 128-bit stores where its rows are contiguous and aligned.
  int64_t widthC = vectorWidthAlong(cType, rank - 1, p.maxVector);

  // The skinny form: few rows, and B read along its contiguous rows.
  int64_t vectorN = vectorWidthAlong(bType, rank - 1, p.maxVector);
  bool skinny = prefersSkinny(p, options);
  if (options.form == "skinny" && !hasUnitStride(bType, rank - 1))
    return mlir::emitError(loc, "generated matmul: the skinny form needs B's rows contiguous");
  if (prologue && (!skinny || p.batch != 1 || accumulate || !skinnyIsOneLaunch(p.m, p.k, p.elementBytes)))
    return mlir::emitError(loc, "generated matmul: a row computed in the kernel needs the one-launch skinny form");

  // With split-K the product kernel only adds into C; the epilogue, if any,
  // follows as its own kernel over C.
  auto launchAll = [&](int64_t splits, const KernelSignature &signature, const LaunchDims &dims,
                       const std::function<mlir::LogicalResult(mlir::OpBuilder &, mlir::gpu::GPUFuncOp)> &body) {
    if (splits > 1 && !accumulate &&
        mlir::failed(emitElementwise(host, loc, p, operands.c, {}, Elementwise::Zero, kernels, name)))
      return mlir::failure();
    mlir::FailureOr<mlir::gpu::GPUFuncOp> built = kernels.tryBuild(signature, body);
    if (mlir::failed(built))
      return mlir::LogicalResult(mlir::emitError(loc, "generated matmul: the kernel's body could not be built"));
    mlir::gpu::GPUFuncOp kernel = *built;
    llvm::SmallVector<Value> arguments{operands.a, operands.b, operands.c};
    if (splits == 1)
      arguments.append(epilogueOperands.begin(), epilogueOperands.end());
    if (prologue)
      arguments.append(prologue->hostOperands.begin(), prologue->hostOperands.end());
    kernels.launch(host, loc, kernel, dims, arguments);
    if (splits > 1 && epilogue)
      return emitElementwise(host, loc, p, operands.c, epilogueOperands, Elementwise::Epilogue, kernels, name);
    return mlir::success();
  };
  auto productProblem = [&](int64_t splits) {
    Problem q = p;
    if (splits > 1) {
      q.epilogue = nullptr;
      q.accumulate = true;
    }
    return q;
  };

  if (skinny) {
    SkinnyConfig cfg = chooseSkinny(p, options, device, vectorN, splitAllowed);
    if (prologue && cfg.splitK > 1)
      return mlir::emitError(loc, "generated matmul: a row computed in the kernel must fit one staged slice");
    if (cfg.splitK > 1 && !splitAllowed) {
      // K does not fit one staged slice and the epilogue forbids splitting.
      if (options.form == "skinny")
        return mlir::emitError(loc, "generated matmul: the skinny form would split K, which this epilogue forbids");
      skinny = false;
    } else {
      Problem q = productProblem(cfg.splitK);
      bool cVector = widthC >= cfg.vectorN;
      int64_t shared = skinnySharedBytes(p, cfg);
      if (shared > device.sharedMemoryPerBlock)
        return mlir::emitError(loc, "generated matmul: the skinny form needs ")
               << shared << " bytes of shared memory; a block has " << device.sharedMemoryPerBlock;
      int64_t aRow = cfg.rowsPerBlock >= kFragment ? roundUp(cfg.rowsPerBlock, kFragment) : cfg.rowsPerBlock;
      KernelSignature signature;
      signature.name = name;
      signature.arguments = argumentTypes(q, /*withAB=*/true);
      signature.workgroupBuffers = {workgroupType({cfg.kPerSplit, aRow}, element),
                                    workgroupType({cfg.rowSlots(), cfg.reductionRows, cfg.blockN}, element)};
      if (prologue)
        signature.workgroupBuffers.push_back(workgroupType({std::max<int64_t>(1, prologue->slots)}, element));
      signature.bytesMoved = bytes;
      signature.flops = flops;
      signature.blockSize = {static_cast<int32_t>(cfg.threads()), 1, 1};
      LaunchDims dims;
      dims.grid = {llvm::divideCeilSigned(p.n, cfg.blockN), cfg.splitK, p.batch * cfg.rowGroups};
      dims.block = {cfg.threads(), 1, 1};
      if (dims.grid[1] > 65535 || dims.grid[2] > 65535)
        return mlir::emitError(loc, "generated matmul: the grid is too large for this product");
      MLPIPE_DEBUG(kDebugEmitters,
                   os << name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x" << p.k
                      << " (batch x M x N x K), skinny form: " << cfg.rowsPerBlock << " rows x " << cfg.blockN
                      << " columns per block (" << cfg.lanesN << " lanes per B row segment, kSkinnyMinSegmentBytes), "
                      << cfg.threads() << " threads, B vectors " << cfg.vectorN << " along N, split-K " << cfg.splitK
                      << " (" << cfg.kPerSplit << " rows each, " << cfg.rowsInFlight << " in flight per thread), C "
                      << (cVector ? "vectors" : "scalars") << ", grid (" << dims.grid[0] << ", " << dims.grid[1] << ", "
                      << dims.grid[2] << "), " << shared << " B shared"
                      << (prologue ? ", A's row computed by every block (a row reduction before it)" : "") << "\n");
      return launchAll(cfg.splitK, signature, dims, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
        return buildSkinnyBody(b, f, q, cfg, cVector);
      });
    }
  }

  std::string error;
  auto chosen = chooseTiled(p, options, device, splitAllowed, error);
  if (mlir::failed(chosen))
    return mlir::emitError(loc, "generated matmul: ") << error;
  TiledConfig cfg = *chosen;
  Problem q = productProblem(cfg.splitK);
  LoadPlan planA = planOperand(p, aType, /*isA=*/true, cfg.blockK, cfg.blockM);
  LoadPlan planB = planOperand(p, bType, /*isA=*/false, cfg.blockK, cfg.blockN);
  KernelSignature signature;
  signature.name = name;
  signature.arguments = argumentTypes(q, /*withAB=*/true);
  signature.workgroupBuffers = {workgroupType({2, cfg.blockK, paddedRow(cfg.blockM, p.elementBytes)}, element),
                                workgroupType({2, cfg.blockK, paddedRow(cfg.blockN, p.elementBytes)}, element)};
  signature.bytesMoved = bytes;
  signature.flops = flops;
  signature.blockSize = {static_cast<int32_t>(cfg.threads()), 1, 1};
  int64_t tilesM = llvm::divideCeilSigned(p.m, cfg.blockM), tilesN = llvm::divideCeilSigned(p.n, cfg.blockN);
  LaunchDims dims;
  dims.grid = {cfg.mFastest ? tilesM : tilesN, cfg.mFastest ? tilesN : tilesM, p.batch * cfg.splitK};
  dims.block = {cfg.threads(), 1, 1};
  if (dims.grid[1] > 65535 || dims.grid[2] > 65535)
    return mlir::emitError(loc, "generated matmul: the grid is too large for this product");
  MLPIPE_DEBUG(kDebugEmitters, os << name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x" << p.k
                                  << " (batch x M x N x K), tiled " << cfg.blockM << "x" << cfg.blockN << "x"
                                  << cfg.blockK << ", thread tile " << cfg.threadM << "x" << cfg.threadN << ", "
                                  << cfg.threads() << " threads, split-K " << cfg.splitK << " (" << cfg.kPerSplit
                                  << " rows each), A vectors " << describePlan(planA, "M") << ", B vectors "
                                  << describePlan(planB, "N") << ", C vectors "
                                  << (cfg.splitK > 1 ? 1 : std::min(kFragment, widthC)) << ", grid (" << dims.grid[0]
                                  << ", " << dims.grid[1] << ", " << dims.grid[2] << ") with "
                                  << (cfg.mFastest ? "M" : "N") << " tiles fastest, " << tiledSharedBytes(p, cfg)
                                  << " B shared, cost " << static_cast<int64_t>(cfg.cost) << "\n");
  return launchAll(cfg.splitK, signature, dims, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
    buildTiledBody(b, f, q, cfg, planA, planB, widthC);
    return mlir::success();
  });
}

} // namespace mlpipe::emitters
