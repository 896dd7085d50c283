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

using mlir::Value;

//===----------------------------------------------------------------------===//
// Heuristics: every number the emitter chooses by, and why.
//===----------------------------------------------------------------------===//

// The widest global and shared access: 128-bit loads and stores (ld.v4.f32).
constexpr int64_t kVectorBytes = 16;
// A thread's register tile is built from fragments of 4 rows and 4 columns,
// each one 128-bit shared load for f32.
constexpr int64_t kFragment = 4;
// Each shared row is padded by 16 bytes: a tile stored transposed (loaded
// along K) then spreads a warp's stores over all 32 banks, and rows stay
// 16-byte aligned for the fragment loads.
constexpr int64_t kSharedPadBytes = 16;
// K-slice per pipeline step. Eight f32 rows of a 128-wide tile are one
// 128-bit load per thread per operand with 256 threads.
constexpr int64_t kBlockK = 8;
// Shared loads a thread issues per step and K row, relative to its FMAs: an
// 8x8 register tile issues 4 fragment loads per 64 FMAs, an 8x4 or 4x8 one
// 3 per 32, a 4x4 one 2 per 16. The cost model charges each tile
// (fragment loads + FMAs) / FMAs, i.e. 1.06, 1.09, 1.13 per FMA, plus the
// fixed per-step cost below, which is what makes small tiles slower.
constexpr double kStepOverheadInstructions = 24.0; // address arithmetic, barrier, global loads, loop
// An SM issues at full rate once it holds this many warps: a warp with a
// register tile of independent FMAs issues about two cycles in three
// between shared loads and barriers, so 6 keep the 4 schedulers busy. With
// fewer resident warps it issues proportionally less.
constexpr int64_t kWarpsForFullIssue = 6;
// Tiles of A and B come from L2 at about 24 bytes per clock per SM under
// full load (an H100/H200: ~5.5 TB/s over 132 SMs at 1.75 GHz), while the
// SM issues 4 warp instructions per clock: a byte costs this many issue
// slots. Loading overlaps the arithmetic, so a block costs the larger of
// the two; it is what keeps thin tiles (16 rows of 128 columns re-reading B
// for every 16 rows) from winning on large products.
constexpr double kIssueSlotsPerL2Byte = 4.0 / 24.0;
// Registers a thread needs beside its accumulators, fragments and prefetched
// tile (addresses, indices, loop state). With it the estimate for the 8x4
// f32 tile (74) matches what ptxas takes unconstrained (75), so that three
// blocks of 256 threads fit an SM; the 8x8 tile (112, ptxas 126) fits two.
constexpr int64_t kRegisterOverhead = 24;
// Registers the stores of C need besides, where they read memory (C's old
// value when accumulating, an epilogue's operands): without them the 8x4
// tile accumulating into C spilled 4 bytes when asked for three blocks.
constexpr int64_t kReadingStoreRegisters = 16;
// Blocks one SM holds at most (16 on sm_75, 32 from sm_80 on: the smaller).
constexpr int64_t kMaxBlocksPerSm = 16;
// The kernels tell ptxas how many blocks an SM should hold (.minnctapersm):
// the tiled kernel as many as the cost model counts on, the skinny one this
// many.
// Without it ptxas may take up to 255 registers: the 8x8 tile at a ragged
// edge lands at 132, one block of 256 threads per SM instead of two.
constexpr int64_t kSkinnyBlocksPerSm = 2;
// Splitting K across blocks adds one atomic add per element of C per split;
// an L2 atomic costs about as much as this many FMAs of one SM's issue slots
// (H100: ~1 atomic per clock per L2 slice against 128 FMAs per clock per SM).
constexpr double kAtomicCostInFmas = 64.0;
// A split keeps at least this many K rows, so that its pipeline runs for
// 32 steps and the atomics stay a small part of its work.
constexpr int64_t kMinRowsPerSplit = 256;
// The grid may not split K more ways than this.
constexpr int64_t kMaxSplitK = 16;

