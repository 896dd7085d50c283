// mlpipe-copies-as-linalg: memref.copy becomes linalg.copy, so that the
// kernel pipeline turns copies (bufferization inserts them, e.g. when a
// result is an input) into GPU kernels instead of host loops.
//
//   memref.copy %src, %dst : memref<4x8xf32> to memref<4x8xf32>
// becomes
//   linalg.copy ins(%src : memref<4x8xf32>) outs(%dst : memref<4x8xf32>)
#include "compiler/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {
namespace {

struct CopiesAsLinalgPass : mlir::PassWrapper<CopiesAsLinalgPass, mlir::OperationPass<mlir::func::FuncOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CopiesAsLinalgPass)
  llvm::StringRef getArgument() const final { return "mlpipe-copies-as-linalg"; }
  llvm::StringRef getDescription() const final { return "Turn memref.copy into linalg.copy"; }
  void getDependentDialects(mlir::DialectRegistry &registry) const final {
    registry.insert<mlir::linalg::LinalgDialect>();
  }

  void runOnOperation() final {
    llvm::SmallVector<mlir::memref::CopyOp> copies;
    getOperation().walk([&](mlir::memref::CopyOp copy) { copies.push_back(copy); });
    for (mlir::memref::CopyOp copy : copies) {
      mlir::OpBuilder builder(copy);
      mlir::linalg::CopyOp::create(builder, copy.getLoc(), copy.getSource(), copy.getTarget());
      copy.erase();
    }
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createCopiesAsLinalgPass() { return std::make_unique<CopiesAsLinalgPass>(); }

} // namespace mlpipe
