// The fused attention kernel (attention_kernel.h): its launch configuration
// and its bodies.
//
// When the prologue is the causal mask (x = s * c + (j > i ? -1e10 : 0), as
// traced), tiles of keys wholly after a block's last query are skipped:
// their p_j are exp(-1e10 - m') = 0 exactly in f32 and f64, since every
// row's first key is unmasked.
//
// A decode step (one query row per head against the KV cache, masked past
// a run-time position the prologue reads) has too few rows to fill the
// GPU: its keys are split over blocks, each block's (m, l, acc) go to a
// temporary, and the last block of a head to finish combines them exactly
// (codegen/split_completion.h):
//   M = max_s m_s,  out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M)
// The step's own keys and values, which the host copied into the cache
// just before, are written there by the block whose split holds their key,
// before it reads the cache (matchCacheWrite). Launched while the kernel
// before it runs, a split first prefetches the cache lines it will stage
// into L2, then waits for that kernel (Config::prefetchedTiles).
#include "attention/attention_kernel.h"

#include "attention/kernel_builder.h"
#include "attention/split_combine.h"
#include "codegen/l2_prefetch.h"
#include "codegen/split_completion.h"
#include "emitters/elemental_emitter.h"
#include "emitters/fusion_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

namespace mlpipe::emitters::fused_attention {

namespace {

// Query rows one block handles: the K and V tiles it stages are shared by
// all of them, so more rows read K and V from L2 fewer times.
constexpr int64_t kQueryRowsPerBlock = 64;
// Fewer rows per block (down to this) when the grid would otherwise leave
// SMs idle: kMinBlocksPerSm blocks per SM at least.
constexpr int64_t kMinQueryRowsPerBlock = 16;
constexpr int64_t kMinBlocksPerSm = 2;
// Keys per K/V tile: each lane keeps one score per key of the tile in
// registers, at most this many 32-bit registers of them (32 f32 keys, 16
// f64 keys); fewer keys when the two tiles would not fit shared memory.
constexpr int64_t kScoreRegistersPerLane = 32;
constexpr int64_t kMinKeysPerTile = 8;
// Elements of the head dimension one lane holds (of q, and of the output
// accumulator): beyond this the lane group grows, so that q, the
// accumulator and a tile's scores fit the registers without spilling.
constexpr int64_t kHeadElementsPerLane = 16;
// Few query rows against many keys (a decode step: one row per head
// against the KV cache) leave most SMs idle with a block per (head, query
// tile): the keys are then split over blocks, each writing its rows'
// partial max, sum and weighted values, and a second kernel combines the
// splits exactly. Splits until kSplitBlocksPerSm blocks per SM (a split's
// block is about one warp staging its K and V tiles: several per SM keep
// enough loads in flight to stream the cache), keeping at least
// kMinKeyTilesPerSplit tiles of keys in each.
constexpr int64_t kSplitBlocksPerSm = 4;
constexpr int64_t kMinKeyTilesPerSplit = 1;
// A batched decode step (rows masked at their own sequences' positions)
// keeps at least this many splits a row even where its rows alone fill
// kSplitBlocksPerSm blocks an SM (GPT-2 124M from 44 sequences on the
// H200): its rows stop at different positions, so a split short of a
// row's position finishes early and frees its SM for another row's, and
// the kernel stays the one measured up to 43 sequences (one split a row
// ran far slower there, fused_attention.cpp's batchedStepKeysSplit).
constexpr int64_t kBatchedStepMinSplits = 2;
// A lone query row's block (a decode step) whose split is one tile of keys
// computes the tile's keys in groups of this many, an online-softmax step
// each, in a loop that stops at the run-time position: a whole tile of
// keys unrolled (32) was fetched cold, and its keys past the position
// computed all the same (H200, GPT-2 124M's decode step after 10 tokens
// under the profiler: of 16.8 cycles between a warp's instructions, 5.3
// waited on instruction fetch). Measured (bf16, alternated with the build
// without it): the step after 10 tokens 0.272-0.274 ms against
// 0.280-0.282, after 1000 alike (0.305-0.308); but a batch of 8, whose
// splits walk 6 tiles, took 0.615 ms after 1000 tokens against 0.584-0.589
// (groups are a chain where the unrolled tile overlaps its keys), so
// splits of several tiles keep the unrolled tile.
constexpr int64_t kLoneRowKeysPerGroup = 8;

// On tensor cores: query rows per block (a warp per 16 rows: the K and V
// tiles staged once serve four warps), halved down to one warp while the
// grid would leave SMs idle (kMinBlocksPerSm); keys per tile (eight 8-key
// slices of scores, 32 f32 registers a lane, as kScoreRegistersPerLane);
// the largest head whose accumulators (D / 2 f32 a lane) and Q fragments
// (D / 4 registers) stay in registers beside the scores.
constexpr int64_t kTensorCoreRowsPerBlock = 64;
constexpr int64_t kLanesPerMmaRow = 4; // lanes holding a row of an mma's accumulator
constexpr int64_t kTensorCoreKeysPerTile = 64;
// A block's key tiles are walked one after another, so the longest block
// (causal: the last query rows, every key) bounds the kernel. While the
// grid's warps number fewer than this many per SM, a block's tiles are
// dealt to up to kMaxKeyGroups groups of warps (each its own tiles, of
// kGroupKeysPerTile keys to keep their shared memory small), a factor
// shorter, the groups' partials combined at the end.
// Two groups at most: each further group adds a turn of the combine (a
// barrier and the partials through shared memory) and threads that leave
// fewer blocks an SM. Measured on the H200 (12 heads of 64, causal, bf16,
// the program's time with the heads' merge; bench/scripts/sweep-attention.sh,
// one run): at T = 1024, 512, 256, 32 rows a block in 4 groups of 32-key
// tiles took 25.7, 14.2, 10.2 µs, in 2 groups 23.0, 12.8, 9.7.
constexpr int64_t kTensorCoreWarpsPerSm = 16;
// Causal query tiles differ in length (tile i walks i + 1 key tiles). The
// longest go first, but the block scheduler deals a grid to the SMs in
// rounds, one block an SM a round while all are resident: at T=1024 (12
// heads, 32 tiles of 32 rows, three rounds on 132 SMs) the SM given the
// longest tile in the first round got the longest of the second and third
// rounds too, 63 key tiles against the 48 of the mean (the SMs were busy
// 73% of the kernel's time under the profiler). Every other round takes its
// tiles in reverse (a snake), so the SM with the first round's longest
// takes the second's shortest: at most 53. Off until timed on the GPU
// (`sweep-attention.sh bf16 1024 '' 'tc-snake-order=1'`).
constexpr bool kSnakeCausalTiles = false;
constexpr int64_t kMaxKeyGroups = 2;
constexpr int64_t kGroupKeysPerTile = 32;
constexpr int64_t kTensorCoreMaxHeadSize = 128;
// Shared-memory row pads, in 32-bit words: the K tile's row length is 4
// words past a multiple of 32 (lanes g = 0..7 read rows g at word t =
// 0..3: banks 4g + t), the V pairs' 8 words past one (lanes read rows t at
// word g: banks 8t + g).
constexpr int64_t kKeyRowBankOffsetWords = 4;
constexpr int64_t kValuePairRowBankOffsetWords = 8;
// cp.async stages of K and V tiles: two, so that the next tiles load
// while the current ones are computed (each stage costs shared memory, a
// tile per key group, and more stages need smaller tiles to fit).
// The stages' bytes come first: while they do not fit, keys per tile are
// halved down to kMinAsyncKeysPerTile before key groups are given up
// (groups shorten the longest block's walk; one mma's 16 keys still
// amortise a tile's barrier and softmax step over 2 D / 8 mma.sync).
constexpr int64_t kAsyncStages = 2;
// With the next round's scores computed ahead (tc-scores-ahead), the copies
// of the round after this one must have landed too: three stages at least
// (this round's, the next's, the one being copied), four by default (a
// power of two: the stage index a mask, not a remainder).
constexpr int64_t kScoresAheadMinStages = 3, kScoresAheadStages = 4;
constexpr int64_t kMinAsyncKeysPerTile = 16;
// The cp.async tiles' rows are padded by 16 bytes: a row of D 16-bit
// elements (D a multiple of 16) is then an odd multiple of 4 words past a
// multiple of 32, so the 8 rows of an ldmatrix 8x8 matrix fall in 8
// different groups of 4 banks, and rows stay 16-byte aligned.
constexpr int64_t kAsyncRowPadBytes = 16;

int64_t paddedWords(int64_t words, int64_t offset) {
  constexpr int64_t kBanks = 32;
  return words + ((offset - words) % kBanks + kBanks) % kBanks;
}

// The attention kernel's body, built in the order it runs: the elemental
// emitters of the softmax (and of its mask), the block's place in the grid,
// its query rows in registers, the range of key tiles it reads (after
// writing the step's keys and values into the cache), the loop over those
// tiles, then the output (or this split's partials).
class AttentionBody {
public:
  AttentionBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg, const FusionGraph &graph,
                const Softmax &softmax, const FusionGraph *maskGraph)
      : b(b), f(f), loc(f.getLoc()), x{b, loc}, cfg(cfg), graph(graph), softmax(softmax), maskGraph(maskGraph),
        q(f.getArgument(0)), k(f.getArgument(1)), v(f.getArgument(2)), out(f.getArgument(3)),
        kTile(f.getWorkgroupAttributions()[0]), vTile(f.getWorkgroupAttributions()[1]), element(cfg.element),
        W(cfg.width), D(cfg.headSize), T(cfg.length), TK(cfg.keys), BK(cfg.keysPerTile) {}