// Skinny products (M small) are bandwidth-bound: every element of B is used
// M times. They take the GEMV-like form when M is at most this (GPT-2
// decoding and short prompts), and B's rows are contiguous.
constexpr int64_t kSkinnyMaxRows = 64;
// Rows of A (and C) one skinny block computes: each thread keeps this many
// rows times one vector of columns in registers.
constexpr int64_t kSkinnyRowsPerBlock = 16;
// Warps per skinny block; they split the block's K-slice row by row and add
// their partial sums in shared memory at the end.
constexpr int64_t kSkinnyWarps = 8;
// Rows of B each thread loads per chunk, at most; the next chunk's loads are
// issued before the current chunk's arithmetic, so twice this many are in
// flight: with 8, 256 B per thread, 64 KiB per block.
constexpr int64_t kSkinnyRowsInFlight = 8;
// Registers a skinny thread may use, so that two blocks of 256 threads fit
// an SM (kSkinnyBlocksPerSm): its accumulators, two chunks of B rows and
// kRegisterOverhead. With 16 rows of C in registers that leaves 4 rows of B
// per chunk (still 128 B in flight per thread, 8 MiB over an H200).
constexpr int64_t kSkinnyRegisters = 128;
// Each warp gets at least this many rows of its block's K-slice, so that the
// shared-memory reduction stays small next to the streaming.
constexpr int64_t kSkinnyMinRowsPerWarp = 4;
// Before splitting K across blocks (which costs two more launches: zeroing
// C and the epilogue), a skinny block narrows: a warp's lanes split into
// groups that each read a segment of a B row, down to this many bytes (two
// 32-byte sectors, every sector still read whole), so that more blocks fit
// across N. A decode step's GEMVs (one row of C) then take one launch each.
constexpr int64_t kSkinnyMinSegmentBytes = 64;
// Row segments narrow only for products of at most this many rows (as
// measured: a decode step's one row).
constexpr int64_t kSkinnyNarrowMaxRows = 1;
// The skinny grid is wide enough, unsplit, with this many blocks per SM.
// Still short of that at the narrowest segment, a narrowed block does not
// split K: a block streaming B moves about 100 GB/s, so a quarter of the
// SMs still come near the DRAM rate, without split-K's two extra launches
// or its atomics (whose order varies: the one-row form gives the same bits
// run after run).
constexpr int64_t kSkinnyTargetBlocksPerSm = 1;
// Shared memory for the staged slice of A, and for the cross-warp reduction.
constexpr int64_t kSkinnyASharedBytes = 16 * 1024;
constexpr int64_t kSkinnyReductionSharedBytes = 32 * 1024;

// The elementwise kernels (zeroing C, the split-K epilogue): one element per
// thread.
constexpr int64_t kElementwiseThreads = 256;

int64_t roundUp(int64_t a, int64_t b) { return llvm::divideCeilSigned(a, b) * b; }

//===----------------------------------------------------------------------===//
// The problem, as the operand types describe it.
//===----------------------------------------------------------------------===//

struct Layout {
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  bool known = false; // every stride and the offset static
};

Layout layoutOf(mlir::MemRefType type) {
  Layout layout;
  if (mlir::failed(type.getStridesAndOffset(layout.strides, layout.offset)))
    return layout;
  layout.known = !mlir::ShapedType::isDynamic(layout.offset) &&
                 llvm::none_of(layout.strides, [](int64_t s) { return mlir::ShapedType::isDynamic(s); });
  return layout;
}

// The widest vector (in elements, at most `maxElements`) that reads `dim`
// of `type` at indices that are multiples of the width with every vector
// aligned to its own size, given an aligned base pointer. 1 when `dim` is
// not contiguous.
int64_t vectorWidthAlong(mlir::MemRefType type, int64_t dim, int64_t maxElements) {
  Layout layout = layoutOf(type);
  if (!layout.known || layout.strides[dim] != 1)
    return 1;
  for (int64_t width = maxElements; width > 1; width /= 2) {
    bool aligned = type.getDimSize(dim) % width == 0 && layout.offset % width == 0;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != dim && type.getDimSize(d) > 1 && layout.strides[d] % width != 0)
        aligned = false;
    if (aligned)
      return width;
  }
  return 1;
}

bool hasUnitStride(mlir::MemRefType type, int64_t dim) {
  Layout layout = layoutOf(type);
  return layout.known && (layout.strides[dim] == 1 || type.getDimSize(dim) == 1);
}

struct Problem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t rank = 2;
  mlir::Type element;
  int64_t elementBytes = 4;
  mlir::MemRefType aType, bType, cType;
  bool accumulate = false;
  const MatmulEpilogue *epilogue = nullptr;
  const MatmulRowPrologue *prologue = nullptr; // A's row computed in the kernel
  int64_t maxVector = 4;                       // elements in the widest access

  int64_t rowDim() const { return rank - 2; }
  int64_t colDim() const { return rank - 1; }
};

// How one operand's tile goes from global to shared memory: vectors of
// `width` elements along K (`alongK`) or along the operand's other axis.
struct LoadPlan {
  bool alongK = false;
  int64_t width = 1;
};

