// The matmul emitter: a matmul fusion (a linalg.matmul or batch_matmul, its
// operands read through views, and an elementwise epilogue) becomes one
// launch of the generated register-tiled kernel (matmul_kernel.h), with the
// epilogue computed in registers on each element of the product before it
// is stored: a bias add, GELU or residual add costs no pass over memory.
//
//   C = epilogue(A · B)      epilogue(p)(i, j) = the fusion's root at (i, j),
//                            with the matmul's element (i, j) taken to be p
#include "codegen/debug.h"
#include "emitters/fusion_emitter.h"
#include "matmul/matmul_kernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/SetVector.h"

namespace mlpipe::emitters {

namespace {

class MatmulEmitter final : public FusionEmitter {
public:
  using FusionEmitter::FusionEmitter;
  const char *name() const override { return "matmul"; }

  // A's row comes from this row reduction fusion's call, computed by every
  // block of the kernel (emitMatmulWithRowPrologue).
  void setRowProducer(const FusionGraph *graph, mlir::func::CallOp call) {
    rowGraph_ = graph;
    rowCall_ = call;
  }

  mlir::LogicalResult emit(mlir::func::CallOp call, KernelFactory &kernels, std::string &why) override {
    Emission e;
    if (mlir::failed(findProduct(e, why)) || mlir::failed(checkOperandTypes(e, why)))
      return mlir::failure();
    mlir::OpBuilder host(call);
    if (mlir::failed(rebuildOperandsOnHost(e, call, host, why)))
      return mlir::failure();
    // Accumulate into C only when the product is stored as it is, into the
    // buffer it started from.
    e.accumulate = e.root == e.matmul && !e.startsFromZero;
    if (rowCall_ && mlir::failed(makeRowPrologue(e, why)))
      return mlir::failure();
    makeEpilogue(e, call);
    std::string name = kernelName(graph_);
    GeneratedMatmulOptions forced;
    forced.blockTile = options_.matmulBlockTile;
    forced.warpTile = options_.matmulWarpTile;
    forced.stages = options_.matmulStages;
    forced.splitK = options_.matmulSplitK;
    forced.prefetchFragments = options_.matmulPrefetchFragments;
    forced.form = options_.matmulForm;
    forced.tf32 = options_.matmulTf32;
    forced.lastSplitCompletes = options_.matmulLastSplitCompletes;
    forced.stagedEpilogue = options_.matmulStagedEpilogue;
    if (mlir::failed(emitGeneratedMatmul(host, call.getLoc(), e.operands, e.accumulate,
                                         e.hasEpilogue ? &e.epilogue : nullptr, kernels, *options_.device, name, forced,
                                         rowCall_ ? &e.prologue : nullptr))) {
      mlir::LogicalResult refused =
          giveUp(e,
                 rowCall_ ? "the generated matmul kernel could not compute A's row in its blocks"
                          : "the generated matmul kernel does not take this product",
                 why);
      if (!e.prologueFailure.empty())
        why += ": " + e.prologueFailure;
      return refused;
    }
    if (!e.epilogueFailure.empty())
      return call.emitError() << "matmul fusion @" << graph_.function().getName()
                              << ": its epilogue could not be emitted: " << e.epilogueFailure;
    MLPIPE_DEBUG(kDebugEmitters,
                 os << name << ": matmul emitter, "
                    << (e.hasEpilogue ? "epilogue of " + std::to_string(graph_.nodes().size() - 1) + " ops in registers"
                                      : std::string("no epilogue"))
                    << (e.accumulate ? ", accumulating into C" : "")
                    << (rowCall_ ? ", A's rows computed by every block from @" + rowGraph_->function().getName().str()
                                 : std::string())
                    << "\n");
    call.erase();
    if (rowCall_)
      rowCall_.erase();
    return mlir::success();
  }

private:
  // What one emit() builds up: the product's nodes, its operands on the
  // host, the row prologue and the epilogue handed to the generated kernel
  // (whose callbacks report into the failures here while it builds).
  struct Emission {
    int matmul = -1; // the product's node
    int root = -1;   // the node stored to C
    bool startsFromZero = false, accumulate = false, hasEpilogue = false;
    MatmulOperands operands;
    // Views cloned next to the call; erased again if the emitter gives up,
    // so that a failure leaves the host code as it was.
    llvm::SmallVector<mlir::Operation *> clonedOnHost;
    MatmulRowPrologue prologue;
    std::string prologueFailure;
    MatmulEpilogue epilogue;
    std::string epilogueFailure;
    // The epilogue's operands: only the arguments it reads (a bias, a
    // residual), not C, so that C aliasing none of them leaves the kernel
    // free to split K.
    llvm::SmallVector<mlir::BlockArgument> epilogueArguments;
  };

