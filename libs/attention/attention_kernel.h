// The fused attention kernel (private to libs/attention): its launch
// configuration, chosen from the shapes and the device description, and
// the bodies of the kernel and of the kernel combining split keys.
//
// A block per (head, tile of query rows); each query row is held by a group
// of lanes, each lane a slice of the head dimension (its q and its output
// accumulator in registers); tiles of K and V stream through shared memory;
// the running max m and sum l of each row are updated per tile (online
// softmax):
//
//   x_j   = prologue(q . k_j)                     (the traced ops, elementally)
//   m'    = max(m, max_j x_j)
//   p_j   = exp(x_j - m')                         (the traced exp node, max := m')
//   l     = l * exp(m - m') + sum_j p_j
//   acc   = acc * exp(m - m') + sum_j p_j v_j
//   out   = acc / l
#pragma once

#include "attention/attention_matching.h"

#include "codegen/device_description.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace mlpipe::emitters::fused_attention {

// The widest vector access, in bytes.
constexpr int64_t kVectorBytes = 16;
// The shape of one mma.sync m16n8k16 the tensor-core kernel is built from:
// its rows (a warp's query rows), columns and depth (head sizes and key
// tiles are multiples of it).
constexpr int64_t kMmaRows = 16, kMmaCols = 8, kMmaDepth = 16;