// A (rows M, K along columns) or B (K along rows, columns N).
LoadPlan planOperand(const Problem &p, mlir::MemRefType type, bool isA, int64_t blockK, int64_t blockOuter) {
  int64_t kDim = isA ? p.colDim() : p.rowDim();
  int64_t outerDim = isA ? p.rowDim() : p.colDim();
  int64_t alongK = std::min(vectorWidthAlong(type, kDim, p.maxVector), blockK);
  int64_t alongOuter = std::min(vectorWidthAlong(type, outerDim, p.maxVector), blockOuter);
  LoadPlan plan;
  if (alongK > 1 || alongOuter > 1) {
    plan.alongK = alongK > alongOuter;
    plan.width = std::max(alongK, alongOuter);
  } else {
    // Scalars: consecutive threads along whichever axis is contiguous.
    plan.alongK = hasUnitStride(type, kDim) && !hasUnitStride(type, outerDim);
    plan.width = 1;
  }
  return plan;
}

//===----------------------------------------------------------------------===//
// Configurations.
//===----------------------------------------------------------------------===//

struct TiledConfig {
  int64_t blockM = 0, blockN = 0, blockK = kBlockK;
  int64_t threadM = 0, threadN = 0;
  int64_t splitK = 1;
  int64_t kPerSplit = 0;   // a multiple of blockK
  bool mFastest = true;    // tiles of M on grid x (consecutive blocks share a tile of B)
  int64_t blocksPerSm = 1; // the blocks an SM should hold at once (for ptxas)
  double cost = 0;         // the model's estimate, in FMA issue slots of the busiest SM

  int64_t threadsM() const { return blockM / threadM; }
  int64_t threadsN() const { return blockN / threadN; }
  int64_t threads() const { return threadsM() * threadsN(); }
};

struct SkinnyConfig {
  int64_t warps = kSkinnyWarps;
  int64_t vectorN = 1;      // columns per thread (one vector of B)
  int64_t lanesN = 32;      // lanes across a row segment; 32 / lanesN segments (rows of B) per warp
  int64_t blockN = 32;      // lanesN x vectorN
  int64_t rowsPerBlock = 1; // rows of A and C per block
  int64_t rowGroups = 1;
  int64_t splitK = 1;
  int64_t kPerSplit = 0;    // a multiple of warps
  int64_t rowsInFlight = 1; // per thread per chunk
  int64_t reductionRows = 1;

  int64_t threads() const { return warps * 32; }
  // Groups of lanes that each take their own rows of the K-slice.
  int64_t rowSlots() const { return warps * (32 / lanesN); }
  int64_t rowsPerWarp() const { return kPerSplit / rowSlots(); }
  int64_t chunks() const { return llvm::divideCeilSigned(rowsPerWarp(), rowsInFlight); }
};

int64_t paddedRow(int64_t elements, int64_t elementBytes) { return elements + kSharedPadBytes / elementBytes; }

int64_t tiledSharedBytes(const Problem &p, const TiledConfig &c) {
  return 2 * c.blockK * (paddedRow(c.blockM, p.elementBytes) + paddedRow(c.blockN, p.elementBytes)) * p.elementBytes;
}

std::string checkTiled(const Problem &p, const TiledConfig &c, const DeviceDescription &device) {
  auto isFragmentMultiple = [](int64_t t) { return t == 4 || t == 8; };
  if (!isFragmentMultiple(c.threadM) || !isFragmentMultiple(c.threadN))
    return "the thread tile must be 4 or 8 in each dimension";
  if (c.blockM % c.threadM != 0 || c.blockN % c.threadN != 0)
    return "the block tile must be a multiple of the thread tile";
  if (c.blockK < 1 || c.blockK > 32 || (c.blockK & (c.blockK - 1)) != 0)
    return "the K-slice must be a power of two up to 32";
  if (c.threads() < device.warpSize || c.threads() > device.maxThreadsPerBlock || c.threads() % device.warpSize != 0)
    return "the block tile over the thread tile must give a whole number of warps, at most " +
           std::to_string(device.maxThreadsPerBlock) + " threads";
  if (tiledSharedBytes(p, c) > device.sharedMemoryPerBlock)
    return "the double-buffered tiles need more shared memory than a block has";
  return "";
}

