// The fused attention kernel on tensor cores (attention_kernel.h), for Q,
// K and V stored in bf16 or f16: the flash-attention scheme with both
// products on mma.sync (m16n8k16, f32 accumulation) and the online softmax
// in f32 registers.
//
// A warp owns 16 query rows; a block's warps share each tile of K and V
// that streams through shared memory. Lane l of a warp holds, as mma.sync
// lays its fragments out (g = l / 4, t = l % 4):
//   Q  (A of S = Q K^T)   rows g and g+8, head elements 2t, 2t+1 (+8) of
//                         each 16-element step: in registers all along;
//   S  (C of S)           rows g and g+8, keys 8n + 2t, 2t+1 of each
//                         8-key slice n of the tile;
//   P  (A of O = P V)     S's own registers, rounded to the stored type: the
//                         C fragments of slices 2j and 2j+1 are exactly the
//                         A fragment of keys 16j .. 16j+15;
//   O  (C of O)           rows g and g+8, head elements 8n + 2t, 2t+1.
// Each row's max is combined over the four lanes holding it (two xor
// shuffles); its sum stays a per-lane partial until the end.
//
// A block walks its key tiles one after another, so its longest walk
// (causal: the last query rows against every key) bounds the kernel; where
// the grid has few warps, the block's tiles are dealt to groups of warps
// (tile i to group i mod keyGroups), each covering all the block's rows
// with its own part of shared memory, and the groups' max, sum and output
// are combined in turn through shared memory at the end.
//
// K and V tiles reach shared memory in one of two ways.
//
// By cp.async (Config::asyncStages = P stages, the default where they fit
// the static shared memory, or with Config::dynamicShared the device's
// opt-in limit of dynamic shared memory, and K and V are read as
// vectors), so that the next tiles load while the current ones are
// computed, through no register:
//
//   cp.async rounds 0 .. P-2 into stages 0 .. P-2, a group each
//   for each round r of the group's tiles:
//     wait until at most P-2 groups are pending; barrier
//                         (round r has landed, and every thread is done
//                          with round r-1, whose stage is overwritten next)
//     cp.async round r+P-1 into stage (r+P-1) mod P, a group
//     the products and softmax step of round r from stage r mod P
//   wait for every group
//
// With the scores ahead (Config::scoresAhead, P >= 3), round r+1's copies
// are waited for at round r too, and its Q K^T is issued right after the
// copies of round r+P-1, before round r's softmax and P V: the scores of
// the next round are independent of this round's exponentials, so their
// mma.sync fill the waits of the softmax's dependent chain. Round 0's
// scores are computed before the loop; each round carries the next's.
//
// K and V both as [keys, D + pad] per stage and key group: B of S by
// ldmatrix.x4 (8 keys by 32 head elements: B of two 16-element steps), B
// of O by ldmatrix.x4.trans (16 keys by 16 head elements: B of two
// 8-element tiles). Keys past the block's tiles or past the last key are
// zero-filled, not read (masked scores, zero weights). Each row is padded
// by 16 bytes (kAsyncRowPadBytes): an odd multiple of 16 bytes past a
// multiple of 128, so the 8 rows of an 8x8 matrix fall in 8 different
// groups of 4 banks, and every row stays 16-byte aligned as cp.async and
// ldmatrix need.
//
// Through registers otherwise (two barriers a tile): K as [keys, D + pad]
// (B of S reads key 8n+g, elements 2t, 2t+1: one 32-bit load); V as pairs
// of keys [keys / 2, 2 D + pad], the values of keys 2i and 2i+1 side by
// side per head element, so that B of O (keys 2t, 2t+1 at element g) is
// one 32-bit load too. The pads put the 32 lanes' loads in 32 different
// banks.
#include "attention/attention_kernel.h"
#include "attention/kernel_builder.h"
#include "attention/split_combine.h"
#include "emitters/fusion_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <functional>
#include <limits>
#include <optional>

namespace mlpipe::emitters::fused_attention {

namespace {

constexpr int64_t kLanesPerRow = 4; // lanes holding one row of a C fragment

class TensorCoreBody {
public:
  TensorCoreBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg, const FusionGraph &graph,
                 const Softmax &softmax, const FusionGraph *maskGraph)
      : b(b), f(f), loc(f.getLoc()), x{b, loc}, cfg(cfg), graph(graph), softmax(softmax), maskGraph(maskGraph),
        q(f.getArgument(0)), k(f.getArgument(1)), v(f.getArgument(2)), out(f.getArgument(3)),
        shared(sharedBuffers(f, cfg)), kTile(shared[0]), vPairs(shared[1]), f32(b.getF32Type()), D(cfg.headSize),
        T(cfg.length), TK(cfg.keys), BK(cfg.keysPerTile), S(cfg.keyGroups), P(cfg.asyncStages),
        groupThreads(cfg.threads / cfg.keyGroups) {}

