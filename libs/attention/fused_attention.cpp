// mlpipe-fused-attention: causal attention as one kernel whose T x T scores
// never reach memory (the flash-attention scheme).
// Passes.td holds its description, with IR before and after.
//
// What it matches, in host code, is what `fuse` and `bufferize` make of
// nn::causalAttention: three calls in a row,
//
//   scores = scores_matmul(Q, K)      a batch_matmul of per-head views
//   probs  = softmax(scores)          prologue x = f(s, h, i, j) (scale, mask),
//                                     max, exp(x - max), sum, divide
//   out    = values_matmul(probs, V)  a batch_matmul with a per-head view of V
//
// where nothing else touches `scores` or `probs`. They become one launch:
// a block per (head, tile of query rows); each query row is held by a group
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
//
// When the prologue is the causal mask (x = s * c + (j > i ? -1e10 : 0), as
// traced), tiles of keys wholly after a block's last query are skipped:
// their p_j are exp(-1e10 - m') = 0 exactly in f32 and f64, since every
// row's first key is unmasked.
//
// A decode step (one query row per head against the KV cache, masked past
// a run-time position the prologue reads) has too few rows to fill the
// GPU: its keys are split over blocks, each block's (m, l, acc) go to a
// temporary, and a second kernel combines them exactly:
//   M = max_s m_s,  out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M)
// The step's own keys and values, which the host copied into the cache
// just before, are written there by the block whose split holds their key,
// before it reads the cache (matchCacheWrite).
#include "attention/passes.h"
#include "attention/split_combine.h"
#include "codegen/debug.h"
#include "codegen/device_description.h"
#include "codegen/kernel_factory.h"
#include "codegen/pass_support.h"
#include "codegen/path_choice.h"
#include "emitters/elemental_emitter.h"
#include "emitters/fusion_emitter.h"
#include "fusion/fusion_graph.h"
#include "fusion/hero_analysis.h"
#include "fusion/softmax_analysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"

#include <limits>
#include <optional>