// Blocks of a tiled configuration one SM can hold at once: limited by
// threads, registers (estimated: accumulators, fragments, the prefetched
// tile, overhead) and shared memory (the opt-in limit stands for the SM's).
int64_t residentBlocks(const Problem &p, const TiledConfig &c, const DeviceDescription &device) {
  int64_t words = p.elementBytes / 4;
  int64_t prefetched = (c.blockM + c.blockN) * c.blockK / c.threads();
  int64_t registers = (c.threadM * c.threadN + c.threadM + c.threadN + prefetched) * words + kRegisterOverhead;
  if (p.accumulate || p.epilogue)
    registers += kReadingStoreRegisters;
  registers = std::min<int64_t>(roundUp(registers, 8), device.maxRegistersPerThread);
  int64_t byThreads = device.maxThreadsPerSm / c.threads();
  int64_t byRegisters = device.registersPerSm / (registers * c.threads());
  int64_t byShared = device.sharedMemoryPerBlockOptIn / tiledSharedBytes(p, c);
  return std::max<int64_t>(1, std::min({byThreads, byRegisters, byShared, kMaxBlocksPerSm}));
}

// Estimated time of a tiled configuration in warp-instruction issue slots
// of the busiest SM: its share of the blocks (rounded up: a partial last
// wave costs a whole one), each costing the larger of its instructions
// (FMAs, shared loads, per-step overhead; slowed where too few warps are
// resident to issue every cycle) and its loads from L2, plus the split-K
// atomics spread over the SMs.
double tiledCost(const Problem &p, const TiledConfig &c, const DeviceDescription &device) {
  int64_t blocks = p.batch * llvm::divideCeilSigned(p.m, c.blockM) * llvm::divideCeilSigned(p.n, c.blockN) * c.splitK;
  int64_t blocksPerSm = llvm::divideCeilSigned(blocks, device.smCount);
  double fmasPerThreadStep = static_cast<double>(c.threadM * c.threadN * c.blockK);
  double fragmentLoads = static_cast<double>((c.threadM + c.threadN) / kFragment * c.blockK);
  double instructionsPerStep = fmasPerThreadStep + fragmentLoads + kStepOverheadInstructions;
  double steps = static_cast<double>(llvm::divideCeilSigned(c.kPerSplit, c.blockK));
  int64_t warps = c.threads() / device.warpSize;
  int64_t residentWarps = std::min(blocksPerSm, residentBlocks(p, c, device)) * warps;
  double issueRate = std::min(1.0, static_cast<double>(residentWarps) / kWarpsForFullIssue);
  double blockCompute = instructionsPerStep * steps * static_cast<double>(warps) / issueRate;
  double blockLoads = static_cast<double>((c.blockM + c.blockN) * c.kPerSplit * p.elementBytes) * kIssueSlotsPerL2Byte;
  double atomics = c.splitK > 1 ? static_cast<double>(p.batch * p.m * p.n * c.splitK) : 0.0;
  return static_cast<double>(blocksPerSm) * std::max(blockCompute, blockLoads) +
         atomics * kAtomicCostInFmas / device.warpSize / device.smCount;
}

TiledConfig withSplit(const Problem &p, TiledConfig c, int64_t splits) {
  c.kPerSplit = roundUp(llvm::divideCeilSigned(p.k, splits), c.blockK);
  c.splitK = llvm::divideCeilSigned(p.k, c.kPerSplit);
  return c;
}