  mlir::LogicalResult build() {
    makeElementalEmitters();
    placeBlock();
    auto [firstTile, tiles] = keyTiles();
    if (cfg.prefetchedTiles > 0) {
      prefetchTiles(firstTile, tiles, cfg.prefetchedTiles);
      mlir::NVVM::GriddepcontrolOp::create(b, loc, mlir::NVVM::GridDepActionKind::wait);
    }
    loadQueryRows();
    // The running max starts from the max reduction's own init.
    Value rowMaxInit = elemental->reductionInit(softmax.max, {head, query});
    llvm::SmallVector<Value> init{rowMaxInit, x.fconst(element, 0.0)};
    for (int64_t c = 0; c < cfg.chunks; ++c)
      init.push_back(x.vzero(element, W));
    if (cfg.cacheWrite || cfg.batchedCacheWrite)
      writeStepIntoCache();
    auto loop = mlir::scf::ForOp::create(b, loc, firstTile, tiles, x.c(1), init);
    if (mlir::failed(buildTileStep(loop)))
      return mlir::failure();
    writeOutput(loop);
    if (elemental->failed())
      return mlir::failure();
    if (anchor->use_empty())
      anchor->erase();
    return mlir::success();
  }

private:
  // The elemental emitter of the softmax fusion: the prologue and the
  // exponential, evaluated on values this kernel defines.
  void makeElementalEmitters() {
    mlir::OpBuilder top = mlir::OpBuilder::atBlockBegin(&f.getBody().front());
    anchor = mlir::arith::ConstantIndexOp::create(top, loc, 0);
    mlir::OpBuilder entry(anchor);
    mlir::IRMapping extras;
    for (auto [position, argument] : llvm::enumerate(softmax.extraArguments))
      extras.map(graph.function().getArgument(argument), f.getArgument(4 + position));
    elemental.emplace(graph, b, entry, extras);
    // The mask's own fusion, when the prologue reads one from memory.
    if (maskGraph) {
      mlir::IRMapping read;
      for (auto [maskArgument, kernelArgument] : cfg.maskArguments)
        read.map(maskGraph->function().getArgument(maskArgument), f.getArgument(kernelArgument));
      mask.emplace(*maskGraph, b, entry, read);
    }
  }

  // The block's split, head and query tile; the thread's lane and query
  // row.
  void placeBlock() {
    tid = threadIdX(b, loc);
    Value block = blockIdX(b, loc);
    split = x.rem(block, cfg.splits);
    block = x.div(block, cfg.splits);
    head = x.div(block, cfg.queryTiles);
    // Query tiles with the most keys first, so the longest blocks start first.
    queryTile = b.createOrFold<mlir::arith::SubIOp>(loc, x.c(cfg.queryTiles - 1), x.rem(block, cfg.queryTiles));
    lane = x.rem(tid, cfg.lanes);
    row = x.add(x.mul(queryTile, cfg.rowsPerBlock), x.div(tid, cfg.lanes));
    rowValid = T % cfg.rowsPerBlock != 0 ? x.lt(row, T) : Value();
    query = T % cfg.rowsPerBlock != 0 ? x.min(row, T - 1) : row;
  }

  // This lane's slice of the head dimension: chunk c is elements
  // [c * lanes * W + lane * W, + W).
  void loadQueryRows() {
    for (int64_t c = 0; c < cfg.chunks; ++c)
      chunkStart.push_back(x.add(x.mul(lane, W), c * cfg.lanes * W));
    llvm::SmallVector<Value> at{head, query};
    if (cfg.queryHeads > 0) // [B, H, 1, D]
      at = {x.div(head, cfg.queryHeads), x.rem(head, cfg.queryHeads), query};
    for (int64_t c = 0; c < cfg.chunks; ++c) {
      llvm::SmallVector<Value> index = at;
      index.push_back(chunkStart[c]);
      qChunks.push_back(x.convert(x.load(q, index, W, cfg.widthQ >= W, cfg.storageBytes), element));
    }
  }

  // Key tiles: all of them, or (causal) those up to the block's last
  // query; with split keys, those of this block's split. The first tile and
  // the end.
  std::pair<Value, Value> keyTiles() {
    Value tiles;
    if (cfg.causal) {
      // ceil(min(Tk, (queryTile + 1) * rows) / BK)
      Value lastKey = x.add(x.mul(queryTile, cfg.rowsPerBlock), cfg.rowsPerBlock);
      lastKey = x.min(lastKey, TK);
      tiles = x.div(x.add(lastKey, BK - 1), BK);
    } else {
      tiles = x.c(cfg.keyTiles);
    }
    Value firstTile = x.c(0);
    if (cfg.splits > 1) {
      // Every split starts inside the keys (splits = ceil(keyTiles / tilesPerSplit)).
      firstTile = x.mul(split, cfg.tilesPerSplit);
      tiles = x.min(x.add(firstTile, cfg.tilesPerSplit), cfg.keyTiles);
    }
    if (cfg.positionArgument >= 0) {
      // Keys after the position p are masked to exact zeros while key 0 is
      // not (p >= 0): the tiles up to p's, all of them for a p outside the keys.
      // In batched decoding, p is the position of the row's own sequence.
      Value sequence = cfg.rowsPerPosition > 0 ? x.div(head, cfg.rowsPerPosition) : Value();
      Value tilesUsed = unitsUpToPosition(b, loc, f.getArgument(cfg.positionArgument), BK, cfg.keyTiles, sequence);
      tiles = b.createOrFold<mlir::arith::MinSIOp>(loc, tiles, tilesUsed);
    }
    return {firstTile, tiles};
  }