  static mlir::LogicalResult giveUp(Emission &e, const char *reason, std::string &why) {
    for (mlir::Operation *op : llvm::reverse(e.clonedOnHost))
      op->erase();
    why = reason;
    return mlir::failure();
  }

  // The fusion's one matmul and the node stored to C, and whether the
  // fusion is one the kernel takes: one output of the product's shape,
  // operands read from memory.
  mlir::LogicalResult findProduct(Emission &e, std::string &why) const {
    int matmul = -1;
    for (const FusionNode &node : graph_.nodes()) {
      if (mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(node.op.getOperation())) {
        if (matmul >= 0)
          return why = "it holds two matmuls", mlir::failure();
        matmul = node.order;
      }
    }
    if (matmul < 0)
      return why = "it holds no matmul", mlir::failure();
    const FusionNode &product = graph_.node(matmul);
    if (graph_.outputs().size() != 1)
      return why = "a matmul fusion with several outputs", mlir::failure();
    int root = graph_.outputs().front().node;
    if (graph_.node(root).output.shape != product.output.shape)
      return why = "an epilogue of another shape than the product", mlir::failure();
    for (int producer : product.inputProducers)
      if (producer >= 0)
        return why = "a matmul operand computed in the fusion", mlir::failure();
    bool startsFromZero = isZeroFillNode(graph_, product.initProducer);
    if (root == matmul && !startsFromZero && product.initProducer >= 0)
      return why = "a matmul accumulating into a value computed in the fusion", mlir::failure();
    e.matmul = matmul;
    e.root = root;
    e.startsFromZero = startsFromZero;
    return mlir::success();
  }

  // What the generated kernel takes: f32 or f64 throughout, static shapes,
  // or 16-bit A and B on tensor cores or in its skinny form (checked here
  // so that a product it does not take falls back quietly).
  mlir::LogicalResult checkOperandTypes(const Emission &e, std::string &why) const {
    const FusionNode &product = graph_.node(e.matmul);
    auto aType = mlir::dyn_cast<mlir::MemRefType>(product.op.getDpsInputs()[0].getType());
    auto bType = mlir::dyn_cast<mlir::MemRefType>(product.op.getDpsInputs()[1].getType());
    auto cType = mlir::dyn_cast<mlir::MemRefType>(graph_.node(e.root).op.getDpsInits()[0].getType());
    if (aType && bType && cType && (aType.getElementType().isBF16() || aType.getElementType().isF16())) {
      bool accumulates = e.root == e.matmul && !e.startsFromZero;
      if (!generatedMatmulTakesSixteenBit(aType, bType, cType, *options_.device, accumulates))
        return why = options_.device->sixteenBitMma
                         ? "16-bit operands the tensor-core form does not take"
                         : "16-bit operands the skinny form does not take (" + options_.device->chip +
                               " has no mma.sync m16n8k16 for the tensor-core form)",
               mlir::failure();
      return mlir::success();
    }
    for (mlir::Value value :
         {product.op.getDpsInputs()[0], product.op.getDpsInputs()[1], graph_.node(e.root).op.getDpsInits()[0]}) {
      auto type = mlir::dyn_cast<mlir::MemRefType>(value.getType());
      if (!type || !type.hasStaticShape() || !(type.getElementType().isF32() || type.getElementType().isF64()))
        return why = "a matmul operand that is not a statically shaped f32 or f64 memref", mlir::failure();
    }
    return mlir::success();
  }