mlir::FailureOr<TiledConfig> chooseTiled(const Problem &p, const GeneratedMatmulOptions &options,
                                         const DeviceDescription &device, bool splitAllowed, std::string &error) {
  // The candidates: 128x128 with 8x8 per thread (256 threads) for large
  // problems; 128x64 and 64x64 with 8x4 (256 and 128 threads) where the
  // large tile would leave SMs idle; 32x128 and 16x128 with 4x8 for few
  // rows. f64 takes 4x4 register tiles (an 8x8 tile of doubles would not fit
  // in registers with the fragments).
  struct Candidate {
    int64_t blockM, blockN, threadM, threadN;
  };
  llvm::SmallVector<Candidate> candidates;
  if (p.elementBytes == 8)
    candidates = {{64, 64, 4, 4}, {32, 64, 4, 4}, {32, 32, 4, 4}};
  else
    candidates = {{128, 128, 8, 8}, {128, 64, 8, 4}, {64, 64, 8, 4}, {32, 128, 4, 8}, {16, 128, 4, 8}};
  bool forcedTile = options.blockTile[0] > 0;
  if (forcedTile) {
    int64_t threadM = options.threadTile[0] > 0 ? options.threadTile[0] : (p.elementBytes == 8 ? 4 : 8);
    int64_t threadN = options.threadTile[1] > 0 ? options.threadTile[1] : threadM;
    candidates = {{options.blockTile[0], options.blockTile[1], threadM, threadN}};
  }
  int64_t blockK = options.blockTile[2] > 0 ? options.blockTile[2] : kBlockK;

  std::optional<TiledConfig> best;
  for (const Candidate &candidate : candidates) {
    TiledConfig base;
    base.blockM = candidate.blockM;
    base.blockN = candidate.blockN;
    base.blockK = blockK;
    base.threadM = candidate.threadM;
    base.threadN = candidate.threadN;
    std::string problem = checkTiled(p, base, device);
    if (!problem.empty()) {
      if (forcedTile) {
        error = problem;
        return mlir::failure();
      }
      continue;
    }
    llvm::SmallVector<int64_t> splits;
    if (options.splitK > 0)
      splits = {splitAllowed ? options.splitK : 1};
    else
      for (int64_t s = 1; s <= kMaxSplitK && (s == 1 || (splitAllowed && p.k / s >= kMinRowsPerSplit)); ++s)
        splits.push_back(s);
    for (int64_t s : splits) {
      TiledConfig config = withSplit(p, base, s);
      config.cost = tiledCost(p, config, device);
      // Strictly better only: earlier candidates (larger tiles, fewer
      // splits) win ties.
      if (!best || config.cost < best->cost)
        best = config;
    }
  }
  if (!best) {
    error = "no tile configuration fits this device";
    return mlir::failure();
  }
  // Consecutive blocks share the tile of the operand with fewer tiles along
  // the other axis: the logits product's 8 tiles of M run side by side on
  // one tile of the 50257 columns, so B comes from HBM once.
  best->mFastest = llvm::divideCeilSigned(p.m, best->blockM) <= llvm::divideCeilSigned(p.n, best->blockN);
  // Ask ptxas to fit as many blocks as an SM will be given, as far as the
  // register estimate allows. The estimate is good for f32 tiles; ptxas's
  // own choice serves f64 better (it hoists fragments of doubles across the
  // K steps).
  int64_t blocks =
      p.batch * llvm::divideCeilSigned(p.m, best->blockM) * llvm::divideCeilSigned(p.n, best->blockN) * best->splitK;
  best->blocksPerSm = p.elementBytes == 4
                          ? std::min(residentBlocks(p, *best, device), llvm::divideCeilSigned(blocks, device.smCount))
                          : 1;
  return *best;
}

SkinnyConfig chooseSkinny(const Problem &p, const GeneratedMatmulOptions &options, const DeviceDescription &device,
                          int64_t vectorN, bool splitAllowed) {
  SkinnyConfig c;
  c.vectorN = vectorN;
  c.rowsPerBlock = std::min(p.m, kSkinnyRowsPerBlock);
  c.rowGroups = llvm::divideCeilSigned(p.m, c.rowsPerBlock);
  // Narrower row segments (more blocks across N) instead of splitting K,
  // for one row whose whole K fits one staged slice (a decode step's GEMVs).
  c.lanesN = 32;
  auto columnBlocksOf = [&](int64_t lanes) {
    return llvm::divideCeilSigned(p.n, lanes * vectorN) * p.batch * c.rowGroups;
  };
  bool narrowable = options.splitK <= 0 && skinnyIsOneLaunch(p.m, p.k, p.elementBytes);
  while (narrowable && c.lanesN > 1 && (c.lanesN / 2) * vectorN * p.elementBytes >= kSkinnyMinSegmentBytes &&
         columnBlocksOf(c.lanesN) < kSkinnyTargetBlocksPerSm * device.smCount &&
         p.k >= c.warps * (32 / (c.lanesN / 2)) * kSkinnyMinRowsPerWarp)
    c.lanesN /= 2;
  c.blockN = c.lanesN * vectorN;
  int64_t columnBlocks = columnBlocksOf(c.lanesN);
  int64_t splits = 1;
  if (options.splitK > 0) {
    splits = options.splitK;
  } else {
    // Enough blocks for every SM; no split shorter than a few rows per
    // slot. A narrowed block never splits (kSkinnyTargetBlocksPerSm).
    if (c.lanesN == 32) {
      int64_t deepest = std::max<int64_t>(1, p.k / (c.rowSlots() * kSkinnyMinRowsPerWarp));
      splits = std::clamp<int64_t>(llvm::divideCeilSigned(device.smCount, columnBlocks), 1, deepest);
    }
  }
  if (!splitAllowed)
    splits = 1;
  // The staged slice of A must fit its shared budget; split further if not.
  int64_t rowBytes = roundUp(c.rowsPerBlock, c.rowsPerBlock >= kFragment ? kFragment : 1) * p.elementBytes;
  int64_t slots = c.rowSlots();
  int64_t maxSlice = std::max<int64_t>(slots, kSkinnyASharedBytes / rowBytes / slots * slots);
  c.kPerSplit = std::min(roundUp(llvm::divideCeilSigned(p.k, splits), slots), maxSlice);
  c.splitK = llvm::divideCeilSigned(p.k, c.kPerSplit);
  int64_t words = p.elementBytes / 4;
  int64_t accumulators = c.rowsPerBlock * c.vectorN * words;
  int64_t forB = (kSkinnyRegisters - kRegisterOverhead - accumulators) / (2 * c.vectorN * words);
  int64_t most = std::clamp<int64_t>(std::min(forB, kSkinnyRowsInFlight), 1, c.rowsPerWarp());
  // As many chunks as that needs, evened out (16 rows by at most 5: 4 x 4).
  c.rowsInFlight = llvm::divideCeilSigned(c.rowsPerWarp(), llvm::divideCeilSigned(c.rowsPerWarp(), most));
  int64_t bytesPerReductionRow = slots * c.blockN * p.elementBytes;
  c.reductionRows = std::clamp<int64_t>(kSkinnyReductionSharedBytes / bytesPerReductionRow, 1, c.rowsPerBlock);
  return c;
}