  // The lines of K and V that `count` tiles from `from` (those before
  // `tiles`) will stage, into L2 (Config::prefetchedTiles). Before the
  // wait for the kernel before this one nothing reads or writes what a
  // kernel writes.
  void prefetchTiles(Value from, Value tiles, int64_t count) {
    for (Value memref : {k, v}) {
      RowsToPrefetch rows;
      rows.matrix = memref;
      rows.outer = {head};
      rows.rowBegin = x.mul(from, BK);
      Value end = b.createOrFold<mlir::arith::MinSIOp>(loc, tiles, x.add(from, count));
      rows.rowEnd = b.createOrFold<mlir::arith::MinSIOp>(loc, x.mul(end, BK), x.c(TK));
      rows.maxRows = count * BK;
      rows.colBegin = x.c(0);
      rows.colEnd = x.c(D);
      rows.maxColumns = D;
      rows.elementBytes = cfg.storageBytes;
      prefetchRowsToL2(b, loc, rows, tid, cfg.threads);
    }
  }

  // The step's keys and values into the cache, by the block whose split
  // holds the key they go to (the kernel does the copy), before it
  // stages its first tile: the barrier at each tile's start orders them.
  // In batched decoding, each row's block writes that row, at the key of
  // its sequence's position.
  void writeStepIntoCache() {
    const CacheWrite *write = cfg.cacheWrite;
    const BatchedCacheWrite *batched = cfg.batchedCacheWrite;
    Value source = f.getArgument(cfg.cacheSourceArgument);
    Value key, sequence, headOfSequence;
    if (batched) {
      sequence = x.div(head, batched->rowsPerSequence);
      headOfSequence = x.rem(head, batched->rowsPerSequence);
      Value p = mlir::memref::LoadOp::create(b, loc, f.getArgument(cfg.positionArgument), mlir::ValueRange{sequence});
      p = mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), p);
      key = x.min(mlir::arith::MaxSIOp::create(b, loc, p, x.c(0)), batched->lastKey);
    } else {
      mlir::IRMapping keyMapping;
      for (auto [input, argument] : llvm::zip_equal(write->keyInputs, cfg.cacheKeyInputArguments))
        keyMapping.map(input, f.getArgument(argument));
      for (mlir::Operation *op : write->keyOps)
        b.clone(*op, keyMapping);
      key = keyMapping.lookup(write->key);
    }
    // The element (kv, d) of the row's new key (kv = 0) or value (1).
    auto newElement = [&](int64_t kv, Value d) -> Value {
      if (!batched) {
        llvm::SmallVector<Value> at;
        for (int dim : write->dims)
          at.push_back(dim == kKeyOrValueDim ? x.c(kv) : dim == kHeadDim ? head : dim == kHeadElementDim ? d : x.c(0));
        return mlir::memref::LoadOp::create(b, loc, source, at);
      }
      // offset + b * sequenceStride + kv * kvStride + h * headStride + d,
      // as an index into the source buffer's dimensions.
      Value flat =
          x.add(x.add(x.mul(sequence, batched->sequenceStride), x.mul(headOfSequence, batched->headStride)), d);
      flat = x.add(flat, batched->offset + kv * batched->kvStride);
      auto shape = mlir::cast<mlir::MemRefType>(source.getType()).getShape();
      llvm::SmallVector<Value> at(shape.size());
      for (int64_t i = static_cast<int64_t>(shape.size()) - 1; i >= 0; --i) {
        at[i] = i > 0 ? x.rem(flat, shape[i]) : flat;
        flat = i > 0 ? x.div(flat, shape[i]) : flat;
      }
      return mlir::memref::LoadOp::create(b, loc, source, at);
    };
    Value splitFirstTile = cfg.splits > 1 ? x.mul(split, cfg.tilesPerSplit) : x.c(0);
    Value splitEndTile =
        cfg.splits > 1 ? x.min(x.add(splitFirstTile, cfg.tilesPerSplit), cfg.keyTiles) : x.c(cfg.keyTiles);
    Value holds = b.createOrFold<mlir::arith::AndIOp>(
        loc, b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::uge, key, x.mul(splitFirstTile, BK)),
        b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::ult, key, x.mul(splitEndTile, BK)));
    x.guarded(holds, [&] {
      for (int64_t start = 0; start < D; start += cfg.threads) {
        Value d = x.add(tid, start);
        Value valid = start + cfg.threads > D ? x.lt(d, D) : Value();
        x.guarded(valid, [&] {
          for (int64_t kv = 0; kv < 2; ++kv) {
            Value value = x.convert(newElement(kv, d), cfg.storage);
            mlir::memref::StoreOp::create(b, loc, value, kv == 0 ? k : v, mlir::ValueRange{head, key, d});
          }
        });
      }
    });
  }

  // Cooperative staging of one tile of K and V rows into shared memory:
  // rows past T read row T-1 (their scores are masked, their weights 0).
  void stage(Value memref, Value tile, Value firstKey, int64_t width) {
    int64_t vectorsPerRow = D / width;
    int64_t vectors = BK * vectorsPerRow;
    for (int64_t start = 0; start < vectors; start += cfg.threads) {
      Value linear = x.add(tid, start);
      Value valid = (start + cfg.threads > vectors) ? x.lt(linear, vectors) : Value();
      x.guarded(valid, [&] {
        Value r = x.div(linear, vectorsPerRow);
        Value col = x.mul(x.rem(linear, vectorsPerRow), width);
        Value key = x.add(firstKey, r);
        if (TK % BK != 0)
          key = x.min(key, TK - 1);
        Value value = x.load(memref, {head, key, col}, width, width > 1, cfg.storageBytes);
        x.store(value, tile, {r, col}, width, width > 1, cfg.storageBytes);
      });
    }
  }

  // The body of the loop over key tiles: the tile staged, its scores
  // through the prologue, then the row's max, sum and accumulator updated
  // (for a lone row, a group of keys at a time: kLoneRowKeysPerGroup).
  mlir::LogicalResult buildTileStep(mlir::scf::ForOp loop) {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    elemental->pushScope();
    if (mask)
      mask->pushScope();
    Value t = loop.getInductionVar();
    llvm::SmallVector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
    Value firstKey = x.mul(t, BK);
    mlir::gpu::BarrierOp::create(b, loc); // the previous tile is read by all
    // The tile prefetchedTiles ahead into L2 while this one is read (the
    // splits of one tile have none).
    if (cfg.prefetchedTiles > 0 && (cfg.splits > 1 ? cfg.tilesPerSplit : cfg.keyTiles) > 1)
      prefetchTiles(x.add(t, cfg.prefetchedTiles), loop.getUpperBound(), 1);
    stage(k, kTile, firstKey, cfg.widthK);
    stage(v, vTile, firstKey, cfg.widthV);
    mlir::gpu::BarrierOp::create(b, loc);

    mlir::FailureOr<llvm::SmallVector<Value>> yielded = mlir::failure();
    const int64_t G = keysPerGroup();
    if (G == BK) {
      yielded = foldKeys(carried, firstKey, x.c(0), BK, /*mayOverrun=*/TK % BK != 0);
    } else {
      // The groups up to the position's (all of them past the keys' end,
      // or without a position), at least one: the tile holds a key up to it.
      Value groups = x.c(BK / G);
      if (cfg.positionArgument >= 0) {
        Value sequence = cfg.rowsPerPosition > 0 ? x.div(head, cfg.rowsPerPosition) : Value();
        Value used =
            unitsUpToPosition(b, loc, f.getArgument(cfg.positionArgument), G, cfg.keyTiles * (BK / G), sequence);
        groups = b.createOrFold<mlir::arith::MinSIOp>(
            loc, groups,
            b.createOrFold<mlir::arith::MaxSIOp>(loc, x.c(1),
                                                 b.createOrFold<mlir::arith::SubIOp>(loc, used, x.mul(t, BK / G))));
      }
      auto inner = mlir::scf::ForOp::create(b, loc, x.c(0), groups, x.c(1), carried);
      mlir::OpBuilder::InsertionGuard innerGuard(b);
      b.setInsertionPointToStart(inner.getBody());
      elemental->pushScope();
      if (mask)
        mask->pushScope();
      llvm::SmallVector<Value> state(inner.getRegionIterArgs().begin(), inner.getRegionIterArgs().end());
      Value firstRow = x.mul(inner.getInductionVar(), G);
      mlir::FailureOr<llvm::SmallVector<Value>> grouped =
          foldKeys(state, x.add(firstKey, firstRow), firstRow, G, /*mayOverrun=*/TK % BK != 0);
      if (mlir::failed(grouped))
        return mlir::failure();
      elemental->popScope();
      if (mask)
        mask->popScope();
      mlir::scf::YieldOp::create(b, loc, *grouped);
      b.setInsertionPointAfter(inner);
      yielded = llvm::SmallVector<Value>(inner.getResults());
    }
    if (mlir::failed(yielded))
      return mlir::failure();
    elemental->popScope();
    if (mask)
      mask->popScope();
    mlir::scf::YieldOp::create(b, loc, *yielded);
    return mlir::success();
  }

  int64_t keysPerGroup() const {
    bool loneRowOneTile = cfg.length == 1 && cfg.splits > 1 && cfg.tilesPerSplit == 1;
    return loneRowOneTile && BK > kLoneRowKeysPerGroup && BK % kLoneRowKeysPerGroup == 0 ? kLoneRowKeysPerGroup : BK;
  }

  // `count` keys of the staged tile from its row `firstRow` (key
  // `firstKey`) folded into the row's state (max, sum, accumulator).
  mlir::FailureOr<llvm::SmallVector<Value>> foldKeys(llvm::ArrayRef<Value> state, Value firstKey, Value firstRow,
                                                     int64_t count, bool mayOverrun) {
    Value rowMax = state[0], rowSum = state[1];
    llvm::SmallVector<Value> acc(state.begin() + 2, state.end());
    llvm::SmallVector<Value> logits, keys, rows;
    Value negInf = x.fconst(element, -std::numeric_limits<double>::infinity());
    Value tileMax = negInf;
    for (int64_t jj = 0; jj < count; ++jj) {
      Value tileRow = x.add(firstRow, jj);
      rows.push_back(tileRow);
      Value score = scoreOf(tileRow);
      Value key = x.add(firstKey, jj);
      keys.push_back(key);
      mlir::FailureOr<Value> logit =
          logitOf(key, score, negInf, mayOverrun && (jj > 0 || cfg.splits > 1 || count < BK));
      if (mlir::failed(logit))
        return mlir::failure();
      logits.push_back(*logit);
      tileMax = mlir::arith::MaximumFOp::create(b, loc, tileMax, *logit);
    }
    Value newMax = mlir::arith::MaximumFOp::create(b, loc, rowMax, tileMax);
    return foldTile(rowMax, rowSum, acc, newMax, negInf, logits, keys, rows);
  }

  // This row's score against key jj of the staged tile: q . k over the
  // lane's chunks, then over the row's lanes.
  Value scoreOf(Value tileRow) {
    Value partial = x.vzero(element, W);
    for (int64_t c = 0; c < cfg.chunks; ++c) {
      Value kv = x.convert(x.load(kTile, {tileRow, chunkStart[c]}, W, true, cfg.storageBytes), element);
      partial = mlir::vector::FMAOp::create(b, loc, qChunks[c], kv, partial);
    }
    Value score = x.extract(partial, 0);
    for (int64_t u = 1; u < W; ++u)
      score = mlir::arith::AddFOp::create(b, loc, score, x.extract(partial, u));
    return sumOverLanes(x, score, cfg.lanes);
  }

  // The logit x of `key` from its score, through the softmax's prologue as
  // traced (the scale, the mask). The prologue may read memory at the key
  // (a mask): where the key may be past the end (`mayOverrun`: the keys
  // are not a whole number of tiles, and this is not the first), it is
  // evaluated at the last one, then masked.
  mlir::FailureOr<Value> logitOf(Value key, Value score, Value negInf, bool mayOverrun) {
    Value logit = evaluatePrologue(*elemental, mask ? &*mask : nullptr, maskGraph, graph, softmax, head, query,
                                   mayOverrun ? x.min(key, TK - 1) : key, score);
    if (!logit)
      return mlir::failure();
    // Keys past the end do not exist.
    if (mayOverrun)
      logit = mlir::arith::SelectOp::create(b, loc, x.lt(key, TK), logit, negInf);
    return logit;
  }

  // The online softmax's step over one tile: the new max `newMax`, the
  // weights exp(x - max) of the tile's keys, the row's sum and accumulator
  // rescaled and added to. What the loop yields: max, sum, accumulator.
  mlir::FailureOr<llvm::SmallVector<Value>> foldTile(Value rowMax, Value rowSum, llvm::ArrayRef<Value> acc,
                                                     Value newMax, Value negInf, llvm::ArrayRef<Value> logits,
                                                     llvm::ArrayRef<Value> keys, llvm::ArrayRef<Value> tileRows) {
    // Exponents are taken against the new max, or against 0 while every key
    // so far is -inf (a mask of -inf): exp(-inf - -inf) would be NaN where
    // the row's later keys still make the softmax finite.
    Value allMasked = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, newMax, negInf);
    Value reference = mlir::arith::SelectOp::create(b, loc, allMasked, x.fconst(element, 0.0), newMax);
    // The traced exp(x - max), with the row's max taken to be the reference.
    elemental->define(softmax.max, {head, query}, reference);
    Value correction = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, rowMax, reference));
    Value tileSum = x.fconst(element, 0.0);
    llvm::SmallVector<Value> next;
    for (int64_t c = 0; c < cfg.chunks; ++c)
      next.push_back(mlir::arith::MulFOp::create(b, loc, acc[c], x.broadcast(correction, W)));
    for (int64_t jj = 0; jj < static_cast<int64_t>(keys.size()); ++jj) {
      llvm::SmallVector<Value> at{head, query, keys[jj]};
      elemental->define(softmax.prologue, at, logits[jj]);
      Value weight = elemental->node(softmax.exp, at);
      if (!weight || elemental->failed())
        return mlir::failure();
      tileSum = mlir::arith::AddFOp::create(b, loc, tileSum, weight);
      Value weights = x.broadcast(weight, W);
      for (int64_t c = 0; c < cfg.chunks; ++c) {
        Value vv = x.convert(x.load(vTile, {tileRows[jj], chunkStart[c]}, W, true, cfg.storageBytes), element);
        next[c] = mlir::vector::FMAOp::create(b, loc, weights, vv, next[c]);
      }
    }
    Value newSum =
        mlir::arith::AddFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, rowSum, correction), tileSum);
    llvm::SmallVector<Value> yielded{newMax, newSum};
    yielded.append(next.begin(), next.end());
    return yielded;
  }

  // The row's output acc / l (the traced division), or with split keys this
  // split's partials, combined by the query tile's last split to finish.
  void writeOutput(mlir::scf::ForOp loop) {
    if (cfg.splits > 1)
      return writeSplitOutput(loop);
    writeNormalized(loop, out);
  }

  void writeNormalized(mlir::scf::ForOp loop, Value target) {
    Value sums = x.broadcast(loop.getResult(1), W);
    x.guarded(rowValid, [&] {
      for (int64_t c = 0; c < cfg.chunks; ++c) {
        Value value = x.convert(mlir::arith::DivFOp::create(b, loc, loop.getResult(2 + c), sums), cfg.outElement);
        x.store(value, target, {head, row, chunkStart[c]}, W, cfg.widthO >= W, cfg.outBytes);
      }
    });
  }

  // With split keys (codegen/split_completion.h): the splits in use
  // (those holding a key up to the run-time position) write their
  // partials and count themselves done; the last combines them into the
  // output. A split alone in use writes the output itself.
  void writeSplitOutput(mlir::scf::ForOp loop) {
    Value finalOut = f.getArgument(cfg.outArgument);
    Value position = cfg.positionArgument >= 0 ? f.getArgument(cfg.positionArgument) : Value();
    Value sequence = position && cfg.rowsPerPosition > 0 ? x.div(head, cfg.rowsPerPosition) : Value();
    int64_t keysPerSplit = cfg.tilesPerSplit * BK;
    Value used = position ? unitsUpToPosition(b, loc, position, keysPerSplit, cfg.splits, sequence) : x.c(cfg.splits);
    auto cmp = [&](mlir::arith::CmpIPredicate predicate, Value l, Value r) {
      return b.createOrFold<mlir::arith::CmpIOp>(loc, predicate, l, r);
    };
    Value shared;
    if (position) {
      Value alone = cmp(mlir::arith::CmpIPredicate::eq, used, x.c(1));
      x.guarded(b.createOrFold<mlir::arith::AndIOp>(loc, alone, cmp(mlir::arith::CmpIPredicate::eq, split, x.c(0))),
                [&] { writeNormalized(loop, finalOut); });
      Value inUse = cmp(mlir::arith::CmpIPredicate::ult, split, used);
      shared = b.createOrFold<mlir::arith::AndIOp>(loc, inUse, cmp(mlir::arith::CmpIPredicate::ne, used, x.c(1)));
    }
    x.guarded(shared, [&] {
      writePartials(loop);
      completeInLastBlock(b, loc, f, f.getWorkgroupAttributions()[2], tid, x.div(blockIdX(b, loc), cfg.splits),
                          cfg.heads * cfg.queryTiles, used, [&] { combineTile(finalOut, used); });
    });
  }

  // This split's partials: acc, then (lane 0) the max and the sum.
  void writePartials(mlir::scf::ForOp loop) {
    x.guarded(rowValid, [&] {
      for (int64_t c = 0; c < cfg.chunks; ++c)
        x.store(loop.getResult(2 + c), out, {head, row, split, chunkStart[c]}, W, true, cfg.elementBytes);
      Value first = b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::eq, lane, x.c(0));
      x.guarded(first, [&] {
        mlir::memref::StoreOp::create(b, loc, loop.getResult(0), out, mlir::ValueRange{head, row, split, x.c(D)});
        mlir::memref::StoreOp::create(b, loc, loop.getResult(1), out, mlir::ValueRange{head, row, split, x.c(D + 1)});
      });
    });
  }

  // The query tile's output from its splits' partials (split_combine.h's
  // formula), by the threads as they hold the rows: a row's lanes take its
  // splits in turn (lane j splits j, j + lanes, ...), each scale
  // exp(m_s - M) taken once, into shared memory; then each lane adds its
  // slice of the head dimension over the splits. Splits past `used` are
  // not in use: their partials (not written) are read as zeros.
  void combineTile(Value finalOut, Value used) {
    Value scales = f.getWorkgroupAttributions()[3];
    Value negInf = x.fconst(element, -std::numeric_limits<double>::infinity());
    Value zero = x.fconst(element, 0.0);
    Value tileRow = x.div(tid, cfg.lanes);
    auto inUse = [&](Value s) {
      return b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::ult, s, used);
    };
    const int64_t S = cfg.splits, perLane = llvm::divideCeilSigned(S, cfg.lanes);
    llvm::SmallVector<Value> splitIndex, maxima, sums;
    Value rowMax = negInf;
    for (int64_t i = 0; i < perLane; ++i) {
      Value s = x.add(lane, i * cfg.lanes);
      Value taken = inUse(s);
      if ((i + 1) * cfg.lanes > S) {
        taken = b.createOrFold<mlir::arith::AndIOp>(loc, taken, x.lt(s, S));
        s = x.min(s, S - 1);
      }
      Value m = mlir::memref::LoadOp::create(b, loc, out, mlir::ValueRange{head, query, s, x.c(D)});
      Value l = mlir::memref::LoadOp::create(b, loc, out, mlir::ValueRange{head, query, s, x.c(D + 1)});
      splitIndex.push_back(s);
      maxima.push_back(mlir::arith::SelectOp::create(b, loc, taken, m, negInf));
      sums.push_back(mlir::arith::SelectOp::create(b, loc, taken, l, zero));
      rowMax = mlir::arith::MaximumFOp::create(b, loc, rowMax, maxima.back());
    }
    rowMax = maxOverLanes(x, rowMax, cfg.lanes);
    // An empty split (every key masked, or not in use) weighs nothing.
    Value rowSum = zero;
    for (int64_t i = 0; i < perLane; ++i) {
      Value empty = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, maxima[i], negInf);
      Value scale = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, maxima[i], rowMax));
      scale = mlir::arith::SelectOp::create(b, loc, empty, zero, scale);
      Value owned = (i + 1) * cfg.lanes > S ? x.lt(x.add(lane, i * cfg.lanes), S) : Value();
      x.guarded(owned, [&] {
        mlir::memref::StoreOp::create(b, loc, scale, scales, mlir::ValueRange{tileRow, splitIndex[i]});
      });
      rowSum = mlir::arith::AddFOp::create(b, loc, rowSum, mlir::arith::MulFOp::create(b, loc, sums[i], scale));
    }
    rowSum = sumOverLanes(x, rowSum, cfg.lanes);
    mlir::gpu::BarrierOp::create(b, loc); // the row's scales
    Value sumsVector = x.broadcast(rowSum, W);
    for (int64_t c = 0; c < cfg.chunks; ++c) {
      Value total = x.vzero(element, W);
      for (int64_t s = 0; s < S; ++s) {
        Value part = x.load(out, {head, query, x.c(s), chunkStart[c]}, W, true, cfg.elementBytes);
        if (mlir::Value taken = inUse(x.c(s)); !mlir::matchPattern(taken, mlir::m_One()))
          part = mlir::arith::SelectOp::create(b, loc, taken, part, x.vzero(element, W));
        Value scale = mlir::memref::LoadOp::create(b, loc, scales, mlir::ValueRange{tileRow, x.c(s)});
        total = mlir::vector::FMAOp::create(b, loc, x.broadcast(scale, W), part, total);
      }
      Value value = x.convert(mlir::arith::DivFOp::create(b, loc, total, sumsVector), cfg.outElement);
      x.guarded(rowValid, [&] {
        x.store(value, finalOut, {head, row, chunkStart[c]}, W, cfg.widthO >= W, cfg.outBytes);
      });
    }
  }

  mlir::OpBuilder &b;
  mlir::gpu::GPUFuncOp f;
  mlir::Location loc;
  Builder x;
  const Config &cfg;
  const FusionGraph &graph;
  const Softmax &softmax;
  const FusionGraph *maskGraph;
  Value q, k, v, out, kTile, vTile;
  mlir::Type element;
  const int64_t W, D, T, TK, BK;
  // makeElementalEmitters: the anchor kernel-wide values go before, and
  // the emitters of the softmax's fusion and of its mask's.
  mlir::Operation *anchor = nullptr;
  std::optional<ElementalEmitter> elemental, mask;
  // placeBlock and loadQueryRows.
  Value tid, split, head, queryTile, lane, row, rowValid, query;
  llvm::SmallVector<Value> chunkStart, qChunks;
};

} // namespace

