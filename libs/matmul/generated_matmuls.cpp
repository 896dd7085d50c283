// mlpipe-generated-matmuls: GPU matmuls become launches of the generated
// kernel (emitters/matmul_kernel.h): register-tiled, skinny, or on tensor
// cores for bf16 and f16.
// Passes.td holds its description, with IR before and after.
#include "codegen/pass_support.h"
#include "fusion/fusion_graph.h"
#include "matmul/matmul_kernel.h"
#include "matmul/passes.h"

#include "support/error.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/Pass.h"

#include <cctype>
#include <string>

namespace mlpipe {

#define GEN_PASS_DEF_GENERATEDMATMULSPASS
#include "matmul/Passes.h.inc"

namespace {

using emitters::rootBuffer;

bool isGeneratedMatmulCandidate(mlir::linalg::LinalgOp op, const DeviceDescription &device) {
  if (!op.hasPureBufferSemantics() || op->getParentOfType<mlir::gpu::GPUModuleOp>())
    return false;
  auto matmul = mlir::dyn_cast<mlir::linalg::MatmulOp>(op.getOperation());
  auto batched = mlir::dyn_cast<mlir::linalg::BatchMatmulOp>(op.getOperation());
  if (!matmul && !batched)
    return false;
  // Matmuls with transposing or broadcasting indexing maps keep the loops.
  if ((matmul && matmul.hasUserDefinedMaps()) || (batched && batched.hasUserDefinedMaps()))
    return false;
  auto aType = mlir::cast<mlir::MemRefType>(op.getDpsInputs()[0].getType());
  auto bType = mlir::cast<mlir::MemRefType>(op.getDpsInputs()[1].getType());
  auto cType = mlir::cast<mlir::MemRefType>(op.getDpsInits()[0].getType());
  // bf16 or f16 A and B where the kernel reads them as stored (on tensor
  // cores, or one row in the skinny form); the zero fill's folding is not
  // known yet, so the product is taken only where it could accumulate.
  if (aType.getElementType().isBF16() || aType.getElementType().isF16())
    return emitters::generatedMatmulTakesSixteenBit(aType, bType, cType, device, /*accumulate=*/true);
  mlir::Type element = cType.getElementType();
  for (mlir::Value operand : op->getOperands()) {
    auto type = mlir::cast<mlir::MemRefType>(operand.getType());
    if (type.getElementType() != element || !type.hasStaticShape())
      return false;
  }
  return element.isF32() || element.isF64();
}

// The zero linalg.fill of C that last wrote it before the matmul, if there
// is one: the kernel then writes C instead of adding to it, and the fill
// goes. Between the two, no op may use memory rooted at C's buffer; where C
// is a function argument (which another argument may alias), no op may use
// memory other than fresh allocations.
mlir::linalg::FillOp zeroFillBefore(mlir::linalg::LinalgOp op) {
  mlir::Value c = op.getDpsInits()[0];
  mlir::Value root = rootBuffer(c);
  bool fresh = root.getDefiningOp<mlir::memref::AllocOp>() != nullptr;
  for (mlir::Operation *previous = op->getPrevNode(); previous; previous = previous->getPrevNode()) {
    if (auto fill = mlir::dyn_cast<mlir::linalg::FillOp>(previous); fill && fill.getDpsInits()[0] == c)
      return emitters::isZeroFill(fill) ? fill : mlir::linalg::FillOp();
    bool touches = false, opaque = false;
    previous->walk([&](mlir::Operation *inner) {
      bool usesMemory = false;
      for (mlir::Value operand : inner->getOperands()) {
        if (!mlir::isa<mlir::MemRefType>(operand.getType()))
          continue;
        usesMemory = true;
        mlir::Value operandRoot = rootBuffer(operand);
        if (operandRoot == root || (!fresh && !operandRoot.getDefiningOp<mlir::memref::AllocOp>()))
          touches = true;
      }
      // An op with effects it does not show through memref operands (a call,
      // a global) may touch anything.
      if (!usesMemory && inner->getNumRegions() == 0 && !mlir::isMemoryEffectFree(inner) &&
          !mlir::isa<mlir::memref::AllocOp>(inner))
        opaque = true;
    });
    if (touches || opaque)
      return {};
  }
  return {};
}

// The front end's scope of an op (its location's name: "h.3.mlp.c_fc" ->
// "h_3_mlp_c_fc"), else its function's name.
std::string scopeOf(mlir::Operation *op, mlir::func::FuncOp function) {
  std::string scope;
  op->getLoc()->walk([&](mlir::Location location) {
    if (auto named = mlir::dyn_cast<mlir::NameLoc>(location)) {
      scope = named.getName().str();
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  if (scope.empty())
    scope = function ? function.getName().str() : "matmul";
  for (char &c : scope)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      c = '_';
  return scope;
}

// The function argument trace named `name` (mlpipe.name), if any.
mlir::Value namedArgument(mlir::func::FuncOp function, llvm::StringRef name) {
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    if (auto attr = function.getArgAttrOfType<mlir::StringAttr>(i, "mlpipe.name"); attr && attr.getValue() == name)
      return function.getArgument(i);
  return {};
}

// The test epilogue (test-epilogue=bias-gelu-residual): GPT-2's MLP shape,
// y = gelu_tanh(A·B + bias[col]) + residual[(batch,) row, col], with `bias`
// and `residual` the function's arguments of those names.
mlir::FailureOr<emitters::MatmulEpilogue> testEpilogue(mlir::linalg::LinalgOp op, const std::string &which) {
  auto function = op->getParentOfType<mlir::func::FuncOp>();
  if (which != "bias-gelu-residual") {
    op->emitError("mlpipe-generated-matmuls: unknown test-epilogue '") << which << "'";
    return mlir::failure();
  }
  mlir::Value bias = namedArgument(function, "bias"), residual = namedArgument(function, "residual");
  if (!bias || !residual) {
    op->emitError("mlpipe-generated-matmuls: test-epilogue=bias-gelu-residual needs arguments named bias and "
                  "residual");
    return mlir::failure();
  }
  emitters::MatmulEpilogue epilogue;
  epilogue.hostOperands = {bias, residual};
  epilogue.apply = [](mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange operands, mlir::ValueRange index,
                      mlir::Value product) -> mlir::Value {
    mlir::Type type = product.getType();
    auto constant = [&](double v) { return mlir::arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v)); };
    mlir::Value biasValue = mlir::memref::LoadOp::create(b, loc, operands[0], mlir::ValueRange{index.back()});
    mlir::Value x = mlir::arith::AddFOp::create(b, loc, product, biasValue);
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    mlir::Value x3 = mlir::arith::MulFOp::create(b, loc, x, mlir::arith::MulFOp::create(b, loc, x, x));
    mlir::Value inner =
        mlir::arith::AddFOp::create(b, loc, x, mlir::arith::MulFOp::create(b, loc, constant(0.044715), x3));
    mlir::Value t =
        mlir::math::TanhOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, constant(0.7978845608028654), inner));
    mlir::Value gelu = mlir::arith::MulFOp::create(b, loc, mlir::arith::MulFOp::create(b, loc, constant(0.5), x),
                                                   mlir::arith::AddFOp::create(b, loc, constant(1.0), t));
    mlir::Value residualValue = mlir::memref::LoadOp::create(b, loc, operands[1], index);
    return mlir::arith::AddFOp::create(b, loc, gelu, residualValue);
  };
  return epilogue;
}

struct GeneratedMatmulsPass : impl::GeneratedMatmulsPassBase<GeneratedMatmulsPass> {
  using GeneratedMatmulsPassBase::GeneratedMatmulsPassBase;

  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    const DeviceDescription *device = passDeviceDescription(module, chip, "mlpipe-generated-matmuls: ");
    if (!device)
      return signalPassFailure();
    emitters::GeneratedMatmulOptions options;
    options.form = form;
    if (!blockTile.empty()) {
      if (blockTile.size() != 3)
        return module.emitError("mlpipe-generated-matmuls: block-tile takes M,N,K"), signalPassFailure();
      options.blockTile = {blockTile[0], blockTile[1], blockTile[2]};
    }
    if (!threadTile.empty()) {
      if (threadTile.size() != 2)
        return module.emitError("mlpipe-generated-matmuls: thread-tile takes M,N"), signalPassFailure();
      options.threadTile = {threadTile[0], threadTile[1]};
    }
    if (!warpTile.empty()) {
      if (warpTile.size() != 2)
        return module.emitError("mlpipe-generated-matmuls: warp-tile takes M,N"), signalPassFailure();
      options.warpTile = {warpTile[0], warpTile[1]};
    }
    options.splitK = splitK;
    options.vectorWidth = vectorWidth;
    options.asyncCopy = asyncCopy;
    options.prefetchFragments = prefetchFragments;
    options.stages = stages;
    if (precision != "f32" && precision != "tf32")
      return module.emitError("mlpipe-generated-matmuls: precision must be f32 or tf32, not '") << precision << "'",
             signalPassFailure();
    options.tf32 = precision == "tf32";
    options.lastSplitCompletes = lastSplitCompletes;
    if (stagedEpilogue < -1 || stagedEpilogue > 1)
      return module.emitError("mlpipe-generated-matmuls: staged-epilogue must be -1, 0 or 1, not ")
                 << int64_t(stagedEpilogue),
             signalPassFailure();
    options.stagedEpilogue = stagedEpilogue;

