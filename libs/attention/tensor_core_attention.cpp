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
// Shared memory: K as [keys, D + pad] (B of S reads key 8n+g, elements 2t,
// 2t+1: one 32-bit load); V as pairs of keys [keys / 2, 2 D + pad], the
// values of keys 2i and 2i+1 side by side per head element, so that B of
// O (keys 2t, 2t+1 at element g) is one 32-bit load too. The pads put the
// 32 lanes' loads in 32 different banks.
#include "attention/attention_kernel.h"
#include "attention/kernel_builder.h"
#include "attention/split_combine.h"
#include "emitters/fusion_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include <limits>
#include <optional>

namespace mlpipe::emitters::fused_attention {

namespace {

// One mma.sync: m16n8k16.
constexpr int64_t kMmaRows = 16, kMmaCols = 8, kMmaDepth = 16;
constexpr int64_t kLanesPerRow = 4; // lanes holding one row of a C fragment

class TensorCoreBody {
public:
  TensorCoreBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg, const FusionGraph &graph,
                 const Softmax &softmax, const FusionGraph *maskGraph)
      : b(b), f(f), loc(f.getLoc()), x{b, loc}, cfg(cfg), graph(graph), softmax(softmax), maskGraph(maskGraph),
        q(f.getArgument(0)), k(f.getArgument(1)), v(f.getArgument(2)), out(f.getArgument(3)),
        kTile(f.getWorkgroupAttributions()[0]), vPairs(f.getWorkgroupAttributions()[1]), f32(b.getF32Type()),
        D(cfg.headSize), T(cfg.length), TK(cfg.keys), BK(cfg.keysPerTile) {}