  // The operands on the host: each view chain rebuilt over the call's
  // operands.
  mlir::LogicalResult rebuildOperandsOnHost(Emission &e, mlir::func::CallOp call, mlir::OpBuilder &host,
                                            std::string &why) const {
    mlir::IRMapping onHost;
    for (auto [argument, operand] : llvm::zip(graph_.function().getArguments(), call.getOperands()))
      onHost.map(argument, operand);
    std::function<mlir::Value(mlir::Value)> hostValue = [&](mlir::Value value) -> mlir::Value {
      if (mlir::Value mapped = onHost.lookupOrNull(value))
        return mapped;
      mlir::Operation *definer = value.getDefiningOp();
      if (!definer || !(isViewOp(definer) || mlir::isa<mlir::arith::ConstantOp>(definer)))
        return {};
      for (mlir::Value operand : definer->getOperands())
        if (!hostValue(operand))
          return {};
      e.clonedOnHost.push_back(host.clone(*definer, onHost));
      return onHost.lookup(value);
    };
    const FusionNode &product = graph_.node(e.matmul);
    e.operands.a = hostValue(product.op.getDpsInputs()[0]);
    e.operands.b = hostValue(product.op.getDpsInputs()[1]);
    e.operands.c = hostValue(graph_.node(e.root).op.getDpsInits()[0]);
    if (!e.operands.a || !e.operands.b || !e.operands.c)
      return giveUp(e, "a matmul operand that is not a view of an argument", why);
    return mlir::success();
  }

  // A's rows computed in the kernel by the row reduction before it: its
  // output must be all of A, read by nothing else; one row the skinny form
  // computes in one launch, or 2 to options_.rowPrologueMaxRows rows of a
  // 16-bit product (the few-row tensor-core tiles).
  mlir::LogicalResult makeRowPrologue(Emission &e, std::string &why) {
    auto aType = mlir::cast<mlir::MemRefType>(e.operands.a.getType());
    int64_t elementBytes = aType.getElementType().getIntOrFloatBitWidth() / 8;
    mlir::Value rowOutput = rowCall_.getOperand(rowGraph_->outputs().front().argument);
    if (e.operands.a != rowOutput || aType.getRank() != 2 || e.accumulate)
      return giveUp(e, "A is not the whole output of the row reduction before it", why);
    int64_t rows = aType.getDimSize(0);
    bool sixteenBit = aType.getElementType().isBF16() || aType.getElementType().isF16();
    if (rows > options_.rowPrologueMaxRows)
      return giveUp(e, "A has more rows than a matmul computes in its blocks (kRowPrologueMaxRows, row-prologue-rows)",
                    why);
    if (rows == 1 ? !skinnyIsOneLaunch(rows, aType.getDimSize(1), elementBytes) : !sixteenBit)
      return giveUp(e, "A's one row is not one launch's, or its several rows are not 16-bit", why);
    // Every block reads the row reduction's inputs whole: none of them may
    // be C, which the blocks write.
    for (mlir::Value operand : rowCall_.getOperands())
      if (operand != rowOutput && rootBuffer(operand) == rootBuffer(e.operands.c))
        return giveUp(e, "C is a buffer the row reduction before it reads", why);
    for (mlir::Value operand : rowCall_.getOperands())
      e.prologue.hostOperands.push_back(operand);
    // Slots for the largest block the kernel may choose.
    e.prologue.slots = rowInBlockSlots(*rowGraph_, options_, options_.device->maxThreadsPerBlock);
    e.prologue.build = [this, &e](mlir::OpBuilder &builder, mlir::Location loc, mlir::ValueRange kernelOperands,
                                  mlir::Value slots, int64_t threads, const RowSink &store) {
      mlir::IRMapping arguments;
      for (auto [argument, kernelValue] : llvm::zip(rowGraph_->function().getArguments(), kernelOperands))
        arguments.map(argument, kernelValue);
      mlir::Operation *parent = builder.getInsertionBlock()->getParentOp();
      auto kernel = mlir::isa<mlir::gpu::GPUFuncOp>(parent) ? mlir::cast<mlir::gpu::GPUFuncOp>(parent)
                                                            : parent->getParentOfType<mlir::gpu::GPUFuncOp>();
      return emitElementally(
          *rowGraph_, builder, kernel, arguments,
          [&](ElementalEmitter &elemental) {
            return emitRowInBlock(*rowGraph_, options_, elemental, slots, threads, store, e.prologueFailure);
          },
          e.prologueFailure);
    };
    return mlir::success();
  }