  mlir::LogicalResult build() {
    if (cfg.blocksPerSm > 0)
      f->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(cfg.blocksPerSm)));
    makeElementalEmitters();
    placeWarp();
    loadQueryFragments();
    llvm::SmallVector<Value> init;
    for (Value query : queries)
      init.push_back(elemental->reductionInit(softmax.max, {head, query}));
    for (int r = 0; r < 2; ++r)
      init.push_back(x.fconst(f32, 0.0));
    Value zero = x.fconst(f32, 0.0);
    for (int64_t i = 0; i < D / kMmaCols * 4; ++i)
      init.push_back(zero);
    // Each key group walks every keyGroups-th tile of the block's.
    tiles = keyTiles();
    Value rounds = x.div(x.add(tiles, S - 1), S);
    stateCount = init.size();
    if (P > 0) {
      placeAsyncCopies();
      for (int64_t s = 0; s + 1 < P; ++s)
        asyncGroup = copyRound(x.c(s));
      if (cfg.scoresAhead) {
        // Round 0's scores before the loop (Config::scoresAhead).
        mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, asyncGroup, b.getI32IntegerAttr(static_cast<int32_t>(P - 2)));
        mlir::gpu::BarrierOp::create(b, loc);
        for (const llvm::SmallVector<Value> &slice : asyncScores(stageRow(x.c(0))))
          init.append(slice.begin(), slice.end());
      }
    }
    auto loop = mlir::scf::ForOp::create(b, loc, x.c(0), rounds, x.c(1), init);
    if (mlir::failed(buildTileStep(loop)))
      return mlir::failure();
    // No copy outlives the kernel (those of rounds past the last included).
    if (P > 0)
      mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, asyncGroup, b.getI32IntegerAttr(0));
    llvm::SmallVector<Value> state(loop.getResults().begin(), loop.getResults().begin() + stateCount);
    // Each row's sum over its four lanes.
    for (int r = 0; r < 2; ++r)
      state[2 + r] = sumOverLanes(x, state[2 + r], kLanesPerRow);
    if (S > 1)
      combineGroups(state);
    else
      writeOutput(state);
    if (elemental->failed())
      return mlir::failure();
    if (anchor->use_empty())
      anchor->erase();
    return mlir::success();
  }