mlir::LogicalResult buildAttentionBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg,
                                       const FusionGraph &graph, const Softmax &softmax, const FusionGraph *maskGraph) {
  return AttentionBody(b, f, cfg, graph, softmax, maskGraph).build();
}

mlir::FailureOr<Config> configFor(const AttentionMatch &match, std::string &why) {
  mlir::linalg::LinalgOp scoresOp = match.scoresOp, valuesOp = match.valuesOp;
  mlir::func::CallOp valuesCall = match.valuesCall;
  auto qType = mlir::dyn_cast<mlir::MemRefType>(scoresOp.getDpsInputs()[0].getType());
  auto ktType = mlir::dyn_cast<mlir::MemRefType>(scoresOp.getDpsInputs()[1].getType());
  auto vType = mlir::dyn_cast<mlir::MemRefType>(valuesOp.getDpsInputs()[1].getType());
  // The values call's output, or the view of the merged heads it is
  // written through (matchHeadsMerge).
  auto oType = match.mergeCall ? match.mergedOutType
                               : mlir::dyn_cast<mlir::MemRefType>(valuesCall.getOperand(match.valuesOut).getType());
  if (!qType || !ktType || !vType || !oType || !qType.hasStaticShape() || !ktType.hasStaticShape() ||
      !vType.hasStaticShape() || !oType.hasStaticShape())
    return why = "operands of dynamic shape", mlir::failure();
  mlir::Type storage = qType.getElementType();
  bool sixteenBit = storage.isBF16() || storage.isF16();
  mlir::Type element = sixteenBit ? mlir::Float32Type::get(storage.getContext()) : storage;
  if (!(element.isF32() || element.isF64()) || ktType.getElementType() != storage ||
      vType.getElementType() != storage || (oType.getElementType() != storage && oType.getElementType() != element) ||
      mlir::cast<mlir::MemRefType>(match.scores.getType()).getElementType() != element)
    return why = "operands that are not all f32, all f64, or all of one 16-bit type with f32 scores", mlir::failure();
  Config cfg;
  cfg.heads = qType.getDimSize(0);
  cfg.length = qType.getDimSize(1);
  cfg.headSize = qType.getDimSize(2);
  cfg.element = element;
  cfg.elementBytes = element.getIntOrFloatBitWidth() / 8;
  cfg.storage = storage;
  cfg.storageBytes = storage.getIntOrFloatBitWidth() / 8;
  cfg.outElement = oType.getElementType();
  cfg.outBytes = cfg.outElement.getIntOrFloatBitWidth() / 8;
  cfg.causal = match.softmax.causal;
  cfg.keys = ktType.getRank() == 3 ? ktType.getDimSize(2) : 0;
  llvm::SmallVector<int64_t> hdk{cfg.heads, cfg.headSize, cfg.keys}, hkd{cfg.heads, cfg.keys, cfg.headSize},
      hqd{cfg.heads, cfg.length, cfg.headSize};
  if (llvm::to_vector(ktType.getShape()) != hdk || llvm::to_vector(vType.getShape()) != hkd ||
      llvm::to_vector(oType.getShape()) != hqd || cfg.keys < 1)
    return why = "Q, K, V and the output do not have matching head shapes", mlir::failure();
  if (cfg.causal && cfg.keys != cfg.length)
    return why = "a causal mask over more keys than queries", mlir::failure();
  if (!oType.getLayout().isIdentity() && !match.mergeCall)
    return why = "an output that is a view", mlir::failure();
  return cfg;
}