namespace mlpipe {

#define GEN_PASS_DEF_FUSEDATTENTIONPASS
#include "attention/Passes.h.inc"

namespace {

using namespace emitters;
using mlir::Value;

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
// The widest vector access, in bytes.
constexpr int64_t kVectorBytes = 16;
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
// Threads per block of the kernel that combines the splits (one thread
// per output element).
constexpr int64_t kCombineThreads = 256;

// ---- Matching --------------------------------------------------------------

// A fusion that is one batch_matmul from zero (its fill), nothing else:
// the node of the product, or -1.
int plainBatchMatmul(const FusionGraph &graph) {
  int product = -1;
  for (const FusionNode &node : graph.nodes()) {
    if (mlir::isa<mlir::linalg::BatchMatmulOp>(node.op.getOperation())) {
      if (product >= 0)
        return -1;
      product = node.order;
    } else if (!mlir::isa<mlir::linalg::FillOp>(node.op.getOperation())) {
      return -1;
    }
  }
  if (product < 0 || !isZeroFillNode(graph, graph.node(product).initProducer) || graph.outputs().size() != 1 ||
      graph.outputs().front().node != product)
    return -1;
  for (int producer : graph.node(product).inputProducers)
    if (producer >= 0)
      return -1;
  return product;
}

// ---- A decode step's cache write ---------------------------------------------

// What a source dimension of the cache write indexes.
enum CacheDim : int { kUnitDim = -1, kKeyOrValueDim = 0, kHeadDim = 1, kHeadElementDim = 2 };

// A host copy of the step's keys and values into the cache at a run-time
// key, just before the attention (the kernel does that copy itself).
struct CacheWrite {
  mlir::linalg::CopyOp copy;
  Value source;                   // shaped as the destination
  Value key;                      // the key (an index) the rows go to
  llvm::SmallVector<int, 5> dims; // per source dimension: a CacheDim
  // How the key is computed on the host: pure ops and loads of host
  // arguments (the position), in order. The kernel computes it again, as
  // the host must not read device memory.
  llvm::SmallVector<mlir::Operation *> keyOps;
  llvm::SmallVector<Value> keyInputs; // the host arguments the loads read
};

// The ops `value` is computed from, in order, if they are pure or loads of
// arguments of the host function, with those arguments; else false.
bool recomputable(Value value, llvm::SetVector<mlir::Operation *> &ops, llvm::SetVector<Value> &inputs) {
  mlir::Operation *definer = value.getDefiningOp();
  if (!definer)
    return false;
  if (ops.contains(definer))
    return true;
  if (auto load = mlir::dyn_cast<mlir::memref::LoadOp>(definer)) {
    if (!mlir::isa<mlir::BlockArgument>(load.getMemRef()))
      return false;
    inputs.insert(load.getMemRef());
    for (Value index : load.getIndices())
      if (!recomputable(index, ops, inputs))
        return false;
  } else if (!mlir::isPure(definer) || definer->getNumRegions() != 0) {
    return false;
  } else {
    for (Value operand : definer->getOperands())
      if (!recomputable(operand, ops, inputs))
        return false;
  }
  ops.insert(definer);
  return true;
}

// The static strides and offset of a memref type, or false.
bool staticLayout(mlir::Type type, llvm::SmallVector<int64_t> &strides, int64_t &offset) {
  auto memref = mlir::dyn_cast<mlir::MemRefType>(type);
  if (!memref || !memref.hasStaticShape() || mlir::failed(memref.getStridesAndOffset(strides, offset)))
    return false;
  return offset != mlir::ShapedType::kDynamic &&
         llvm::none_of(strides, [](int64_t s) { return s == mlir::ShapedType::kDynamic; });
}

// The copy before `scoresCall` that writes, at one run-time key, exactly
// the elements k[h, key, d] and v[h, key, d] of the cache that `k` and `v`
// ([H, Tk, D] views) view, for every head h and element d; nothing but the
// calls being fused touching the cache or the copy's source between the
// copy and `valuesCall`. Else none.
std::optional<CacheWrite> matchCacheWrite(mlir::func::CallOp scoresCall, mlir::func::CallOp softmaxCall,
                                          mlir::func::CallOp valuesCall, Value k, Value v, int64_t heads,
                                          int64_t headSize, mlir::Type element) {
  Value root = rootBuffer(k);
  if (rootBuffer(v) != root || !mlir::isa<mlir::BlockArgument>(root))
    return std::nullopt;
  mlir::linalg::CopyOp copy;
  for (mlir::Operation *op = scoresCall->getPrevNode(); op && !copy; op = op->getPrevNode())
    if (auto candidate = mlir::dyn_cast<mlir::linalg::CopyOp>(op);
        candidate && candidate.getOutputs().size() == 1 && rootBuffer(candidate.getOutputs()[0]) == root)
      copy = candidate;
  if (!copy || !copy.hasPureBufferSemantics())
    return std::nullopt;
  auto destination = copy.getOutputs()[0].getDefiningOp<mlir::memref::SubViewOp>();
  llvm::SmallVector<int64_t> rootStrides, kStrides, vStrides;
  int64_t rootOffset = 0, kOffset = 0, vOffset = 0;
  if (!destination || destination.getSource() != root || !staticLayout(root.getType(), rootStrides, rootOffset) ||
      !staticLayout(k.getType(), kStrides, kOffset) || !staticLayout(v.getType(), vStrides, vOffset) ||
      llvm::any_of(destination.getStaticStrides(), [](int64_t s) { return s != 1; }))
    return std::nullopt;
  // One dynamic offset, the key's; the rest adds up to where k's slice starts.
  CacheWrite write;
  write.copy = copy;
  write.source = copy.getInputs()[0];
  int keyDim = -1;
  int64_t base = rootOffset;
  for (auto [i, offset] : llvm::enumerate(destination.getMixedOffsets())) {
    if (auto attribute = mlir::dyn_cast<mlir::Attribute>(offset)) {
      base += mlir::cast<mlir::IntegerAttr>(attribute).getInt() * rootStrides[i];
    } else if (keyDim < 0) {
      keyDim = static_cast<int>(i);
      write.key = mlir::cast<Value>(offset);
      llvm::SetVector<mlir::Operation *> ops;
      llvm::SetVector<Value> inputs;
      // Its inputs (the position) must never be written, so that the
      // kernel reads what the host would have.
      if (!recomputable(write.key, ops, inputs) ||
          llvm::any_of(inputs, [&](Value input) { return !hostInput(input, scoresCall); }))
        return std::nullopt;
      write.keyOps.assign(ops.begin(), ops.end());
      write.keyInputs.assign(inputs.begin(), inputs.end());
    } else {
      return std::nullopt;
    }
  }
  llvm::ArrayRef<int64_t> sizes = destination.getStaticSizes();
  if (keyDim < 0 || sizes[keyDim] != 1 || rootStrides[keyDim] != kStrides[1] || rootStrides[keyDim] != vStrides[1] ||
      base != kOffset || kStrides[0] != vStrides[0] || kStrides[2] != vStrides[2])
    return std::nullopt;
  int seen[3] = {0, 0, 0};
  for (auto [i, size] : llvm::enumerate(sizes)) {
    int64_t stride = rootStrides[i];
    int dim = kUnitDim;
    if (static_cast<int>(i) == keyDim || size == 1)
      dim = kUnitDim;
    else if (size == 2 && base + stride == vOffset)
      dim = kKeyOrValueDim;
    else if (size == heads && stride == kStrides[0])
      dim = kHeadDim;
    else if (size == headSize && stride == kStrides[2])
      dim = kHeadElementDim;
    else
      return std::nullopt;
    if (dim != kUnitDim)
      ++seen[dim];
    write.dims.push_back(dim);
  }
  auto sourceType = mlir::dyn_cast<mlir::MemRefType>(write.source.getType());
  if (seen[0] != 1 || seen[1] != 1 || seen[2] != 1 || !sourceType || sourceType.getShape() != sizes ||
      sourceType.getElementType() != element)
    return std::nullopt;
  // Moving the copy to the attention kernel moves it past everything in
  // between: none of it may touch the cache or the copy's source.
  Value sourceRoot = rootBuffer(write.source);
  for (mlir::Operation *op = copy->getNextNode(); op != valuesCall.getOperation(); op = op->getNextNode()) {
    if (!op)
      return std::nullopt;
    if (op == scoresCall.getOperation() || op == softmaxCall.getOperation())
      continue;
    auto touches = op->walk([&](mlir::Operation *inner) {
      if (isViewOp(inner))
        return mlir::WalkResult::advance();
      for (Value operand : inner->getOperands())
        if (mlir::isa<mlir::MemRefType>(operand.getType()) &&
            (rootBuffer(operand) == root || rootBuffer(operand) == sourceRoot))
          return mlir::WalkResult::interrupt();
      return mlir::WalkResult::advance();
    });
    if (touches.wasInterrupted())
      return std::nullopt;
  }
  return write;
}

// ---- The kernel ------------------------------------------------------------

struct Config {
  int64_t heads = 0, length = 0, headSize = 0; // length: query rows
  int64_t keys = 0;                            // key (and value) rows
  int64_t keyTiles = 0;                        // ceil(keys / keysPerTile)
  int64_t splits = 1;                          // blocks the keys of a query tile are split over
  int64_t tilesPerSplit = 0;
  int64_t partialStride = 0; // elements per row of the partials: D values, max, sum, padding
  mlir::Type element;
  int64_t elementBytes = 4;
  int64_t rowsPerBlock = kQueryRowsPerBlock;
  int64_t lanes = 1;  // per query row
  int64_t width = 1;  // elements per register chunk
  int64_t chunks = 1; // per lane
  int64_t keysPerTile = 0;
  int64_t threads = 0;
  int64_t queryTiles = 0;
  int64_t widthQ = 1, widthK = 1, widthV = 1, widthO = 1; // global vector widths
  bool causal = false;
  // A decode step's keys past a run-time position are masked: the kernel
  // argument holding that position, -1 if none.
  int64_t positionArgument = -1;
  // The step's keys and values the kernel writes into the cache first
  // (the kernel does the copy), or null; the kernel argument of its
  // source, and of each of its key's inputs (CacheWrite::keyInputs).
  const CacheWrite *cacheWrite = nullptr;
  int64_t cacheSourceArgument = -1;
  llvm::SmallVector<int64_t> cacheKeyInputArguments;
};

// The widest vector (at most `maxElements`) along the last dimension of a
// memref: every vector aligned to its size, given an aligned base.
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

struct Builder {
  mlir::OpBuilder &b;
  mlir::Location loc;
  Value c(int64_t v) const { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) const { return b.createOrFold<mlir::arith::AddIOp>(loc, x, y); }
  Value add(Value x, int64_t y) const { return y == 0 ? x : add(x, c(y)); }
  Value mul(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::MulIOp>(loc, x, c(y)); }
  Value div(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::DivUIOp>(loc, x, c(y)); }
  Value rem(Value x, int64_t y) const { return y == 1 ? c(0) : b.createOrFold<mlir::arith::RemUIOp>(loc, x, c(y)); }
  Value min(Value x, int64_t y) const { return b.createOrFold<mlir::arith::MinSIOp>(loc, x, c(y)); }
  Value lt(Value x, int64_t y) const {
    return b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, x, c(y));
  }
  Value fconst(mlir::Type type, double v) const {
    return mlir::arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
  }
  Value vzero(mlir::Type element, int64_t width) const {
    auto type = mlir::VectorType::get({width}, element);
    return mlir::arith::ConstantOp::create(b, loc, type,
                                           mlir::DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)));
  }
  Value extract(Value v, int64_t i) const { return mlir::vector::ExtractOp::create(b, loc, v, i); }
  Value broadcast(Value scalar, int64_t width) const {
    return mlir::vector::BroadcastOp::create(b, loc, mlir::VectorType::get({width}, scalar.getType()), scalar);
  }
  // `width` consecutive elements along the last dimension of a memref, as
  // a vector (one access when `vectorOk`, else element by element).
  Value load(Value memref, llvm::SmallVector<Value> index, int64_t width, bool vectorOk, int64_t elementBytes) const {
    auto element = mlir::cast<mlir::MemRefType>(memref.getType()).getElementType();
    auto type = mlir::VectorType::get({width}, element);
    if (vectorOk && width > 1)
      return mlir::vector::LoadOp::create(b, loc, type, memref, index, false, llvm::MaybeAlign(width * elementBytes));
    Value result = vzero(element, width);
    Value last = index.back();
    for (int64_t u = 0; u < width; ++u) {
      index.back() = add(last, u);
      Value x = mlir::memref::LoadOp::create(b, loc, memref, index);
      result = mlir::vector::InsertOp::create(b, loc, x, result, u);
    }
    return result;
  }
  void store(Value vector, Value memref, llvm::SmallVector<Value> index, int64_t width, bool vectorOk,
             int64_t elementBytes) const {
    if (vectorOk && width > 1) {
      mlir::vector::StoreOp::create(b, loc, vector, memref, index, false, llvm::MaybeAlign(width * elementBytes));
      return;
    }
    Value last = index.back();
    for (int64_t u = 0; u < width; ++u) {
      index.back() = add(last, u);
      mlir::memref::StoreOp::create(b, loc, extract(vector, u), memref, index);
    }
  }
  void guarded(Value condition, const std::function<void()> &body) const {
    if (!condition) {
      body();
      return;
    }
    auto branch = mlir::scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&branch.getThenRegion().front());
    body();
  }
};

