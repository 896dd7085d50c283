// The generated matmul's tensor-core form: A and B stored in bf16 or f16,
// products on mma.sync m16n8k16 with f32 accumulation (sm_80 and later),
// fragments by ldmatrix, K-slices staged through shared memory in one of
// two ways. f32 A and B under precision=tf32 take the same form on
// mma.sync m16n8k8 .tf32, each fragment register one f32 rounded to TF32
// (cvt.rna) as it is loaded: the K-step and the slices hold the same bytes
// of a row as 16-bit ones (kMmaKBytes), so staging and ldmatrix are shared.
//
// By cp.async, where both operands are read as vectors (4 to 16 bytes), in
// S stages (2 to 4: as many as fit the block's share of the SM's shared
// memory while the register file holds two blocks of 8 warps; the option
// stages=N forces S):
//
//   cp.async slices 0 .. S-2 into stages 0 .. S-2, a group each
//   for t in slices:                       (blockK of K per step)
//     wait until at most S-2 groups are pending; barrier
//                                          (slice t has landed, and every
//                                           thread is done with step t-1)
//     cp.async slice t+S-1 into stage (t-1) mod S, a group
//     for each 16 of the slice's K:
//       A fragments of the warp's m16 tiles, B fragments of its n8 tiles
//       (ldmatrix.x4), one mma.sync per (m16, n8) pair
//   C <- epilogue(acc [+ C])               (two columns a store)
//
// Through registers otherwise (an odd extent: scalar reads), two stages:
//
//   stage slice 0 into shared stage 0; barrier
//   for t in slices:
//     registers <- global slice t+1        (issued first: its latency hides
//                                           behind the mma.sync below)
//     the products of slice t, as above
//     shared stage (t+1)&1 <- registers; barrier
//
// (one barrier per step suffices: step t writes the stage step t-1 read,
// after every thread passed step t-1's barrier).
//
// A block computes a blockM x blockN tile of C with warpsM x warpsN warps,
// each warp a (blockM / warpsM) x (blockN / warpsN) tile: a grid of m16n8
// tiles, 4 f32 accumulators each per lane. Products of at most 16 rows
// take tiles of one m16 row (warps of 16x16 along N, or one of 16x8; 128
// of K a step), so that no mma.sync computes rows that are never stored.
// Fragments as mma.sync lays them out, lane l, g = l / 4, t = l % 4:
//   A (row-major)  rows g, g+8 at K 2t, 2t+1, then the same 8 further;
//   B (col-major)  K 2t, 2t+1 (then 8 further) at column g;
//   C              rows g, g+8 at columns 2t, 2t+1.
//
// The stages are views of the block's dynamic shared memory (its size
// passed at launch, which raises the kernel's limit past the 48 KiB of
// static shared memory: four stages of 128x128x32 take 74 KiB), A's from
// byte 0, B's after them. Shared memory holds each operand along its
// contiguous axis. K-major
// ([stage][outer][k]: A as [m][k], B as [n][k], B's columns) holds the
// fragments as ldmatrix's 8x8 matrices: one ldmatrix.x4 gives a lane its
// four A registers of an m16 tile, or its B registers of two n8 tiles.
// Outer-major ([stage][k][outer], an operand read along M or N by
// cp.async: B as stored, [k][n]) holds them transposed, and ldmatrix.trans
// hands out the same registers. Each row is padded by 16 bytes (80-byte
// K-major rows at blockK = 32, 272-byte [k][n] rows at blockN = 128): the
// 8 rows of a matrix, 16 bytes each, fall in distinct 16-byte bank groups,
// and rows stay 16-byte aligned, as ldmatrix and cp.async need.
//
// Global reads go along whichever axis of the operand has unit stride, as
// 128-bit vectors (8 elements) where the layout keeps them aligned. Through
// registers, a vector along K is stored as it is; along M (A) or N (B), as
// with a transposed view, a thread loads the same vector from two
// consecutive K rows and stores each element pair as one 32-bit store into
// the K-major tile. Rows of A and columns of B past the edge are clamped to
// the last one (they feed only elements of C that are never stored); K
// past the edge reads as zero (cp.async: zero-filled, nothing read).
#include "matmul/matmul_building.h"

#include "codegen/debug.h"
#include "codegen/split_completion.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

#include <algorithm>
#include <array>
#include <optional>

