// The generated matmul's problem and configurations (private to
// libs/matmul): what the operand types say about a product, and what the
// heuristics of matmul_config.cpp choose for it, the tiled kernel's tiles
// or the skinny kernel's row segments, with the layout constants the
// kernels' bodies share.
#pragma once

#include "matmul/matmul_kernel.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/MathExtras.h"

#include <cstdint>
#include <string>

namespace mlpipe::emitters::generated_matmul {

//===----------------------------------------------------------------------===//
// The kernels' layout: what every form reads and writes by.
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
// The kernels tell ptxas how many blocks an SM should hold (.minnctapersm):
// the tiled kernel as many as the cost model counts on, the skinny one this
// many.
// Without it ptxas may take up to 255 registers: the 8x8 tile at a ragged
// edge lands at 132, one block of 256 threads per SM instead of two.
constexpr int64_t kSkinnyBlocksPerSm = 2;
// Skinny products (M small) are bandwidth-bound: every element of B is used
// M times. They take the GEMV-like form when M is at most this (GPT-2
// decoding and short prompts), and B's rows are contiguous.
constexpr int64_t kSkinnyMaxRows = 64;
// 16-bit products of this many rows up to two m16 tiles (32) take the
// tensor-core form, their K split across blocks, instead of the skinny form,
// on chips with 16-bit mma.sync: the skinny form's many-row blocks wait on
// instruction issue (tensor_core_matmul.cpp, kFewRowsSplitsK), where that
// form splits K with both operands staged by cp.async (the shape measured;
// otherwise, as for a K of one slice or an odd N, the skinny form stays).
// One row stays on the skinny form, which streams B near the copy rate.
constexpr int64_t kFewRowTensorCoreMinRows = 2;
// Rows the tensor-core form's few-row tiles (one or two m16 tiles high)
// take: up to a batched decode step of 32 sequences, whose products
// cuBLASLt takes in 4.5-7.5 us each (its split-K reduce a separate kernel)
// for 1.2-4.7 MB of weights. 17 to 32 rows are not yet timed on the GPU:
// the default path leaves them to cuBLASLt (kGeneratedSkinnyMaxRowsSixteenBit).
constexpr int64_t kTensorCoreFewRowsMaxRows = 32;
// On sm_90a, products of more rows than one m16 tile take the warpgroup
// form (wgmma from shared memory, 64 rows a warpgroup) where their operands
// allow it and the few-row tiles do not split K, instead of mma.sync.
constexpr int64_t kWarpgroupMinRows = 17;
// On chips with programmatic dependent launch a kernel's blocks are
// resident while the kernel before it runs. Where B is a buffer no kernel
// writes (a weight, Problem::bUnwritten), the tensor-core and warpgroup
// forms copy their pipeline's first stages of B (cp.async) before the
// kernel waits for the one before it, and A's after: the first step then
// waits on A alone, B already on its way (the skinny form holds its B in
// registers the same way, kSkinnyLoadsBBeforeWait).
constexpr bool kTensorCoreCopiesBBeforeWait = true;
// Warps per skinny block; they split the block's K-slice row by row and add
// their partial sums in shared memory at the end.
constexpr int64_t kSkinnyWarps = 8;

// The row-dot form (B stored [N, K], few rows): a group of this many lanes
// reads a row of B's storage, 128 contiguous bytes a step (whole 32-byte
// sectors); a warp reads four rows at once.
constexpr int64_t kRowDotLanes = 8;
constexpr int64_t kRowDotThreads = 256;
// f32 sums a lane keeps, one per row of A and column of its group: a group
// takes kRowDotSums / M columns (at most kRowDotMaxColumns), so each vector
// of A it loads (from L1) is used for that many columns. GPT-2's logits at
// 16 rows (16 x 768 by 50257, `bench matmul --shapes 16x768x50257t`, H200,
// 2026-12-03): at 64 sums (four columns) the kernel spilled at 128
// registers and took 118 us in f32, 97 in bf16 (0.73x and 1.08x cuBLAS);
// at 32 (two columns) 66 and 57 us (1.29x and 1.84x).
constexpr int64_t kRowDotSums = 32;
constexpr int64_t kRowDotMaxColumns = 4;
// Steps whose vectors of B a lane loads before using any: two steps of
// four columns keep eight 128-bit loads in flight per lane.
constexpr int64_t kRowDotStepsInFlight = 2;
// Blocks an SM should hold (.minnctapersm), so 128 registers a thread:
// unbounded, ptxas hoists every row of A's loads of a step (the 16-row f32
// logits took 222 registers, one block of eight warps an SM, and ran at
// 1.08x cuBLAS's speed against 1.28x with 24 B spilled at two blocks;
// bf16 at 8 rows 2.91x against 3.60x: `bench matmul --shapes
// 16x768x50257t`, H200, 2026-12-03).
constexpr int64_t kRowDotBlocksPerSm = 2;
// On chips with programmatic dependent launch, where B is a buffer no
// kernel writes (a weight: the tied logits' wte), a lane loads its first
// round of B's vectors into registers before the kernel waits for the one
// before it (as the skinny form holds its B, kSkinnyLoadsBBeforeWait): a
// decode step's logits, whose blocks are resident during the last layer,
// then start streaming wte while that layer ends.
constexpr bool kRowDotLoadsBBeforeWait = true;
// The generated kernel's own choice (form "auto") takes the row-dot form
// for at most this many rows (two columns a group at 32).
constexpr int64_t kRowDotMaxRows = 32;

inline int64_t roundUp(int64_t a, int64_t b) { return llvm::divideCeilSigned(a, b) * b; }

//===----------------------------------------------------------------------===//
// The problem, as the operand types describe it.
//===----------------------------------------------------------------------===//

// The widest vector (in elements, at most `maxElements`) that reads `dim`
// of `type` at indices that are multiples of the width with every vector
// aligned to its own size, given an aligned base pointer. 1 when `dim` is
// not contiguous.
int64_t vectorWidthAlong(mlir::MemRefType type, int64_t dim, int64_t maxElements);

bool hasUnitStride(mlir::MemRefType type, int64_t dim);

struct Problem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t rank = 2;
  // The type the product is computed and accumulated in (f32 or f64), and
  // the type A and B are stored in with its size: the same, or bf16 and f16
  // (widened in registers as they are read, by the skinny, row-dot and
  // tensor-core forms). C is stored in `element` or, after an epilogue, in
  // A's type.
  mlir::Type element;
  mlir::Type storage;
  int64_t elementBytes = 4;     // of `storage`
  int64_t accumulatorBytes = 4; // of `element`
  mlir::MemRefType aType, bType, cType;
  bool accumulate = false;
  const MatmulEpilogue *epilogue = nullptr;
  const MatmulRowPrologue *prologue = nullptr; // A's row computed in the kernel
  // B is a buffer no kernel writes while the program runs (a weight;
  // isUnwrittenArgument): a kernel may read it before it waits for the one
  // before it.
  bool bUnwritten = false;
  // f32 A and B rounded to TF32 on the tensor-core form (its mma.sync
  // m16n8k8 .tf32; GeneratedMatmulOptions::tf32).
  bool tf32 = false;
  int64_t maxVector = 4; // elements in the widest access

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
LoadPlan planOperand(const Problem &p, mlir::MemRefType type, bool isA, int64_t blockK, int64_t blockOuter);

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
  // B's slice brought into L2 before the kernel waits for the one before
  // it (kSkinnyPrefetchesB: 16-bit B, few sums a thread).
  bool prefetchB = false;
  // ...and, where B is never written (Problem::bUnwritten), the thread's
  // first chunk of B rows loaded into registers before the wait: its whole
  // slice where it fits (kSkinnyHeldBRegisters), as one chunk.
  bool loadsBBeforeWait = false;
  // With split K, the last of a column tile's splits to finish adds the
  // partial sums and writes C through the epilogue
  // (codegen/split_completion.h), instead of a second kernel.
  bool lastSplitCompletes = false;