// The butterfly over the `lanes` lanes of a row's group (xor offsets stay
// inside aligned groups).
Value sumOverLanes(const Builder &x, Value value, int64_t lanes) {
  constexpr int kWarp = 32;
  for (int64_t offset = lanes / 2; offset >= 1; offset /= 2) {
    Value other;
    if (value.getType().isF32()) {
      other = mlir::gpu::ShuffleOp::create(x.b, x.loc, value, offset, kWarp, mlir::gpu::ShuffleMode::XOR)
                  .getShuffleResult();
    } else {
      // f64 as two 32-bit halves.
      mlir::Type i64 = x.b.getI64Type(), i32 = x.b.getI32Type();
      Value bits = mlir::arith::BitcastOp::create(x.b, x.loc, i64, value);
      Value shift = mlir::arith::ConstantIntOp::create(x.b, x.loc, i64, 32);
      Value low = mlir::arith::TruncIOp::create(x.b, x.loc, i32, bits);
      Value high =
          mlir::arith::TruncIOp::create(x.b, x.loc, i32, mlir::arith::ShRUIOp::create(x.b, x.loc, bits, shift));
      auto shuffle = [&](Value half) {
        return mlir::gpu::ShuffleOp::create(x.b, x.loc, half, offset, kWarp, mlir::gpu::ShuffleMode::XOR)
            .getShuffleResult();
      };
      Value joined = mlir::arith::OrIOp::create(
          x.b, x.loc, mlir::arith::ExtUIOp::create(x.b, x.loc, i64, shuffle(low)),
          mlir::arith::ShLIOp::create(x.b, x.loc, mlir::arith::ExtUIOp::create(x.b, x.loc, i64, shuffle(high)), shift));
      other = mlir::arith::BitcastOp::create(x.b, x.loc, value.getType(), joined);
    }
    value = mlir::arith::AddFOp::create(x.b, x.loc, value, other);
  }
  return value;
}

