// FusionGraph: last-writer resolution over a bufferized fusion function.
#include "fusion/fusion_graph.h"

#include "mlir/IR/Matchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlpipe::emitters {

llvm::SmallVector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

namespace {

mlir::Value rootOf(mlir::Value value) { return rootBuffer(value); }

} // namespace

int64_t elementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

bool isViewOp(mlir::Operation *op) {
  return op && (mlir::isa<mlir::ViewLikeOpInterface, mlir::memref::TransposeOp>(op));
}

mlir::Value rootBuffer(mlir::Value value) {
  while (mlir::Operation *definer = value.getDefiningOp()) {
    if (auto transpose = mlir::dyn_cast<mlir::memref::TransposeOp>(definer))
      value = transpose.getIn();
    else if (auto view = mlir::dyn_cast<mlir::ViewLikeOpInterface>(definer))
      value = view.getViewSource();
    else
      break;
  }
  return value;
}

bool isZeroFill(mlir::linalg::FillOp fill) {
  return fill.hasPureBufferSemantics() && mlir::matchPattern(fill.getInputs()[0], mlir::m_AnyZeroFloat());
}

bool isZeroFillNode(const FusionGraph &graph, int node) {
  if (node < 0)
    return false;
  auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(graph.node(node).op.getOperation());
  return fill && isZeroFill(fill);
}

std::optional<BufferView> layoutOf(mlir::Value memref, mlir::Value root) {
  auto type = mlir::dyn_cast<mlir::MemRefType>(memref.getType());
  auto rootType = mlir::dyn_cast<mlir::MemRefType>(root.getType());
  if (!type || !rootType || !type.hasStaticShape() || !rootType.hasStaticShape())
    return std::nullopt;
  BufferView view;
  view.root = root;
  view.value = memref;
  view.shape.assign(type.getShape().begin(), type.getShape().end());
  if (mlir::failed(type.getStridesAndOffset(view.strides, view.offset)))
    return std::nullopt;
  if (llvm::any_of(view.strides, [](int64_t s) { return s == mlir::ShapedType::kDynamic; }))
    return std::nullopt;
  view.dynamicOffset = view.offset == mlir::ShapedType::kDynamic;
  if (view.dynamicOffset)
    view.offset = 0;
  // Unit dimensions may carry any stride.
  llvm::SmallVector<int64_t> dense = rowMajorStrides(view.shape);
  bool rowMajor = view.offset == 0 && !view.dynamicOffset;
  for (size_t i = 0; i < dense.size(); ++i)
    rowMajor &= view.shape[i] == 1 || view.strides[i] == dense[i];
  view.coversRootDensely = rowMajor && elementCount(view.shape) == elementCount(rootType.getShape());
  return view;
}

bool FusionGraph::readsMemrefInBody(mlir::linalg::LinalgOp op) {
  bool reads = false;
  op->walk([&](mlir::Operation *nested) {
    if (nested != op.getOperation())
      for (mlir::Value operand : nested->getOperands())
        reads |= mlir::isa<mlir::MemRefType>(operand.getType());
  });
  return reads;
}