bool tensorCoresFit(const Config &cfg, const DeviceDescription &device, std::string &whyNot) {
  if (!(cfg.storage.isBF16() || cfg.storage.isF16()))
    return whyNot = "Q, K and V not in 16 bits", false;
  if (!device.sixteenBitMma)
    return whyNot = device.chip + " has no 16-bit mma.sync", false;
  if (cfg.headSize % kMmaDepth != 0 || cfg.headSize > kTensorCoreMaxHeadSize)
    return whyNot = "a head size that is not a multiple of 16 up to 128", false;
  if (cfg.length < kMmaRows)
    return whyNot = "fewer query rows than one mma's 16", false;
  return true;
}

bool asyncCopiesFit(Config &cfg, int64_t globalWidth, int64_t warpSize) {
  if (cfg.asyncStages == 0)
    return false;
  int64_t groupThreads = cfg.rowsPerBlock / kMmaRows * warpSize;
  int64_t width = std::min(globalWidth, kVectorBytes / cfg.storageBytes);
  while (width >= 2 && (cfg.headSize % width != 0 || cfg.keysPerTile * cfg.headSize / width % groupThreads != 0))
    width /= 2;
  cfg.asyncWidth = width >= 2 ? width : 0;
  return cfg.asyncWidth > 0;
}