struct Config {
  int64_t heads = 0, length = 0, headSize = 0; // length: query rows
  int64_t keys = 0;                            // key (and value) rows
  int64_t keyTiles = 0;                        // ceil(keys / keysPerTile)
  int64_t splits = 1;                          // blocks the keys of a query tile are split over
  int64_t tilesPerSplit = 0;
  // With split keys, the kernel argument of the output (argument 3 is the
  // partials then): the last split of a query tile to finish combines.
  int64_t outArgument = -1;
  int64_t partialStride = 0; // elements per row of the partials: D values, max, sum, padding
  // The type the kernel computes in (f32 or f64: scores, the softmax, the
  // accumulators, the split keys' partials), and the type Q, K, V and the
  // output are stored in: the same, or bf16/f16 (read as stored, widened
  // in registers, the output rounded once).
  mlir::Type element;
  int64_t elementBytes = 4;
  mlir::Type storage;
  int64_t storageBytes = 4;
  // The output's type: `storage`, or `element` where the rounding to the
  // stored type comes later (fused into the kernel that merges the heads).
  mlir::Type outElement;
  int64_t outBytes = 4;
  int64_t rowsPerBlock = 0; // chooseLaunch: kQueryRowsPerBlock or fewer
  int64_t lanes = 1;        // per query row
  int64_t width = 1;        // elements per register chunk
  int64_t chunks = 1;       // per lane
  int64_t keysPerTile = 0;
  int64_t threads = 0;
  int64_t queryTiles = 0;
  int64_t widthQ = 1, widthK = 1, widthV = 1, widthO = 1; // global vector widths
  bool causal = false;
  // A decode step's keys past a run-time position are masked: the kernel
  // argument holding that position, -1 if none. In batched decoding it
  // holds a position per sequence ([batch] i32), row r's at r /
  // rowsPerPosition (0: one position, rank 0).
  int64_t positionArgument = -1;
  int64_t rowsPerPosition = 0;
  // The kernel arguments holding what the mask's fusion reads besides its
  // output (a decode step's position), by that fusion's argument number:
  // the kernel computes the mask's elements as that fusion does.
  llvm::SmallVector<std::pair<unsigned, int64_t>> maskArguments;
  // A decode step's kernel, launched while the kernel before it runs
  // (programmatic dependent launch), prefetches the cache's lines of its
  // split's first prefetchedTiles tiles (those up to the position's) into
  // L2 before it waits for that kernel, and at each tile the lines of the
  // tile that many ahead: the cache was written by earlier steps, so its
  // lines come from DRAM, and a prefetch is safe whatever the kernel before
  // writes (l2_prefetch.h). The position is a host input no kernel writes,
  // read before the wait too. 0: no prefetch (choosePrefetch: by default
  // only a split of one tile, a lone row's).
  int64_t prefetchedTiles = 0;
  // Batched decoding's queries, read in place as [batch, queryHeads, 1, D]
  // (row r = b * queryHeads + h at [b, h]); 0: q is [H, Tq, D].
  int64_t queryHeads = 0;
  // The step's keys and values the kernel writes into the cache first
  // (the kernel does the copy), or null; the kernel argument of its
  // source, and of each of its key's inputs (CacheWrite::keyInputs).
  const CacheWrite *cacheWrite = nullptr;
  int64_t cacheSourceArgument = -1;
  // Batched decoding's: every sequence's keys and values, each row's
  // written at its sequence's position; the source argument is then the
  // buffer they are read from (BatchedCacheWrite::sourceRoot).
  const BatchedCacheWrite *batchedCacheWrite = nullptr;
  llvm::SmallVector<int64_t> cacheKeyInputArguments;
  // On tensor cores (tensor_core_attention.cpp): both products on
  // mma.sync, a warp per 16 query rows, no split keys and no cache write.
  // Elements per row of the K tile and of the V tile's pairs of keys in
  // shared memory (padded so that a warp's fragment loads hit 32 banks).
  bool tensorCores = false;
  int64_t kTileRow = 0, vPairRow = 0;
  // Groups of warps over which a block's key tiles are dealt (tile i to
  // group i mod keyGroups), each group's warps covering all the block's
  // rows; their partial max, sum and output combined through shared memory
  // at the end.
  int64_t keyGroups = 1;
  // Blocks that must fit an SM at once (ptxas bounds the registers to
  // match), or 0 for ptxas's own choice.
  int64_t blocksPerSm = 0;
  // Causal query tiles on tensor cores, longest first: blocks are dealt to
  // the SMs in rounds of this many (the SM count; 0: one order, longest
  // first), every other round taking its tiles in reverse, so that an SM's
  // blocks sum to about the same number of key tiles (kSnakeCausalTiles).
  int64_t snakeRoundBlocks = 0;
  // On tensor cores, K and V tiles copied by cp.async into this many
  // shared stages (each stage a tile per key group, K and V both as
  // [keys, kTileRow], read by ldmatrix, V's with .trans), the next tiles
  // in flight while one is computed; 0: through registers (V as pairs of
  // keys). asyncWidth: elements a cp.async copies.
  int64_t asyncStages = 0;
  int64_t asyncWidth = 0;
  // With asyncStages >= 3: each round computes the next round's scores
  // (Q K^T) before its own softmax, so that the two overlap
  // (tensor_core_attention.cpp).
  bool scoresAhead = false;
  // The kernel's shared buffers (workgroupBuffers) as views of dynamic
  // shared memory (dynamicSharedBytes of it, up to the device's opt-in
  // limit) instead of static workgroup buffers (48 KiB at most).
  bool dynamicShared = false;
};

// Choices of the launch that the pass's options may fix instead of the
// heuristics (0: the heuristic's). On tensor cores: query rows per block,
// key groups, keys per tile, blocks per SM, cp.async stages, and whether
// tiles may be copied by cp.async at all; a batched decode step's fewest
// key splits a row.
struct LaunchOverrides {
  int64_t rowsPerBlock = 0, keyGroups = 0, keysPerTile = 0, blocksPerSm = 0, stages = 0;
  bool asyncCopy = true;
  // cp.async stages in dynamic shared memory, up to the opt-in limit.
  bool dynamicShared = false;
  // Causal tiles dealt in snake order: 1, or 0 longest first throughout
  // (< 0: kSnakeCausalTiles).
  int64_t snakeOrder = -1;
  // A batched decode step's fewest splits a row (0: kBatchedStepMinSplits).
  int64_t batchedMinSplits = 0;
  // The next round's scores before this round's softmax (Config::scoresAhead;
  // kScoresAheadStages stages unless `stages` is given, at least 3).
  bool scoresAhead = false;
};