int64_t skinnySharedBytes(const Problem &p, const SkinnyConfig &c) {
  int64_t aRow = roundUp(c.rowsPerBlock, c.rowsPerBlock >= kFragment ? kFragment : 1);
  return (c.kPerSplit * aRow + c.rowSlots() * c.reductionRows * c.blockN) * p.elementBytes;
}

//===----------------------------------------------------------------------===//
// Building blocks of kernel bodies.
//===----------------------------------------------------------------------===//

// Index arithmetic that folds constants as it goes.
struct Ix {
  mlir::OpBuilder &b;
  mlir::Location loc;

  Value c(int64_t v) const { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) const { return b.createOrFold<mlir::arith::AddIOp>(loc, x, y); }
  Value add(Value x, int64_t y) const { return y == 0 ? x : add(x, c(y)); }
  Value sub(Value x, Value y) const { return b.createOrFold<mlir::arith::SubIOp>(loc, x, y); }
  Value mul(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::MulIOp>(loc, x, c(y)); }
  Value div(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::DivUIOp>(loc, x, c(y)); }
  Value rem(Value x, int64_t y) const { return y == 1 ? c(0) : b.createOrFold<mlir::arith::RemUIOp>(loc, x, c(y)); }
  Value min(Value x, Value y) const { return b.createOrFold<mlir::arith::MinSIOp>(loc, x, y); }
  Value min(Value x, int64_t y) const { return min(x, c(y)); }
  Value lt(Value x, Value y) const {
    return b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, x, y);
  }
  Value lt(Value x, int64_t y) const { return lt(x, c(y)); }
  Value both(Value x, Value y) const {
    if (!x)
      return y;
    if (!y)
      return x;
    return b.createOrFold<mlir::arith::AndIOp>(loc, x, y);
  }
};

// A matrix operand inside a kernel: loads and stores by logical (batch,
// row, column), vectors along either axis (along rows through a transposed
// view, made once, whose innermost dimension is the contiguous one).
class Matrix {
public:
  Matrix(Value value, int64_t elementBytes) : value_(value), elementBytes_(elementBytes) {
    type_ = mlir::cast<mlir::MemRefType>(value.getType());
  }

  mlir::Type element() const { return type_.getElementType(); }

  // `width` elements starting at (row, col), along columns or rows.
  Value load(const Ix &ix, Value batch, Value row, Value col, bool alongRows, int64_t width) {
    if (width == 1) {
      Value scalar = mlir::memref::LoadOp::create(ix.b, ix.loc, value_, indices(batch, row, col));
      return mlir::vector::BroadcastOp::create(ix.b, ix.loc, vectorType(1), scalar);
    }
    Value base = alongRows ? transposed(ix) : value_;
    auto at = alongRows ? indices(batch, col, row) : indices(batch, row, col);
    return mlir::vector::LoadOp::create(ix.b, ix.loc, vectorType(width), base, at, /*nontemporal=*/false,
                                        llvm::MaybeAlign(width * elementBytes_));
  }

