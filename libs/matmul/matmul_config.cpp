// The generated matmul's heuristics: which form a product takes, and the
// configuration of each form (the tiled kernel's block and thread tiles and
// its split of K, chosen by a cost model; the skinny kernel's row segments
// and split), every number they choose by a named constant with its reason.
#include "matmul/matmul_config.h"

#include "codegen/path_choice.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <bit>
#include <optional>

namespace mlpipe::emitters {

namespace generated_matmul {

namespace {

//===----------------------------------------------------------------------===//
// Heuristics: every number the emitter chooses by, and why (the layout
// constants the kernels share are in matmul_config.h).
//===----------------------------------------------------------------------===//

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
// Registers the stores of split-K's partial products need besides (the
// address of the split's slab): the 8x8 tile of a product split 5 ways
// (1024x3072 by 3072x768 on sm_75) spilled 4 bytes when asked for two
// blocks an SM (8 more still asked for two); ptxas takes 139 unconstrained.
constexpr int64_t kPartialStoreRegisters = 24;
// Blocks one SM holds at most (16 on sm_75, 32 from sm_80 on: the smaller).
constexpr int64_t kMaxBlocksPerSm = 16;
// Splitting K across blocks writes each element of C once per split (a
// partial product, to L2) and reads it back in the kernel that adds the
// splits; that costs about as much as this many FMAs of one SM's issue
// slots, as an L2 atomic did (H100: ~1 per clock per L2 slice against 128
// FMAs per clock per SM) when the splits were added atomically.
constexpr double kSplitPartialCostInFmas = 64.0;
// A split keeps at least this many K rows, so that its pipeline runs for
// 32 steps and its partial products stay a small part of its work.
constexpr int64_t kMinRowsPerSplit = 256;
// The grid may not split K more ways than this.
constexpr int64_t kMaxSplitK = 16;

// Rows of A (and C) one skinny block computes: each thread keeps this many
// rows times one vector of columns in registers.
constexpr int64_t kSkinnyRowsPerBlock = 16;
// Sums a skinny thread keeps in registers (its rows times its vector of
// columns), at most: 16 rows of 4 f32 columns. A 16-bit B's 128-bit vector
// is 8 columns, 128 sums at 16 rows, which leaves no registers for the rows
// of B in flight; such products read 64-bit vectors (4 columns) instead.
constexpr int64_t kSkinnyMaxSums = 64;
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
// Before splitting K across blocks (which costs one more launch: the
// kernel that adds the splits), a skinny block narrows: a warp's lanes split into
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
// SMs still come near the DRAM rate, without split-K's second launch.
constexpr int64_t kSkinnyTargetBlocksPerSm = 1;
// On chips with programmatic dependent launch, a skinny kernel's blocks are
// resident while the kernel before it runs (mlpipe-programmatic-launch). A
// decode step is a chain of few-row products, each starting its stream of B
// only when the one before has finished: a block may first bring its slice
// of B into L2, then wait, and read it from L2. Measured on the H200 (GPT-2
// 124M decode step, alternated with the build without it in one run): bf16
// 5-12 us faster after 10 tokens and 17 us after 1000 (of 0.35-0.39 ms), f32
// 15-20 us slower (of 0.35-0.40 ms). So only B of at most this many bytes an
// element is prefetched.
constexpr bool kSkinnyPrefetchesB = true;
constexpr int64_t kSkinnyPrefetchMaxElementBytes = 2;
// ...and only where the thread's sums leave it registers for the prefetch
// loop's addresses: with 16 rows of 4 f32 sums (64 registers) a thread is at
// its kSkinnyRegisters cap, and GPT-2's 16-row c_attn spilled 4 bytes.
constexpr int64_t kSkinnyPrefetchMaxSums = 32;
// Where B is never written while the program runs (a weight), a thread may
// load its rows of B into registers before the wait, not just into L2: the
// chain after the wait then starts with A and the arithmetic, without a
// round trip to L2 for B. Its whole slice becomes one chunk where it takes
// at most kSkinnyHeldBRegisters (a decode step's GEMVs of K = 768: 12 rows
// of 8 bf16 or 4 f32, 48 registers); a longer slice loads its first chunk
// before the wait and the rest after it (a 16-bit B's rest prefetched into
// L2 first). Measured on the H200 (GPT-2 124M decode step after 10 tokens,
// alternated with the build without it in one run): bf16 0.326-0.330
// against 0.341-0.345 ms, after 1000 tokens 0.357-0.360 against 0.376; f32
// 0.339-0.343 against 0.360 ms, so f32 B is loaded too (f32 B prefetched
// into L2 only had been slower, kSkinnyPrefetchMaxElementBytes).
constexpr bool kSkinnyLoadsBBeforeWait = true;
constexpr int64_t kSkinnyHeldBRegisters = 48;
constexpr int64_t kSkinnyLoadsBBeforeWaitMaxElementBytes = 4;
// A one-row GEMV still on fewer blocks than SMs at the narrowest segment,
// whose thread's rows of B do not fit the registers it holds before its
// wait (GPT-2's MLP c_proj, K = 3072 on 24 blocks: 48 rows a thread, 8 of
// them held), splits K over blocks until they fit (at most a block an
// SM); the last of a column tile's splits to finish adds the partial sums
// and writes C (SkinnyConfig::lastSplitCompletes): still one launch.
constexpr bool kSkinnySplitsToHoldB = true;
// Shared memory for the staged slice of A, and for the cross-warp reduction.
constexpr int64_t kSkinnyASharedBytes = 16 * 1024;
constexpr int64_t kSkinnyReductionSharedBytes = 32 * 1024;

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
  if (c.splitK > 1)
    registers += kPartialStoreRegisters;
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
// partial products spread over the SMs.
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
  double partials = c.splitK > 1 ? static_cast<double>(p.batch * p.m * p.n * c.splitK) : 0.0;
  return static_cast<double>(blocksPerSm) * std::max(blockCompute, blockLoads) +
         partials * kSplitPartialCostInFmas / device.warpSize / device.smCount;
}

TiledConfig withSplit(const Problem &p, TiledConfig c, int64_t splits) {
  c.kPerSplit = roundUp(llvm::divideCeilSigned(p.k, splits), c.blockK);
  c.splitK = llvm::divideCeilSigned(p.k, c.kPerSplit);
  return c;
}

} // namespace

//===----------------------------------------------------------------------===//
// The problem, as the operand types describe it.
//===----------------------------------------------------------------------===//

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

int64_t paddedRow(int64_t elements, int64_t elementBytes) { return elements + kSharedPadBytes / elementBytes; }

int64_t tiledSharedBytes(const Problem &p, const TiledConfig &c) {
  return 2 * c.blockK * (paddedRow(c.blockM, p.elementBytes) + paddedRow(c.blockN, p.elementBytes)) * p.elementBytes;
}

int64_t skinnySharedBytes(const Problem &p, const SkinnyConfig &c) {
  int64_t aRow = roundUp(c.rowsPerBlock, c.rowsPerBlock >= kFragment ? kFragment : 1);
  return c.kPerSplit * aRow * p.elementBytes + c.rowSlots() * c.reductionRows * c.blockN * p.accumulatorBytes;
}

bool prefersSkinny(const Problem &p, const GeneratedMatmulOptions &options) {
  bool bRowsContiguous = hasUnitStride(p.bType, p.colDim()) && p.n > 1;
  return options.form == "skinny" ||
         (options.form == "auto" && p.m <= kSkinnyMaxRows && bRowsContiguous && options.blockTile[0] == 0);
}

bool prefersRowDot(const Problem &p, const GeneratedMatmulOptions &options) {
  if (options.form == "row_dot")
    return true;
  bool bStoredByColumns = hasUnitStride(p.bType, p.rowDim()) && !hasUnitStride(p.bType, p.colDim());
  return options.form == "auto" && options.blockTile[0] == 0 && p.batch == 1 && p.m <= kRowDotMaxRows &&
         bStoredByColumns && p.n >= kGeneratedRowDotMinColumns;
}

RowDotConfig chooseRowDot(const Problem &p, const DeviceDescription &device) {
  RowDotConfig cfg;
  cfg.columns = std::clamp<int64_t>(kRowDotSums / std::max<int64_t>(1, p.m), 1, kRowDotMaxColumns);
  cfg.vectorK =
      std::min(vectorWidthAlong(p.aType, p.colDim(), p.maxVector), vectorWidthAlong(p.bType, p.rowDim(), p.maxVector));
  cfg.stepsInFlight = std::min(kRowDotStepsInFlight, cfg.steps(p.k));
  cfg.loadsBBeforeWait = kRowDotLoadsBBeforeWait && device.programmaticDependentLaunch && p.bUnwritten;
  return cfg;
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
                          int64_t widestVectorN, bool splitAllowed) {
  SkinnyConfig c;
  c.rowsPerBlock = std::min(p.m, kSkinnyRowsPerBlock);
  int64_t sumsPerRow = std::max<int64_t>(1, kSkinnyMaxSums / c.rowsPerBlock);
  c.vectorN = std::min(widestVectorN, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(sumsPerRow))));
  const int64_t vectorN = c.vectorN;
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
  // 32-bit registers a row of B takes as stored (a vector of 16-bit
  // elements is widened as it is used).
  int64_t perBRow = std::max<int64_t>(1, c.vectorN * p.elementBytes / 4);
  bool holdsB = kSkinnyLoadsBBeforeWait && device.programmaticDependentLaunch && p.bUnwritten &&
                p.elementBytes <= kSkinnyLoadsBBeforeWaitMaxElementBytes &&
                c.rowsPerBlock * c.vectorN <= kSkinnyPrefetchMaxSums;
  int64_t splits = 1;
  if (options.splitK > 0) {
    splits = options.splitK;
  } else if (narrowable && holdsB && kSkinnySplitsToHoldB && splitAllowed) {
    auto heldRows = [&](int64_t s) { return roundUp(llvm::divideCeilSigned(p.k, s), c.rowSlots()) / c.rowSlots(); };
    int64_t s = 1;
    while (heldRows(s) * perBRow > kSkinnyHeldBRegisters && columnBlocks * (s + 1) <= device.smCount)
      ++s;
    if (heldRows(s) * perBRow <= kSkinnyHeldBRegisters)
      splits = s;
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
  c.lastSplitCompletes = c.splitK > 1 && narrowable;
  // 32-bit registers: the accumulators, and each B row of a chunk.
  int64_t accumulators = c.rowsPerBlock * c.vectorN * p.accumulatorBytes / 4;
  int64_t forB = (kSkinnyRegisters - kRegisterOverhead - accumulators) / (2 * perBRow);
  int64_t most = std::clamp<int64_t>(std::min(forB, kSkinnyRowsInFlight), 1, c.rowsPerWarp());
  // As many chunks as that needs, evened out (16 rows by at most 5: 4 x 4).
  c.rowsInFlight = llvm::divideCeilSigned(c.rowsPerWarp(), llvm::divideCeilSigned(c.rowsPerWarp(), most));
  c.prefetchB = kSkinnyPrefetchesB && device.programmaticDependentLaunch &&
                p.elementBytes <= kSkinnyPrefetchMaxElementBytes &&
                c.rowsPerBlock * c.vectorN <= kSkinnyPrefetchMaxSums;
  c.loadsBBeforeWait = holdsB;
  if (c.loadsBBeforeWait && c.rowsPerWarp() * perBRow <= kSkinnyHeldBRegisters)
    c.rowsInFlight = c.rowsPerWarp();
  int64_t bytesPerReductionRow = slots * c.blockN * p.accumulatorBytes;
  c.reductionRows = std::clamp<int64_t>(kSkinnyReductionSharedBytes / bytesPerReductionRow, 1, c.rowsPerBlock);
  return c;
}

} // namespace generated_matmul

bool skinnyIsOneLaunch(int64_t m, int64_t k, int64_t elementBytes) {
  // What chooseSkinny narrows (and splits only with the last split
  // completing, kSkinnySplitsToHoldB): one row, whose whole K
  // (one element per k: no fragment padding at one row) fits the staged
  // slice of A.
  return m >= 1 && m <= generated_matmul::kSkinnyNarrowMaxRows &&
         k * elementBytes <= generated_matmul::kSkinnyASharedBytes;
}

} // namespace mlpipe::emitters