namespace mlpipe::emitters::generated_matmul {

namespace {

// mma.sync's tile: m16n8k16 on 16-bit A and B, m16n8k8 on TF32 (f32
// operands, precision=tf32). Either K-step is 32 bytes of a row of A or a
// column of B, so the shared tiles, ldmatrix's 8x8 matrices of 16-bit
// words (a matrix row: 8 16-bit elements or 4 f32) and the lanes'
// addresses are the same bytes in both; TF32 takes each 32-bit word of a
// fragment as one element where 16-bit takes a pair:
//   A  rows g, g+8 at K t, then the same 4 further;
//   B  K t, t+4 at column g;
//   C  as for 16-bit.
constexpr int64_t kMmaM = 16, kMmaN = 8;
constexpr int64_t kMmaKBytes = 32;
// Bytes of a row of one of ldmatrix's 8x8 matrices of 16-bit words.
constexpr int64_t kLdmatrixRowBytes = 16;
int64_t mmaK(const Problem &p) { return kMmaKBytes / p.elementBytes; }
// K of a slice given for 16-bit operands: the same bytes of a row for f32.
int64_t sliceK(int64_t sixteenBitK, const Problem &p) { return sixteenBitK * 2 / p.elementBytes; }
// Lanes holding one row of a C fragment.
constexpr int64_t kLanesPerRow = 4;
// K per pipeline step: two mma K-steps (a stage of 128x128 tiles of A and
// B takes 18.5 to 20 KiB).
constexpr int64_t kTensorCoreBlockK = 32;
// Each shared row is padded by 16 bytes (see above), but for an f32 (TF32)
// outer-major tile ([k][outer]), whose fragments no ldmatrix.trans can
// load (it moves 16-bit words): its lanes read 32-bit words at K rows t
// and t+4, outer g (lane l: g = l / 4, t = l % 4), and a row of 8 words
// past a multiple of 32 (a 32-byte pad on a multiple of 128 bytes) puts
// the 32 lanes in 32 banks, where 16 bytes would put two in one.
constexpr int64_t kTensorCorePadBytes = 16;
constexpr int64_t kTf32OuterMajorPadBytes = 32;
// A block's warps each own a tile of C: a 64x64 warp tile is 4x8 mma
// tiles, 128 accumulators a lane, 32 independent mma.sync a K-step for 8
// ldmatrix.x4 (a 64x32 tile: 16 for 6). The warps issue so little else
// that this ILP, not more warps, keeps the tensor pipe fed: on the H200,
// 1024x768x3072 in bf16 with 128x128 tiles took 24.2 us in 4 warps of
// 64x64 against 28.8 us in 8 warps of 64x32 (2026-12-03, L2 warm,
// bench/scripts/sweep-matmul.sh; the profile of the 8-warp form issued
// one instruction every 5 cycles a scheduler).
struct TensorCoreShape {
  int64_t blockM, blockN, warpsM, warpsN;
};
// The candidates, largest first: 128x128 (4 warps of 64x64) reads the
// fewest bytes per FLOP; 64x128 and 64x64 (warps of 32x32) where the large
// tile leaves SMs idle (GPT-2's 1024x768 products: 48 tiles of 128x128 on
// 132 SMs).
constexpr std::array<TensorCoreShape, 3> kTensorCoreShapes = {{{128, 128, 2, 2}, {64, 128, 2, 4}, {64, 64, 2, 2}}};
// The largest candidate whose grid gives every SM at least this many
// blocks is taken; the smallest where none does.
constexpr int64_t kTensorCoreMinBlocksPerSm = 1;
// Products of at most this many rows (a short prompt's prefill, a batched
// decode step) take tiles of one or two m16 rows, as many as the product
// has: on the smallest tile above (64 rows) three quarters of the mma.sync
// and of A's staging would go to rows never stored, with a quarter of the
// blocks.
constexpr int64_t kFewRowsMaxRows = kTensorCoreFewRowsMaxRows;
int64_t fewRowsBlockM(const Problem &p) { return std::min(roundUp(p.m, kMmaM), kFewRowsMaxRows); }
// Their tiles, widest first (the rows fewRowsBlockM): warps of 16x16 (one
// m16 tile and two n8 tiles, one ldmatrix.x4 each a K-step) side by side
// along N, then one warp of 16x8; taken by the same rule (kTensorCoreMinBlocksPerSm). Such
// a product streams B (each element is used by at most 16 rows): its speed
// is that of the SMs streaming, so the grid's width comes before the
// block's (GPT-2's N = 768 at 16 rows: 96 blocks of 16x8, not 48).
constexpr std::array<TensorCoreShape, 4> kFewRowsShapes = {
    {{16, 64, 1, 4}, {16, 32, 1, 2}, {16, 16, 1, 1}, {16, 8, 1, 1}}};
// Their K-slice: with little arithmetic a step, longer slices keep more of
// B in flight per block (three slices of 128 x 16 columns: 12 KiB) in
// fewer steps (6 for K = 768).
constexpr int64_t kFewRowsBlockK = 128;
// A few-row product whose tiles leave SMs idle splits K across blocks
// (where its epilogue allows, and both operands go by cp.async), up to one
// block an SM, each split at least kFewRowsMinSlicesPerSplit K-slices: the
// splits' partial products (16 rows: 64 bytes a column each) are summed by
// a second kernel with the epilogue, as the skinny form's are. The skinny
// form's 16-row kernel issues about 190 instructions per K row (FMAs, and
// A widened from shared memory) from 8 warps an SM, and waits on issue,
// not memory (H200 profile of GPT-2's 16x3072x768 in bf16: 7.1 us, DRAM
// 14% busy, no eligible warp 49% of cycles); an mma.sync does 16 rows x
// 8 columns x 16 of K at once.
constexpr bool kFewRowsSplitsK = true;
// Where K is split, the last split of a tile to finish adds the splits'
// partial products and applies the epilogue in the same launch
// (split_completion.h), as the skinny GEMV's splits do, instead of a
// second kernel: a short prompt's forward runs 48 such sums (four
// products a layer), each a link of the kernels' chain. Built and checked
// on the simulator, not yet timed: off (last-split-completes=1 turns it on).
constexpr bool kFewRowsLastSplitCompletes = false;
constexpr int64_t kFewRowsSplitTargetBlocksPerSm = 1;
constexpr int64_t kFewRowsMinSlicesPerSplit = 1;
// Shared stages of the cp.async pipeline, at most: with slice t computed,
// slices t+1 .. t+stages-1 are in flight. Two stages of 128x128x32 (all
// that 48 KiB of static shared memory held) left every step waiting a
// whole round trip to global memory (H200: about 1.9 us a step, 24 steps
// of 1024x768x3072 in 46 us). Four keep three slices in flight while one
// is multiplied; more would take shared memory a second block needs, for
// latency that three slices should already cover.
constexpr int64_t kMaxAsyncStages = 4;
// Registers a thread of the tensor-core form takes (ptxas, sm_90: 128 for
// the 64x32 warp tile's 64 accumulators, fragments and addresses): at
// least this many, and for larger warp tiles their accumulators and this
// many besides for fragments and addresses.
constexpr int64_t kTensorCoreRegisters = 128;
constexpr int64_t kTensorCoreRegistersBesideAccumulators = 64;
int64_t tensorCoreRegisters(int64_t accumulators) {
  return std::max(kTensorCoreRegisters, accumulators + kTensorCoreRegistersBesideAccumulators);
}
// The stages stop where their shared memory would keep out a block the
// register file still holds (two of 256 threads at kTensorCoreRegisters:
// one block's barriers and waits are then covered by the other's mma.sync)
// and the grid gives the SM. At least one block always fits.
int64_t tensorCoreBlocksPerSm(int64_t threads, int64_t accumulators, int64_t blocks, const DeviceDescription &device) {
  int64_t byRegisters = device.registersPerSm / (tensorCoreRegisters(accumulators) * threads);
  int64_t byThreads = device.maxThreadsPerSm / threads;
  int64_t given = llvm::divideCeilSigned(blocks, device.smCount);
  return std::max<int64_t>(1, std::min({byRegisters, byThreads, given}));
}

// Elements of a shared row of `elements` with its pad.
int64_t sharedRow(int64_t elements, int64_t elementBytes, bool kMajor = true) {
  int64_t pad = !kMajor && elementBytes == 4 ? kTf32OuterMajorPadBytes : kTensorCorePadBytes;
  return elements + pad / elementBytes;
}

struct TensorCoreConfig {
  int64_t blockM = 0, blockN = 0, blockK = kTensorCoreBlockK;
  int64_t warpsM = 1, warpsN = 1;
  // K split across blocks (few rows, kFewRowsSplitsK): each split's K rows
  // (a multiple of blockK; 0: all of K) go to a partial product.
  int64_t splitK = 1, kPerSplit = 0;
  // The last split of a tile adds the splits in the launch
  // (kFewRowsLastSplitCompletes), no second kernel.
  bool lastSplitCompletes = false;
  // A's rows computed by every block (a row prologue) are held whole in
  // shared memory, one stage of this many K (every split's, zero past K);
  // 0: A is staged slice by slice.
  int64_t residentK = 0;