  Value loadScalar(const Ix &ix, Value batch, Value row, Value col) {
    return mlir::memref::LoadOp::create(ix.b, ix.loc, value_, indices(batch, row, col));
  }
  void storeScalar(const Ix &ix, Value element, Value batch, Value row, Value col) {
    mlir::memref::StoreOp::create(ix.b, ix.loc, element, value_, indices(batch, row, col));
  }
  // A vector along columns (the caller checked the layout allows it).
  Value loadRowVector(const Ix &ix, Value batch, Value row, Value col, int64_t width) {
    return mlir::vector::LoadOp::create(ix.b, ix.loc, vectorType(width), value_, indices(batch, row, col), false,
                                        llvm::MaybeAlign(width * elementBytes_));
  }
  void storeRowVector(const Ix &ix, Value vector, Value batch, Value row, Value col, int64_t width) {
    mlir::vector::StoreOp::create(ix.b, ix.loc, vector, value_, indices(batch, row, col), false,
                                  llvm::MaybeAlign(width * elementBytes_));
  }
  void atomicAdd(const Ix &ix, Value element, Value batch, Value row, Value col) {
    mlir::memref::AtomicRMWOp::create(ix.b, ix.loc, mlir::arith::AtomicRMWKind::addf, element, value_,
                                      indices(batch, row, col));
  }

  mlir::VectorType vectorType(int64_t width) const { return mlir::VectorType::get({width}, element()); }

private:
  llvm::SmallVector<Value> indices(Value batch, Value row, Value col) const {
    if (type_.getRank() == 3)
      return {batch, row, col};
    return {row, col};
  }
  Value transposed(const Ix &ix) {
    if (!transposed_) {
      mlir::OpBuilder::InsertionGuard guard(ix.b);
      // At the top of the kernel, so every use sees it.
      if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(value_))
        ix.b.setInsertionPointToStart(arg.getOwner());
      int64_t rank = type_.getRank();
      llvm::SmallVector<unsigned> order;
      for (int64_t d = 0; d < rank; ++d)
        order.push_back(static_cast<unsigned>(d));
      std::swap(order[rank - 2], order[rank - 1]);
      auto permutation = mlir::AffineMap::getPermutationMap(order, ix.b.getContext());
      transposed_ = mlir::memref::TransposeOp::create(ix.b, ix.loc, value_, mlir::AffineMapAttr::get(permutation));
    }
    return transposed_;
  }

  Value value_;
  mlir::MemRefType type_;
  int64_t elementBytes_;
  Value transposed_;
};

Value zeroVector(const Ix &ix, mlir::Type element, int64_t width) {
  auto type = mlir::VectorType::get({width}, element);
  return mlir::arith::ConstantOp::create(ix.b, ix.loc, type,
                                         mlir::DenseElementsAttr::get(type, ix.b.getFloatAttr(element, 0.0)));
}

Value zeroScalar(const Ix &ix, mlir::Type element) {
  return mlir::arith::ConstantOp::create(ix.b, ix.loc, element, ix.b.getFloatAttr(element, 0.0));
}

Value extract(const Ix &ix, Value vector, int64_t i) {
  return mlir::vector::ExtractOp::create(ix.b, ix.loc, vector, i);
}

Value insert(const Ix &ix, Value element, Value vector, int64_t i) {
  return mlir::vector::InsertOp::create(ix.b, ix.loc, element, vector, i);
}

// An scf.for from 0 to `upper` carrying `init`, its body built by `body`
// with the same builder (so helpers that captured it build inside the loop).
mlir::scf::ForOp buildLoop(const Ix &ix, Value upper, mlir::ValueRange init,
                           const std::function<llvm::SmallVector<Value>(Value, llvm::SmallVector<Value>)> &body) {
  auto loop = mlir::scf::ForOp::create(ix.b, ix.loc, ix.c(0), upper, ix.c(1), init);
  mlir::OpBuilder::InsertionGuard guard(ix.b);
  ix.b.setInsertionPointToStart(loop.getBody());
  llvm::SmallVector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
  llvm::SmallVector<Value> results = body(loop.getInductionVar(), carried);
  mlir::scf::YieldOp::create(ix.b, ix.loc, results);
  return loop;
}

Value slice(const Ix &ix, Value vector, int64_t offset, int64_t width) {
  auto type = mlir::cast<mlir::VectorType>(vector.getType());
  if (offset == 0 && width == type.getNumElements())
    return vector;
  Value result = zeroVector(ix, type.getElementType(), width);
  for (int64_t i = 0; i < width; ++i)
    result = insert(ix, extract(ix, vector, offset + i), result, i);
  return result;
}

Value fma(const Ix &ix, Value a, Value b, Value acc) { return mlir::vector::FMAOp::create(ix.b, ix.loc, a, b, acc); }

