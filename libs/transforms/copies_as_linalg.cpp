// mlpipe-copies-as-linalg: memref.copy becomes linalg.copy.
// Passes.td holds its description, with IR before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_COPIESASLINALGPASS
#include "transforms/Passes.h.inc"

namespace {

struct CopiesAsLinalgPass : impl::CopiesAsLinalgPassBase<CopiesAsLinalgPass> {
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

} // namespace mlpipe