  int64_t warps() const { return warpsM * warpsN; }
  int64_t threads() const { return warps() * 32; }
  int64_t warpM() const { return blockM / warpsM; }
  int64_t warpN() const { return blockN / warpsN; }
  int64_t tilesM() const { return warpM() / kMmaM; }               // m16 tiles a warp
  int64_t tilesN() const { return warpN() / kMmaN; }               // n8 tiles a warp
  int64_t accumulators() const { return tilesM() * tilesN() * 4; } // f32 of C a lane
  int64_t blocks(const Problem &p) const {
    return p.batch * llvm::divideCeilSigned(p.m, blockM) * llvm::divideCeilSigned(p.n, blockN) * splitK;
  }
  // K rows one block multiplies, and its K-slices.
  int64_t kOfBlock(const Problem &p) const { return kPerSplit > 0 ? kPerSplit : p.k; }
  int64_t steps(const Problem &p) const { return llvm::divideCeilSigned(kOfBlock(p), blockK); }
  // Shared memory of two K-major stages of A and B (through registers).
  int64_t twoStageBytes(int64_t elementBytes) const {
    return 2 * (blockM + blockN) * sharedRow(blockK, elementBytes) * elementBytes;
  }
};

// How K-slices reach shared memory: by cp.async into `stages` stages, each
// operand stored along its contiguous axis (K-major: [outer][k], read by
// ldmatrix; outer-major: [k][outer], read by ldmatrix.trans), where both
// operands are read as vectors of 4 to 16 bytes; otherwise through
// registers into two K-major stages (a transposed store of pairs where an
// operand's contiguous axis is not K).
struct Staging {
  bool async = false;
  int64_t stages = 2;
  bool kMajorA = true, kMajorB = true;
  int64_t blocksPerSm = 1; // what the stages leave room for
};

// The shape of an operand's shared buffer.
llvm::SmallVector<int64_t> sharedShape(const TensorCoreConfig &c, int64_t stages, int64_t blockOuter, bool kMajor,
                                       int64_t elementBytes) {
  if (kMajor)
    return {stages, blockOuter, sharedRow(c.blockK, elementBytes)};
  return {stages, c.blockK, sharedRow(blockOuter, elementBytes, /*kMajor=*/false)};
}
// A's: its stages, or its resident rows ([1][blockM][residentK + pad]).
llvm::SmallVector<int64_t> sharedShapeA(const TensorCoreConfig &c, int64_t stages, bool kMajor, int64_t elementBytes) {
  if (c.residentK > 0)
    return {1, c.blockM, sharedRow(c.residentK, elementBytes)};
  return sharedShape(c, stages, c.blockM, kMajor, elementBytes);
}
// The shared buffers live in dynamic shared memory (beyond the 48 KiB of
// static shared memory, up to the block's opt-in limit): A's stages from
// byte 0, B's from sharedOffsetB, both 16-byte aligned.
int64_t operandSharedBytes(const TensorCoreConfig &c, int64_t stages, int64_t outer, bool kMajor,
                           int64_t elementBytes) {
  auto shape = sharedShape(c, stages, outer, kMajor, elementBytes);
  return shape[0] * shape[1] * shape[2] * elementBytes;
}
int64_t sharedOffsetB(const TensorCoreConfig &c, const Staging &staging, int64_t elementBytes) {
  auto shape = sharedShapeA(c, staging.stages, staging.kMajorA, elementBytes);
  return roundUp(shape[0] * shape[1] * shape[2] * elementBytes, kVectorBytes);
}
int64_t sharedBytesOf(const TensorCoreConfig &c, const Staging &staging, int64_t elementBytes) {
  return sharedOffsetB(c, staging, elementBytes) +
         operandSharedBytes(c, staging.stages, c.blockN, staging.kMajorB, elementBytes);
}

// The staging, and for cp.async the stages: as many as fit (at most
// kMaxAsyncStages) in the block's opt-in shared memory and in its share of
// the SM's, tensorCoreBlocksPerSm blocks each with the system's reserve;
// or the count the options force (staging through registers keeps its
// two). Fails with `error` where a forced count does not fit a block.
mlir::FailureOr<Staging> chooseStaging(const TensorCoreConfig &c, const Problem &p, const LoadPlan &planA,
                                       const LoadPlan &planB, const GeneratedMatmulOptions &options,
                                       const DeviceDescription &device, std::string &error) {
  Staging staging;
  staging.blocksPerSm = tensorCoreBlocksPerSm(c.threads(), c.accumulators(), c.blocks(p), device);
  // cp.async copies 4, 8 or 16 bytes: vectors of at least two elements;
  // every thread copies the same number of them (its copies are then one
  // group of tokens, with no thread left out).
  auto whole = [&](const LoadPlan &plan, int64_t outer) { return outer * c.blockK / plan.width % c.threads() == 0; };
  const bool copiesA = c.residentK == 0;
  if (!options.asyncCopy || (copiesA && (planA.width < 2 || !whole(planA, c.blockM))) || planB.width < 2 ||
      !whole(planB, c.blockN))
    return staging;
  Staging async = staging;
  async.async = true;
  async.kMajorA = copiesA ? planA.alongK : true;
  async.kMajorB = planB.alongK;
  auto fits = [&](int64_t stages, int64_t limit) {
    Staging s = async;
    s.stages = stages;
    return sharedBytesOf(c, s, p.elementBytes) <= limit;
  };
  if (options.stages > 0) {
    async.stages = options.stages;
    if (options.stages < 2 || !fits(options.stages, device.sharedMemoryPerBlockOptIn)) {
      error = "stages=" + std::to_string(options.stages) + " must be at least 2 and fit the " +
              std::to_string(device.sharedMemoryPerBlockOptIn) + " B of shared memory a block may have";
      return mlir::failure();
    }
    for (async.blocksPerSm = staging.blocksPerSm; async.blocksPerSm > 1; --async.blocksPerSm)
      if (fits(async.stages, device.sharedMemoryPerSm / async.blocksPerSm - device.sharedMemoryReservedPerBlock))
        break;
    return async;
  }
  int64_t limit = std::min(device.sharedMemoryPerBlockOptIn,
                           device.sharedMemoryPerSm / staging.blocksPerSm - device.sharedMemoryReservedPerBlock);
  async.stages = 1;
  while (async.stages < kMaxAsyncStages && fits(async.stages + 1, limit))
    ++async.stages;
  return async.stages >= 2 ? async : staging;
}

std::string checkTensorCore(const TensorCoreConfig &c, const Problem &p, const DeviceDescription &device) {
  if (c.blockM <= 0 || c.blockN <= 0 || c.blockM % c.warpsM != 0 || c.blockN % c.warpsN != 0 ||
      c.warpM() % kMmaM != 0 || c.warpN() % kMmaN != 0)
    return "the block tile must split into warp tiles of whole m16n8 tiles";
  if (c.blockK < mmaK(p) || c.blockK % mmaK(p) != 0)
    return "the K-slice must be a multiple of the mma K-step (16; 8 for TF32)";
  if (c.threads() > device.maxThreadsPerBlock)
    return "too many warps for a block";
  if (c.twoStageBytes(p.elementBytes) > device.sharedMemoryPerBlockOptIn)
    return "the double-buffered tiles need more shared memory than a block has";
  return "";
}

mlir::FailureOr<TensorCoreConfig> chooseTensorCore(const Problem &p, const GeneratedMatmulOptions &options,
                                                   const DeviceDescription &device, bool splitAllowed,
                                                   std::string &error) {
  if (options.blockTile[0] > 0) {
    // A forced tile: warps of 64x32 where the tile is 128 rows, of 32x32
    // otherwise (a 32x32 tile is one warp; 16 rows: warps of 16x32).
    TensorCoreConfig c;
    c.blockM = options.blockTile[0];
    c.blockN = options.blockTile[1];
    c.blockK = options.blockTile[2] > 0 ? options.blockTile[2] : sliceK(kTensorCoreBlockK, p);
    // A forced warp tile must divide the block tile.
    const bool forcedWarp = options.warpTile[0] > 0;
    int64_t warpM = forcedWarp ? options.warpTile[0] : (c.blockM >= 128 ? 64 : 32);
    int64_t warpN = forcedWarp ? options.warpTile[1] : 32;
    if (forcedWarp && (warpN <= 0 || c.blockM % warpM != 0 || c.blockN % warpN != 0)) {
      error = "the block tile must be whole warp tiles";
      return mlir::failure();
    }
    c.warpsM = std::max<int64_t>(1, c.blockM / warpM);
    c.warpsN = std::max<int64_t>(1, c.blockN / warpN);
    error = checkTensorCore(c, p, device);
    if (!error.empty())
      return mlir::failure();
    return c;
  }
  std::optional<TensorCoreConfig> chosen;
  const bool fewRows = p.m <= kFewRowsMaxRows;
  if (fewRows && kFewRowsSplitsK && splitAllowed) {
    // The widest few-row tile, its grid widened by splitting K.
    for (const TensorCoreShape &shape : kFewRowsShapes) {
      TensorCoreConfig c;
      c.blockM = fewRowsBlockM(p);
      c.blockN = shape.blockN;
      c.blockK = sliceK(kFewRowsBlockK, p);
      c.warpsM = shape.warpsM;
      c.warpsN = shape.warpsN;
      if (!checkTensorCore(c, p, device).empty())
        continue;
      int64_t slices = llvm::divideCeilSigned(p.k, c.blockK);
      int64_t wanted = llvm::divideCeilSigned(kFewRowsSplitTargetBlocksPerSm * device.smCount, c.blocks(p));
      int64_t splits = std::clamp<int64_t>(wanted, 1, std::max<int64_t>(1, slices / kFewRowsMinSlicesPerSplit));
      if (splits == 1)
        break;
      c.kPerSplit = llvm::divideCeilSigned(slices, splits) * c.blockK;
      c.splitK = llvm::divideCeilSigned(p.k, c.kPerSplit);
      c.lastSplitCompletes = c.splitK > 1 && (options.lastSplitCompletes < 0 ? kFewRowsLastSplitCompletes
                                                                             : options.lastSplitCompletes > 0);
      if (p.prologue)
        c.residentK = c.splitK * c.kPerSplit;
      return c;
    }
  }
  llvm::ArrayRef<TensorCoreShape> shapes = fewRows ? llvm::ArrayRef(kFewRowsShapes) : llvm::ArrayRef(kTensorCoreShapes);
  for (const TensorCoreShape &shape : shapes) {
    TensorCoreConfig c;
    c.blockM = fewRows ? fewRowsBlockM(p) : shape.blockM;
    c.blockN = shape.blockN;
    c.blockK = sliceK(fewRows ? kFewRowsBlockK : kTensorCoreBlockK, p);
    c.warpsM = shape.warpsM;
    c.warpsN = shape.warpsN;
    if (!checkTensorCore(c, p, device).empty())
      continue;
    chosen = c;
    if (c.blocks(p) >= kTensorCoreMinBlocksPerSm * device.smCount)
      break;
  }
  if (!chosen) {
    error = "no tensor-core tile fits this device";
    return mlir::failure();
  }
  if (p.prologue)
    chosen->residentK = roundUp(p.k, chosen->blockK);
  return *chosen;
}

// How one operand's tile goes from global to shared memory (LoadPlan):
// vectors along K stored as they are, or vectors along the operand's other
// axis ("outer": M for A, N for B) from two consecutive K rows, stored as
// pairs. Each thread's slots are fixed for the whole loop.
struct OperandTile {
  Matrix *matrix = nullptr;
  bool isA = true;
  LoadPlan plan;
  int64_t blockOuter = 0, extent = 0; // the tile's and the operand's outer size
  bool kMajor = true;                 // shared [outer][k], else [k][outer]
  Value shared;
  // The shared row and K each lane addresses for ldmatrix (loadMatrices),
  // relative to the warp's tile and the mma K-step.
  Value laneOuter, laneK;
  struct Slot {
    Value outer, kk, valid; // valid: null when every thread has this slot
  };
  llvm::SmallVector<Slot> slots;
};

class TensorCoreBody {
public:
  TensorCoreBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Problem &p, const Problem &whole,
                 const TensorCoreConfig &cfg, const Staging &staging, const LoadPlan &planA, const LoadPlan &planB,
                 bool prefetch, bool bBeforeWait)
      : b(b), f(f), loc(f.getLoc()), ix{b, loc}, p(p), whole(whole), cfg(cfg), staging(staging), prefetch(prefetch),
        bBeforeWait(bBeforeWait), storage(p.storage), f32(b.getF32Type()), eb(p.elementBytes), a(f.getArgument(0), eb),
        bm(f.getArgument(1), eb), c(f.getArgument(2), bytesOfElement(p.cType)) {
    tileA.matrix = &a;
    tileA.isA = true;
    tileA.plan = planA;
    tileA.blockOuter = cfg.blockM;
    tileA.extent = p.m;
    tileA.kMajor = staging.kMajorA;
    tileB.matrix = &bm;
    tileB.isA = false;
    tileB.plan = planB;
    tileB.blockOuter = cfg.blockN;
    tileB.extent = p.n;
    tileB.kMajor = staging.kMajorB;
  }