namespace {

mlir::LogicalResult chooseTensorCoreLaunch(Config &cfg, const DeviceDescription &device, std::string &why,
                                           const LaunchOverrides &overrides) {
  cfg.tensorCores = true;
  cfg.lanes = 4; // a C fragment's row is held by four lanes, two elements each
  cfg.width = 2;
  cfg.chunks = cfg.headSize / 8;
  cfg.rowsPerBlock = kTensorCoreRowsPerBlock;
  while (cfg.rowsPerBlock > kMmaRows &&
         cfg.heads * llvm::divideCeilSigned(cfg.length, cfg.rowsPerBlock) < kMinBlocksPerSm * device.smCount)
    cfg.rowsPerBlock /= 2;
  while (cfg.rowsPerBlock > kMmaRows && cfg.rowsPerBlock / 2 >= cfg.length)
    cfg.rowsPerBlock /= 2;
  if (overrides.rowsPerBlock > 0) {
    if (overrides.rowsPerBlock % kMmaRows != 0)
      return why = "tc-rows-per-block must be a multiple of 16", mlir::failure();
    cfg.rowsPerBlock = overrides.rowsPerBlock;
  }
  cfg.queryTiles = llvm::divideCeilSigned(cfg.length, cfg.rowsPerBlock);
  int64_t roundedKeys = llvm::divideCeilSigned(cfg.keys, kMmaDepth) * kMmaDepth;
  int64_t warps = cfg.heads * cfg.queryTiles * (cfg.rowsPerBlock / kMmaRows);
  cfg.keyGroups = 1;
  while (cfg.keyGroups < kMaxKeyGroups && warps * cfg.keyGroups < kTensorCoreWarpsPerSm * device.smCount &&
         2 * cfg.keyGroups * kGroupKeysPerTile <= roundedKeys)
    cfg.keyGroups *= 2;
  if (overrides.keyGroups > 0) {
    if (!llvm::isPowerOf2_64(overrides.keyGroups))
      return why = "tc-key-groups must be a power of two", mlir::failure();
    cfg.keyGroups = overrides.keyGroups;
  }
  cfg.keysPerTile = std::min(cfg.keyGroups > 1 ? kGroupKeysPerTile : kTensorCoreKeysPerTile, roundedKeys);
  if (overrides.keysPerTile > 0) {
    if (overrides.keysPerTile % kMmaDepth != 0)
      return why = "tc-keys-per-tile must be a multiple of 16", mlir::failure();
    cfg.keysPerTile = overrides.keysPerTile;
  }
  cfg.blocksPerSm = overrides.blocksPerSm;
  if (overrides.stages < 0 || overrides.stages == 1)
    return why = "tc-stages must be 2 or more (0: the heuristic's)", mlir::failure();
  cfg.asyncStages = overrides.asyncCopy ? (overrides.stages > 0 ? overrides.stages : kAsyncStages) : 0;
  if (overrides.scoresAhead && cfg.asyncStages > 0) {
    if (overrides.stages > 0 && overrides.stages < kScoresAheadMinStages)
      return why = "tc-scores-ahead needs tc-stages of 3 or more", mlir::failure();
    cfg.scoresAhead = true;
    if (overrides.stages == 0)
      cfg.asyncStages = kScoresAheadStages;
  }
  int64_t elementsPerWord = 4 / cfg.storageBytes;
  cfg.kTileRow = paddedWords(cfg.headSize / elementsPerWord, kKeyRowBankOffsetWords) * elementsPerWord;
  cfg.vPairRow = paddedWords(cfg.headSize, kValuePairRowBankOffsetWords) * elementsPerWord;
  if (cfg.asyncStages > 0)
    cfg.kTileRow = cfg.headSize + kAsyncRowPadBytes / cfg.storageBytes;
  auto sharedBytes = [&] {
    int64_t tiles = cfg.asyncStages > 0
                        ? cfg.asyncStages * cfg.keyGroups * 2 * cfg.keysPerTile * cfg.kTileRow
                        : cfg.keyGroups * (cfg.keysPerTile * cfg.kTileRow + cfg.keysPerTile / 2 * cfg.vPairRow);
    int64_t partials =
        cfg.keyGroups > 1 ? cfg.rowsPerBlock * (cfg.headSize + 2 * kLanesPerMmaRow) * cfg.elementBytes : 0;
    return tiles * cfg.storageBytes + partials;
  };
  bool fits = false;
  if (cfg.asyncStages > 0) {
    // Fewer keys a tile (unless fixed), then fewer key groups (unless
    // fixed); through registers where the stages still do not fit.
    // Where the stages of the heuristic's tiles do not fit the static 48
    // KiB, they go to dynamic shared memory (up to the device's opt-in
    // limit) before the tiles shrink: at T=1024, 12 heads of 64, bf16 on
    // the H200, the stages in static memory with 16-key tiles took 33.2 µs,
    // in dynamic memory with 32-key tiles 27.5 µs, and the tiles through
    // registers 28.5 (bench/scripts/time-attention.sh, one run).
    cfg.dynamicShared = overrides.dynamicShared || (overrides.keysPerTile == 0 && overrides.keyGroups == 0 &&
                                                    sharedBytes() > device.sharedMemoryPerBlock &&
                                                    device.sharedMemoryPerBlockOptIn > device.sharedMemoryPerBlock);
    int64_t budget = cfg.dynamicShared ? device.sharedMemoryPerBlockOptIn : device.sharedMemoryPerBlock;
    while (sharedBytes() > budget && overrides.keysPerTile == 0 && cfg.keysPerTile > kMinAsyncKeysPerTile)
      cfg.keysPerTile /= 2;
    while (sharedBytes() > budget && overrides.keyGroups == 0 && cfg.keyGroups > 1)
      cfg.keyGroups /= 2;
    fits = sharedBytes() <= budget && asyncCopiesFit(cfg, kVectorBytes / cfg.storageBytes, device.warpSize);
    if (!fits) {
      LaunchOverrides throughRegisters = overrides;
      throughRegisters.asyncCopy = false;
      return chooseTensorCoreLaunch(cfg, device, why, throughRegisters);
    }
  } else {
    cfg.dynamicShared = false;
  }
  // Fewer key groups, then fewer keys a tile, until they fit.
  int64_t budget = cfg.dynamicShared ? device.sharedMemoryPerBlockOptIn : device.sharedMemoryPerBlock;
  while (sharedBytes() > budget && cfg.keyGroups > 1)
    cfg.keyGroups /= 2;
  while (sharedBytes() > budget && cfg.keysPerTile > kMmaDepth)
    cfg.keysPerTile /= 2;
  if (sharedBytes() > budget)
    return why = "the K and V tiles do not fit shared memory", mlir::failure();
  cfg.threads = cfg.rowsPerBlock / kMmaRows * cfg.keyGroups * device.warpSize;
  if (cfg.threads > device.maxThreadsPerBlock)
    return why = "more threads than a block holds (" + std::to_string(cfg.threads) + ")", mlir::failure();
  cfg.keyTiles = llvm::divideCeilSigned(cfg.keys, cfg.keysPerTile);
  cfg.splits = 1;
  cfg.tilesPerSplit = cfg.keyTiles;
  cfg.partialStride = cfg.headSize + kVectorBytes / cfg.elementBytes;
  bool snake = overrides.snakeOrder < 0 ? kSnakeCausalTiles : overrides.snakeOrder > 0;
  cfg.snakeRoundBlocks = snake && cfg.causal && cfg.positionArgument < 0 && cfg.queryTiles > 1 &&
                                 cfg.heads * cfg.queryTiles > device.smCount
                             ? device.smCount
                             : 0;
  return mlir::success();
}

} // namespace