  int64_t threads() const { return warps * 32; }
  // Groups of lanes that each take their own rows of the K-slice.
  int64_t rowSlots() const { return warps * (32 / lanesN); }
  int64_t rowsPerWarp() const { return kPerSplit / rowSlots(); }
  int64_t chunks() const { return llvm::divideCeilSigned(rowsPerWarp(), rowsInFlight); }
};

struct RowDotConfig {
  int64_t columns = 1;                          // per group of kRowDotLanes lanes
  int64_t vectorK = 1;                          // elements of a vector along K
  int64_t stepsInFlight = kRowDotStepsInFlight; // steps loaded before any is used
  // The first round's vectors of B loaded before the kernel's wait
  // (kRowDotLoadsBBeforeWait).
  bool loadsBBeforeWait = false;

  int64_t columnsPerBlock() const { return kRowDotThreads / kRowDotLanes * columns; }
  // Steps over K: each reads kRowDotLanes vectors of a row of B's storage.
  int64_t steps(int64_t k) const { return llvm::divideCeilSigned(k, kRowDotLanes * vectorK); }
  // Whether the rounds of steps reach past K (those vectors count as zero).
  bool maskK(int64_t k) const { return roundUp(steps(k), stepsInFlight) * kRowDotLanes * vectorK != k; }
};

// Elements of a shared row of `elements` with its padding.
int64_t paddedRow(int64_t elements, int64_t elementBytes);
// Shared memory of the tiled kernel's two stages of A and B tiles.
int64_t tiledSharedBytes(const Problem &p, const TiledConfig &c);
// Shared memory of the skinny kernel's staged slice of A and its cross-warp
// reduction.
int64_t skinnySharedBytes(const Problem &p, const SkinnyConfig &c);

// Whether the skinny form takes the product: few rows, and B read along its
// contiguous rows (or the options ask for it).
bool prefersSkinny(const Problem &p, const GeneratedMatmulOptions &options);

// Whether the row-dot form takes the product: few rows, unbatched, B stored
// [N, K] (K contiguous, N not) and wide (or the options ask for it).
bool prefersRowDot(const Problem &p, const GeneratedMatmulOptions &options);

// The row-dot configuration: columns a group from the rows of A (its sums
// in registers), vectors of 128 bits along K where A and B allow.
RowDotConfig chooseRowDot(const Problem &p, const DeviceDescription &device);

// The tiled configuration of least estimated cost among the candidates (or
// the one the options force); split-K only where `splitAllowed`. Fails with
// `error` when no candidate fits the device.
mlir::FailureOr<TiledConfig> chooseTiled(const Problem &p, const GeneratedMatmulOptions &options,
                                         const DeviceDescription &device, bool splitAllowed, std::string &error);

// The skinny configuration for B vectors of at most `widestVectorN`
// elements (fewer where a thread's sums would not fit its registers): row
// segments narrowed before splitting K, K split (where `splitAllowed`)
// until the grid fills the GPU and the staged slice of A fits.
SkinnyConfig chooseSkinny(const Problem &p, const GeneratedMatmulOptions &options, const DeviceDescription &device,
                          int64_t widestVectorN, bool splitAllowed);

} // namespace mlpipe::emitters::generated_matmul