// The kernel's body. Arguments: q ([H, Tq, D] view), k, v ([H, Tk, D]
// views), out ([H, Tq, D]), or with split keys the partials ([H, Tq, S,
// partialStride]: acc, then max and sum); workgroup buffers: the K tile
// and the V tile.
mlir::LogicalResult buildBody(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg, const FusionGraph &graph,
                              const Softmax &softmax, const FusionGraph *maskGraph) {
  mlir::Location loc = f.getLoc();
  Builder x{b, loc};
  Value q = f.getArgument(0), k = f.getArgument(1), v = f.getArgument(2), out = f.getArgument(3);
  Value kTile = f.getWorkgroupAttributions()[0], vTile = f.getWorkgroupAttributions()[1];
  mlir::Type element = cfg.element;
  const int64_t W = cfg.width, D = cfg.headSize, T = cfg.length, TK = cfg.keys, BK = cfg.keysPerTile;

  // The elemental emitter of the softmax fusion: the prologue and the
  // exponential, evaluated on values this kernel defines.
  mlir::OpBuilder top = mlir::OpBuilder::atBlockBegin(&f.getBody().front());
  mlir::Operation *anchor = mlir::arith::ConstantIndexOp::create(top, loc, 0);
  mlir::OpBuilder entry(anchor);
  mlir::IRMapping extras;
  for (auto [position, argument] : llvm::enumerate(softmax.extraArguments))
    extras.map(graph.function().getArgument(argument), f.getArgument(4 + position));
  ElementalEmitter elemental(graph, b, entry, extras);
  // The mask's own fusion, when the prologue reads one from memory.
  std::optional<ElementalEmitter> mask;
  if (maskGraph)
    mask.emplace(*maskGraph, b, entry, mlir::IRMapping{});

  Value tid = threadIdX(b, loc);
  Value block = blockIdX(b, loc);
  Value split = x.rem(block, cfg.splits);
  block = x.div(block, cfg.splits);
  Value head = x.div(block, cfg.queryTiles);
  // Query tiles with the most keys first, so the longest blocks start first.
  Value queryTile = b.createOrFold<mlir::arith::SubIOp>(loc, x.c(cfg.queryTiles - 1), x.rem(block, cfg.queryTiles));
  Value lane = x.rem(tid, cfg.lanes);
  Value row = x.add(x.mul(queryTile, cfg.rowsPerBlock), x.div(tid, cfg.lanes));
  Value rowValid = T % cfg.rowsPerBlock != 0 ? x.lt(row, T) : Value();
  Value query = T % cfg.rowsPerBlock != 0 ? x.min(row, T - 1) : row;

  // This lane's slice of the head dimension: chunk c is elements
  // [c * lanes * W + lane * W, + W).
  llvm::SmallVector<Value> chunkStart;
  for (int64_t c = 0; c < cfg.chunks; ++c)
    chunkStart.push_back(x.add(x.mul(lane, W), c * cfg.lanes * W));
  llvm::SmallVector<Value> qChunks;
  for (int64_t c = 0; c < cfg.chunks; ++c)
    qChunks.push_back(x.load(q, {head, query, chunkStart[c]}, W, cfg.widthQ >= W, cfg.elementBytes));

  // The running max starts from the max reduction's own init.
  Value rowMaxInit = elemental.reductionInit(softmax.max, {head, query});
  llvm::SmallVector<Value> init{rowMaxInit, x.fconst(element, 0.0)};
  for (int64_t c = 0; c < cfg.chunks; ++c)
    init.push_back(x.vzero(element, W));

  // Key tiles: all of them, or (causal) those up to the block's last
  // query; with split keys, those of this block's split.
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
    Value tilesUsed = unitsUpToPosition(b, loc, f.getArgument(cfg.positionArgument), BK, cfg.keyTiles);
    tiles = b.createOrFold<mlir::arith::MinSIOp>(loc, tiles, tilesUsed);
  }

  // The step's keys and values into the cache, by the block whose split
  // holds the key they go to (the kernel does the copy), before it
  // stages its first tile: the barrier at each tile's start orders them.
  if (const CacheWrite *write = cfg.cacheWrite) {
    Value source = f.getArgument(cfg.cacheSourceArgument);
    mlir::IRMapping keyMapping;
    for (auto [input, argument] : llvm::zip_equal(write->keyInputs, cfg.cacheKeyInputArguments))
      keyMapping.map(input, f.getArgument(argument));
    for (mlir::Operation *op : write->keyOps)
      b.clone(*op, keyMapping);
    Value key = keyMapping.lookup(write->key);
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
            llvm::SmallVector<Value> at;
            for (int dim : write->dims)
              at.push_back(dim == kKeyOrValueDim    ? x.c(kv)
                           : dim == kHeadDim        ? head
                           : dim == kHeadElementDim ? d
                                                    : x.c(0));
            Value value = mlir::memref::LoadOp::create(b, loc, source, at);
            mlir::memref::StoreOp::create(b, loc, value, kv == 0 ? k : v, mlir::ValueRange{head, key, d});
          }
        });
      }
    });
  }

  // Cooperative staging of one tile of K and V rows into shared memory:
  // rows past T read row T-1 (their scores are masked, their weights 0).
  auto stage = [&](Value memref, Value tile, Value firstKey, int64_t width) {
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
        Value value = x.load(memref, {head, key, col}, width, width > 1, cfg.elementBytes);
        x.store(value, tile, {r, col}, width, width > 1, cfg.elementBytes);
      });
    }
  };

  auto loop = mlir::scf::ForOp::create(b, loc, firstTile, tiles, x.c(1), init);
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    elemental.pushScope();
    if (mask)
      mask->pushScope();
    Value t = loop.getInductionVar();
    Value rowMax = loop.getRegionIterArgs()[0];
    Value rowSum = loop.getRegionIterArgs()[1];
    llvm::SmallVector<Value> acc(loop.getRegionIterArgs().begin() + 2, loop.getRegionIterArgs().end());
    Value firstKey = x.mul(t, BK);
    mlir::gpu::BarrierOp::create(b, loc); // the previous tile is read by all
    stage(k, kTile, firstKey, cfg.widthK);
    stage(v, vTile, firstKey, cfg.widthV);
    mlir::gpu::BarrierOp::create(b, loc);

    // Scores of this row against the tile's keys, through the prologue.
    mlir::linalg::LinalgOp prologue = graph.node(softmax.prologue).op;
    mlir::OpOperand *scoresOperand = prologue.getDpsInputOperand(softmax.scoresInput);
    llvm::SmallVector<Value> logits, keys;
    Value negInf = x.fconst(element, -std::numeric_limits<double>::infinity());
    Value tileMax = negInf;
    for (int64_t jj = 0; jj < BK; ++jj) {
      Value partial = x.vzero(element, W);
      for (int64_t c = 0; c < cfg.chunks; ++c) {
        Value kv = x.load(kTile, {x.c(jj), chunkStart[c]}, W, true, cfg.elementBytes);
        partial = mlir::vector::FMAOp::create(b, loc, qChunks[c], kv, partial);
      }
      Value score = x.extract(partial, 0);
      for (int64_t u = 1; u < W; ++u)
        score = mlir::arith::AddFOp::create(b, loc, score, x.extract(partial, u));
      score = sumOverLanes(x, score, cfg.lanes);
      Value key = x.add(firstKey, jj);
      keys.push_back(key);
      // The prologue may read memory at the key (a mask): keys past the end
      // are evaluated at the last one, then masked.
      bool mayOverrun = TK % BK != 0 && (jj > 0 || cfg.splits > 1);
      llvm::SmallVector<Value> at{head, query, mayOverrun ? x.min(key, TK - 1) : key};
      llvm::SmallVector<Value> loopIndex = elemental.loopIndexOfOutput(softmax.prologue, at);
      elemental.defineRead(softmax.prologue, *scoresOperand,
                           elemental.applyMap(prologue.getMatchingIndexingMap(scoresOperand), loopIndex), score);
      if (mask) {
        // The mask's element, computed as its fusion computes it.
        mlir::OpOperand &maskOperand = prologue->getOpOperand(softmax.maskInput);
        llvm::SmallVector<Value> maskIndex =
            elemental.applyMap(prologue.getMatchingIndexingMap(&maskOperand), loopIndex);
        Value penalty = mask->node(maskGraph->outputs().front().node, maskIndex);
        if (!penalty || mask->failed())
          return mlir::failure();
        elemental.defineRead(softmax.prologue, maskOperand, maskIndex, penalty);
      }
      Value logit = elemental.node(softmax.prologue, at);
      if (!logit || elemental.failed())
        return mlir::failure();
      // Keys past the end do not exist.
      if (mayOverrun)
        logit = mlir::arith::SelectOp::create(b, loc, x.lt(key, TK), logit, negInf);
      logits.push_back(logit);
      tileMax = mlir::arith::MaximumFOp::create(b, loc, tileMax, logit);
    }
    Value newMax = mlir::arith::MaximumFOp::create(b, loc, rowMax, tileMax);
    // Exponents are taken against the new max, or against 0 while every key
    // so far is -inf (a mask of -inf): exp(-inf - -inf) would be NaN where
    // the row's later keys still make the softmax finite.
    Value allMasked = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, newMax, negInf);
    Value reference = mlir::arith::SelectOp::create(b, loc, allMasked, x.fconst(element, 0.0), newMax);
    // The traced exp(x - max), with the row's max taken to be the reference.
    elemental.define(softmax.max, {head, query}, reference);
    Value correction = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, rowMax, reference));
    Value tileSum = x.fconst(element, 0.0);
    llvm::SmallVector<Value> next;
    for (int64_t c = 0; c < cfg.chunks; ++c)
      next.push_back(mlir::arith::MulFOp::create(b, loc, acc[c], x.broadcast(correction, W)));
    for (int64_t jj = 0; jj < BK; ++jj) {
      llvm::SmallVector<Value> at{head, query, keys[jj]};
      elemental.define(softmax.prologue, at, logits[jj]);
      Value weight = elemental.node(softmax.exp, at);
      if (!weight || elemental.failed())
        return mlir::failure();
      tileSum = mlir::arith::AddFOp::create(b, loc, tileSum, weight);
      Value weights = x.broadcast(weight, W);
      for (int64_t c = 0; c < cfg.chunks; ++c) {
        Value vv = x.load(vTile, {x.c(jj), chunkStart[c]}, W, true, cfg.elementBytes);
        next[c] = mlir::vector::FMAOp::create(b, loc, weights, vv, next[c]);
      }
    }
    Value newSum =
        mlir::arith::AddFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, rowSum, correction), tileSum);
    llvm::SmallVector<Value> yielded{newMax, newSum};
    yielded.append(next.begin(), next.end());
    elemental.popScope();
    if (mask)
      mask->popScope();
    mlir::scf::YieldOp::create(b, loc, yielded);
  }
  Value rowSum = loop.getResult(1);
  if (cfg.splits > 1) {
    // This split's partials: acc, then (lane 0) the max and the sum.
    x.guarded(rowValid, [&] {
      for (int64_t c = 0; c < cfg.chunks; ++c)
        x.store(loop.getResult(2 + c), out, {head, row, split, chunkStart[c]}, W, true, cfg.elementBytes);
      Value first = b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::eq, lane, x.c(0));
      x.guarded(first, [&] {
        mlir::memref::StoreOp::create(b, loc, loop.getResult(0), out, mlir::ValueRange{head, row, split, x.c(D)});
        mlir::memref::StoreOp::create(b, loc, rowSum, out, mlir::ValueRange{head, row, split, x.c(D + 1)});
      });
    });
  } else {
    // out = acc / l, the traced division.
    Value sums = x.broadcast(rowSum, W);
    x.guarded(rowValid, [&] {
      for (int64_t c = 0; c < cfg.chunks; ++c) {
        Value value = mlir::arith::DivFOp::create(b, loc, loop.getResult(2 + c), sums);
        x.store(value, out, {head, row, chunkStart[c]}, W, cfg.widthO >= W, cfg.elementBytes);
      }
    });
  }
  if (elemental.failed())
    return mlir::failure();
  if (anchor->use_empty())
    anchor->erase();
  return mlir::success();
}

