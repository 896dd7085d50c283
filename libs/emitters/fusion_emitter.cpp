// The classifier, and what the emitters share.
#include "emitters/fusion_emitter.h"

#include "codegen/debug.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlpipe::emitters {

FusionKind inferFusionKind(const FusionGraph &graph) {
  bool row = false, column = false, transpose = false;
  for (const FusionNode &node : graph.nodes()) {
    switch (heroRole(node.op)) {
    case HeroRole::Matmul:
      return FusionKind::Matmul;
    case HeroRole::RowReduction:
      row = true;
      break;
    case HeroRole::ColumnReduction:
      column = true;
      break;
    case HeroRole::Transpose:
      transpose = true;
      break;
    default:
      break;
    }
  }
  if (row)
    return FusionKind::RowReduction;
  if (column)
    return FusionKind::ColumnReduction;
  if (transpose)
    return FusionKind::Transpose;
  return FusionKind::Loop;
}

std::unique_ptr<FusionEmitter> getFusionEmitter(FusionKind kind, const FusionGraph &graph,
                                                const EmitterOptions &options, std::string &why) {
  // Every hero in the fusion must be one the emitter of its kind handles.
  for (const FusionNode &node : graph.nodes()) {
    HeroRole role = heroRole(node.op);
    // (A reduction no other emitter takes runs as a serial loop per output
    // element in the loop emitter.)
    bool fits = role == HeroRole::Elementwise || (role == HeroRole::Other && kind == FusionKind::Loop) ||
                (role == HeroRole::RowReduction && kind == FusionKind::RowReduction) ||
                (role == HeroRole::ColumnReduction && kind == FusionKind::ColumnReduction) ||
                (role == HeroRole::Transpose && (kind == FusionKind::Transpose || kind == FusionKind::Loop)) ||
                (role == HeroRole::Matmul && kind == FusionKind::Matmul);
    if (!fits) {
      why = std::string("it holds a ") + heroRoleName(role) + " (" + node.op->getName().getStringRef().str() +
            "), which a " + fusionKindName(kind) + " fusion's emitter does not take";
      return nullptr;
    }
  }
  switch (kind) {
  case FusionKind::Loop:
    return makeLoopEmitter(graph, options);
  case FusionKind::RowReduction:
    return makeRowReductionEmitter(graph, options);
  case FusionKind::ColumnReduction:
    return makeColumnReductionEmitter(graph, options);
  case FusionKind::Transpose:
    return makeTransposeEmitter(graph, options);
  case FusionKind::Matmul:
    if (auto emitter = makeMatmulEmitter(graph, options))
      return emitter;
    why = "no matmul emitter takes an epilogue";
    return nullptr;
  }
  return nullptr;
}

mlir::FailureOr<mlir::gpu::GPUFuncOp>
buildFusionKernel(KernelFactory &kernels, const FusionGraph &graph, KernelSignature signature,
                  const std::function<mlir::LogicalResult(ElementalEmitter &, mlir::gpu::GPUFuncOp)> &body,
                  std::string &why) {
  mlir::func::FuncOp function = graph.function();
  // The fusion's arguments first; any the emitter asked for (a workspace)
  // follow.
  signature.arguments.insert(signature.arguments.begin(), function.getArgumentTypes().begin(),
                             function.getArgumentTypes().end());
  return kernels.tryBuild(signature, [&](mlir::OpBuilder &builder, mlir::gpu::GPUFuncOp kernel) {
    mlir::IRMapping arguments;
    for (unsigned i = 0; i < function.getNumArguments(); ++i)
      arguments.map(function.getArgument(i), kernel.getArgument(i));
    return emitElementally(
        graph, builder, kernel, arguments, [&](ElementalEmitter &elemental) { return body(elemental, kernel); }, why);
  });
}

mlir::LogicalResult emitElementally(const FusionGraph &graph, mlir::OpBuilder &builder, mlir::gpu::GPUFuncOp kernel,
                                    const mlir::IRMapping &arguments,
                                    const std::function<mlir::LogicalResult(ElementalEmitter &)> &body,
                                    std::string &why) {
  // Kernel-wide values (constants, argument views) go before an anchor at
  // the top, so they come before every use, in the order they were made.
  mlir::OpBuilder top = mlir::OpBuilder::atBlockBegin(&kernel.getBody().front());
  mlir::Operation *anchor = mlir::arith::ConstantIndexOp::create(top, kernel.getLoc(), 0);
  ElementalEmitter elemental(graph, builder, mlir::OpBuilder(anchor), arguments);
  if (mlir::failed(body(elemental)))
    return mlir::failure();
  if (elemental.failed()) {
    why = elemental.failure();
    return mlir::failure();
  }
  if (anchor->use_empty())
    anchor->erase();
  return mlir::success();
}

namespace {
int64_t saturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }
} // namespace