  void build(int64_t widthCAllowed) {
    // The registers a thread may take: as many as leave room for the
    // blocks the stages were sized for (prefetched fragments would
    // otherwise take a second block's share).
    if (staging.blocksPerSm > 1)
      f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(staging.blocksPerSm)));
    // A, B, C (or the partial products); where the last split completes,
    // C and the epilogue's operands; then the prologue's.
    size_t prologueCount = p.prologue ? p.prologue->hostOperands.size() : 0;
    unsigned firstOperand = cfg.lastSplitCompletes ? 4 : 3;
    for (unsigned i = firstOperand; i < f.getNumArguments(); ++i)
      (i + prologueCount < f.getNumArguments() ? epilogueOperands : prologueOperands).push_back(f.getArgument(i));
    placeShared();
    placeBlock();
    if (!resident())
      placeSlots(tileA);
    placeSlots(tileB);
    mlir::scf::ForOp loop;
    if (staging.async && prefetch) {
      loop = prefetchingPipeline();
    } else if (staging.async) {
      loop = asyncPipeline();
    } else {
      stageFirstSlice();
      loop = pipeline();
    }
    writeC(loop, widthCAllowed);
    if (cfg.lastSplitCompletes) {
      // The tile's group: its place in the grid, whichever split.
      Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
      Value blockY = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y);
      int64_t tilesM = llvm::divideCeilSigned(p.m, cfg.blockM), tilesN = llvm::divideCeilSigned(p.n, cfg.blockN);
      int64_t gridX = mFastest ? tilesM : tilesN, gridY = mFastest ? tilesN : tilesM;
      Value tile = ix.add(ix.mul(ix.add(ix.mul(batchIndex(), gridY), blockY), gridX), blockX);
      completeInLastBlock(b, loc, f, f.getWorkgroupAttributions()[0], tid, tile, whole.batch * gridX * gridY,
                          ix.c(cfg.splitK), [&] { addSplitsAndWriteC(widthCAllowed); });
    }
  }