private:
  // The shared buffers (workgroupBuffers): the kernel's workgroup
  // buffers, or views of its dynamic shared memory made at its entry.
  static llvm::SmallVector<Value, 3> sharedBuffers(mlir::gpu::GPUFuncOp f, const Config &cfg) {
    if (!cfg.dynamicShared)
      return llvm::SmallVector<Value, 3>(f.getWorkgroupAttributions());
    mlir::OpBuilder entry = mlir::OpBuilder::atBlockBegin(&f.getBody().front());
    mlir::Location loc = f.getLoc();
    auto space = mlir::gpu::AddressSpaceAttr::get(f.getContext(), mlir::gpu::AddressSpace::Workgroup);
    auto bytesType = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, entry.getI8Type(),
                                           mlir::MemRefLayoutAttrInterface{}, space);
    Value bytes = mlir::gpu::DynamicSharedMemoryOp::create(entry, loc, bytesType);
    llvm::SmallVector<Value, 3> buffers;
    for (auto [type, offset] :
         llvm::zip(workgroupBuffers(cfg, f.getContext()), dynamicSharedOffsets(cfg, f.getContext()))) {
      Value shift = mlir::arith::ConstantIndexOp::create(entry, loc, offset);
      buffers.push_back(mlir::memref::ViewOp::create(entry, loc, type, bytes, shift, mlir::ValueRange{}));
    }
    return buffers;
  }

  void makeElementalEmitters() {
    mlir::OpBuilder top = mlir::OpBuilder::atBlockBegin(&f.getBody().front());
    anchor = mlir::arith::ConstantIndexOp::create(top, loc, 0);
    mlir::OpBuilder entry(anchor);
    mlir::IRMapping extras;
    for (auto [position, argument] : llvm::enumerate(softmax.extraArguments))
      extras.map(graph.function().getArgument(argument), f.getArgument(4 + position));
    elemental.emplace(graph, b, entry, extras);
    if (maskGraph) {
      mlir::IRMapping read;
      for (auto [maskArgument, kernelArgument] : cfg.maskArguments)
        read.map(maskGraph->function().getArgument(maskArgument), f.getArgument(kernelArgument));
      mask.emplace(*maskGraph, b, entry, read);
    }
  }

  // The place in the longest-first order of the block dealt `block`-th:
  // in round r = block / S (S = snakeRoundBlocks) its block i = block % S,
  // or in odd rounds, of n blocks in the round, n - 1 - i.
  Value snakeOrder(Value block) {
    const int64_t S = cfg.snakeRoundBlocks, total = cfg.heads * cfg.queryTiles;
    Value round = x.div(block, S), first = x.mul(round, S);
    Value inRound = x.rem(block, S);
    Value roundBlocks = x.min(b.createOrFold<mlir::arith::SubIOp>(loc, x.c(total), first), S);
    Value reversed = b.createOrFold<mlir::arith::SubIOp>(loc, x.add(roundBlocks, -1), inRound);
    Value odd = b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::ne, x.rem(round, 2), x.c(0));
    return x.add(first, b.createOrFold<mlir::arith::SelectOp>(loc, odd, reversed, inRound));
  }

  // The block's head and query tile; the warp's key group and 16 rows; the
  // lane's group g (its two rows, g and g+8) and place t in it.
  void placeWarp() {
    tid = threadIdX(b, loc);
    keyGroup = x.div(tid, groupThreads);
    groupTid = x.rem(tid, groupThreads);
    kRowBase = x.mul(keyGroup, BK);
    vRowBase = x.mul(keyGroup, BK / 2);
    Value block = blockIdX(b, loc);
    // Query tiles with the most keys first, every head's, so that the
    // longest blocks start in the first wave (heads after the first wave's
    // would otherwise start theirs last: with causal tiles at T=1024 the
    // SMs were busy 62% of the kernel's time); in snake order
    // (Config::snakeRoundBlocks), every other round of blocks reversed.
    if (cfg.snakeRoundBlocks > 0)
      block = snakeOrder(block);
    head = cfg.queryTiles == 1 ? block : x.rem(block, cfg.heads);
    queryTile = cfg.queryTiles == 1
                    ? x.c(0)
                    : b.createOrFold<mlir::arith::SubIOp>(loc, x.c(cfg.queryTiles - 1), x.div(block, cfg.heads));
    Value lane = x.rem(tid, 32);
    group = x.div(lane, kLanesPerRow);
    inGroup = x.rem(lane, kLanesPerRow);
    Value warpInGroup = x.div(groupTid, 32);
    if (cfg.causal && cfg.positionArgument < 0)
      visiblePenalty = visibleCausalPenalty(softmax, graph, maskGraph);
    warpFirstQuery = x.min(x.add(x.mul(queryTile, cfg.rowsPerBlock), x.mul(warpInGroup, kMmaRows)), T - 1);
    for (int r = 0; r < 2; ++r) {
      rowsInBlock.push_back(x.add(x.add(x.mul(warpInGroup, kMmaRows), group), r * 8));
      Value row = x.add(x.mul(queryTile, cfg.rowsPerBlock), rowsInBlock.back());
      rows.push_back(row);
      rowValid.push_back(T % cfg.rowsPerBlock != 0 ? x.lt(row, T) : Value());
      queries.push_back(T % cfg.rowsPerBlock != 0 ? x.min(row, T - 1) : row);
    }
  }

  // Two consecutive 16-bit elements as one 32-bit mma operand: i32 for
  // bf16, vector<2xf16> for f16.
  Value operand(Value pair) {
    if (cfg.storage.isBF16())
      return mlir::LLVM::BitcastOp::create(b, loc, b.getI32Type(), pair);
    return pair;
  }
  Value pairOf(Value first, Value second) {
    auto type = mlir::VectorType::get({2}, cfg.storage);
    return operand(mlir::vector::FromElementsOp::create(
        b, loc, type, mlir::ValueRange{x.convert(first, cfg.storage), x.convert(second, cfg.storage)}));
  }
  Value loadPair(Value memref, llvm::SmallVector<Value> index, bool vectorOk) {
    return operand(x.load(memref, std::move(index), 2, vectorOk, cfg.storageBytes));
  }

  // D += A B on one m16n8k16 tile; `c` the four f32 of C, in place.
  void mma(llvm::ArrayRef<Value> a, llvm::ArrayRef<Value> bb, llvm::SmallVectorImpl<Value> &c) {
    auto ptx = cfg.storage.isBF16() ? mlir::NVVM::MMATypes::bf16 : mlir::NVVM::MMATypes::f16;
    auto result = mlir::LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    Value d = mlir::NVVM::MmaOp::create(
        b, loc, result, a, bb, c, llvm::ArrayRef<int64_t>{kMmaRows, kMmaCols, kMmaDepth}, std::nullopt, std::nullopt,
        std::array<mlir::NVVM::MMATypes, 2>{ptx, ptx},
        std::array<mlir::NVVM::MMALayout, 2>{mlir::NVVM::MMALayout::row, mlir::NVVM::MMALayout::col});
    for (int64_t i = 0; i < 4; ++i)
      c[i] = mlir::LLVM::ExtractValueOp::create(b, loc, d, llvm::ArrayRef<int64_t>{i});
  }

  // Q's A fragments, one per 16 elements of the head: rows g, g+8 and
  // elements 2t, 2t+1, then 8 further.
  void loadQueryFragments() {
    bool vectorOk = cfg.widthQ >= 2;
    for (int64_t s = 0; s < D / kMmaDepth; ++s) {
      std::array<Value, 4> fragment;
      for (int half = 0; half < 2; ++half) {
        Value col = x.add(x.mul(inGroup, 2), s * kMmaDepth + half * 8);
        for (int r = 0; r < 2; ++r)
          fragment[half * 2 + r] = loadPair(q, {head, queries[r], col}, vectorOk);
      }
      queryFragments.push_back(fragment);
    }
  }

  // All key tiles, or (causal) those up to the block's last query, or
  // those up to a run-time position.
  Value keyTiles() {
    Value tiles = x.c(cfg.keyTiles);
    if (cfg.causal) {
      Value lastKey = x.min(x.add(x.mul(queryTile, cfg.rowsPerBlock), cfg.rowsPerBlock), TK);
      tiles = x.div(x.add(lastKey, BK - 1), BK);
    }
    if (cfg.positionArgument >= 0) {
      Value tilesUsed = unitsUpToPosition(b, loc, f.getArgument(cfg.positionArgument), BK, cfg.keyTiles);
      tiles = b.createOrFold<mlir::arith::MinSIOp>(loc, tiles, tilesUsed);
    }
    return tiles;
  }

  // The tile's K rows as stored, and its V rows as pairs of keys, by the
  // threads of the key group, into the group's part of the buffers; keys
  // past the end read the last one (their scores are masked). In two
  // halves: loadTile's global loads (a thread's K vectors, then its V
  // vectors of keys 2p and 2p+1), storeTile's shared stores of them. A
  // pair row is built in registers: the same `width` elements of keys 2p
  // and 2p+1, interleaved, stored as two vectors. A thread past the
  // tile's last vector loads that one again and stores nothing.
  llvm::SmallVector<Value> loadTile(Value firstKey) {
    llvm::SmallVector<Value> loaded;
    auto key = [&](Value offset) {
      Value at = x.add(firstKey, offset);
      return TK % BK != 0 ? x.min(at, TK - 1) : at;
    };
    int64_t kVectors = D / cfg.widthK;
    cooperativeSlots(BK * kVectors, [&](Value linear, Value) {
      Value r = x.div(linear, kVectors);
      Value col = x.mul(x.rem(linear, kVectors), cfg.widthK);
      loaded.push_back(x.load(k, {head, key(r), col}, cfg.widthK, cfg.widthK > 1, cfg.storageBytes));
    });
    int64_t vVectors = D / cfg.widthV;
    cooperativeSlots(BK / 2 * vVectors, [&](Value linear, Value) {
      Value pair = x.div(linear, vVectors);
      Value col = x.mul(x.rem(linear, vVectors), cfg.widthV);
      Value even = x.mul(pair, 2);
      loaded.push_back(x.load(v, {head, key(even), col}, cfg.widthV, cfg.widthV > 1, cfg.storageBytes));
      loaded.push_back(x.load(v, {head, key(x.add(even, 1)), col}, cfg.widthV, cfg.widthV > 1, cfg.storageBytes));
    });
    return loaded;
  }

  void storeTile(llvm::ArrayRef<Value> loaded) {
    size_t next = 0;
    int64_t kVectors = D / cfg.widthK;
    cooperativeSlots(BK * kVectors, [&](Value linear, Value valid) {
      Value value = loaded[next++];
      x.guarded(valid, [&] {
        Value r = x.div(linear, kVectors);
        Value col = x.mul(x.rem(linear, kVectors), cfg.widthK);
        x.store(value, kTile, {x.add(kRowBase, r), col}, cfg.widthK, cfg.widthK > 1, cfg.storageBytes);
      });
    });
    int64_t width = cfg.widthV, vVectors = D / width;
    cooperativeSlots(BK / 2 * vVectors, [&](Value linear, Value valid) {
      Value even = loaded[next++], odd = loaded[next++];
      x.guarded(valid, [&] {
        Value pair = x.div(linear, vVectors);
        Value col = x.mul(x.rem(linear, vVectors), width);
        llvm::SmallVector<int64_t> interleave;
        for (int64_t u = 0; u < width; ++u)
          interleave.append({u, width + u});
        Value pairs = mlir::vector::ShuffleOp::create(b, loc, even, odd, interleave);
        for (int64_t half = 0; half < 2; ++half) {
          llvm::SmallVector<int64_t> part;
          for (int64_t u = 0; u < width; ++u)
            part.push_back(half * width + u);
          Value chunk = mlir::vector::ShuffleOp::create(b, loc, pairs, pairs, part);
          x.store(chunk, vPairs, {x.add(vRowBase, pair), x.add(x.mul(col, 2), half * width)}, width, width > 1,
                  cfg.storageBytes);
        }
      });
    });
  }

  // `body(linear, valid)` for each of the key group's thread's slots of
  // count: linear = groupTid, + groupThreads, ... clamped to count - 1,
  // `valid` (null where every thread's slot is in range) whether it was.
  void cooperativeSlots(int64_t count, const std::function<void(Value, Value)> &body) {
    for (int64_t start = 0; start < count; start += groupThreads) {
      Value linear = x.add(groupTid, start);
      Value valid;
      if (start + groupThreads > count) {
        valid = x.lt(linear, count);
        linear = x.min(linear, count - 1);
      }
      body(linear, valid);
    }
  }

  // cp.async's slots: a key group's threads copy the tile's keys x D
  // elements as vectors of asyncWidth, consecutive threads along a key's
  // row (asyncCopiesFit: every thread the same number of them, for K and
  // for V alike). Keys from keyEnd on (past the block's tiles or past the
  // keys) are zero-filled, nothing read: their scores are masked, their
  // weights zero. The lane's place for ldmatrix: row lane % 8 of matrix
  // lane / 8.
  void placeAsyncCopies() {
    const int64_t width = cfg.asyncWidth, vectors = D / width;
    for (int64_t start = 0; start < BK * vectors; start += groupThreads) {
      Value linear = x.add(groupTid, start);
      copySlots.push_back({x.div(linear, vectors), x.mul(x.rem(linear, vectors), width)});
    }
    keyEnd = x.min(x.mul(tiles, BK), TK);
    Value lane = x.rem(tid, 32);
    matrixRow = x.rem(lane, 8);
    matrix = x.div(lane, 8);
  }

  // The first row of this key group's tile in stage `stage`.
  Value stageRow(Value stage) { return x.add(x.mul(stage, S * BK), kRowBase); }

  // The copies of this group's K and V tile of round `round` into stage
  // round mod P, as one group of copies (its token).
  Value copyRound(Value round) {
    const int64_t width = cfg.asyncWidth;
    Value tile = S > 1 ? x.add(x.mul(round, S), keyGroup) : round;
    Value firstKey = x.mul(tile, BK);
    Value row = stageRow(x.rem(round, P));
    mlir::UnitAttr bypassL1 = width * cfg.storageBytes == kVectorBytes ? b.getUnitAttr() : mlir::UnitAttr();
    llvm::SmallVector<Value> tokens;
    for (auto [r, col] : copySlots) {
      Value key = x.add(firstKey, r);
      Value inside = b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, key, keyEnd);
      Value present = mlir::arith::SelectOp::create(b, loc, inside, x.c(width), x.c(0));
      Value from = x.min(key, TK - 1);
      for (auto [buffer, global] : {std::pair{kTile, k}, std::pair{vPairs, v}})
        tokens.push_back(mlir::nvgpu::DeviceAsyncCopyOp::create(b, loc, buffer, mlir::ValueRange{x.add(row, r), col},
                                                                global, mlir::ValueRange{head, from, col},
                                                                b.getIndexAttr(width), present, bypassL1));
    }
    return mlir::nvgpu::DeviceAsyncCreateGroupOp::create(b, loc, tokens);
  }

  // `count` 8x8 matrices of a shared tile by one ldmatrix (lane l gives
  // row `row`, column `col` of matrix l / 8's row l % 8), as mma operands.
  llvm::SmallVector<Value> loadMatrices(Value buffer, Value row, Value col, int64_t count, bool transpose) {
    auto type = mlir::VectorType::get({count, 2}, cfg.storage);
    Value matrices = mlir::nvgpu::LdMatrixOp::create(b, loc, type, buffer, mlir::ValueRange{row, col}, transpose,
                                                     static_cast<uint32_t>(count));
    llvm::SmallVector<Value> registers;
    for (int64_t j = 0; j < count; ++j)
      registers.push_back(operand(mlir::vector::ExtractOp::create(b, loc, matrices, j)));
    return registers;
  }

  mlir::LogicalResult buildTileStep(mlir::scf::ForOp loop) {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    elemental->pushScope();
    if (mask)
      mask->pushScope();
    llvm::SmallVector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().begin() + stateCount);
    // With scores ahead: this round's scores, computed the round before.
    llvm::SmallVector<Value> scoresNow(loop.getRegionIterArgs().begin() + stateCount, loop.getRegionIterArgs().end());
    llvm::SmallVector<Value> scoresNext;
    // This group's tile of the round, if the block has one left for it.
    Value tile = S > 1 ? x.add(x.mul(loop.getInductionVar(), S), keyGroup) : loop.getInductionVar();
    Value active =
        S > 1 ? b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, tile, tiles) : Value();
    Value firstKey = x.mul(tile, BK);
    Value tileRow;
    if (P > 0) {
      // This thread's copies of the round have landed; then every
      // thread's have, and every thread is done with the previous round,
      // whose stage the round P - 1 ahead is copied into.
      // With scores ahead, the next round's copies too: its scores are
      // computed now, before this round's softmax, so that their mma.sync
      // overlap it.
      const int64_t pending = P - 2 - (cfg.scoresAhead ? 1 : 0);
      mlir::nvgpu::DeviceAsyncWaitOp::create(b, loc, asyncGroup, b.getI32IntegerAttr(static_cast<int32_t>(pending)));
      mlir::gpu::BarrierOp::create(b, loc);
      copyRound(x.add(loop.getInductionVar(), P - 1));
      tileRow = stageRow(x.rem(loop.getInductionVar(), P));
      if (cfg.scoresAhead)
        for (const llvm::SmallVector<Value> &slice : asyncScores(stageRow(x.rem(x.add(loop.getInductionVar(), 1), P))))
          scoresNext.append(slice.begin(), slice.end());
    } else {
      mlir::gpu::BarrierOp::create(b, loc); // the previous tile is read by all
      x.guarded(active, [&] { storeTile(loadTile(firstKey)); });
      mlir::gpu::BarrierOp::create(b, loc);
    }
    if (!active) {
      mlir::FailureOr<llvm::SmallVector<Value>> yielded = foldTile(carried, firstKey, tileRow, scoresNow);
      if (mlir::failed(yielded))
        return mlir::failure();
      yielded->append(scoresNext.begin(), scoresNext.end());
      mlir::scf::YieldOp::create(b, loc, *yielded);
      return popScopes();
    }
    auto branch = mlir::scf::IfOp::create(b, loc, mlir::ValueRange(carried).getTypes(), active, /*withElse=*/true);
    {
      mlir::OpBuilder::InsertionGuard inBranch(b);
      b.setInsertionPointToStart(&branch.getThenRegion().front());
      mlir::FailureOr<llvm::SmallVector<Value>> yielded = foldTile(carried, firstKey, tileRow, scoresNow);
      if (mlir::failed(yielded))
        return mlir::failure();
      mlir::scf::YieldOp::create(b, loc, *yielded);
      b.setInsertionPointToStart(&branch.getElseRegion().front());
      mlir::scf::YieldOp::create(b, loc, carried);
    }
    llvm::SmallVector<Value> results(branch.getResults().begin(), branch.getResults().end());
    results.append(scoresNext.begin(), scoresNext.end());
    mlir::scf::YieldOp::create(b, loc, results);
    return popScopes();
  }

  mlir::LogicalResult popScopes() {
    elemental->popScope();
    if (mask)
      mask->popScope();
    return mlir::success();
  }

  // S = Q K^T of the tile staged at `tileRow` (cp.async stages), slice by
  // slice of 8 keys: four f32 a lane each, as mma.sync's C lays them out.
  // ldmatrix.x4: the slice's 8 keys at 16 s .. 16 s + 31, lanes 8m .. 8m +
  // 7 addressing keys 0..7 at 16 s + 8m: B of steps s and s + 1 (x2 for a
  // last step alone).
  llvm::SmallVector<llvm::SmallVector<Value>> asyncScores(Value tileRow) {
    int64_t slices = BK / kMmaCols;
    llvm::SmallVector<llvm::SmallVector<Value>> scores(slices);
    Value zero = x.fconst(f32, 0.0);
    for (int64_t n = 0; n < slices; ++n) {
      scores[n].assign(4, zero);
      Value keyRow = x.add(x.add(tileRow, matrixRow), n * kMmaCols);
      for (int64_t s = 0; s < D / kMmaDepth; s += 2) {
        int64_t count = s + 1 < D / kMmaDepth ? 4 : 2;
        Value col = x.add(x.mul(count == 4 ? matrix : x.rem(matrix, 2), 8), s * kMmaDepth);
        llvm::SmallVector<Value> registers = loadMatrices(kTile, keyRow, col, count, /*transpose=*/false);
        mma(queryFragments[s], {registers[0], registers[1]}, scores[n]);
        if (count == 4)
          mma(queryFragments[s + 1], {registers[2], registers[3]}, scores[n]);
      }
    }
    return scores;
  }

  // One tile of this group's: scores, the online softmax's step, the
  // output's accumulators. What the loop yields: the rows' max, their
  // per-lane sums, the accumulators.
  mlir::FailureOr<llvm::SmallVector<Value>> foldTile(llvm::ArrayRef<Value> carried, Value firstKey, Value tileRow,
                                                     llvm::ArrayRef<Value> scoresAhead) {
    Value rowMax[2] = {carried[0], carried[1]};
    Value rowSum[2] = {carried[2], carried[3]};

    // S = Q K^T, slice by slice of 8 keys (or as computed the round before).
    int64_t slices = BK / kMmaCols;
    llvm::SmallVector<llvm::SmallVector<Value>> scores(slices);
    if (!scoresAhead.empty()) {
      for (int64_t n = 0; n < slices; ++n)
        scores[n].assign(scoresAhead.begin() + n * 4, scoresAhead.begin() + n * 4 + 4);
    } else if (P > 0) {
      scores = asyncScores(tileRow);
    } else {
      Value zero = x.fconst(f32, 0.0);
      for (int64_t n = 0; n < slices; ++n) {
        scores[n].assign(4, zero);
        Value keyRow = x.add(x.add(kRowBase, group), n * kMmaCols);
        for (int64_t s = 0; s < D / kMmaDepth; ++s) {
          Value col = x.add(x.mul(inGroup, 2), s * kMmaDepth);
          Value b0 = loadPair(kTile, {keyRow, col}, true);
          Value b1 = loadPair(kTile, {keyRow, x.add(col, 8)}, true);
          mma(queryFragments[s], {b0, b1}, scores[n]);
        }
      }
    }

    // Logits through the traced prologue; each row's max over the tile.
    // Where every key of the tile is visible to every row of the warp (a
    // causal tile wholly at or below the warp's first row), the penalty is
    // its constant there and not computed: a branch the whole warp takes.
    llvm::SmallVector<llvm::SmallVector<Value>> logits(slices);
    Value tileMax[2];
    auto computeLogits = [&](const VisibleCausalPenalty *visible) -> mlir::FailureOr<llvm::SmallVector<Value>> {
      Value negInf = x.fconst(f32, -std::numeric_limits<double>::infinity());
      llvm::SmallVector<Value> values;
      Value maxima[2] = {negInf, negInf};
      for (int64_t n = 0; n < slices; ++n) {
        for (int64_t i = 0; i < 4; ++i) {
          int r = i / 2;
          Value key = x.add(x.add(firstKey, x.mul(inGroup, 2)), n * kMmaCols + i % 2);
          bool mayOverrun = !visible && TK % BK != 0;
          Value readKey = mayOverrun ? x.min(key, TK - 1) : key;
          Value logit = evaluatePrologue(*elemental, mask ? &*mask : nullptr, maskGraph, graph, softmax, head,
                                         queries[r], readKey, scores[n][i], visible);
          if (!logit)
            return mlir::failure();
          if (mayOverrun)
            logit = mlir::arith::SelectOp::create(b, loc, x.lt(key, TK), logit, negInf);
          values.push_back(logit);
          maxima[r] = mlir::arith::MaximumFOp::create(b, loc, maxima[r], logit);
        }
      }
      values.append({maxima[0], maxima[1]});
      return values;
    };
    mlir::FailureOr<llvm::SmallVector<Value>> computed;
    if (visiblePenalty) {
      Value lastKey = x.add(firstKey, BK - 1);
      Value visible =
          b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::sle, lastKey, warpFirstQuery);
      llvm::SmallVector<mlir::Type> types(slices * 4 + 2, f32);
      auto branch = mlir::scf::IfOp::create(b, loc, types, visible, /*withElse=*/true);
      for (bool inVisible : {true, false}) {
        mlir::OpBuilder::InsertionGuard inBranch(b);
        b.setInsertionPointToStart(inVisible ? &branch.getThenRegion().front() : &branch.getElseRegion().front());
        elemental->pushScope();
        if (mask)
          mask->pushScope();
        computed = computeLogits(inVisible ? &*visiblePenalty : nullptr);
        elemental->popScope();
        if (mask)
          mask->popScope();
        if (mlir::failed(computed))
          return mlir::failure();
        mlir::scf::YieldOp::create(b, loc, *computed);
      }
      computed = llvm::SmallVector<Value>(branch.getResults().begin(), branch.getResults().end());
    } else {
      computed = computeLogits(nullptr);
      if (mlir::failed(computed))
        return mlir::failure();
    }
    for (int64_t n = 0; n < slices; ++n)
      logits[n].assign(computed->begin() + n * 4, computed->begin() + n * 4 + 4);
    tileMax[0] = (*computed)[slices * 4];
    tileMax[1] = (*computed)[slices * 4 + 1];
    Value negInf = x.fconst(f32, -std::numeric_limits<double>::infinity());
    // The online softmax's step: new maxima, the weights against them,
    // sums and accumulators rescaled.
    Value correction[2], newMax[2], references[2];
    for (int r = 0; r < 2; ++r) {
      newMax[r] = mlir::arith::MaximumFOp::create(b, loc, rowMax[r], maxOverLanes(x, tileMax[r], kLanesPerRow));
      // Exponents against 0 while every key so far is -inf (exp(-inf - -inf) is NaN).
      Value allMasked = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, newMax[r], negInf);
      Value reference = mlir::arith::SelectOp::create(b, loc, allMasked, x.fconst(f32, 0.0), newMax[r]);
      references[r] = reference;
      correction[r] = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, rowMax[r], reference));
    }
    llvm::SmallVector<llvm::SmallVector<Value>> weights(slices);
    Value offsets[2] = {exp2Offset(references[0]), exp2Offset(references[1])};
    Value sums[2] = {mlir::arith::MulFOp::create(b, loc, rowSum[0], correction[0]),
                     mlir::arith::MulFOp::create(b, loc, rowSum[1], correction[1])};
    for (int64_t n = 0; n < slices; ++n) {
      for (int64_t i = 0; i < 4; ++i) {
        int r = i / 2;
        Value weight = exp2Weight(logits[n][i], offsets[r]);
        weights[n].push_back(weight);
        sums[r] = mlir::arith::AddFOp::create(b, loc, sums[r], weight);
      }
    }
    llvm::SmallVector<Value> yielded{newMax[0], newMax[1], sums[0], sums[1]};
    // O = O * correction + P V.
    llvm::SmallVector<std::array<Value, 4>> probabilities;
    for (int64_t j = 0; j < BK / kMmaDepth; ++j)
      probabilities.push_back(
          {pairOf(weights[2 * j][0], weights[2 * j][1]), pairOf(weights[2 * j][2], weights[2 * j][3]),
           pairOf(weights[2 * j + 1][0], weights[2 * j + 1][1]), pairOf(weights[2 * j + 1][2], weights[2 * j + 1][3])});
    auto rescaled = [&](int64_t n) {
      llvm::SmallVector<Value> acc;
      for (int64_t i = 0; i < 4; ++i)
        acc.push_back(mlir::arith::MulFOp::create(b, loc, carried[4 + n * 4 + i], correction[i / 2]));
      return acc;
    };
    if (P > 0) {
      // ldmatrix.x4.trans: V's keys 16 j .. 16 j + 15 at elements 8 n ..
      // 8 n + 15, lanes 8m .. 8m + 7 addressing keys 16 j + 8 (m mod 2)
      // + 0..7 at element 8 n + 8 (m / 2): B of element tiles n and n + 1
      // (D / 8 is even).
      for (int64_t n = 0; n < D / kMmaCols; n += 2) {
        llvm::SmallVector<Value> acc[2] = {rescaled(n), rescaled(n + 1)};
        Value col = x.add(x.mul(x.div(matrix, 2), 8), n * kMmaCols);
        for (int64_t j = 0; j < BK / kMmaDepth; ++j) {
          Value keyRow = x.add(x.add(x.add(tileRow, x.mul(x.rem(matrix, 2), 8)), matrixRow), j * kMmaDepth);
          llvm::SmallVector<Value> registers = loadMatrices(vPairs, keyRow, col, 4, /*transpose=*/true);
          mma(probabilities[j], {registers[0], registers[1]}, acc[0]);
          mma(probabilities[j], {registers[2], registers[3]}, acc[1]);
        }
        yielded.append(acc[0].begin(), acc[0].end());
        yielded.append(acc[1].begin(), acc[1].end());
      }
      return yielded;
    }
    for (int64_t n = 0; n < D / kMmaCols; ++n) {
      llvm::SmallVector<Value> acc = rescaled(n);
      Value col = x.mul(x.add(group, n * kMmaCols), 2);
      for (int64_t j = 0; j < BK / kMmaDepth; ++j) {
        Value pairRow = x.add(vRowBase, inGroup);
        Value b0 = loadPair(vPairs, {x.add(pairRow, j * 8), col}, true);
        Value b1 = loadPair(vPairs, {x.add(pairRow, j * 8 + 4), col}, true);
        mma(probabilities[j], {b0, b1}, acc);
      }
      yielded.append(acc.begin(), acc.end());
    }
    return yielded;
  }

  // The softmax's weight exp(logit - m) (its traced exp node, which the
  // softmax analysis guarantees is exp(x - m)) as exp2((logit - m) log2 e):
  // a multiply and one ex2 instead of libdevice's range-reduced expf, at
  // about 1e-8 relative error (log2 e rounded to f32), far inside the
  // 16-bit rounding of the weights before P V. Measured on the H200 at
  // T=1024 (12 heads of 64, causal): the kernel 30.2-30.5 us -> 27.7-27.9
  // us in bf16.
  //
  // As logit log2 e - m log2 e (`offset`, once a row and tile): one fused
  // multiply-add a weight, about |m| 2^-24 off in the exponent. And by
  // ex2.approx.ftz: a subnormal weight (below 2^-126 of the row's largest,
  // 1) is 0, which changes no sum of at least 1 and no 16-bit weight that
  // P V reads, without the non-ftz form's range fix-up (a compare and two
  // multiplies a weight).
  Value exp2Weight(Value logit, Value offset) {
    Value scaled =
        mlir::arith::AddFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, logit, x.fconst(f32, kLog2E)), offset);
    return mlir::LLVM::CallIntrinsicOp::create(b, loc, f32, b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
                                               mlir::ValueRange{scaled})
        .getResult(0);
  }
  static constexpr double kLog2E = 1.4426950408889634;
  // -m log2 e, the exponent's offset for a row whose max is m.
  Value exp2Offset(Value reference) {
    return mlir::arith::NegFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, reference, x.fconst(f32, kLog2E)));
  }

  // Each row's output O / l (the traced division), rounded to the
  // output's type, two elements a store. `state`: the rows' max, sums and
  // accumulators.
  void writeOutput(llvm::ArrayRef<Value> state) {
    Value sums[2] = {state[2], state[3]};
    bool vectorOk = cfg.widthO >= 2;
    for (int r = 0; r < 2; ++r) {
      x.guarded(T % cfg.rowsPerBlock != 0 ? rowValid[r] : Value(), [&] {
        for (int64_t n = 0; n < D / kMmaCols; ++n) {
          Value pair = x.vzero(f32, 2);
          for (int64_t i = 0; i < 2; ++i) {
            Value value = mlir::arith::DivFOp::create(b, loc, state[4 + n * 4 + r * 2 + i], sums[r]);
            pair = mlir::vector::InsertOp::create(b, loc, value, pair, i);
          }
          Value col = x.add(x.mul(inGroup, 2), n * kMmaCols);
          x.store(x.convert(pair, cfg.outElement), out, {head, rows[r], col}, 2, vectorOk, cfg.outBytes);
        }
      });
    }
  }

  // The key groups' partials combined in turn through shared memory (a
  // barrier between turns): group 0 writes its rows' max, sum and
  // accumulators; each later group rescales the stored ones and its own to
  // their common max, adds them, and writes them back; the last writes the
  // output.
  //   M = max(m, m'),  l = l e^(m - M) + l' e^(m' - M),  O likewise
  // Group 0 has the block's first tile, whose first key no row masks, so
  // M is finite from its turn on (and a group with no tiles adds zeros).
  void combineGroups(llvm::SmallVector<Value> state) {
    Value partials = shared[2];
    Value negInf = x.fconst(f32, -std::numeric_limits<double>::infinity());
    // Each lane keeps its own copy of its rows' max and sum (columns D + 2t
    // and D + 2t + 1), so no lane reads what another writes in its turn.
    Value maxColumn = x.add(x.mul(inGroup, 2), D), sumColumn = x.add(maxColumn, 1);
    for (int64_t turn = 0; turn < S; ++turn) {
      mlir::gpu::BarrierOp::create(b, loc);
      Value mine = b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::eq, keyGroup, x.c(turn));
      x.guarded(mine, [&] {
        llvm::SmallVector<Value> combined = state;
        if (turn > 0) {
          for (int r = 0; r < 2; ++r) {
            Value storedMax =
                mlir::memref::LoadOp::create(b, loc, partials, mlir::ValueRange{rowsInBlock[r], maxColumn});
            Value storedSum =
                mlir::memref::LoadOp::create(b, loc, partials, mlir::ValueRange{rowsInBlock[r], sumColumn});
            Value common = mlir::arith::MaximumFOp::create(b, loc, state[r], storedMax);
            Value allMasked = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, common, negInf);
            common = mlir::arith::SelectOp::create(b, loc, allMasked, x.fconst(f32, 0.0), common);
            Value own = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, state[r], common));
            Value stored = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, storedMax, common));
            combined[r] = mlir::arith::MaximumFOp::create(b, loc, state[r], storedMax);
            combined[2 + r] =
                mlir::arith::AddFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, state[2 + r], own),
                                            mlir::arith::MulFOp::create(b, loc, storedSum, stored));
            for (int64_t n = 0; n < D / kMmaCols; ++n) {
              for (int64_t i = 0; i < 2; ++i) {
                int64_t slot = 4 + n * 4 + r * 2 + i;
                Value col = x.add(x.add(x.mul(inGroup, 2), n * kMmaCols), i);
                Value value = mlir::memref::LoadOp::create(b, loc, partials, mlir::ValueRange{rowsInBlock[r], col});
                combined[slot] =
                    mlir::arith::AddFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, state[slot], own),
                                                mlir::arith::MulFOp::create(b, loc, value, stored));
              }
            }
          }
        }
        if (turn == S - 1) {
          writeOutput(combined);
          return;
        }
        for (int r = 0; r < 2; ++r) {
          for (int64_t n = 0; n < D / kMmaCols; ++n)
            for (int64_t i = 0; i < 2; ++i)
              mlir::memref::StoreOp::create(
                  b, loc, combined[4 + n * 4 + r * 2 + i], partials,
                  mlir::ValueRange{rowsInBlock[r], x.add(x.add(x.mul(inGroup, 2), n * kMmaCols), i)});
          mlir::memref::StoreOp::create(b, loc, combined[r], partials, mlir::ValueRange{rowsInBlock[r], maxColumn});
          mlir::memref::StoreOp::create(b, loc, combined[2 + r], partials, mlir::ValueRange{rowsInBlock[r], sumColumn});
        }
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
  Value q, k, v, out;
  llvm::SmallVector<Value, 3> shared;
  Value kTile, vPairs;
  mlir::Type f32;
  const int64_t D, T, TK, BK, S, P, groupThreads;
  // The loop's carried values before the scores ahead (Config::scoresAhead).
  size_t stateCount = 0;
  mlir::Operation *anchor = nullptr;
  std::optional<ElementalEmitter> elemental, mask;
  Value tid, head, queryTile, group, inGroup, keyGroup, groupTid, kRowBase, vRowBase, tiles;
  llvm::SmallVector<Value, 2> rows, rowsInBlock, rowValid, queries;
  // The causal penalty where it masks nothing, if the prologue's is the
  // traced one; the warp's first query row (clamped to the last).
  std::optional<VisibleCausalPenalty> visiblePenalty;
  Value warpFirstQuery;
  llvm::SmallVector<std::array<Value, 4>> queryFragments;
  // With cp.async: each copy slot's row of the tile and column; the key
  // past the last one a copy reads (the block's tiles, the keys); the
  // lane's row of an ldmatrix's 8x8 matrix and the matrix it addresses;
  // the token of a group of copies.
  llvm::SmallVector<std::pair<Value, Value>> copySlots;
  Value keyEnd, matrixRow, matrix, asyncGroup;
};

} // namespace

mlir::LogicalResult buildTensorCoreAttentionBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg,
                                                 const FusionGraph &graph, const Softmax &softmax,
                                                 const FusionGraph *maskGraph) {
  return TensorCoreBody(b, f, cfg, graph, softmax, maskGraph).build();
}

} // namespace mlpipe::emitters::fused_attention