int64_t fusionBytes(const FusionGraph &graph) {
  int64_t bytes = 0;
  llvm::DenseSet<mlir::Value> counted;
  for (const FusionNode &node : graph.nodes()) {
    unsigned position = 0;
    for (mlir::OpOperand *input : node.op.getDpsInputOperands()) {
      int producer = node.inputProducers[position++];
      mlir::Value value = input->get();
      if (producer < 0 && mlir::isa<mlir::MemRefType>(value.getType()) && counted.insert(value).second)
        bytes = saturatingAdd(bytes, bytesOf(value.getType()));
    }
    // A table read in the body (a gather): one element per output element.
    if (FusionGraph::readsMemrefInBody(node.op))
      bytes = saturatingAdd(bytes, bytesOf(node.op.getDpsInits()[0].getType()));
  }
  for (const FusionGraph::Output &output : graph.outputs())
    bytes = saturatingAdd(bytes, bytesOf(graph.function().getArgument(output.argument).getType()));
  return bytes;
}

std::string kernelName(const FusionGraph &graph) { return graph.function().getName().str(); }

mlir::Value threadIdX(mlir::OpBuilder &builder, mlir::Location loc) {
  return mlir::gpu::ThreadIdOp::create(builder, loc, mlir::gpu::Dimension::x);
}

mlir::Value blockIdX(mlir::OpBuilder &builder, mlir::Location loc) {
  return mlir::gpu::BlockIdOp::create(builder, loc, mlir::gpu::Dimension::x);
}

namespace {

// gpu.shuffle moves 32-bit values: wider ones go as two halves.
mlir::Value shuffleXor(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value value, int offset, int width) {
  mlir::Type type = value.getType();
  unsigned bits = type.getIntOrFloatBitWidth();
  if (bits == 32)
    return mlir::gpu::ShuffleOp::create(builder, loc, value, offset, width, mlir::gpu::ShuffleMode::XOR)
        .getShuffleResult();
  mlir::Type i32 = builder.getI32Type();
  if (bits < 32) {
    mlir::Type narrow = builder.getIntegerType(bits);
    mlir::Value asInt = mlir::arith::BitcastOp::create(builder, loc, narrow, value);
    mlir::Value wide = mlir::arith::ExtUIOp::create(builder, loc, i32, asInt);
    mlir::Value moved =
        mlir::gpu::ShuffleOp::create(builder, loc, wide, offset, width, mlir::gpu::ShuffleMode::XOR).getShuffleResult();
    mlir::Value back = mlir::arith::TruncIOp::create(builder, loc, narrow, moved);
    return mlir::arith::BitcastOp::create(builder, loc, type, back);
  }
  mlir::Type i64 = builder.getI64Type();
  mlir::Value asInt = mlir::arith::BitcastOp::create(builder, loc, i64, value);
  mlir::Value low = mlir::arith::TruncIOp::create(builder, loc, i32, asInt);
  mlir::Value shift = mlir::arith::ConstantIntOp::create(builder, loc, i64, 32);
  mlir::Value high =
      mlir::arith::TruncIOp::create(builder, loc, i32, mlir::arith::ShRUIOp::create(builder, loc, asInt, shift));
  mlir::Value lowMoved =
      mlir::gpu::ShuffleOp::create(builder, loc, low, offset, width, mlir::gpu::ShuffleMode::XOR).getShuffleResult();
  mlir::Value highMoved =
      mlir::gpu::ShuffleOp::create(builder, loc, high, offset, width, mlir::gpu::ShuffleMode::XOR).getShuffleResult();
  mlir::Value joined = mlir::arith::OrIOp::create(
      builder, loc, mlir::arith::ExtUIOp::create(builder, loc, i64, lowMoved),
      mlir::arith::ShLIOp::create(builder, loc, mlir::arith::ExtUIOp::create(builder, loc, i64, highMoved), shift));
  return mlir::arith::BitcastOp::create(builder, loc, type, joined);
}

} // namespace

mlir::Value butterflyReduce(ElementalEmitter &elemental, int node, mlir::Value value, int width) {
  // The shuffle's width is the whole warp: xor offsets below `width` stay
  // inside each aligned group of `width` lanes.
  constexpr int kWarp = 32;
  for (int offset = width / 2; offset >= 1; offset /= 2) {
    mlir::Value other = shuffleXor(elemental.builder(), elemental.loc(), value, offset, kWarp);
    value = elemental.combine(node, value, other);
  }
  return value;
}

int vectorWidthFor(mlir::Type elementType, const FusionGraph &graph, const EmitterOptions &options) {
  // Vectors of i1 are bit-packed, but a memref of i1 holds a byte per
  // element: such elements move one at a time.
  if (elementType.getIntOrFloatBitWidth() % 8 != 0)
    return 1;
  unsigned bytes = std::max(1u, elementType.getIntOrFloatBitWidth() / 8);
  for (mlir::BlockArgument argument : graph.function().getArguments()) {
    auto memref = mlir::dyn_cast<mlir::MemRefType>(argument.getType());
    if (!memref || !memref.getElementType().isIntOrFloat())
      continue;
    unsigned bits = memref.getElementType().getIntOrFloatBitWidth();
    // 16-bit data sets 8 elements; 8-bit data does not widen further (16
    // elements of an f32 computation would hold 64 bytes of registers).
    if (bits % 8 == 0 && bits >= 16)
      bytes = std::min(bytes, bits / 8);
  }
  return std::max(1, options.vectorBytes / static_cast<int>(bytes));
}

} // namespace mlpipe::emitters