llvm::FailureOr<FusionGraph> FusionGraph::analyze(mlir::func::FuncOp fusion, std::string &reason) {
  FusionGraph graph;
  graph.function_ = fusion;
  if (!fusion.getBody().hasOneBlock())
    return reason = "the fusion has more than one block", mlir::failure();
  for (mlir::BlockArgument argument : fusion.getArguments())
    if (auto type = mlir::dyn_cast<mlir::MemRefType>(argument.getType());
        type && (!type.hasStaticShape() || !type.getLayout().isIdentity()))
      return reason = "a fusion argument is not a static row-major memref", mlir::failure();

  // Last writer of each root buffer so far, in program order.
  llvm::DenseMap<mlir::Value, int> lastWriter;
  for (mlir::Operation &op : fusion.getBody().front()) {
    if (mlir::isa<mlir::func::ReturnOp, mlir::memref::AllocOp, mlir::memref::AllocaOp, mlir::memref::DeallocOp,
                  mlir::arith::ConstantOp, mlir::memref::GetGlobalOp>(op) ||
        isViewOp(&op))
      continue;
    // A scalar read from an argument nothing here writes (a run-time
    // position), and arithmetic on scalars: the kernel recomputes them.
    if (auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op)) {
      mlir::Value root = rootOf(load.getMemRef());
      if (!(mlir::isa<mlir::BlockArgument>(root) || root.getDefiningOp<mlir::memref::GetGlobalOp>()) ||
          lastWriter.count(root))
        return reason = "a scalar read of a buffer the fusion writes", mlir::failure();
      continue;
    }
    if (op.getDialect() && op.getDialect()->getNamespace() == "arith" && op.getNumRegions() == 0)
      continue;
    auto linalgOp = mlir::dyn_cast<mlir::linalg::LinalgOp>(op);
    if (!linalgOp || !linalgOp.hasPureBufferSemantics())
      return reason = "it holds " + op.getName().getStringRef().str() + ", which is not a linalg op on buffers",
             mlir::failure();
    if (linalgOp.getNumDpsInits() != 1)
      return reason = "a linalg op with several outputs", mlir::failure();

    FusionNode node;
    node.op = linalgOp;
    node.order = static_cast<int>(graph.nodes_.size());
    for (mlir::OpOperand *input : linalgOp.getDpsInputOperands()) {
      mlir::Value value = input->get();
      if (!mlir::isa<mlir::MemRefType>(value.getType())) {
        node.inputProducers.push_back(-1);
        continue;
      }
      mlir::Value root = rootOf(value);
      std::optional<BufferView> inputView = layoutOf(value, root);
      if (!inputView)
        return reason = "an operand with a dynamic layout", mlir::failure();
      auto found = lastWriter.find(root);
      if (found != lastWriter.end() &&
          (!graph.nodes_[found->second].output.coversRootDensely || inputView->dynamicOffset))
        return reason = "a read of a buffer the fusion wrote only part of", mlir::failure();
      node.inputProducers.push_back(found == lastWriter.end() ? -1 : found->second);
    }
    mlir::Value output = linalgOp.getDpsInits()[0];
    mlir::Value outputRoot = rootOf(output);
    std::optional<BufferView> outputView = layoutOf(output, outputRoot);
    if (!outputView)
      return reason = "an output with a dynamic layout", mlir::failure();
    node.output = *outputView;
    auto previous = lastWriter.find(outputRoot);
    node.initProducer = previous == lastWriter.end() ? -1 : previous->second;
    if (node.initProducer >= 0 &&
        (!outputView->coversRootDensely || !graph.nodes_[node.initProducer].output.coversRootDensely))
      return reason = "part of a buffer written over another write", mlir::failure();
    // A body reading a memref (a gather's table) must read an argument
    // nothing in the fusion writes.
    bool badBodyRead = false;
    op.walk([&](mlir::Operation *nested) {
      if (nested == &op)
        return;
      for (mlir::Value operand : nested->getOperands())
        if (mlir::isa<mlir::MemRefType>(operand.getType())) {
          mlir::Value root = rootOf(operand);
          badBodyRead |= !(mlir::isa<mlir::BlockArgument>(root) || root.getDefiningOp<mlir::memref::GetGlobalOp>()) ||
                         lastWriter.count(root);
        }
    });
    if (badBodyRead)
      return reason = "a body reads a buffer the fusion writes", mlir::failure();
    graph.nodeOf_[&op] = node.order + 1;
    lastWriter[outputRoot] = node.order;
    graph.nodes_.push_back(std::move(node));
  }
  if (graph.nodes_.empty())
    return reason = "the fusion computes nothing", mlir::failure();
  for (mlir::BlockArgument argument : fusion.getArguments()) {
    auto found = lastWriter.find(argument);
    if (found != lastWriter.end())
      graph.outputs_.push_back({argument.getArgNumber(), found->second});
  }
  if (graph.outputs_.empty())
    return reason = "the fusion writes no argument", mlir::failure();
  return graph;
}

bool FusionGraph::isOutputArgument(unsigned argument) const {
  return llvm::any_of(outputs_, [&](const Output &output) { return output.argument == argument; });
}

int FusionGraph::producerOf(int consumer, mlir::OpOperand &operand) const {
  const FusionNode &node = nodes_[consumer];
  if (node.op.isDpsInit(&operand))
    return node.initProducer;
  unsigned position = 0;
  for (mlir::OpOperand *input : node.op.getDpsInputOperands()) {
    if (input == &operand)
      return node.inputProducers[position];
    ++position;
  }
  return -1;
}

std::optional<BufferView> FusionGraph::view(mlir::Value memref) const { return layoutOf(memref, rootOf(memref)); }

llvm::SmallVector<int> FusionGraph::reductions() const {
  llvm::SmallVector<int> found;
  for (const FusionNode &node : nodes_)
    if (node.op.getNumReductionLoops() > 0)
      found.push_back(node.order);
  return found;
}

} // namespace mlpipe::emitters