// The kernel that combines split keys (split_combine.h): one thread per
// element (h, i, d) of the output. Arguments: partials ([H, Tq, S,
// partialStride]), out ([H, Tq, D]) and, where keys past a run-time
// position are not read, that position.
mlir::LogicalResult buildCombine(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f, const Config &cfg) {
  mlir::Location loc = f.getLoc();
  Builder x{b, loc};
  Value partials = f.getArgument(0), out = f.getArgument(1);
  Value position = cfg.positionArgument >= 0 ? f.getArgument(2) : Value();
  const int64_t D = cfg.headSize;
  int64_t total = cfg.heads * cfg.length * D;
  Value linear = x.add(x.mul(blockIdX(b, loc), kCombineThreads), threadIdX(b, loc));
  Value valid = total % kCombineThreads != 0 ? x.lt(linear, total) : Value();
  x.guarded(valid, [&] {
    Value d = x.rem(linear, D);
    Value row = x.rem(x.div(linear, D), cfg.length);
    Value head = x.div(linear, D * cfg.length);
    Value value = combineSplits(b, loc, partials, position, D, cfg.tilesPerSplit * cfg.keysPerTile, head, row, d);
    mlir::memref::StoreOp::create(b, loc, value, out, mlir::ValueRange{head, row, d});
  });
  return mlir::success();
}

// ---- The pass --------------------------------------------------------------