private:
  // The operands' stages as views of the block's dynamic shared memory.
  void placeShared() {
    auto space = mlir::gpu::AddressSpaceAttr::get(b.getContext(), mlir::gpu::AddressSpace::Workgroup);
    auto bytes =
        mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getI8Type(), mlir::MemRefLayoutAttrInterface(), space);
    Value dynamic = mlir::gpu::DynamicSharedMemoryOp::create(b, loc, bytes);
    auto view = [&](const OperandTile &tile, int64_t offset) -> Value {
      auto shape = tile.isA ? sharedShapeA(cfg, staging.stages, tile.kMajor, eb)
                            : sharedShape(cfg, staging.stages, tile.blockOuter, tile.kMajor, eb);
      auto type = workgroupType(shape, storage);
      return mlir::memref::ViewOp::create(b, loc, type, dynamic, ix.c(offset), mlir::ValueRange{});
    };
    tileA.shared = view(tileA, 0);
    tileB.shared = view(tileB, sharedOffsetB(cfg, staging, eb));
  }

  // The ids, the block's tile of C, the warp's tile in it and the lane's
  // place in its fragments.
  void placeBlock() {
    tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockX = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x);
    Value blockY = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::y);
    mFastest = llvm::divideCeilSigned(p.m, cfg.blockM) <= llvm::divideCeilSigned(p.n, cfg.blockN);
    Value tileM = mFastest ? blockX : blockY;
    Value tileN = mFastest ? blockY : blockX;
    // z: the batch, or with split K the split's slab of the partial
    // products (split x batches + batch).
    Value blockZ;
    if (p.rank == 3 || cfg.splitK > 1)
      blockZ = mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::z);
    if (cfg.splitK > 1) {
      batch = p.rank == 3 ? ix.rem(blockZ, p.batch) : Value();
      kStart = ix.mul(ix.div(blockZ, p.batch), cfg.kOfBlock(p));
      batchOfC = blockZ;
    } else {
      batch = p.rank == 3 ? blockZ : Value();
      kStart = ix.c(0);
      batchOfC = batch;
    }
    m0 = ix.mul(tileM, cfg.blockM);
    n0 = ix.mul(tileN, cfg.blockN);
    steps = ix.c(cfg.steps(p));
    maskK = cfg.steps(p) * cfg.blockK * cfg.splitK != p.k;
    Value warp = ix.div(tid, 32);
    Value lane = ix.rem(tid, 32);
    group = ix.div(lane, kLanesPerRow);
    inGroup = ix.rem(lane, kLanesPerRow);
    warpRow = ix.mul(ix.div(warp, cfg.warpsN), cfg.warpM());
    warpCol = ix.mul(ix.rem(warp, cfg.warpsN), cfg.warpN());
    // The row each lane addresses for ldmatrix.x4 (loadMatrices), lane l
    // giving row l % 8 of matrix l / 8. Of A: matrices 1 and 3 are 8 rows
    // (M) further, 2 and 3 are a matrix row further along K (8 16-bit
    // elements, 4 f32); of B: 1 and 3 are that further along K, 2 and 3
    // the next n8 tile. A shared row is along K (K-major) or along the
    // operand's other axis (outer-major, read transposed: 16-bit only).
    const int64_t kRow = kLdmatrixRowBytes / eb;
    Value rowInMatrix = ix.rem(lane, 8), matrix = ix.div(lane, 8);
    Value matrixLow = ix.mul(ix.rem(matrix, 2), 8), matrixHigh = ix.mul(ix.div(matrix, 2), 8);
    Value kLow = ix.mul(ix.rem(matrix, 2), kRow), kHigh = ix.mul(ix.div(matrix, 2), kRow);
    placeLanes(tileA, warpRow, rowInMatrix, /*outerStep=*/matrixLow, /*kStep=*/kHigh);
    placeLanes(tileB, warpCol, rowInMatrix, /*outerStep=*/matrixHigh, /*kStep=*/kLow);
  }

  void placeLanes(OperandTile &tile, Value warpOrigin, Value rowInMatrix, Value outerStep, Value kStep) {
    if (tile.kMajor) {
      tile.laneOuter = ix.add(ix.add(warpOrigin, rowInMatrix), outerStep);
      tile.laneK = kStep;
    } else {
      tile.laneOuter = ix.add(warpOrigin, outerStep);
      tile.laneK = ix.add(rowInMatrix, kStep);
    }
  }

  // Slots: along K, (outer, kk) of each vector, consecutive threads along
  // K; along the outer axis, the vector's first outer index and the even K
  // row of its pair, consecutive threads on consecutive pairs. Shared rows
  // 8 apart share banks (8 x 20 words), so threads storing pairs into rows
  // of one vector apart would all hit one bank: threads of consecutive
  // pairs store into the same row at consecutive words instead (two
  // vectors a warp: two ways at most).
  void placeSlots(OperandTile &tile) {
    if (staging.async) {
      placeAsyncSlots(tile);
      return;
    }
    const int64_t threads = cfg.threads(), width = tile.plan.width;
    const int64_t vectors =
        tile.plan.alongK ? tile.blockOuter * cfg.blockK / width : tile.blockOuter / width * (cfg.blockK / 2);
    const int64_t perRow = tile.plan.alongK ? cfg.blockK / width : cfg.blockK / 2;
    for (int64_t j = 0; j < llvm::divideCeilSigned(vectors, threads); ++j) {
      Value q = ix.add(tid, j * threads);
      OperandTile::Slot slot;
      if ((j + 1) * threads > vectors) {
        slot.valid = ix.lt(q, vectors);
        q = ix.min(q, vectors - 1);
      }
      Value major = ix.div(q, perRow), minor = ix.rem(q, perRow);
      if (tile.plan.alongK) {
        slot.outer = major;
        slot.kk = ix.mul(minor, width);
      } else {
        slot.outer = ix.mul(major, width);
        slot.kk = ix.mul(minor, 2);
      }
      tile.slots.push_back(slot);
    }
  }

  // cp.async slots: one vector each, consecutive threads along the
  // operand's contiguous axis (K for a K-major tile, else the outer axis),
  // so that a warp's copies read contiguous global rows and fill
  // contiguous shared rows.
  void placeAsyncSlots(OperandTile &tile) {
    const int64_t threads = cfg.threads(), width = tile.plan.width;
    const int64_t vectors = tile.blockOuter * cfg.blockK / width;
    const int64_t perRow = (tile.kMajor ? cfg.blockK : tile.blockOuter) / width;
    for (int64_t j = 0; j < llvm::divideCeilSigned(vectors, threads); ++j) {
      // (chooseStaging: every thread has every slot.)
      Value q = ix.add(tid, j * threads);
      OperandTile::Slot slot;
      Value major = ix.div(q, perRow), minor = ix.mul(ix.rem(q, perRow), width);
      slot.outer = tile.kMajor ? major : minor;
      slot.kk = tile.kMajor ? minor : major;
      tile.slots.push_back(slot);
    }
  }

  // The cp.async copies of one operand's slice `slice` into shared stage
  // `stage`: rows (or columns) past the edge clamped, K past the edge
  // zero-filled (no bytes read from global memory). A slice past the
  // block's last (the pipeline's tail) is all zero-filled: the copies read
  // nothing, into a stage no later step reads (a short split's slices
  // would otherwise be read again for every stage it has beyond them).
  void copySlice(OperandTile &tile, Value slice, Value stage, llvm::SmallVectorImpl<Value> &tokens) {
    if (tile.isA && resident())
      return;
    const int64_t width = tile.plan.width;
    const bool kMajor = tile.kMajor;
    const int64_t lastSlice = cfg.steps(p) - 1;
    Value live = ix.lt(slice, lastSlice + 1);
    std::optional<int64_t> knownLive = mlir::getConstantIntValue(live);
    if (knownLive && *knownLive)
      live = Value();
    Value k0 = ix.add(kStart, ix.mul(ix.min(slice, lastSlice), cfg.blockK));
    Value source = tile.matrix->along(ix, /*alongRows=*/tile.isA ? !kMajor : kMajor);
    for (const OperandTile::Slot &slot : tile.slots) {
      {
        Value outer = ix.add(tile.isA ? m0 : n0, slot.outer);
        if (tile.extent % tile.blockOuter != 0)
          outer = ix.min(outer, tile.extent - (kMajor ? 1 : width));
        Value k = ix.add(k0, slot.kk);
        Value present;
        if (maskK) {
          present = mlir::arith::SelectOp::create(b, loc, ix.lt(k, p.k), ix.c(width), ix.c(0));
          k = ix.min(k, p.k - (kMajor ? width : 1));
        }
        if (live)
          present = b.createOrFold<mlir::arith::SelectOp>(loc, live, present ? present : ix.c(width), ix.c(0));
        // The source view's innermost axis is the contiguous one.
        llvm::SmallVector<Value> from;
        if (p.rank == 3)
          from.push_back(batch);
        from.push_back(kMajor ? outer : k);
        from.push_back(kMajor ? k : outer);
        llvm::SmallVector<Value> to{stage, kMajor ? slot.outer : slot.kk, kMajor ? slot.kk : slot.outer};
        mlir::UnitAttr bypassL1 = width * eb == 16 ? b.getUnitAttr() : mlir::UnitAttr();
        tokens.push_back(mlir::nvgpu::DeviceAsyncCopyOp::create(b, loc, tile.shared, to, source, from,
                                                                b.getIndexAttr(width), present, bypassL1));
      }
    }
  }

  // The pipeline's first slices, 0 .. stages-2, into their stages, a group
  // each; the last group's token. Where B is copied before the wait, all
  // of its first slices go first (they join the first group, which the
  // first step waits for), then the wait, then A's.
  Value copyFirstSlices() {
    const int64_t stages = staging.stages;
    if (resident()) {
      // Only B is copied (A's rows are computed after the wait): each of
      // its first slices a group of its own, all before the wait (a group
      // of no copies would not print back as IR).
      Value group;
      for (int64_t s = 0; s + 1 < stages; ++s) {
        llvm::SmallVector<Value> tokens;
        copySlice(tileB, ix.c(s), ix.c(s), tokens);
        group = mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokens);
      }
      if (bBeforeWait)
        waitForKernelBefore(ix);
      return group;
    }
    llvm::SmallVector<Value> early;
    if (bBeforeWait) {
      for (int64_t s = 0; s + 1 < stages; ++s)
        copySlice(tileB, ix.c(s), ix.c(s), early);
      waitForKernelBefore(ix);
    }
    Value group;
    for (int64_t s = 0; s + 1 < stages; ++s) {
      if (!bBeforeWait) {
        group = copySlices(ix.c(s), ix.c(s));
        continue;
      }
      llvm::SmallVector<Value> tokens = s == 0 ? early : llvm::SmallVector<Value>();
      copySlice(tileA, ix.c(s), ix.c(s), tokens);
      group = mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokens);
    }
    return group;
  }

  // Both operands' slice `slice` into `stage`, as one group of copies.
  Value copySlices(Value slice, Value stage) {
    llvm::SmallVector<Value> tokens;
    copySlice(tileA, slice, stage, tokens);
    copySlice(tileB, slice, stage, tokens);
    return mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokens);
  }

  // The cp.async pipeline: slices 0 .. stages-2 in flight first; at step
  // t, wait until at most stages-2 groups are pending (slice t has
  // landed: this thread's copies), a barrier (every thread's have, and
  // every thread has finished step t-1, whose stage the next copies
  // overwrite), slice t+stages-1 issued into that stage, then slice t
  // multiplied. Slices past the last read nothing (copySlice).
  mlir::scf::ForOp asyncPipeline() {
    const int64_t stages = staging.stages;
    Value group = copyFirstSlices();
    computeResidentA();
    llvm::SmallVector<Value> init(cfg.tilesM() * cfg.tilesN() * 4, zeroScalar(ix, f32));
    mlir::scf::ForOp loop = buildLoop(ix, steps, init, [&](Value step, llvm::SmallVector<Value> acc) {
      // (wait_group takes no group: the token only orders the ops.)
      mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(static_cast<int32_t>(stages - 2)));
      mlir::gpu::BarrierOp::create(b, loc);
      Value ahead = ix.add(step, stages - 1);
      copySlices(ahead, ix.rem(ahead, stages));
      return compute(step, ix.rem(step, stages), acc);
    });
    // No copy outlives the kernel.
    mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(0));
    return loop;
  }

  // The same pipeline with each mma K-step's fragments loaded one K-step
  // ahead, carried through the loop with the accumulators: while step s
  // multiplies, step s+1's ldmatrix are in flight; at a stage's last
  // K-step, the wait and barrier for the next stage come first, then its
  // first fragments, then the last step's mma.sync, so that the barrier
  // and the first ldmatrix overlap the tensor cores' work. Slice t+stages-1
  // is copied at the top of step t into the stage step t-1 read: every
  // read of it came before the barrier that ended step t-1.
  mlir::scf::ForOp prefetchingPipeline() {
    const int64_t stages = staging.stages, kSteps = cfg.blockK / mmaK(p);
    const int64_t accumulators = cfg.accumulators();
    Value group = copyFirstSlices();
    computeResidentA();
    auto waitForSlice = [&](Value pending) {
      mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, pending, b.getI32IntegerAttr(static_cast<int32_t>(stages - 2)));
      mlir::gpu::BarrierOp::create(b, loc);
    };
    waitForSlice(group);
    llvm::SmallVector<Value> init(accumulators, zeroScalar(ix, f32));
    llvm::append_range(init, loadFragments(ix.c(0), ix.c(0), 0).flat());
    mlir::scf::ForOp loop = buildLoop(ix, steps, init, [&](Value step, llvm::SmallVector<Value> carried) {
      llvm::SmallVector<Value> acc(carried.begin(), carried.begin() + accumulators);
      Fragments current = Fragments::of(cfg, llvm::ArrayRef(carried).drop_front(accumulators));
      Value ahead = ix.add(step, stages - 1);
      Value issued = copySlices(ahead, ix.rem(ahead, stages));
      Value stage = ix.rem(step, stages);
      for (int64_t s = 0; s < kSteps; ++s) {
        Fragments next;
        if (s + 1 < kSteps) {
          next = loadFragments(step, stage, s + 1);
        } else {
          waitForSlice(issued);
          next = loadFragments(ix.add(step, 1), ix.rem(ix.add(step, 1), stages), 0);
        }
        multiply(current, acc);
        current = std::move(next);
      }
      llvm::append_range(acc, current.flat());
      return acc;
    });
    // No copy outlives the kernel.
    mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(0));
    return loop;
  }

  // One vector of the operand at (outer, k), zero where k is past K.
  Value loadVector(OperandTile &tile, Value outer, Value k, bool alongK) {
    const int64_t width = tile.plan.width;
    Value kInside;
    if (maskK) {
      kInside = ix.lt(k, p.k);
      k = ix.min(k, p.k - (alongK ? width : 1));
    }
    // A is [M, K] (K along columns), B is [K, N] (K along rows).
    Value v = tile.isA ? tile.matrix->load(ix, batch, outer, k, /*alongRows=*/!alongK, width)
                       : tile.matrix->load(ix, batch, k, outer, /*alongRows=*/alongK, width);
    if (kInside)
      v = mlir::arith::SelectOp::create(b, loc, kInside, v, zeroVector(ix, storage, width));
    return v;
  }

  // Global loads of one operand's slice at K offset `k0`.
  llvm::SmallVector<Value> loadTile(OperandTile &tile, Value outer0, Value k0) {
    llvm::SmallVector<Value> values;
    const bool alongK = tile.plan.alongK;
    for (const OperandTile::Slot &slot : tile.slots) {
      Value outer = ix.add(outer0, slot.outer);
      if (tile.extent % tile.blockOuter != 0)
        outer = ix.min(outer, tile.extent - (alongK ? 1 : tile.plan.width));
      Value k = ix.add(k0, slot.kk);
      values.push_back(loadVector(tile, outer, k, alongK));
      if (!alongK)
        values.push_back(loadVector(tile, outer, ix.add(k, 1), alongK));
    }
    return values;
  }

  void storeTile(OperandTile &tile, llvm::ArrayRef<Value> values, Value stage) {
    const int64_t width = tile.plan.width;
    size_t next = 0;
    for (const OperandTile::Slot &slot : tile.slots) {
      Value first = values[next++];
      Value second = tile.plan.alongK ? Value() : values[next++];
      guarded(ix, slot.valid, [&] {
        if (tile.plan.alongK) {
          if (width == 1)
            mlir::memref::StoreOp::create(b, loc, extract(ix, first, 0), tile.shared,
                                          mlir::ValueRange{stage, slot.outer, slot.kk});
          else
            mlir::vector::StoreOp::create(b, loc, first, tile.shared, mlir::ValueRange{stage, slot.outer, slot.kk},
                                          false, llvm::MaybeAlign(width * eb));
          return;
        }
        // Element i of K rows kk and kk+1: one pair at (outer + i, kk).
        auto pairType = mlir::VectorType::get({2}, storage);
        for (int64_t i = 0; i < width; ++i) {
          Value pair = mlir::vector::FromElementsOp::create(
              b, loc, pairType, mlir::ValueRange{extract(ix, first, i), extract(ix, second, i)});
          mlir::vector::StoreOp::create(b, loc, pair, tile.shared,
                                        mlir::ValueRange{stage, ix.add(slot.outer, i), slot.kk}, false,
                                        llvm::MaybeAlign(2 * eb));
        }
      });
    }
  }

  std::pair<llvm::SmallVector<Value>, llvm::SmallVector<Value>> loadBoth(Value step) {
    Value k0 = ix.add(kStart, ix.mul(step, cfg.blockK));
    return std::make_pair(loadTile(tileA, m0, k0), loadTile(tileB, n0, k0));
  }

  // Two consecutive 16-bit elements as one 32-bit mma operand: i32 for
  // bf16, vector<2xf16> for f16.
  Value operand(Value pair) {
    if (storage.isBF16())
      return mlir::LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
    return pair;
  }

  // `count` 8x8 matrices of a shared stage by one ldmatrix: lane l gives
  // the address of row l % 8 of matrix l / 8 (`outer`, `k`: its row and
  // first K), and receives, of each matrix j, row l / 4 at K 2(l % 4) and
  // the next: register j of an A fragment (matrices: rows 0-7 and 8-15 at
  // K 0-7, then at K 8-15) or of B fragments ([n][k] rows: n 0-7 at K 0-7
  // and 8-15 for one n8 tile, then the next tile's).
  // An outer-major tile ([k][outer]) holds the same matrices transposed:
  // lane l then addresses K row l % 8, and ldmatrix.trans hands it the
  // same elements.
  // With TF32 (f32 K-major tiles) a lane receives one 32-bit word of
  // each matrix, row l / 4 at K l % 4: the element its fragment holds
  // there, rounded to TF32.
  llvm::SmallVector<Value> loadMatrices(const OperandTile &tile, Value stage, Value outer, Value k, int64_t count) {
    const int64_t perLane = p.tf32 ? 1 : 2;
    auto type = mlir::VectorType::get({count, perLane}, storage);
    llvm::SmallVector<Value> at{stage, tile.kMajor ? outer : k, tile.kMajor ? k : outer};
    Value matrices = mlir::nvgpu::LdMatrixOp::create(b, loc, type, tile.shared, at,
                                                     /*transpose=*/!tile.kMajor, static_cast<uint32_t>(count));
    llvm::SmallVector<Value> registers;
    for (int64_t j = 0; j < count; ++j)
      registers.push_back(
          p.tf32 ? tf32Register(mlir::vector::ExtractOp::create(b, loc, matrices, llvm::ArrayRef<int64_t>{j, 0}))
                 : operand(mlir::vector::ExtractOp::create(b, loc, matrices, j)));
    return registers;
  }

  // An f32 element as an mma.sync .tf32 operand: rounded to TF32's 10
  // bits of mantissa, to nearest with ties away from zero (cvt.rna).
  Value tf32Register(Value element) {
    return mlir::NVVM::ConvertFloatToTF32Op::create(b, loc, b.getI32Type(), element, mlir::NVVM::FPRoundingMode::RNA,
                                                    mlir::NVVM::SaturationMode::NONE, /*relu=*/false);
  }

  // TF32 fragment registers of an outer-major f32 tile ([k][outer]), one
  // 32-bit load each: register r at outer `outer0` + g + outerOffsets[r],
  // K `k0` + t + kOffsets[r] (lane l: g = l / 4, t = l % 4).
  llvm::SmallVector<Value> loadWords(const OperandTile &tile, Value stage, Value outer0, Value k0,
                                     llvm::ArrayRef<int64_t> outerOffsets, llvm::ArrayRef<int64_t> kOffsets) {
    llvm::SmallVector<Value> registers;
    Value outer = ix.add(outer0, group), k = ix.add(k0, inGroup);
    for (auto [outerOffset, kOffset] : llvm::zip(outerOffsets, kOffsets)) {
      Value word = mlir::memref::LoadOp::create(
          b, loc, tile.shared, mlir::ValueRange{stage, ix.add(k, kOffset), ix.add(outer, outerOffset)});
      registers.push_back(tf32Register(word));
    }
    return registers;
  }

  // D += A B on one m16n8k16 tile (m16n8k8 for TF32); `acc` the four f32
  // of C, in place.
  void mma(llvm::ArrayRef<Value> fragmentA, llvm::ArrayRef<Value> fragmentB, Value *acc) {
    auto ptx = p.tf32             ? mlir::NVVM::MMATypes::tf32
               : storage.isBF16() ? mlir::NVVM::MMATypes::bf16
                                  : mlir::NVVM::MMATypes::f16;
    auto result = mlir::LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    Value d = mlir::NVVM::MmaOp::create(
        b, loc, result, fragmentA, fragmentB, mlir::ValueRange{acc[0], acc[1], acc[2], acc[3]},
        llvm::ArrayRef<int64_t>{kMmaM, kMmaN, mmaK(p)}, std::nullopt, std::nullopt,
        std::array<mlir::NVVM::MMATypes, 2>{ptx, ptx},
        std::array<mlir::NVVM::MMALayout, 2>{mlir::NVVM::MMALayout::row, mlir::NVVM::MMALayout::col});
    for (int64_t i = 0; i < 4; ++i)
      acc[i] = mlir::LLVM::ExtractValueOp::create(b, loc, d, llvm::ArrayRef<int64_t>{i});
  }

  // One mma K-step's fragments: of A, four registers a m16 tile; of B, two
  // an n8 tile. flat() and of() pass them through a loop's carried values.
  struct Fragments {
    llvm::SmallVector<llvm::SmallVector<Value>> a, b;
    llvm::SmallVector<Value> flat() const {
      llvm::SmallVector<Value> values;
      for (const auto &registers : a)
        llvm::append_range(values, registers);
      for (const auto &registers : b)
        llvm::append_range(values, registers);
      return values;
    }
    static Fragments of(const TensorCoreConfig &cfg, llvm::ArrayRef<Value> values) {
      Fragments f;
      for (int64_t i = 0; i < cfg.tilesM(); ++i, values = values.drop_front(4))
        f.a.emplace_back(values.take_front(4));
      for (int64_t j = 0; j < cfg.tilesN(); ++j, values = values.drop_front(2))
        f.b.emplace_back(values.take_front(2));
      return f;
    }
  };

  // The fragments of mma K-step `s` of slice `slice`, in shared stage
  // `stage` (A resident: at the slice's K of its one stage).
  Fragments loadFragments(Value slice, Value stage, int64_t s) {
    Fragments f;
    const int64_t kStep = mmaK(p), kHalf = kStep / 2;
    Value stageA = stage, kA = ix.c(s * kStep);
    if (resident()) {
      stageA = ix.c(0);
      kA = ix.add(ix.add(kStart, ix.mul(slice, cfg.blockK)), s * kStep);
    }
    // A: one ldmatrix.x4 a m16 tile (TF32 outer-major: four words).
    for (int64_t i = 0; i < cfg.tilesM(); ++i)
      f.a.push_back(p.tf32 && !tileA.kMajor
                        ? loadWords(tileA, stage, ix.add(warpRow, i * kMmaM), kA, {0, 8, 0, 8}, {0, 0, kHalf, kHalf})
                        : loadMatrices(tileA, stageA, ix.add(tileA.laneOuter, i * kMmaM), ix.add(tileA.laneK, kA), 4));
    // B: one ldmatrix.x4 a pair of n8 tiles (x2 for a last one alone;
    // TF32 outer-major: two words an n8 tile).
    if (p.tf32 && !tileB.kMajor) {
      for (int64_t j = 0; j < cfg.tilesN(); ++j)
        f.b.push_back(loadWords(tileB, stage, ix.add(warpCol, j * kMmaN), ix.c(s * kStep), {0, 0}, {0, kHalf}));
      return f;
    }
    for (int64_t j = 0; j < cfg.tilesN(); j += 2) {
      int64_t count = j + 1 < cfg.tilesN() ? 4 : 2;
      llvm::SmallVector<Value> registers =
          loadMatrices(tileB, stage, ix.add(tileB.laneOuter, j * kMmaN), ix.add(tileB.laneK, s * kStep), count);
      f.b.push_back({registers[0], registers[1]});
      if (count == 4)
        f.b.push_back({registers[2], registers[3]});
    }
    return f;
  }

  // acc += the K-step's products. acc[(i * tilesN + j) * 4 + r]: m16 tile
  // i, n8 tile j, register r.
  void multiply(const Fragments &f, llvm::SmallVectorImpl<Value> &acc) {
    for (int64_t i = 0; i < cfg.tilesM(); ++i)
      for (int64_t j = 0; j < cfg.tilesN(); ++j)
        mma(f.a[i], f.b[j], &acc[(i * cfg.tilesN() + j) * 4]);
  }

  // K-slice `slice`'s products from shared stage `stage`.
  llvm::SmallVector<Value> compute(Value slice, Value stage, llvm::SmallVector<Value> acc) {
    for (int64_t s = 0; s < cfg.blockK / mmaK(p); ++s)
      multiply(loadFragments(slice, stage, s), acc);
    return acc;
  }

  bool resident() const { return cfg.residentK > 0; }

  // The batch of A and B (0 for rank 2).
  Value batchIndex() { return batch ? batch : ix.c(0); }

  // The last split's completion: each element of the block's tile is the
  // sum of the splits' partial products, in the order of the splits (as
  // the second kernel adds them), written through the epilogue into C;
  // `width` columns a thread at a time where C's rows and the tile allow.
  void addSplitsAndWriteC(int64_t widthCAllowed) {
    Matrix partials(f.getArgument(2), 4);
    Matrix wholeC(f.getArgument(3), bytesOfElement(whole.cType));
    OutputWriter writer{whole, wholeC, epilogueOperands};
    int64_t width = 1;
    while (width < 4 && whole.n % (2 * width) == 0 && 2 * width <= widthCAllowed)
      width *= 2;
    const int64_t perRow = cfg.blockN / width, outputs = cfg.blockM * perRow, threads = cfg.threads();
    Value batchOfAB = batchIndex();
    for (int64_t j = 0; j < llvm::divideCeilSigned(outputs, threads); ++j) {
      Value q = ix.add(tid, j * threads);
      Value valid = (j + 1) * threads > outputs ? ix.lt(q, outputs) : Value();
      Value row = ix.add(m0, ix.div(q, perRow));
      Value col = ix.add(n0, ix.mul(ix.rem(q, perRow), width));
      Value inside = ix.both(valid, ix.both(ix.lt(row, whole.m), ix.lt(col, whole.n)));
      guarded(ix, inside, [&] {
        Value sum = sumOfSplits(ix, partials, batchOfAB, row, col, width, cfg.splitK, whole.batch);
        writer.write(ix, sum, batch, row, col, width, /*vectorC=*/width > 1);
      });
    }
  }

  // A's rows computed by the block (the row prologue) into its resident
  // stage, after the wait for the kernel before (copyFirstSlices): rows
  // past M and K past the product's (every split's slices) zero, so that
  // the rows never stored and the K that B zero-fills add nothing (not
  // even a NaN of uninitialised memory); then a barrier.
  void computeResidentA() {
    if (!resident())
      return;
    Value shared = tileA.shared;
    auto zeroFill = [&](int64_t rowBegin, int64_t rowEnd, int64_t kBegin, int64_t kEnd) {
      int64_t width = kEnd - kBegin, count = (rowEnd - rowBegin) * width;
      for (int64_t j = 0; j * cfg.threads() < count; ++j) {
        Value q = ix.add(tid, j * cfg.threads());
        Value valid = (j + 1) * cfg.threads() > count ? ix.lt(q, count) : Value();
        guarded(ix, valid, [&] {
          mlir::memref::StoreOp::create(
              b, loc, zeroScalar(ix, storage), shared,
              mlir::ValueRange{ix.c(0), ix.add(ix.div(q, width), rowBegin), ix.add(ix.rem(q, width), kBegin)});
        });
      }
    };
    if (p.m < cfg.blockM)
      zeroFill(p.m, cfg.blockM, 0, cfg.residentK);
    if (p.k < cfg.residentK)
      zeroFill(0, p.m, p.k, cfg.residentK);
    auto store = [&](Value row, Value k, llvm::ArrayRef<Value> values) {
      llvm::SmallVector<Value> stored;
      for (Value value : values)
        stored.push_back(convertFloat(ix, value, storage));
      if (stored.size() == 1) {
        mlir::memref::StoreOp::create(b, loc, stored.front(), shared, mlir::ValueRange{ix.c(0), row, k});
        return;
      }
      auto type = mlir::VectorType::get({static_cast<int64_t>(stored.size())}, storage);
      Value vector = mlir::vector::FromElementsOp::create(b, loc, type, stored);
      mlir::vector::StoreOp::create(b, loc, vector, shared, mlir::ValueRange{ix.c(0), row, k}, false,
                                    llvm::MaybeAlign(static_cast<int64_t>(stored.size()) * eb));
    };
    prologueFailed = mlir::failed(p.prologue->build(b, loc, prologueOperands, Value(), cfg.threads(), store));
    mlir::gpu::BarrierOp::create(b, loc);
  }