  // The epilogue, where the product is not stored as it is: the fusion's
  // root computed in registers from the product's element.
  void makeEpilogue(Emission &e, mlir::func::CallOp call) {
    e.hasEpilogue = e.root != e.matmul || (!e.startsFromZero && !e.accumulate);
    if (!e.hasEpilogue)
      return;
    e.epilogueArguments = argumentsReadByEpilogue(e.matmul, e.startsFromZero);
    for (mlir::BlockArgument argument : e.epilogueArguments)
      e.epilogue.hostOperands.push_back(call.getOperand(argument.getArgNumber()));
    e.epilogue.apply = [this, &e](mlir::OpBuilder &builder, mlir::Location, mlir::ValueRange kernelOperands,
                                  mlir::ValueRange index, mlir::Value value) -> mlir::Value {
      mlir::IRMapping arguments;
      for (auto [argument, kernelValue] : llvm::zip(e.epilogueArguments, kernelOperands))
        arguments.map(argument, kernelValue);
      ElementalEmitter elemental(graph_, builder, builder, arguments);
      llvm::SmallVector<mlir::Value> at(index.begin(), index.end());
      // The product's element: A·B, plus what the matmul started from.
      if (!e.startsFromZero && graph_.node(e.matmul).initProducer >= 0) {
        mlir::Value init = elemental.reductionInit(e.matmul, at);
        value = mlir::isa<mlir::FloatType>(value.getType())
                    ? mlir::arith::AddFOp::create(builder, elemental.loc(), value, init).getResult()
                    : mlir::arith::AddIOp::create(builder, elemental.loc(), value, init).getResult();
      }
      elemental.define(e.matmul, at, value);
      mlir::Value result = elemental.node(e.root, at);
      if (elemental.failed() || !result) {
        e.epilogueFailure = elemental.failure();
        return value;
      }
      return result;
    };
  }

  const FusionGraph *rowGraph_ = nullptr;
  mlir::func::CallOp rowCall_;

  // The fusion's arguments the epilogue reads: what the ops after the
  // matmul take as inputs or read of their outputs' old values (through any
  // views) where no op of the fusion produced it, and C's old value when the
  // matmul adds to it.
  llvm::SmallVector<mlir::BlockArgument> argumentsReadByEpilogue(int matmul, bool startsFromZero) const {
    llvm::SetVector<mlir::BlockArgument> read;
    mlir::Block &entry = graph_.function().front();
    auto note = [&](mlir::Value value) {
      auto argument = mlir::dyn_cast<mlir::BlockArgument>(rootBuffer(value));
      if (argument && argument.getOwner() == &entry)
        read.insert(argument);
    };
    const FusionNode &product = graph_.node(matmul);
    for (const FusionNode &node : graph_.nodes()) {
      if (node.order == matmul || node.order == product.initProducer)
        continue;
      // What a node of the fusion produced is not read from memory.
      for (auto [input, producer] : llvm::zip(node.op.getDpsInputOperands(), node.inputProducers))
        if (producer < 0)
          note(input->get());
      if (node.initProducer < 0)
        for (mlir::OpOperand &init : node.op.getDpsInitsMutable())
          if (!node.op.getMatchingBlockArgument(&init).use_empty())
            note(init.get());
      // What its body loads itself (a gather's table: an embedding the
      // fusion computes for its residual add).
      node.op->walk([&](mlir::Operation *nested) {
        if (nested != node.op.getOperation())
          for (mlir::Value operand : nested->getOperands())
            if (mlir::isa<mlir::BaseMemRefType>(operand.getType()))
              note(operand);
      });
    }
    if (!startsFromZero)
      note(product.op.getDpsInits()[0]);
    return llvm::SmallVector<mlir::BlockArgument>(read.begin(), read.end());
  }
};

} // namespace

std::unique_ptr<FusionEmitter> makeMatmulEmitter(const FusionGraph &graph, const EmitterOptions &options) {
  return std::make_unique<MatmulEmitter>(graph, options);
}

mlir::LogicalResult emitMatmulWithRowPrologue(const FusionGraph &matmul, mlir::func::CallOp call,
                                              const FusionGraph &row, mlir::func::CallOp rowCall,
                                              const EmitterOptions &options, KernelFactory &kernels, std::string &why) {
  MatmulEmitter emitter(matmul, options);
  emitter.setRowProducer(&row, rowCall);
  // A refusal here is not an error: the two fusions are then emitted apart.
  mlir::ScopedDiagnosticHandler quiet(call.getContext(), [&](mlir::Diagnostic &diagnostic) {
    why = diagnostic.str();
    return mlir::success();
  });
  return emitter.emit(call, kernels, why);
}

} // namespace mlpipe::emitters