  mlir::LogicalResult build() {
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
    auto loop = mlir::scf::ForOp::create(b, loc, x.c(0), keyTiles(), x.c(1), init);
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
  void makeElementalEmitters() {
    mlir::OpBuilder top = mlir::OpBuilder::atBlockBegin(&f.getBody().front());
    anchor = mlir::arith::ConstantIndexOp::create(top, loc, 0);
    mlir::OpBuilder entry(anchor);
    mlir::IRMapping extras;
    for (auto [position, argument] : llvm::enumerate(softmax.extraArguments))
      extras.map(graph.function().getArgument(argument), f.getArgument(4 + position));
    elemental.emplace(graph, b, entry, extras);
    if (maskGraph)
      mask.emplace(*maskGraph, b, entry, mlir::IRMapping{});
  }

  // The block's head and query tile; the warp's 16 rows; the lane's group
  // g (its two rows, g and g+8) and place t in it.
  void placeWarp() {
    tid = threadIdX(b, loc);
    Value block = blockIdX(b, loc);
    head = x.div(block, cfg.queryTiles);
    // Query tiles with the most keys first, so the longest blocks start first.
    queryTile = b.createOrFold<mlir::arith::SubIOp>(loc, x.c(cfg.queryTiles - 1), x.rem(block, cfg.queryTiles));
    Value lane = x.rem(tid, 32);
    group = x.div(lane, kLanesPerRow);
    inGroup = x.rem(lane, kLanesPerRow);
    Value warpRow = x.add(x.mul(queryTile, cfg.rowsPerBlock), x.mul(x.div(tid, 32), kMmaRows));
    for (int r = 0; r < 2; ++r) {
      Value row = x.add(x.add(warpRow, group), r * 8);
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

  // The tile's K rows as stored, and its V rows as pairs of keys; keys
  // past the end read the last one (their scores are masked).
  void stage(Value firstKey) {
    for (int kv = 0; kv < 2; ++kv) {
      int64_t width = kv == 0 ? cfg.widthK : cfg.widthV;
      int64_t vectorsPerRow = D / width, vectors = BK * vectorsPerRow;
      for (int64_t start = 0; start < vectors; start += cfg.threads) {
        Value linear = x.add(tid, start);
        Value valid = (start + cfg.threads > vectors) ? x.lt(linear, vectors) : Value();
        x.guarded(valid, [&] {
          Value r = x.div(linear, vectorsPerRow);
          Value col = x.mul(x.rem(linear, vectorsPerRow), width);
          Value key = x.add(firstKey, r);
          if (TK % BK != 0)
            key = x.min(key, TK - 1);
          Value value = x.load(kv == 0 ? k : v, {head, key, col}, width, width > 1, cfg.storageBytes);
          if (kv == 0) {
            x.store(value, kTile, {r, col}, width, width > 1, cfg.storageBytes);
            return;
          }
          // V[key][col + u] -> pairs[key / 2][2 (col + u) + key % 2]
          Value pairRow = x.div(r, 2), parity = x.rem(r, 2);
          for (int64_t u = 0; u < width; ++u) {
            Value at = x.add(x.mul(x.add(col, u), 2), parity);
            mlir::memref::StoreOp::create(b, loc, x.extract(value, u), vPairs, mlir::ValueRange{pairRow, at});
          }
        });
      }
    }
  }

  mlir::LogicalResult buildTileStep(mlir::scf::ForOp loop) {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    elemental->pushScope();
    if (mask)
      mask->pushScope();
    auto carried = loop.getRegionIterArgs();
    Value rowMax[2] = {carried[0], carried[1]};
    Value rowSum[2] = {carried[2], carried[3]};
    Value firstKey = x.mul(loop.getInductionVar(), BK);
    mlir::gpu::BarrierOp::create(b, loc); // the previous tile is read by all
    stage(firstKey);
    mlir::gpu::BarrierOp::create(b, loc);

    // S = Q K^T, slice by slice of 8 keys.
    int64_t slices = BK / kMmaCols;
    llvm::SmallVector<llvm::SmallVector<Value>> scores(slices);
    Value zero = x.fconst(f32, 0.0);
    for (int64_t n = 0; n < slices; ++n) {
      scores[n].assign(4, zero);
      Value keyRow = x.add(group, n * kMmaCols);
      for (int64_t s = 0; s < D / kMmaDepth; ++s) {
        Value col = x.add(x.mul(inGroup, 2), s * kMmaDepth);
        Value b0 = loadPair(kTile, {keyRow, col}, true);
        Value b1 = loadPair(kTile, {keyRow, x.add(col, 8)}, true);
        mma(queryFragments[s], {b0, b1}, scores[n]);
      }
    }

    // Logits through the traced prologue; each row's max over the tile.
    Value negInf = x.fconst(f32, -std::numeric_limits<double>::infinity());
    llvm::SmallVector<llvm::SmallVector<Value>> keys(slices), logits(slices);
    Value tileMax[2] = {negInf, negInf};
    for (int64_t n = 0; n < slices; ++n) {
      for (int64_t i = 0; i < 4; ++i) {
        int r = i / 2;
        Value key = x.add(x.add(firstKey, x.mul(inGroup, 2)), n * kMmaCols + i % 2);
        bool mayOverrun = TK % BK != 0;
        Value readKey = mayOverrun ? x.min(key, TK - 1) : key;
        Value logit = evaluatePrologue(*elemental, mask ? &*mask : nullptr, maskGraph, graph, softmax, head,
                                       queries[r], readKey, scores[n][i]);
        if (!logit)
          return mlir::failure();
        if (mayOverrun)
          logit = mlir::arith::SelectOp::create(b, loc, x.lt(key, TK), logit, negInf);
        keys[n].push_back(key);
        logits[n].push_back(logit);
        tileMax[r] = mlir::arith::MaximumFOp::create(b, loc, tileMax[r], logit);
      }
    }
    // The online softmax's step: new maxima, the weights against them,
    // sums and accumulators rescaled.
    Value correction[2], newMax[2];
    for (int r = 0; r < 2; ++r) {
      newMax[r] = mlir::arith::MaximumFOp::create(b, loc, rowMax[r], maxOverLanes(x, tileMax[r], kLanesPerRow));
      // Exponents against 0 while every key so far is -inf (exp(-inf - -inf) is NaN).
      Value allMasked = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, newMax[r], negInf);
      Value reference = mlir::arith::SelectOp::create(b, loc, allMasked, x.fconst(f32, 0.0), newMax[r]);
      elemental->define(softmax.max, {head, queries[r]}, reference);
      correction[r] = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, rowMax[r], reference));
    }
    llvm::SmallVector<llvm::SmallVector<Value>> weights(slices);
    Value sums[2] = {mlir::arith::MulFOp::create(b, loc, rowSum[0], correction[0]),
                     mlir::arith::MulFOp::create(b, loc, rowSum[1], correction[1])};
    for (int64_t n = 0; n < slices; ++n) {
      for (int64_t i = 0; i < 4; ++i) {
        int r = i / 2;
        llvm::SmallVector<Value> at{head, queries[r], keys[n][i]};
        elemental->define(softmax.prologue, at, logits[n][i]);
        Value weight = elemental->node(softmax.exp, at);
        if (!weight || elemental->failed())
          return mlir::failure();
        weights[n].push_back(weight);
        sums[r] = mlir::arith::AddFOp::create(b, loc, sums[r], weight);
      }
    }
    llvm::SmallVector<Value> yielded{newMax[0], newMax[1], sums[0], sums[1]};
    // O = O * correction + P V.
    llvm::SmallVector<std::array<Value, 4>> probabilities;
    for (int64_t j = 0; j < BK / kMmaDepth; ++j)
      probabilities.push_back({pairOf(weights[2 * j][0], weights[2 * j][1]),
                               pairOf(weights[2 * j][2], weights[2 * j][3]),
                               pairOf(weights[2 * j + 1][0], weights[2 * j + 1][1]),
                               pairOf(weights[2 * j + 1][2], weights[2 * j + 1][3])});
    for (int64_t n = 0; n < D / kMmaCols; ++n) {
      llvm::SmallVector<Value> acc;
      for (int64_t i = 0; i < 4; ++i)
        acc.push_back(mlir::arith::MulFOp::create(b, loc, carried[4 + n * 4 + i], correction[i / 2]));
      Value col = x.mul(x.add(group, n * kMmaCols), 2);
      for (int64_t j = 0; j < BK / kMmaDepth; ++j) {
        Value b0 = loadPair(vPairs, {x.add(inGroup, j * 8), col}, true);
        Value b1 = loadPair(vPairs, {x.add(inGroup, j * 8 + 4), col}, true);
        mma(probabilities[j], {b0, b1}, acc);
      }
      yielded.append(acc.begin(), acc.end());
    }
    elemental->popScope();
    if (mask)
      mask->popScope();
    mlir::scf::YieldOp::create(b, loc, yielded);
    return mlir::success();
  }

