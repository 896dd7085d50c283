// What the attention kernels' bodies share (kernel_builder.h).
#include "attention/kernel_builder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlpipe::emitters::fused_attention {

Value Builder::vzero(mlir::Type element, int64_t width) const {
  auto type = mlir::VectorType::get({width}, element);
  return mlir::arith::ConstantOp::create(b, loc, type,
                                         mlir::DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)));
}

Value Builder::load(Value memref, llvm::SmallVector<Value> index, int64_t width, bool vectorOk,
                    int64_t elementBytes) const {
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

void Builder::store(Value vector, Value memref, llvm::SmallVector<Value> index, int64_t width, bool vectorOk,
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

Value Builder::convert(Value value, mlir::Type to) const {
  mlir::Type from = mlir::getElementTypeOrSelf(value.getType());
  if (from == to)
    return value;
  mlir::Type type = to;
  if (auto vector = mlir::dyn_cast<mlir::VectorType>(value.getType()))
    type = mlir::VectorType::get(vector.getShape(), to);
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return mlir::arith::ExtFOp::create(b, loc, type, value);
  return mlir::arith::TruncFOp::create(b, loc, type, value);
}

void Builder::guarded(Value condition, const std::function<void()> &body) const {
  if (!condition) {
    body();
    return;
  }
  auto branch = mlir::scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&branch.getThenRegion().front());
  body();
}

namespace {

// The butterfly: `combine` of the value and its xor partner's, for offsets
// lanes/2 down to 1.
Value butterfly(const Builder &x, Value value, int64_t lanes, const std::function<Value(Value, Value)> &combine) {
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
    value = combine(value, other);
  }
  return value;
}

} // namespace

Value sumOverLanes(const Builder &x, Value value, int64_t lanes) {
  return butterfly(x, value, lanes, [&](Value a, Value b) { return mlir::arith::AddFOp::create(x.b, x.loc, a, b); });
}

Value maxOverLanes(const Builder &x, Value value, int64_t lanes) {
  return butterfly(x, value, lanes,
                   [&](Value a, Value b) { return mlir::arith::MaximumFOp::create(x.b, x.loc, a, b); });
}

Value evaluatePrologue(ElementalEmitter &elemental, ElementalEmitter *mask, const FusionGraph *maskGraph,
                       const FusionGraph &graph, const Softmax &softmax, Value head, Value query, Value readKey,
                       Value score, const VisibleCausalPenalty *visible) {
  mlir::linalg::LinalgOp prologue = graph.node(softmax.prologue).op;
  mlir::OpOperand *scoresOperand = prologue.getDpsInputOperand(softmax.scoresInput);
  llvm::SmallVector<Value> at{head, query, readKey};
  llvm::SmallVector<Value> loopIndex = elemental.loopIndexOfOutput(softmax.prologue, at);
  elemental.defineRead(softmax.prologue, *scoresOperand,
                       elemental.applyMap(prologue.getMatchingIndexingMap(scoresOperand), loopIndex), score);
  mlir::OpBuilder &b = elemental.builder();
  if (mask) {
    // The mask's element, computed as its fusion computes it (or, where
    // the key is visible, the constant it is there).
    mlir::OpOperand &maskOperand = prologue->getOpOperand(softmax.maskInput);
    llvm::SmallVector<Value> maskIndex = elemental.applyMap(prologue.getMatchingIndexingMap(&maskOperand), loopIndex);
    Value penalty;
    if (visible) {
      mlir::Type type = mlir::getElementTypeOrSelf(maskOperand.get().getType());
      penalty = mlir::arith::ConstantOp::create(b, elemental.loc(), b.getFloatAttr(type, visible->value));
    } else {
      penalty = mask->node(maskGraph->outputs().front().node, maskIndex);
    }
    if (!penalty || mask->failed())
      return {};
    elemental.defineRead(softmax.prologue, maskOperand, maskIndex, penalty);
  }
  if (visible && visible->term)
    elemental.substituteBodyValue(
        visible->term,
        mlir::arith::ConstantOp::create(b, elemental.loc(), b.getFloatAttr(visible->term.getType(), visible->value)));
  Value logit = elemental.node(softmax.prologue, at);
  if (visible && visible->term)
    elemental.clearBodySubstitutions();
  if (!logit || elemental.failed())
    return {};
  return logit;
}

} // namespace mlpipe::emitters::fused_attention