// The configuration's shapes, from the matched products: Q [H, Tq, D],
// K^T [H, D, Tk], V [H, Tk, D], out [H, Tq, D], all f32, all f64, or all
// bf16 or f16 with f32 scores; failure
// with the reason otherwise.
mlir::FailureOr<Config> configFor(const AttentionMatch &match, std::string &why);

// Whether the tensor-core kernel takes this attention on this GPU: Q, K
// and V in bf16 or f16 on a chip with their mma.sync (sm_80 on), a head
// size a multiple of 16 (one mma's depth) up to kTensorCoreMaxHeadSize (its
// accumulators in registers), and at least one mma's 16 query rows (fewer
// rows, a decode step's, split their keys over blocks instead). Why not
// otherwise.
bool tensorCoresFit(const Config &cfg, const DeviceDescription &device, std::string &whyNot);

// The launch configuration, from the device description: lanes per query
// row, query rows per block, keys per tile, splits of the keys; with
// `tensorCores` (tensorCoresFit), warps of 16 rows and mma-sized tiles.
// `overrides` fix what they give on tensor cores (checked: a multiple of
// 16 rows, a power of two of groups, a multiple of 16 keys).
mlir::LogicalResult chooseLaunch(Config &cfg, const DeviceDescription &device, bool tensorCores, std::string &why,
                                 const LaunchOverrides &overrides = {});

// Config::prefetchedTiles for a launch whose position argument is known:
// `fixed` tiles where it is not 0 (-1: none), else the heuristic's.
void choosePrefetch(Config &cfg, const DeviceDescription &device, int64_t fixed = 0);

// Whether the tensor-core kernel's K and V tiles (cfg.asyncStages > 0)
// can be copied by cp.async from global vectors of `globalWidth`
// elements: copies of 4 to 16 bytes, every thread of a key group the same
// number of them; sets cfg.asyncWidth to the widest such copy.
bool asyncCopiesFit(Config &cfg, int64_t globalWidth, int64_t warpSize);

// The buffers the kernel keeps in shared memory: the tiles of K's and V's
// rows, or on tensor cores K's padded rows and V's pairs of keys (a tile
// per key group; with cp.async, stages of K's and V's padded rows), and
// with several key groups their partials ([rows, D +
// 8] f32: the output, then each of a row's four lanes' max and sum); with
// split keys an i32 flag (whether this block is its query tile's last
// split) and the combine's scales ([rows, splits] in the compute type).
llvm::SmallVector<mlir::MemRefType, 3> workgroupBuffers(const Config &cfg, mlir::MLIRContext *context);

// Where each of workgroupBuffers lies in dynamic shared memory (byte
// offsets, each 16-byte aligned), and the bytes of all of them.
llvm::SmallVector<int64_t, 3> dynamicSharedOffsets(const Config &cfg, mlir::MLIRContext *context);
int64_t dynamicSharedBytes(const Config &cfg, mlir::MLIRContext *context);

// The widest vector (at most `maxElements`) along the last dimension of a
// memref: every vector aligned to its size, given an aligned base.
int64_t vectorWidthAlongLast(mlir::MemRefType type, int64_t maxElements);

// The kernel's body. Arguments: q ([H, Tq, D] view), k, v ([H, Tk, D]
// views), out ([H, Tq, D]), or with split keys the partials ([H, Tq, S,
// partialStride]: acc, then max and sum) and out at cfg.outArgument;
// workgroup buffers: the K tile, the V tile and with split keys the flag
// and the scales.
//
// With split keys, each split in use writes its partials, and the last of
// a query tile's splits to finish combines them (split_combine.h) into
// out (codegen/split_completion.h). Where only the first split is in use
// (keys up to a run-time position), its block writes out as an unsplit
// block does.
mlir::LogicalResult buildAttentionBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg,
                                       const FusionGraph &graph, const Softmax &softmax, const FusionGraph *maskGraph);

// The tensor-core kernel's body (tensor_core_attention.cpp), with the
// arguments of buildAttentionBody (never split keys).
mlir::LogicalResult buildTensorCoreAttentionBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg,
                                                 const FusionGraph &graph, const Softmax &softmax,
                                                 const FusionGraph *maskGraph);

} // namespace mlpipe::emitters::fused_attention