    llvm::SmallVector<mlir::linalg::LinalgOp> matmuls;
    module.walk([&](mlir::linalg::LinalgOp op) {
      if (isGeneratedMatmulCandidate(op, *device))
        matmuls.push_back(op);
    });
    emitters::KernelFactory kernels(module);
    for (mlir::linalg::LinalgOp op : matmuls) {
      auto function = op->getParentOfType<mlir::func::FuncOp>();
      // Named for what it computes; KernelFactory numbers the modules of
      // equal names.
      std::string name =
          scopeOf(op, function) + "_" + (mlir::isa<mlir::linalg::BatchMatmulOp>(op) ? "batch_matmul" : "matmul");
      std::optional<emitters::MatmulEpilogue> epilogue;
      if (!testEpilogueKind.empty()) {
        auto built = testEpilogue(op, testEpilogueKind);
        if (mlir::failed(built))
          return signalPassFailure();
        epilogue = std::move(*built);
      }
      mlir::linalg::FillOp fill = zeroFillBefore(op);
      mlir::OpBuilder host(op);
      emitters::MatmulOperands operands{op.getDpsInputs()[0], op.getDpsInputs()[1], op.getDpsInits()[0]};
      if (mlir::failed(emitters::emitGeneratedMatmul(host, op.getLoc(), operands, /*accumulate=*/!fill,
                                                     epilogue ? &*epilogue : nullptr, kernels, *device, name, options)))
        return signalPassFailure();
      op->erase();
      if (fill)
        fill->erase();
    }
  }
};

} // namespace

} // namespace mlpipe