Value broadcast(const Ix &ix, Value scalar, int64_t width) {
  return mlir::vector::BroadcastOp::create(ix.b, ix.loc, mlir::VectorType::get({width}, scalar.getType()), scalar);
}

// Runs `body` under `condition` (unconditionally when it is null).
void guarded(const Ix &ix, Value condition, const std::function<void()> &body) {
  if (!condition) {
    body();
    return;
  }
  auto branch = mlir::scf::IfOp::create(ix.b, ix.loc, condition, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(ix.b);
  ix.b.setInsertionPointToStart(&branch.getThenRegion().front());
  body();
}

// Runs `then` or `otherwise` by `condition`.
void branch(const Ix &ix, Value condition, const std::function<void()> &then, const std::function<void()> &otherwise) {
  auto branch = mlir::scf::IfOp::create(ix.b, ix.loc, condition, /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard guard(ix.b);
  ix.b.setInsertionPointToStart(&branch.getThenRegion().front());
  then();
  ix.b.setInsertionPointToStart(&branch.getElseRegion().front());
  otherwise();
}

// The final value of one element of C: the product, plus C's old value when
// accumulating, through the epilogue.
struct OutputWriter {
  const Problem &p;
  Matrix &c;
  llvm::ArrayRef<Value> epilogueOperands;

  Value finish(const Ix &ix, Value product, Value batch, Value row, Value col) const {
    if (!p.epilogue)
      return product;
    llvm::SmallVector<Value> index;
    if (p.rank == 3)
      index.push_back(batch);
    index.push_back(row);
    index.push_back(col);
    return p.epilogue->apply(ix.b, ix.loc, epilogueOperands, index, product);
  }

  // Writes `width` consecutive columns of one row; `vectorC` says C's layout
  // allows a vector of `width` there. The caller checked bounds.
  void write(const Ix &ix, Value values, Value batch, Value row, Value col, int64_t width, bool vectorC) const {
    if (vectorC) {
      Value v = values;
      if (p.accumulate)
        v = mlir::arith::AddFOp::create(ix.b, ix.loc, v, c.loadRowVector(ix, batch, row, col, width));
      if (p.epilogue)
        for (int64_t j = 0; j < width; ++j)
          v = insert(ix, finish(ix, extract(ix, v, j), batch, row, ix.add(col, j)), v, j);
      c.storeRowVector(ix, v, batch, row, col, width);
      return;
    }
    for (int64_t j = 0; j < width; ++j) {
      Value colJ = ix.add(col, j);
      Value v = extract(ix, values, j);
      if (p.accumulate)
        v = mlir::arith::AddFOp::create(ix.b, ix.loc, v, c.loadScalar(ix, batch, row, colJ));
      c.storeScalar(ix, finish(ix, v, batch, row, colJ), batch, row, colJ);
    }
  }
};

// Shared tiles are read and written 128 bits at a time: ask for that
// alignment (the default is the element's).
void alignWorkgroupBuffers(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
  for (unsigned i = 0; i < f.getNumWorkgroupAttributions(); ++i)
    f.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(kVectorBytes));
}

mlir::MemRefType workgroupType(llvm::ArrayRef<int64_t> shape, mlir::Type element) {
  auto space = mlir::gpu::AddressSpaceAttr::get(element.getContext(), mlir::gpu::AddressSpace::Workgroup);
  return mlir::MemRefType::get(shape, element, mlir::MemRefLayoutAttrInterface(), space);
}

llvm::SmallVector<mlir::Type> argumentTypes(const Problem &p, bool withAB) {
  llvm::SmallVector<mlir::Type> types;
  if (withAB) {
    types.push_back(p.aType);
    types.push_back(p.bType);
  }
  types.push_back(p.cType);
  if (p.epilogue)
    for (Value operand : p.epilogue->hostOperands)
      types.push_back(operand.getType());
  if (p.prologue)
    for (Value operand : p.prologue->hostOperands)
      types.push_back(operand.getType());
  return types;
}

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
  bool bRowsContiguous = hasUnitStride(bType, rank - 1) && p.n > 1;
  bool skinny = options.form == "skinny" ||
                (options.form == "auto" && p.m <= kSkinnyMaxRows && bRowsContiguous && options.blockTile[0] == 0);
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

bool skinnyIsOneLaunch(int64_t m, int64_t k, int64_t elementBytes) {
  // What chooseSkinny narrows (and so never splits): one row, whose whole K
  // (one element per k: no fragment padding at one row) fits the staged
  // slice of A.
  return m >= 1 && m <= kSkinnyNarrowMaxRows && k * elementBytes <= kSkinnyASharedBytes;
}

} // namespace mlpipe::emitters
