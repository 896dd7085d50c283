// mlpipe-elide-result-copies: a result computed into a temporary and copied
// into its out-parameter is computed into the out-parameter.
// Passes.td holds its description, with IR before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlpipe {

#define GEN_PASS_DEF_ELIDERESULTCOPIESPASS
#include "transforms/Passes.h.inc"

namespace {

struct ElideResultCopiesPass : impl::ElideResultCopiesPassBase<ElideResultCopiesPass> {
  void runOnOperation() final {
    mlir::func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    llvm::SmallVector<mlir::memref::CopyOp> copies;
    for (mlir::Operation &op : function.getBody().front())
      if (auto copy = mlir::dyn_cast<mlir::memref::CopyOp>(op))
        copies.push_back(copy);
    for (mlir::memref::CopyOp copy : copies)
      elide(copy);
  }

  // The copy goes when its target is an argument nothing else touches and
  // its source a buffer of the same type, allocated here and not used after
  // the copy but to free it.
  static void elide(mlir::memref::CopyOp copy) {
    auto target = mlir::dyn_cast<mlir::BlockArgument>(copy.getTarget());
    auto alloc = copy.getSource().getDefiningOp<mlir::memref::AllocOp>();
    if (!target || !alloc || !target.hasOneUse() || alloc.getType() != target.getType() ||
        alloc->getBlock() != copy->getBlock())
      return;
    mlir::memref::DeallocOp dealloc;
    for (mlir::Operation *user : alloc->getUsers()) {
      if (user == copy)
        continue;
      if (auto free = mlir::dyn_cast<mlir::memref::DeallocOp>(user)) {
        dealloc = free;
        continue;
      }
      mlir::Operation *top = copy->getBlock()->findAncestorOpInBlock(*user);
      if (!top || !top->isBeforeInBlock(copy))
        return;
    }
    copy.erase();
    if (dealloc)
      dealloc.erase();
    alloc.getResult().replaceAllUsesWith(target);
    alloc.erase();
  }
};

} // namespace

} // namespace mlpipe