public:
  bool prologueFailed = false;

private:
  void stageFirstSlice() {
    auto [va, vb] = loadBoth(ix.c(0));
    storeTile(tileA, va, ix.c(0));
    storeTile(tileB, vb, ix.c(0));
    mlir::gpu::BarrierOp::create(b, loc);
  }

  mlir::scf::ForOp pipeline() {
    llvm::SmallVector<Value> init(cfg.tilesM() * cfg.tilesN() * 4, zeroScalar(ix, f32));
    return buildLoop(ix, steps, init, [&](Value step, llvm::SmallVector<Value> acc) {
      // The next slice first (the last step reloads its own: harmless, and
      // no branch).
      Value next = ix.min(ix.add(step, 1), ix.sub(steps, ix.c(1)));
      auto [va, vb] = loadBoth(next);
      Value stage = b.createOrFold<mlir::arith::AndIOp>(loc, step, ix.c(1));
      Value other = b.createOrFold<mlir::arith::XOrIOp>(loc, stage, ix.c(1));
      acc = compute(step, stage, acc);
      storeTile(tileA, va, other);
      storeTile(tileB, vb, other);
      mlir::gpu::BarrierOp::create(b, loc);
      return acc;
    });
  }

  // Each lane writes its C fragments (writeAccumulatorTiles).
  void writeC(mlir::scf::ForOp loop, int64_t widthCAllowed) {
    OutputWriter writer{p, c, epilogueOperands};
    AccumulatorTiles tiles;
    tiles.rowOrigin = ix.add(m0, warpRow);
    tiles.colOrigin = ix.add(n0, warpCol);
    tiles.group = group;
    tiles.inGroup = inGroup;
    tiles.tilesM = cfg.tilesM();
    tiles.tilesN = cfg.tilesN();
    tiles.rowEdge = p.m % cfg.blockM != 0;
    tiles.colEdge = p.n % cfg.blockN != 0;
    writeAccumulatorTiles(
        ix, writer, tiles, [&](int64_t i) { return acc(loop, i); }, batchOfC, widthCAllowed);
  }

  static Value acc(mlir::scf::ForOp loop, int64_t i) { return loop.getResult(i); }

  mlir::OpBuilder &b;
  mlir::gpu::GPUFuncOp f;
  mlir::Location loc;
  Ix ix;
  const Problem &p;
  const Problem &whole; // the unsplit product (C and the epilogue where the last split completes)
  const TensorCoreConfig &cfg;
  const Staging &staging;
  bool prefetch;
  bool bBeforeWait; // B's first slices copied before the wait
  mlir::Type storage, f32;
  int64_t eb;
  Matrix a, bm, c;
  OperandTile tileA, tileB;
  llvm::SmallVector<Value> epilogueOperands, prologueOperands;
  // batch: A's and B's; batchOfC: C's (with split K, the partial
  // products' slab); kStart: the block's first K row.
  Value tid, batch, batchOfC, kStart, m0, n0, steps, group, inGroup, warpRow, warpCol;
  bool maskK = false, mFastest = true;
};