  // Each row's output O / l (the traced division), l summed over the
  // row's four lanes; rounded to the output's type, two elements a store.
  void writeOutput(mlir::scf::ForOp loop) {
    Value sums[2] = {sumOverLanes(x, loop.getResult(2), kLanesPerRow),
                     sumOverLanes(x, loop.getResult(3), kLanesPerRow)};
    bool vectorOk = cfg.widthO >= 2;
    for (int r = 0; r < 2; ++r) {
      x.guarded(T % cfg.rowsPerBlock != 0 ? rowValid[r] : Value(), [&] {
        for (int64_t n = 0; n < D / kMmaCols; ++n) {
          Value pair = x.vzero(f32, 2);
          for (int64_t i = 0; i < 2; ++i) {
            Value value = mlir::arith::DivFOp::create(b, loc, loop.getResult(4 + n * 4 + r * 2 + i), sums[r]);
            pair = mlir::vector::InsertOp::create(b, loc, value, pair, i);
          }
          Value col = x.add(x.mul(inGroup, 2), n * kMmaCols);
          x.store(x.convert(pair, cfg.outElement), out, {head, rows[r], col}, 2, vectorOk, cfg.outBytes);
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
  Value q, k, v, out, kTile, vPairs;
  mlir::Type f32;
  const int64_t D, T, TK, BK;
  mlir::Operation *anchor = nullptr;
  std::optional<ElementalEmitter> elemental, mask;
  Value tid, head, queryTile, group, inGroup;
  llvm::SmallVector<Value, 2> rows, rowValid, queries;
  llvm::SmallVector<std::array<Value, 4>> queryFragments;
};

} // namespace

mlir::LogicalResult buildTensorCoreAttentionBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg,
                                                 const FusionGraph &graph, const Softmax &softmax,
                                                 const FusionGraph *maskGraph) {
  return TensorCoreBody(b, f, cfg, graph, softmax, maskGraph).build();
}

} // namespace mlpipe::emitters::fused_attention