llvm::SmallVector<mlir::MemRefType, 3> workgroupBuffers(const Config &cfg, mlir::MLIRContext *context) {
  auto space = mlir::gpu::AddressSpaceAttr::get(context, mlir::gpu::AddressSpace::Workgroup);
  auto tile = [&](int64_t rows, int64_t columns, mlir::Type element) {
    return mlir::MemRefType::get({rows, columns}, element, mlir::MemRefLayoutAttrInterface{}, space);
  };
  if (!cfg.tensorCores) {
    llvm::SmallVector<mlir::MemRefType, 3> buffers{tile(cfg.keysPerTile, cfg.headSize, cfg.storage),
                                                   tile(cfg.keysPerTile, cfg.headSize, cfg.storage)};
    if (cfg.splits > 1) {
      buffers.push_back(completionFlagType(context));
      buffers.push_back(tile(cfg.rowsPerBlock, cfg.splits, cfg.element));
    }
    return buffers;
  }
  llvm::SmallVector<mlir::MemRefType, 3> buffers;
  if (cfg.asyncStages > 0) {
    int64_t rows = cfg.asyncStages * cfg.keyGroups * cfg.keysPerTile;
    buffers = {tile(rows, cfg.kTileRow, cfg.storage), tile(rows, cfg.kTileRow, cfg.storage)};
  } else {
    buffers = {tile(cfg.keyGroups * cfg.keysPerTile, cfg.kTileRow, cfg.storage),
               tile(cfg.keyGroups * cfg.keysPerTile / 2, cfg.vPairRow, cfg.storage)};
  }
  if (cfg.keyGroups > 1)
    buffers.push_back(tile(cfg.rowsPerBlock, cfg.headSize + 2 * kLanesPerMmaRow, cfg.element));
  return buffers;
}

llvm::SmallVector<int64_t, 3> dynamicSharedOffsets(const Config &cfg, mlir::MLIRContext *context) {
  llvm::SmallVector<int64_t, 3> offsets;
  int64_t end = 0;
  for (mlir::MemRefType buffer : workgroupBuffers(cfg, context)) {
    offsets.push_back(end);
    int64_t bytes = buffer.getNumElements() * buffer.getElementTypeBitWidth() / 8;
    end += llvm::divideCeilSigned(bytes, kVectorBytes) * kVectorBytes;
  }
  return offsets;
}