std::string describe(const LoadPlan &plan, const char *outer) {
  return std::to_string(plan.width) + (plan.alongK ? " along K" : std::string(" along ") + outer);
}

} // namespace

bool tensorCoresTake(const Problem &p, const DeviceDescription &device) {
  return (p.storage.isBF16() || p.storage.isF16()) && device.sixteenBitMma;
}

bool tensorCoresSplitFewRows(const Problem &p, const GeneratedMatmulOptions &options, const DeviceDescription &device,
                             bool splitAllowed) {
  std::string error;
  auto chosen = chooseTensorCore(p, options, device, splitAllowed, error);
  if (mlir::failed(chosen) || chosen->splitK <= 1)
    return false;
  LoadPlan planA = planOperand(p, p.aType, /*isA=*/true, chosen->blockK, chosen->blockM);
  LoadPlan planB = planOperand(p, p.bType, /*isA=*/false, chosen->blockK, chosen->blockN);
  auto staging = chooseStaging(*chosen, p, planA, planB, options, device, error);
  return mlir::succeeded(staging) && staging->async;
}

mlir::LogicalResult emitTensorCoreMatmul(const ProductLaunch &launch, const Problem &p) {
  std::string error;
  auto chosen = chooseTensorCore(p, launch.options, launch.device, launch.splitAllowed, error);
  if (mlir::failed(chosen))
    return mlir::emitError(launch.loc, "generated matmul: tensor-core form: ") << error;
  TensorCoreConfig cfg = *chosen;
  LoadPlan planA = planOperand(p, p.aType, /*isA=*/true, cfg.blockK, cfg.blockM);
  LoadPlan planB = planOperand(p, p.bType, /*isA=*/false, cfg.blockK, cfg.blockN);
  KernelSignature signature;
  signature.name = launch.name;
  auto chosenStaging = chooseStaging(cfg, p, planA, planB, launch.options, launch.device, error);
  if (mlir::failed(chosenStaging))
    return mlir::emitError(launch.loc, "generated matmul: tensor-core form: ") << error;
  Staging staging = *chosenStaging;
  if (cfg.splitK > 1 && !staging.async) {
    // Split K only by cp.async (the register staging reads K from 0).
    cfg.splitK = 1;
    cfg.kPerSplit = 0;
    chosenStaging = chooseStaging(cfg, p, planA, planB, launch.options, launch.device, error);
    if (mlir::failed(chosenStaging))
      return mlir::emitError(launch.loc, "generated matmul: tensor-core form: ") << error;
    staging = *chosenStaging;
  }
  if (p.prologue && (!staging.async || cfg.residentK == 0))
    return mlir::emitError(launch.loc, "generated matmul: tensor-core form: A's rows computed in the kernel need B's "
                                       "slices by cp.async and all of A's rows in shared memory beside them");
  Problem q = productProblem(p, cfg.splitK);
  const bool bBeforeWait =
      kTensorCoreCopiesBBeforeWait && staging.async && p.bUnwritten && launch.device.programmaticDependentLaunch;
  // A, B, C or the partial products; C and the epilogue's operands where
  // the last split completes; the prologue's operands.
  Problem withoutPrologue = q, wholeWithoutPrologue = p;
  withoutPrologue.prologue = wholeWithoutPrologue.prologue = nullptr;
  signature.arguments = argumentTypes(withoutPrologue, /*withAB=*/true);
  if (cfg.lastSplitCompletes) {
    signature.arguments.append(argumentTypes(wholeWithoutPrologue, /*withAB=*/false));
    signature.workgroupBuffers.push_back(completionFlagType(launch.host.getContext()));
  }
  if (p.prologue)
    for (Value operand : p.prologue->hostOperands)
      signature.arguments.push_back(operand.getType());
  int64_t sharedBytes = sharedBytesOf(cfg, staging, p.elementBytes);
  signature.bytesMoved = launch.bytes;
  signature.flops = launch.flops;
  signature.blockSize = {static_cast<int32_t>(cfg.threads()), 1, 1};
  int64_t tilesM = llvm::divideCeilSigned(p.m, cfg.blockM), tilesN = llvm::divideCeilSigned(p.n, cfg.blockN);
  bool mFastest = tilesM <= tilesN;
  LaunchDims dims;
  dims.grid = {mFastest ? tilesM : tilesN, mFastest ? tilesN : tilesM, p.batch * cfg.splitK};
  dims.block = {cfg.threads(), 1, 1};
  if (dims.grid[1] > 65535 || dims.grid[2] > 65535)
    return mlir::emitError(launch.loc, "generated matmul: the grid is too large for this product");
  // C's pairs, or the partial products' (f32, rows contiguous).
  int64_t widthC = cfg.splitK > 1 ? 2 : launch.widthC;
  MLPIPE_DEBUG(
      kDebugEmitters,
      os << launch.name << ": generated matmul " << p.batch << "x" << p.m << "x" << p.n << "x" << p.k
         << " (batch x M x N x K), tensor cores ("
         << (p.tf32 ? "mma.sync m16n8k8, tf32: f32 rounded by cvt.rna"
                    : std::string("mma.sync m16n8k16, ") + (p.storage.isBF16() ? "bf16" : "f16"))
         << ", f32 accumulation), block " << cfg.blockM << "x" << cfg.blockN << "x" << cfg.blockK << ", " << cfg.warps()
         << " warps " << cfg.warpsM << "x" << cfg.warpsN << " of " << cfg.warpM() << "x" << cfg.warpN()
         << (cfg.splitK > 1
                 ? ", split-K " + std::to_string(cfg.splitK) + " (" + std::to_string(cfg.kPerSplit) +
                       " rows each, kFewRowsSplitsK" +
                       (cfg.lastSplitCompletes ? "; the last split adds them, kFewRowsLastSplitCompletes" : "") + ")"
                 : std::string())
         << ", A vectors " << describe(planA, "M") << ", B vectors " << describe(planB, "N") << ", C vectors "
         << (p.n % 2 == 0 && widthC >= 2 ? 2 : 1) << ", grid (" << dims.grid[0] << ", " << dims.grid[1] << ", "
         << dims.grid[2] << ") with " << (mFastest ? "M" : "N") << " tiles fastest, " << sharedBytes << " B shared in "
         << staging.stages << " stages "
         << (staging.async ? std::string("by cp.async (A ") + (staging.kMajorA ? "K-major" : "M-major") + ", B " +
                                 (staging.kMajorB ? "K-major" : "N-major") + ")"
                           : std::string("through registers"))
         << ", dynamic, sized for " << staging.blocksPerSm << (staging.blocksPerSm == 1 ? " block" : " blocks")
         << " an SM"
         << (staging.async ? (launch.options.prefetchFragments ? ", fragments loaded a K-step ahead"
                                                               : ", fragments loaded with their K-step")
                           : "")
         << (bBeforeWait ? ", B's first slices copied before the wait (kTensorCoreCopiesBBeforeWait)" : "")
         << (cfg.residentK > 0 ? ", A's " + std::to_string(p.m) + " rows computed by every block into " +
                                     std::to_string(cfg.residentK) + " of K in shared memory (a row prologue)"
                               : std::string())
         << "\n");
  return launchProduct(
      launch, p, cfg.splitK, signature, dims,
      [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
        TensorCoreBody body(b, f, q, p, cfg, staging, planA, planB, launch.options.prefetchFragments, bBeforeWait);
        body.build(widthC);
        return mlir::failure(body.prologueFailed);
      },
      sharedBytes, cfg.lastSplitCompletes);
}

} // namespace mlpipe::emitters::generated_matmul
