// mlpipe-fill-per-use: a linalg.fill on tensors with several uses becomes one
// fill per use.
//
// cse merges equal fills, so two matmuls of one shape end up accumulating
// into one zero-filled tensor; bufferization must then copy it for the first
// matmul to keep it for the second. Refilling is cheaper than copying:
//
//   %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
//   %a = linalg.batch_matmul ins(...) outs(%z : ...)
//   %b = linalg.batch_matmul ins(...) outs(%z : ...)
// becomes
//   %z = linalg.fill ins(%zero : f32) outs(%e : ...) -> ...
//   %a = linalg.batch_matmul ins(...) outs(%z : ...)
//   %z2 = linalg.fill ins(%zero : f32) outs(%e : ...) -> ...
//   %b = linalg.batch_matmul ins(...) outs(%z2 : ...)
#include "compiler/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {
namespace {

struct FillPerUsePass : mlir::PassWrapper<FillPerUsePass, mlir::OperationPass<mlir::func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(FillPerUsePass)
  llvm::StringRef getArgument() const final { return "mlpipe-fill-per-use"; }
  llvm::StringRef getDescription() const final { return "Give every use of a tensor linalg.fill its own fill"; }

  void runOnOperation() final {
    llvm::SmallVector<mlir::linalg::FillOp> fills;
    getOperation().walk([&](mlir::linalg::FillOp fill) {
      if (fill.hasPureTensorSemantics() && !fill->getResult(0).hasOneUse())
        fills.push_back(fill);
    });
    for (mlir::linalg::FillOp fill : fills) {
      llvm::SmallVector<mlir::OpOperand *> uses;
      for (mlir::OpOperand &use : fill->getResult(0).getUses())
        uses.push_back(&use);
      for (size_t i = 1; i < uses.size(); ++i) {
        mlir::OpBuilder builder(uses[i]->getOwner());
        mlir::Operation *copy = builder.clone(*fill);
        uses[i]->set(copy->getResult(0));
      }
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createFillPerUsePass() { return std::make_unique<FillPerUsePass>(); }

} // namespace mlpipe