struct FusedAttentionPass : impl::FusedAttentionPassBase<FusedAttentionPass> {
  using FusedAttentionPassBase::FusedAttentionPassBase;

  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    const DeviceDescription *device = passDeviceDescription(module, chip);
    if (!device)
      return signalPassFailure();
    mlir::SymbolTable symbols(module);
    KernelFactory kernels(module);
    llvm::SmallVector<mlir::func::CallOp> softmaxCalls;
    module.walk([&](mlir::func::CallOp call) {
      auto caller = call->getParentOfType<mlir::func::FuncOp>();
      auto callee = symbols.lookup<mlir::func::FuncOp>(call.getCallee());
      if (!caller->hasAttr(kFusionAttrName) && callee && callee->hasAttr(kFusionAttrName))
        softmaxCalls.push_back(call);
    });
    int fused = 0;
    for (mlir::func::CallOp call : softmaxCalls) {
      std::string why;
      looksLikeSoftmax_ = false;
      if (mlir::succeeded(fuse(call, symbols, kernels, *device, why)))
        ++fused;
      else if (looksLikeSoftmax_)
        MLPIPE_DEBUG(kDebugEmitters, os << call.getCallee() << ": not fused attention: " << why << "\n");
    }
    // Masks every reader of which now computes its elements itself: their
    // fusion (which writes nothing else) goes.
    for (Value mask : masks_) {
      llvm::SmallVector<mlir::Operation *> users(mask.getUsers().begin(), mask.getUsers().end());
      int writers = 0;
      bool onlyWritten = llvm::all_of(users, [&](mlir::Operation *user) {
        if (mlir::isa<mlir::memref::DeallocOp>(user))
          return true;
        auto call = mlir::dyn_cast<mlir::func::CallOp>(user);
        auto callee = call ? symbols.lookup<mlir::func::FuncOp>(call.getCallee()) : mlir::func::FuncOp();
        std::string ignored;
        auto graph = callee ? FusionGraph::analyze(callee, ignored) : mlir::FailureOr<FusionGraph>(mlir::failure());
        ++writers;
        return mlir::succeeded(graph) && graph->outputs().size() == 1 &&
               call.getOperand(graph->outputs().front().argument) == mask && call.getNumOperands() == 1;
      });
      if (!onlyWritten || writers != 1)
        continue;
      for (mlir::Operation *user : users)
        user->erase();
      mask.getDefiningOp()->erase();
    }
    masks_.clear();
    // Fusion functions nothing calls any more.
    for (auto function : llvm::make_early_inc_range(module.getOps<mlir::func::FuncOp>()))
      if (function->hasAttr(kFusionAttrName) && mlir::SymbolTable::symbolKnownUseEmpty(function, module))
        function.erase();
    if (fused > 0)
      MLPIPE_DEBUG(kDebugEmitters, os << fused << " attentions fused\n");
  }

  // The other call using a buffer, besides `call` and deallocations.
  static mlir::func::CallOp otherCall(Value buffer, mlir::func::CallOp call) {
    mlir::func::CallOp other;
    for (mlir::Operation *user : buffer.getUsers()) {
      if (user == call.getOperation() || mlir::isa<mlir::memref::DeallocOp>(user))
        continue;
      auto userCall = mlir::dyn_cast<mlir::func::CallOp>(user);
      if (!userCall || other)
        return {};
      other = userCall;
    }
    return other;
  }

  mlir::LogicalResult fuse(mlir::func::CallOp softmaxCall, mlir::SymbolTable &symbols, KernelFactory &kernels,
                           const DeviceDescription &device, std::string &why) {
    auto softmaxFn = symbols.lookup<mlir::func::FuncOp>(softmaxCall.getCallee());
    auto kind = softmaxFn->getAttrOfType<mlir::StringAttr>(kFusionAttrName);
    if (!kind || kind.getValue() != "row_reduction")
      return mlir::failure();
    auto softmaxGraph = FusionGraph::analyze(softmaxFn, why);
    if (mlir::failed(softmaxGraph))
      return mlir::failure();
    // Which argument is read, which written.
    if (softmaxGraph->outputs().size() != 1)
      return why = "not one output", mlir::failure();
    auto softmax = matchSoftmax(*softmaxGraph, why, looksLikeSoftmax_);
    if (mlir::failed(softmax))
      return mlir::failure();
    unsigned outArg = softmaxGraph->outputs().front().argument;
    unsigned inArg =
        mlir::cast<mlir::BlockArgument>(softmaxGraph->node(softmax->prologue).op.getDpsInputs()[softmax->scoresInput])
            .getArgNumber();
    Value scores = softmaxCall.getOperand(inArg), probs = softmaxCall.getOperand(outArg);
    if (!scores.getDefiningOp<mlir::memref::AllocOp>() || !probs.getDefiningOp<mlir::memref::AllocOp>())
      return why = "scores or probabilities are not temporaries of the host", mlir::failure();
    for (unsigned argument : softmax->extraArguments)
      if (softmaxCall.getOperand(argument) == scores || softmaxCall.getOperand(argument) == probs)
        return why = "the softmax reads its own buffers twice", mlir::failure();
    // A mask read from memory, added to the scaled scores at [query, key].
    mlir::func::FuncOp maskWriter;
    if (!softmax->causal && (maskWriter = matchCausalMaskWriter(*softmax, *softmaxGraph, softmaxCall, symbols)))
      masks_.insert(softmaxCall.getOperand(softmax->maskArgument));
    // A decode step's mask past a run-time position (positionMaskSource)
    // makes those keys' weights exact zeros: tiles of keys wholly after it
    // are not read, and a split holding none writes an empty partial (max
    // -inf, sum 0), which the combining kernel skips. A step early in a long
    // cache then reads the keys it has, not the whole cache.
    Value position = !softmax->causal ? maskingPosition(*softmax, *softmaxGraph, softmaxCall, symbols) : Value();
    std::optional<FusionGraph> maskGraph;
    if (maskWriter) {
      auto analyzed = FusionGraph::analyze(maskWriter, why);
      if (mlir::failed(analyzed))
        return mlir::failure();
      maskGraph = std::move(*analyzed);
    }
    mlir::func::CallOp scoresCall = otherCall(scores, softmaxCall), valuesCall = otherCall(probs, softmaxCall);
    if (!scoresCall || !valuesCall || scoresCall->getBlock() != softmaxCall->getBlock() ||
        valuesCall->getBlock() != softmaxCall->getBlock() || !scoresCall->isBeforeInBlock(softmaxCall) ||
        !softmaxCall->isBeforeInBlock(valuesCall))
      return why = "the scores or probabilities have other users", mlir::failure();
    auto scoresFn = symbols.lookup<mlir::func::FuncOp>(scoresCall.getCallee());
    auto valuesFn = symbols.lookup<mlir::func::FuncOp>(valuesCall.getCallee());
    if (!scoresFn || !valuesFn)
      return why = "a callee is missing", mlir::failure();
    auto scoresGraph = FusionGraph::analyze(scoresFn, why);
    auto valuesGraph = FusionGraph::analyze(valuesFn, why);
    if (mlir::failed(scoresGraph) || mlir::failed(valuesGraph))
      return mlir::failure();
    int scoresProduct = plainBatchMatmul(*scoresGraph), valuesProduct = plainBatchMatmul(*valuesGraph);
    if (scoresProduct < 0 || valuesProduct < 0)
      return why = "the products are not plain batch matmuls", mlir::failure();
    // The scores call writes `scores` (its output argument), and nothing else.
    unsigned scoresOut = scoresGraph->outputs().front().argument;
    unsigned valuesOut = valuesGraph->outputs().front().argument;
    if (scoresCall.getOperand(scoresOut) != scores)
      return why = "the scores matmul does not write the scores", mlir::failure();
    for (auto [i, operand] : llvm::enumerate(scoresCall.getOperands()))
      if (i != scoresOut && operand == scores)
        return why = "the scores matmul reads the scores", mlir::failure();
    mlir::linalg::LinalgOp scoresOp = scoresGraph->node(scoresProduct).op;
    mlir::linalg::LinalgOp valuesOp = valuesGraph->node(valuesProduct).op;
    // The values product reads the probabilities as its A operand, as they are.
    auto probsArg = mlir::dyn_cast<mlir::BlockArgument>(valuesOp.getDpsInputs()[0]);
    if (!probsArg || probsArg.getOwner() != &valuesFn.front() ||
        valuesCall.getOperand(probsArg.getArgNumber()) != probs)
      return why = "the values matmul does not read the probabilities directly", mlir::failure();
    for (auto [i, operand] : llvm::enumerate(valuesCall.getOperands()))
      if (i != probsArg.getArgNumber() && operand == probs)
        return why = "the values matmul reads the probabilities twice", mlir::failure();

    // Types and shapes: Q [H, Tq, D], K^T [H, D, Tk], V [H, Tk, D], out [H, Tq, D].
    auto qType = mlir::dyn_cast<mlir::MemRefType>(scoresOp.getDpsInputs()[0].getType());
    auto ktType = mlir::dyn_cast<mlir::MemRefType>(scoresOp.getDpsInputs()[1].getType());
    auto vType = mlir::dyn_cast<mlir::MemRefType>(valuesOp.getDpsInputs()[1].getType());
    auto oType = mlir::dyn_cast<mlir::MemRefType>(valuesCall.getOperand(valuesOut).getType());
    if (!qType || !ktType || !vType || !oType || !qType.hasStaticShape() || !ktType.hasStaticShape() ||
        !vType.hasStaticShape() || !oType.hasStaticShape())
      return why = "operands of dynamic shape", mlir::failure();
    mlir::Type element = qType.getElementType();
    if (!(element.isF32() || element.isF64()) || ktType.getElementType() != element ||
        vType.getElementType() != element || oType.getElementType() != element ||
        mlir::cast<mlir::MemRefType>(scores.getType()).getElementType() != element)
      return why = "operands that are not all f32 or all f64", mlir::failure();
    Config cfg;
    cfg.heads = qType.getDimSize(0);
    cfg.length = qType.getDimSize(1);
    cfg.headSize = qType.getDimSize(2);
    cfg.element = element;
    cfg.elementBytes = element.getIntOrFloatBitWidth() / 8;
    cfg.causal = softmax->causal;
    cfg.keys = ktType.getRank() == 3 ? ktType.getDimSize(2) : 0;
    llvm::SmallVector<int64_t> hdk{cfg.heads, cfg.headSize, cfg.keys}, hkd{cfg.heads, cfg.keys, cfg.headSize},
        hqd{cfg.heads, cfg.length, cfg.headSize};
    if (llvm::to_vector(ktType.getShape()) != hdk || llvm::to_vector(vType.getShape()) != hkd ||
        llvm::to_vector(oType.getShape()) != hqd || cfg.keys < 1)
      return why = "Q, K, V and the output do not have matching head shapes", mlir::failure();
    if (cfg.causal && cfg.keys != cfg.length)
      return why = "a causal mask over more keys than queries", mlir::failure();
    if (!oType.getLayout().isIdentity())
      return why = "an output that is a view", mlir::failure();
    // The limit is on query rows walking every key: a decode step's one
    // row per head is split over the keys instead.
    AttentionChoice choice = chooseAttentionPath(cfg.length, cfg.keys, maxKeys);
    if (choice.path != AttentionPath::Fused)
      return why = choice.why, mlir::failure();

    // The launch configuration, from the device description.
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
    auto sharedBytes = [&] { return 2 * cfg.keysPerTile * cfg.headSize * cfg.elementBytes; };
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
      cfg.splits = std::clamp<int64_t>(wanted, 1, most);
      cfg.tilesPerSplit = llvm::divideCeilSigned(cfg.keyTiles, cfg.splits);
      cfg.splits = llvm::divideCeilSigned(cfg.keyTiles, cfg.tilesPerSplit);
    }
    cfg.partialStride = cfg.headSize + maxWidth;

    // The operands on the host: the fusions' view chains rebuilt over the
    // calls' operands; K^T transposed back to [H, T, D].
    // (At the values call: every operand of the three calls is defined by then.)
    mlir::OpBuilder host(valuesCall);
    llvm::SmallVector<mlir::Operation *> cloned;
    auto hostValue = [&](mlir::func::CallOp call, mlir::func::FuncOp fn, Value value) -> Value {
      mlir::IRMapping mapping;
      for (auto [argument, operand] : llvm::zip(fn.getArguments(), call.getOperands()))
        mapping.map(argument, operand);
      std::function<Value(Value)> bring = [&](Value inner) -> Value {
        if (Value mapped = mapping.lookupOrNull(inner))
          return mapped;
        mlir::Operation *definer = inner.getDefiningOp();
        if (!definer || !(isViewOp(definer) || mlir::isa<mlir::arith::ConstantOp>(definer)))
          return {};
        for (Value operand : definer->getOperands())
          if (!bring(operand))
            return {};
        cloned.push_back(host.clone(*definer, mapping));
        return mapping.lookup(inner);
      };
      return bring(value);
    };
    Value qHost = hostValue(scoresCall, scoresFn, scoresOp.getDpsInputs()[0]);
    Value ktHost = hostValue(scoresCall, scoresFn, scoresOp.getDpsInputs()[1]);
    Value vHost = hostValue(valuesCall, valuesFn, valuesOp.getDpsInputs()[1]);
    Value oHost = valuesCall.getOperand(valuesOut);
    if (!qHost || !ktHost || !vHost) {
      for (mlir::Operation *op : llvm::reverse(cloned))
        op->erase();
      return why = "an operand that is not a view of an argument", mlir::failure();
    }
    auto swap = mlir::AffineMap::getPermutationMap(llvm::ArrayRef<unsigned>{0, 2, 1}, host.getContext());
    Value kHost = mlir::memref::TransposeOp::create(host, softmaxCall.getLoc(), ktHost, mlir::AffineMapAttr::get(swap));
    cfg.widthQ = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(qHost.getType()), maxWidth);
    cfg.widthK = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(kHost.getType()), maxWidth);
    cfg.widthV = vectorWidthAlongLast(mlir::cast<mlir::MemRefType>(vHost.getType()), maxWidth);
    cfg.widthO = vectorWidthAlongLast(oType, maxWidth);

    // attn_scores_matmul_3 -> attn_attention
    std::string name = scoresFn.getName().str();
    if (size_t at = name.find("_scores_matmul"); at != std::string::npos)
      name = name.substr(0, at);
    name += "_attention";
    KernelSignature signature;
    signature.name = name;
    // With split keys the kernel writes partials to a host temporary, and a
    // second kernel combines them into the output.
    Value partials;
    auto partialsType = mlir::MemRefType::get({cfg.heads, cfg.length, cfg.splits, cfg.partialStride}, element);
    if (cfg.splits > 1)
      partials =
          mlir::memref::AllocOp::create(host, softmaxCall.getLoc(), partialsType, host.getI64IntegerAttr(kVectorBytes));
    signature.arguments = {qHost.getType(), kHost.getType(), vHost.getType(), partials ? partialsType : oType};
    llvm::SmallVector<Value> launchOperands{qHost, kHost, vHost, partials ? partials : oHost};
    for (unsigned argument : softmax->extraArguments) {
      Value operand = softmaxCall.getOperand(argument);
      signature.arguments.push_back(operand.getType());
      launchOperands.push_back(operand);
    }
    if (position) {
      // (Sublayer mode's prologue loads it itself: an extra argument already.)
      auto known = llvm::find(launchOperands, position);
      cfg.positionArgument = known - launchOperands.begin();
      if (known == launchOperands.end()) {
        signature.arguments.push_back(position.getType());
        launchOperands.push_back(position);
      }
    }
    // A decode step writes its token's keys and values into the cache with a
    // copy just before the attention reads the cache: a kernel of its own, a
    // launch a layer on a step's critical path. The attention kernel does it
    // instead: the block whose split holds the key the copy writes copies the
    // step's keys and values for its head into the cache first, then reads
    // the cache as before; no other block reads that key.
    std::optional<CacheWrite> cacheWrite;
    if (position && !cfg.causal && cfg.queryTiles == 1)
      cacheWrite = matchCacheWrite(scoresCall, softmaxCall, valuesCall, kHost, vHost, cfg.heads, cfg.headSize, element);
    if (cacheWrite) {
      cfg.cacheWrite = &*cacheWrite;
      cfg.cacheSourceArgument = static_cast<int64_t>(launchOperands.size());
      signature.arguments.push_back(cacheWrite->source.getType());
      launchOperands.push_back(cacheWrite->source);
      // The position the key is computed from is often an argument already.
      for (Value input : cacheWrite->keyInputs) {
        auto known = llvm::find(launchOperands, input);
        cfg.cacheKeyInputArguments.push_back(known - launchOperands.begin());
        if (known == launchOperands.end()) {
          signature.arguments.push_back(input.getType());
          launchOperands.push_back(input);
        }
      }
    }
    auto space = mlir::gpu::AddressSpaceAttr::get(host.getContext(), mlir::gpu::AddressSpace::Workgroup);
    auto tileType =
        mlir::MemRefType::get({cfg.keysPerTile, cfg.headSize}, element, mlir::MemRefLayoutAttrInterface{}, space);
    signature.workgroupBuffers = {tileType, tileType};
    int64_t rowBytes = cfg.heads * cfg.headSize * cfg.elementBytes;
    int64_t partialBytes = cfg.splits > 1 ? partialsType.getNumElements() * cfg.elementBytes : 0;
    signature.bytesMoved = rowBytes * (cfg.length + 2 * cfg.keys) + (partials ? partialBytes : rowBytes * cfg.length) +
                           (cacheWrite ? 4 * rowBytes : 0);
    int64_t pairs = cfg.causal ? cfg.heads * cfg.length * (cfg.length + 1) / 2 : cfg.heads * cfg.length * cfg.keys;
    signature.flops = 4 * pairs * cfg.headSize;
    signature.blockSize = {static_cast<int32_t>(cfg.threads), 1, 1};
    auto kernel = kernels.tryBuild(signature, [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) {
      for (unsigned i = 0; i < f.getNumWorkgroupAttributions(); ++i)
        f.setWorkgroupAttributionAttr(i, "llvm.align", b.getI64IntegerAttr(kVectorBytes));
      return buildBody(b, f, cfg, *softmaxGraph, *softmax, maskGraph ? &*maskGraph : nullptr);
    });
    mlir::FailureOr<mlir::gpu::GPUFuncOp> combine = mlir::failure();
    if (mlir::succeeded(kernel) && partials) {
      KernelSignature combining;
      combining.name = name + "_combine";
      combining.arguments = {partialsType, oType};
      if (position)
        combining.arguments.push_back(position.getType());
      combining.bytesMoved = partialBytes + rowBytes * cfg.length;
      combining.blockSize = {static_cast<int32_t>(kCombineThreads), 1, 1};
      combine = kernels.tryBuild(combining,
                                 [&](mlir::OpBuilder &b, mlir::gpu::GPUFuncOp f) { return buildCombine(b, f, cfg); });
    }
    if (mlir::failed(kernel) || (partials && mlir::failed(combine))) {
      if (partials)
        partials.getDefiningOp()->erase();
      kHost.getDefiningOp()->erase();
      for (mlir::Operation *op : llvm::reverse(cloned))
        op->erase();
      return why = "the kernel could not be built", mlir::failure();
    }
    std::string splitText =
        cfg.splits > 1 ? ", keys split " + std::to_string(cfg.splits) + " ways (" + std::to_string(cfg.tilesPerSplit) +
                             " tiles each; kSplitBlocksPerSm, kMinKeyTilesPerSplit), then a combining kernel"
                       : "";
    MLPIPE_DEBUG(kDebugEmitters,
                 os << name << ": fused attention, " << cfg.heads << " heads of " << cfg.length << " queries x "
                    << cfg.keys << " keys x " << cfg.headSize
                    << (cfg.causal                  ? ", causal (tiles past the diagonal skipped)"
                        : cfg.positionArgument >= 0 ? ", masked past a run-time position (tiles after it skipped)"
                                                    : ", not causal (every tile)")
                    << ", " << cfg.rowsPerBlock << " query rows per block, " << cfg.lanes << " lanes per row holding "
                    << cfg.chunks << " chunks of " << cfg.width << ", " << cfg.keysPerTile
                    << "-key tiles of K and V in shared memory, vectors q " << cfg.widthQ << " k " << cfg.widthK
                    << " v " << cfg.widthV << " out " << cfg.widthO << ", " << cfg.heads * cfg.queryTiles * cfg.splits
                    << " blocks x " << cfg.threads << " threads" << splitText
                    << (cacheWrite ? ", writing the step's keys and values into the cache first" : "") << "\n");
    LaunchDims dims;
    dims.grid = {cfg.heads * cfg.queryTiles * cfg.splits, 1, 1};
    dims.block = {cfg.threads, 1, 1};
    kernels.launch(host, valuesCall.getLoc(), *kernel, dims, launchOperands);
    if (partials) {
      LaunchDims combineDims;
      combineDims.grid = {llvm::divideCeilSigned(cfg.heads * cfg.length * cfg.headSize, kCombineThreads), 1, 1};
      combineDims.block = {kCombineThreads, 1, 1};
      llvm::SmallVector<Value> combineOperands{partials, oHost};
      if (position)
        combineOperands.push_back(position);
      kernels.launch(host, valuesCall.getLoc(), *combine, combineDims, combineOperands);
      mlir::memref::DeallocOp::create(host, valuesCall.getLoc(), partials);
    }
    // The three calls go (and the cache write the kernel does); the
    // temporaries they shared with nobody else too.
    if (cacheWrite)
      cacheWrite->copy.erase();
    valuesCall.erase();
    softmaxCall.erase();
    scoresCall.erase();
    for (Value buffer : {scores, probs}) {
      for (mlir::Operation *user : llvm::make_early_inc_range(buffer.getUsers()))
        user->erase();
      buffer.getDefiningOp()->erase();
    }
    return mlir::success();
  }

  // Whether the fusion being looked at started like a softmax (two
  // reductions, the first a max): only then does debug output say why it
  // was not fused.
  bool looksLikeSoftmax_ = false;
  // Causal masks in memory whose elements fused kernels now compute.
  llvm::SetVector<Value> masks_;
};

} // namespace

} // namespace mlpipe
