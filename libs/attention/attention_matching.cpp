// What mlpipe-fused-attention matches (attention_matching.h).
#include "attention/attention_matching.h"

#include "fusion/hero_analysis.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

namespace mlpipe::emitters::fused_attention {

namespace {

// Whether `node` only rounds `product`'s result to a narrower float type,
// element by element (a 16-bit program's storage of an f32 product).
bool roundsProduct(const FusionGraph &graph, const FusionNode &node, int product) {
  auto generic = mlir::dyn_cast<mlir::linalg::GenericOp>(node.op.getOperation());
  if (!generic || generic.getNumDpsInputs() != 1 || node.inputProducers[0] != product ||
      generic.getNumReductionLoops() != 0 ||
      !llvm::all_of(generic.getIndexingMapsArray(), [](mlir::AffineMap map) { return map.isIdentity(); }))
    return false;
  mlir::Block *body = generic.getBody();
  auto truncate = mlir::dyn_cast<mlir::arith::TruncFOp>(body->front());
  return truncate && truncate.getIn() == body->getArgument(0) &&
         body->getTerminator()->getOperand(0) == truncate.getResult();
}

// A fusion that is one batch_matmul from zero (its fill), nothing else,
// or (where `rounded` may be) that and the rounding of its result to the
// output's narrower type, or (where `copiedA` may be) that and a copy
// into the product's A operand (*copiedA: its node, else -1): the node of
// the product, or -1.
int plainBatchMatmul(const FusionGraph &graph, bool *rounded = nullptr, int *copiedA = nullptr) {
  int product = -1, rounding = -1, copy = -1;
  for (const FusionNode &node : graph.nodes()) {
    if (mlir::isa<mlir::linalg::BatchMatmulOp>(node.op.getOperation())) {
      if (product >= 0)
        return -1;
      product = node.order;
    } else if (rounded && rounding < 0 && product >= 0 && roundsProduct(graph, node, product)) {
      rounding = node.order;
    } else if (copiedA && copy < 0 && product < 0 && mlir::isa<mlir::linalg::CopyOp>(node.op.getOperation())) {
      copy = node.order;
    } else if (!mlir::isa<mlir::linalg::FillOp>(node.op.getOperation())) {
      return -1;
    }
  }
  int output = rounding >= 0 ? rounding : product;
  if (product < 0 || !isZeroFillNode(graph, graph.node(product).initProducer) || graph.outputs().size() != 1 ||
      graph.outputs().front().node != output)
    return -1;
  if (rounded)
    *rounded = rounding >= 0;
  for (auto [i, producer] : llvm::enumerate(graph.node(product).inputProducers))
    if (producer >= 0 && !(i == 0 && producer == copy))
      return -1;
  if (copy >= 0 && graph.node(product).inputProducers[0] != copy)
    return -1;
  if (copiedA)
    *copiedA = copy;
  return product;
}

// The other call using a buffer, besides `call` and deallocations.
mlir::func::CallOp otherCall(Value buffer, mlir::func::CallOp call) {
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

// The softmax fusion the call calls, the host temporaries it reads and
// writes (the scores and the probabilities), and the mask or position it
// reads.
mlir::LogicalResult matchSoftmaxCall(mlir::func::CallOp softmaxCall, mlir::SymbolTable &symbols, AttentionMatch &match,
                                     std::string &why, bool &looksLikeSoftmax) {
  auto softmaxFn = symbols.lookup<mlir::func::FuncOp>(softmaxCall.getCallee());
  auto kind = softmaxFn->getAttrOfType<mlir::StringAttr>(kFusionAttrName);
  if (!kind || kind.getValue() != "row_reduction")
    return mlir::failure();
  auto softmaxGraph = FusionGraph::analyze(softmaxFn, why);
  if (mlir::failed(softmaxGraph))
    return mlir::failure();
  match.softmaxCall = softmaxCall;
  match.softmaxGraph = std::move(*softmaxGraph);
  const FusionGraph &graph = match.softmaxGraph;
  // Which argument is read, which written.
  if (graph.outputs().size() != 1)
    return why = "not one output", mlir::failure();
  auto softmax = matchSoftmax(graph, why, looksLikeSoftmax);
  if (mlir::failed(softmax))
    return mlir::failure();
  match.softmax = *softmax;
  unsigned outArg = graph.outputs().front().argument;
  unsigned inArg =
      mlir::cast<mlir::BlockArgument>(graph.node(softmax->prologue).op.getDpsInputs()[softmax->scoresInput])
          .getArgNumber();
  Value scores = softmaxCall.getOperand(inArg), probs = softmaxCall.getOperand(outArg);
  if (!scores.getDefiningOp<mlir::memref::AllocOp>() || !probs.getDefiningOp<mlir::memref::AllocOp>())
    return why = "scores or probabilities are not temporaries of the host", mlir::failure();
  for (unsigned argument : softmax->extraArguments)
    if (softmaxCall.getOperand(argument) == scores || softmaxCall.getOperand(argument) == probs)
      return why = "the softmax reads its own buffers twice", mlir::failure();
  match.scores = scores;
  match.probs = probs;
  // A mask read from memory, added to the scaled scores at [query, key].
  mlir::func::FuncOp maskWriter;
  if (!match.softmax.causal && (maskWriter = matchCausalMaskWriter(match.softmax, graph, softmaxCall, symbols))) {
    match.mask = softmaxCall.getOperand(match.softmax.maskArgument);
  }
  // A decode step's mask past a run-time position (positionMaskSource)
  // makes those keys' weights exact zeros: tiles of keys wholly after it
  // are not read, and a split holding none neither writes partials nor
  // counts itself done (the combine skips it). A step early in a long
  // cache then reads the keys it has, not the whole cache.
  match.position = !match.softmax.causal
                       ? maskingPosition(match.softmax, graph, softmaxCall, symbols, &match.rowsPerPosition)
                       : Value();
  // A position's mask read from memory (fused mode; batched decoding's
  // too, a row's position read at its sequence): the kernel computes its
  // elements from the positions, as the mask's fusion does, and that
  // fusion's kernel goes once no call reads the mask.
  if (match.position && !maskWriter) {
    if (mlir::func::CallOp writer = matchPositionMaskInput(match.softmax, graph, softmaxCall, symbols)) {
      match.mask = softmaxCall.getOperand(match.softmax.maskArgument);
      match.maskWriterCall = writer;
      maskWriter = symbols.lookup<mlir::func::FuncOp>(writer.getCallee());
    }
  }
  if (maskWriter) {
    auto analyzed = FusionGraph::analyze(maskWriter, why);
    if (mlir::failed(analyzed))
      return mlir::failure();
    match.maskGraph = std::move(*analyzed);
  }
  return mlir::success();
}

// The scores matmul call writing the scores, the values matmul call reading
// the probabilities, each a plain batch matmul, in a row with the softmax.
mlir::LogicalResult matchProductCalls(mlir::SymbolTable &symbols, AttentionMatch &match, std::string &why) {
  mlir::func::CallOp softmaxCall = match.softmaxCall;
  Value scores = match.scores, probs = match.probs;
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
  bool valuesRounded = false;
  int queryCopy = -1;
  int scoresProduct = plainBatchMatmul(*scoresGraph, nullptr, &queryCopy),
      valuesProduct = plainBatchMatmul(*valuesGraph, &valuesRounded);
  if (scoresProduct < 0 || valuesProduct < 0)
    return why = "the products are not plain batch matmuls", mlir::failure();
  if (queryCopy >= 0)
    match.queryCopy = mlir::cast<mlir::linalg::CopyOp>(scoresGraph->node(queryCopy).op.getOperation());
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
  if (!probsArg || probsArg.getOwner() != &valuesFn.front() || valuesCall.getOperand(probsArg.getArgNumber()) != probs)
    return why = "the values matmul does not read the probabilities directly", mlir::failure();
  for (auto [i, operand] : llvm::enumerate(valuesCall.getOperands()))
    if (i != probsArg.getArgNumber() && operand == probs)
      return why = "the values matmul reads the probabilities twice", mlir::failure();
  match.scoresCall = scoresCall;
  match.valuesCall = valuesCall;
  match.scoresFn = scoresFn;
  match.valuesFn = valuesFn;
  match.scoresOp = scoresOp;
  match.valuesOp = valuesOp;
  match.valuesOut = valuesOut;
  return mlir::success();
}

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

} // namespace

mlir::LogicalResult matchAttention(mlir::func::CallOp softmaxCall, mlir::SymbolTable &symbols, AttentionMatch &match,
                                   std::string &why, bool &looksLikeSoftmax) {
  if (mlir::failed(matchSoftmaxCall(softmaxCall, symbols, match, why, looksLikeSoftmax)))
    return mlir::failure();
  return matchProductCalls(symbols, match, why);
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

namespace {

// The key a batched cache write goes to: clamp(positions[b], 0, last),
// as traced (index_cast of a load of element b of `positions`, maxsi 0,
// minsi last): b, or -1.
int64_t clampedPositionOf(Value key, Value positions, int64_t last) {
  auto upper = key.getDefiningOp<mlir::arith::MinSIOp>();
  auto lower = upper ? upper.getLhs().getDefiningOp<mlir::arith::MaxSIOp>() : nullptr;
  auto cast = lower ? lower.getLhs().getDefiningOp<mlir::arith::IndexCastOp>() : nullptr;
  auto load = cast ? cast.getIn().getDefiningOp<mlir::memref::LoadOp>() : nullptr;
  llvm::APInt low, high;
  if (!load || !mlir::matchPattern(lower.getRhs(), mlir::m_ConstantInt(&low)) || !low.isZero() ||
      !mlir::matchPattern(upper.getRhs(), mlir::m_ConstantInt(&high)) || high.getSExtValue() != last ||
      !load.getIndices().empty() || rootBuffer(load.getMemRef()) != positions)
    return -1;
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (!staticLayout(load.getMemRef().getType(), strides, offset))
    return -1;
  return offset;
}

} // namespace

std::optional<BatchedCacheWrite> matchBatchedCacheWrite(mlir::func::CallOp scoresCall, mlir::func::CallOp softmaxCall,
                                                        mlir::func::CallOp valuesCall, Value k, Value v,
                                                        Value positions, int64_t rows, int64_t rowsPerSequence,
                                                        int64_t headSize, mlir::Type element) {
  Value root = rootBuffer(k);
  auto positionsType = mlir::dyn_cast<mlir::MemRefType>(positions.getType());
  if (rootBuffer(v) != root || !mlir::isa<mlir::BlockArgument>(root) || rowsPerSequence <= 0 ||
      rows % rowsPerSequence != 0 || !positionsType || !positionsType.getLayout().isIdentity())
    return std::nullopt;
  int64_t batch = rows / rowsPerSequence;
  llvm::SmallVector<int64_t> rootStrides, kStrides, vStrides;
  int64_t rootOffset = 0, kOffset = 0, vOffset = 0;
  auto rootType = mlir::cast<mlir::MemRefType>(root.getType());
  // The cache [2, B * H, n_ctx, D], k and v its two halves.
  if (rootType.getRank() != 4 || !staticLayout(rootType, rootStrides, rootOffset) ||
      !staticLayout(k.getType(), kStrides, kOffset) || !staticLayout(v.getType(), vStrides, vOffset) ||
      rootType.getDimSize(0) != 2 || rootType.getDimSize(1) != rows || rootType.getDimSize(3) != headSize ||
      kOffset != rootOffset || vOffset != rootOffset + rootStrides[0] || kStrides[0] != rootStrides[1] ||
      kStrides[1] != rootStrides[2] || kStrides[2] != rootStrides[3] || vStrides != kStrides || rootStrides[3] != 1)
    return std::nullopt;
  BatchedCacheWrite write;
  write.rowsPerSequence = rowsPerSequence;
  write.lastKey = rootType.getDimSize(2) - 1;
  write.copies.assign(batch, nullptr);
  llvm::SmallVector<int64_t> offsets(batch, 0);
  mlir::Operation *first = scoresCall;
  for (mlir::Operation *op = scoresCall->getPrevNode(); op; op = op->getPrevNode()) {
    auto copy = mlir::dyn_cast<mlir::linalg::CopyOp>(op);
    if (!copy || copy.getOutputs().size() != 1 || rootBuffer(copy.getOutputs()[0]) != root)
      continue;
    auto destination = copy.getOutputs()[0].getDefiningOp<mlir::memref::SubViewOp>();
    if (!copy.hasPureBufferSemantics() || !destination || destination.getSource() != root ||
        llvm::any_of(destination.getStaticStrides(), [](int64_t s) { return s != 1; }))
      return std::nullopt;
    llvm::SmallVector<mlir::OpFoldResult> at = destination.getMixedOffsets();
    llvm::SmallVector<int64_t> sizes(destination.getStaticSizes());
    std::optional<int64_t> kv = mlir::getConstantIntValue(at[0]), row = mlir::getConstantIntValue(at[1]),
                           d = mlir::getConstantIntValue(at[3]);
    auto key = mlir::dyn_cast<Value>(at[2]);
    if (!kv || *kv != 0 || !row || *row % rowsPerSequence != 0 || !d || *d != 0 || !key ||
        sizes != llvm::SmallVector<int64_t>{2, rowsPerSequence, 1, headSize})
      return std::nullopt;
    int64_t sequence = *row / rowsPerSequence;
    if (sequence >= batch || write.copies[sequence] || clampedPositionOf(key, positions, write.lastKey) != sequence)
      return std::nullopt;
    // The source: [2, H, 1, D] in an identity-layout buffer, at fixed strides.
    Value source = copy.getInputs()[0];
    auto sourceType = mlir::dyn_cast<mlir::MemRefType>(source.getType());
    Value sourceRoot = rootBuffer(source);
    auto sourceRootType = mlir::dyn_cast<mlir::MemRefType>(sourceRoot.getType());
    llvm::SmallVector<int64_t> strides;
    int64_t offset = 0;
    if (!sourceType || sourceType.getShape() != llvm::ArrayRef<int64_t>(sizes) ||
        sourceType.getElementType() != element || !sourceRootType || !sourceRootType.getLayout().isIdentity() ||
        !sourceRootType.hasStaticShape() || !staticLayout(sourceType, strides, offset) || strides[3] != 1 ||
        (write.sourceRoot &&
         (sourceRoot != write.sourceRoot || strides[0] != write.kvStride || strides[1] != write.headStride)))
      return std::nullopt;
    write.sourceRoot = sourceRoot;
    write.kvStride = strides[0];
    write.headStride = strides[1];
    write.copies[sequence] = copy;
    offsets[sequence] = offset;
    first = copy;
  }
  if (llvm::is_contained(write.copies, nullptr))
    return std::nullopt;
  // Sequence b's source at offset + b * sequenceStride.
  write.offset = offsets[0];
  write.sequenceStride = batch > 1 ? offsets[1] - offsets[0] : 0;
  for (int64_t b = 0; b < batch; ++b)
    if (offsets[b] != write.offset + b * write.sequenceStride)
      return std::nullopt;
  // Moving the copies into the attention kernel moves them past everything
  // in between: none of it may touch the cache or the copies' source.
  for (mlir::Operation *op = first->getNextNode(); op != valuesCall.getOperation(); op = op->getNextNode()) {
    if (!op)
      return std::nullopt;
    if (op == scoresCall.getOperation() || op == softmaxCall.getOperation())
      continue;
    if (auto copy = mlir::dyn_cast<mlir::linalg::CopyOp>(op); copy && llvm::is_contained(write.copies, copy))
      continue;
    auto touches = op->walk([&](mlir::Operation *inner) {
      if (isViewOp(inner))
        return mlir::WalkResult::advance();
      for (Value operand : inner->getOperands())
        if (mlir::isa<mlir::MemRefType>(operand.getType()) &&
            (rootBuffer(operand) == root || rootBuffer(operand) == write.sourceRoot))
          return mlir::WalkResult::interrupt();
      return mlir::WalkResult::advance();
    });
    if (touches.wasInterrupted())
      return std::nullopt;
  }
  return write;
}

namespace {

// Whether `map` is the heads' merge (t, c) -> (c floordiv D, t, c mod D).
bool isHeadsMergeMap(mlir::AffineMap map, int64_t headSize) {
  if (map.getNumDims() != 2 || map.getNumSymbols() != 0 || map.getNumResults() != 3)
    return false;
  mlir::MLIRContext *context = map.getContext();
  mlir::AffineExpr t = mlir::getAffineDimExpr(0, context), c = mlir::getAffineDimExpr(1, context);
  return map.getResult(0) == c.floorDiv(headSize) && map.getResult(1) == t && map.getResult(2) == c % headSize;
}

} // namespace

void matchHeadsMerge(AttentionMatch &match, mlir::SymbolTable &symbols) {
  Value out = match.valuesCall.getOperand(match.valuesOut);
  auto outType = mlir::dyn_cast<mlir::MemRefType>(out.getType());
  auto outAlloc = out.getDefiningOp<mlir::memref::AllocOp>();
  if (!outType || !outAlloc || outType.getRank() != 3 || !outType.getLayout().isIdentity())
    return;
  // The output's one reader besides the values call.
  mlir::func::CallOp merge;
  for (mlir::Operation *user : out.getUsers()) {
    if (user == match.valuesCall.getOperation() || mlir::isa<mlir::memref::DeallocOp>(user))
      continue;
    auto call = mlir::dyn_cast<mlir::func::CallOp>(user);
    if (!call || merge)
      return;
    merge = call;
  }
  if (!merge || merge->getBlock() != match.valuesCall->getBlock() || merge.getNumOperands() != 2 ||
      merge.getOperand(0) != out || !match.valuesCall->isBeforeInBlock(merge))
    return;
  auto fn = symbols.lookup<mlir::func::FuncOp>(merge.getCallee());
  if (!fn || fn.getBody().empty() || !fn.getBody().hasOneBlock())
    return;
  // One linalg.generic, then the return.
  mlir::Block &body = fn.getBody().front();
  if (body.getOperations().size() != 2)
    return;
  auto generic = mlir::dyn_cast<mlir::linalg::GenericOp>(body.front());
  if (!generic || generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getDpsInputs()[0] != fn.getArgument(0) || generic.getDpsInits()[0] != fn.getArgument(1) ||
      generic.getNumReductionLoops() != 0)
    return;
  int64_t heads = outType.getDimSize(0), rows = outType.getDimSize(1), headSize = outType.getDimSize(2);
  Value merged = merge.getOperand(1);
  auto mergedType = mlir::dyn_cast<mlir::MemRefType>(merged.getType());
  // A fresh allocation (of static shape, in the block), or the host
  // function's own argument (the program's output).
  auto mergedAlloc = merged.getDefiningOp<mlir::memref::AllocOp>();
  auto mergedArgument = mlir::dyn_cast<mlir::BlockArgument>(merged);
  bool fresh = mergedAlloc && mergedAlloc.getOperands().empty() && mergedAlloc->getBlock() == merge->getBlock();
  bool argument = mergedArgument && mergedArgument.getOwner() == merge->getBlock();
  if (!mergedType || !(fresh || argument) || mergedType.getRank() != 2 || !mergedType.getLayout().isIdentity() ||
      mergedType.getDimSize(0) != rows || mergedType.getDimSize(1) != heads * headSize)
    return;
  auto maps = generic.getIndexingMapsArray();
  if (!isHeadsMergeMap(maps[0], headSize) || !maps[1].isIdentity())
    return;
  // The body yields the element, or its truncf to the merged type.
  mlir::Block &inner = generic.getRegion().front();
  auto yield = mlir::cast<mlir::linalg::YieldOp>(inner.getTerminator());
  Value yielded = yield.getOperand(0);
  if (auto truncf = yielded.getDefiningOp<mlir::arith::TruncFOp>())
    yielded = truncf.getIn();
  if (yielded != inner.getArgument(0) || inner.getOperations().size() > 2)
    return;
  // Nothing uses the merged buffer between the values call (where the
  // kernel will write it) and the merge; a fresh one, nothing before; and
  // the attention's calls do not read it.
  for (mlir::Operation *user : merged.getUsers()) {
    if (user == merge.getOperation())
      continue;
    if (user == match.scoresCall.getOperation() || user == match.softmaxCall.getOperation() ||
        user == match.valuesCall.getOperation())
      return;
    if (user->getBlock() != merge->getBlock())
      return;
    if (!merge->isBeforeInBlock(user) && (fresh || match.valuesCall->isBeforeInBlock(user)))
      return;
  }
  // [T, H * D] -> [T, H, D] -> [H, T, D]: strides (D, H * D, 1).
  mlir::MLIRContext *context = out.getContext();
  auto layout = mlir::StridedLayoutAttr::get(context, 0, {headSize, heads * headSize, 1});
  match.mergedOutType = mlir::MemRefType::get({heads, rows, headSize}, mergedType.getElementType(), layout);
  match.mergeCall = merge;
  if (fresh && !mergedAlloc->isBeforeInBlock(match.valuesCall))
    mergedAlloc->moveBefore(match.valuesCall);
}

} // namespace mlpipe::emitters::fused_attention