int64_t dynamicSharedBytes(const Config &cfg, mlir::MLIRContext *context) {
  llvm::SmallVector<mlir::MemRefType, 3> buffers = workgroupBuffers(cfg, context);
  if (buffers.empty())
    return 0;
  mlir::MemRefType last = buffers.back();
  return dynamicSharedOffsets(cfg, context).back() + last.getNumElements() * last.getElementTypeBitWidth() / 8;
}

mlir::LogicalResult chooseLaunch(Config &cfg, const DeviceDescription &device, bool tensorCores, std::string &why,
                                 const LaunchOverrides &overrides) {
  if (tensorCores)
    return chooseTensorCoreLaunch(cfg, device, why, overrides);
  cfg.lanes = 1;
  // A query row alone per head (a decode step) is alone in its block,
  // whose other lanes would idle: it gets a whole warp's lanes (as many as
  // divide the head size), so each key's dot product is a few instructions
  // per lane and a butterfly, not a long chain of fused multiply-adds on
  // four lanes. The split block's single warp runs latency-bound, one
  // instruction at a time, so fewer instructions on its path shorten it.
  bool aloneRow = cfg.length == 1;
  while (cfg.lanes < device.warpSize && (aloneRow || cfg.headSize / cfg.lanes > kHeadElementsPerLane) &&
         cfg.headSize % (cfg.lanes * 2) == 0)
    cfg.lanes *= 2;
  cfg.width = kVectorBytes / cfg.elementBytes;
  while (cfg.width > 1 && cfg.headSize % (cfg.lanes * cfg.width) != 0)
    cfg.width /= 2;
  cfg.chunks = cfg.headSize / (cfg.lanes * cfg.width);
  // Rows per block: as many as fill the GPU with kMinBlocksPerSm blocks
  // per SM, from kQueryRowsPerBlock down.
  cfg.rowsPerBlock = kQueryRowsPerBlock;
  while (cfg.rowsPerBlock > kMinQueryRowsPerBlock &&
         cfg.heads * llvm::divideCeilSigned(cfg.length, cfg.rowsPerBlock) < kMinBlocksPerSm * device.smCount)
    cfg.rowsPerBlock /= 2;
  // Never more rows than the sequence (rounded to a warp's worth of rows).
  int64_t rowsPerWarp = std::max<int64_t>(1, device.warpSize / cfg.lanes);
  while (cfg.rowsPerBlock > rowsPerWarp && cfg.rowsPerBlock / 2 >= cfg.length)
    cfg.rowsPerBlock /= 2;
  cfg.threads = cfg.rowsPerBlock * cfg.lanes;
  while (cfg.threads > device.maxThreadsPerBlock) {
    cfg.rowsPerBlock /= 2;
    cfg.threads = cfg.rowsPerBlock * cfg.lanes;
  }
  cfg.queryTiles = llvm::divideCeilSigned(cfg.length, cfg.rowsPerBlock);
  cfg.keysPerTile = kScoreRegistersPerLane * 4 / cfg.elementBytes;
  auto sharedBytes = [&] { return 2 * cfg.keysPerTile * cfg.headSize * cfg.storageBytes; };
  while (sharedBytes() > device.sharedMemoryPerBlock && cfg.keysPerTile > kMinKeysPerTile)
    cfg.keysPerTile /= 2;
  if (sharedBytes() > device.sharedMemoryPerBlock)
    return why = "the K and V tiles do not fit shared memory", mlir::failure();
  int64_t maxWidth = kVectorBytes / cfg.elementBytes;
  cfg.keyTiles = llvm::divideCeilSigned(cfg.keys, cfg.keysPerTile);
  // Split the keys when the blocks would leave SMs idle (never causal
  // attention: its blocks' key ranges differ by design).
  if (!cfg.causal) {
    int64_t blocks = cfg.heads * cfg.queryTiles;
    int64_t wanted = llvm::divideCeilSigned(kSplitBlocksPerSm * device.smCount, blocks);
    int64_t most = std::max<int64_t>(1, cfg.keyTiles / kMinKeyTilesPerSplit);
    if (cfg.rowsPerPosition > 0)
      wanted = std::max(wanted, overrides.batchedMinSplits > 0 ? overrides.batchedMinSplits : kBatchedStepMinSplits);
    cfg.splits = std::clamp<int64_t>(wanted, 1, most);
    cfg.tilesPerSplit = llvm::divideCeilSigned(cfg.keyTiles, cfg.splits);
    cfg.splits = llvm::divideCeilSigned(cfg.keyTiles, cfg.tilesPerSplit);
  }
  cfg.partialStride = cfg.headSize + maxWidth;
  return mlir::success();
}

void choosePrefetch(Config &cfg, const DeviceDescription &device, int64_t fixed) {
  cfg.prefetchedTiles = 0;
  if (cfg.tensorCores || cfg.positionArgument < 0 || !device.programmaticDependentLaunch || fixed < 0)
    return;
  int64_t splitTiles = cfg.splits > 1 ? cfg.tilesPerSplit : cfg.keyTiles;
  if (fixed > 0) {
    cfg.prefetchedTiles = std::min(fixed, splitTiles);
    return;
  }
  // A split of one tile (a lone row's: one sequence) prefetches it.
  // Measured on the H200 (bf16, alternated with the build without the
  // prefetch): the step after 10 tokens 0.271-0.274 ms against
  // 0.280-0.282, after 1000 0.308-0.316 against 0.313-0.320.
  //
  // Splits of several tiles (batched decoding) are not prefetched unless
  // kPrefetchSeveralTileSplits: every tile of such a split prefetched
  // before the wait took a batch of 32 after 1000 tokens (768 blocks of 16
  // tiles, 98 MB a layer, twice L2) to 1.154-1.170 ms against 1.077
  // without, its lines evicted before they were read. The bounded form is
  // built and checked on the CPU simulator but not yet timed: a split's
  // first tiles while the launch's lines fit 1 / kPrefetchL2Divisor of L2
  // (at least one), then at each tile the one that many ahead.
  constexpr bool kPrefetchSeveralTileSplits = false;
  constexpr int64_t kPrefetchL2Divisor = 4;
  if (splitTiles > 1 && !kPrefetchSeveralTileSplits)
    return;
  int64_t blocks = cfg.heads * cfg.queryTiles * cfg.splits;
  int64_t tileBytes = 2 * cfg.keysPerTile * cfg.headSize * cfg.storageBytes; // K and V
  int64_t fitting = device.l2CacheBytes / kPrefetchL2Divisor / std::max<int64_t>(1, blocks * tileBytes);
  cfg.prefetchedTiles = std::clamp<int64_t>(fitting, 1, splitTiles);
}

int64_t vectorWidthAlongLast(mlir::MemRefType type, int64_t maxElements) {
  llvm::SmallVector<int64_t> strides;
  int64_t offset;
  if (mlir::failed(type.getStridesAndOffset(strides, offset)) || mlir::ShapedType::isDynamic(offset) ||
      llvm::any_of(strides, [](int64_t s) { return mlir::ShapedType::isDynamic(s); }) || strides.back() != 1)
    return 1;
  for (int64_t width = maxElements; width > 1; width /= 2) {
    bool aligned = type.getShape().back() % width == 0 && offset % width == 0;
    for (int64_t d = 0; d + 1 < type.getRank(); ++d)
      if (type.getDimSize(d) > 1 && strides[d] % width != 0)
        aligned = false;
    if (aligned)
      return width;
  }
  return 1;
}

} // namespace mlpipe::emitters::fused_attention
