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
  // its source a buffer of the same type, allocated here (or a reshape of
  // one: expand_shape or collapse_shape, as a fusion that reshapes its
  // result leaves it) and not used after the copy but to free it. The
  // allocation becomes the target (or the inverse reshape of it).
  static void elide(mlir::memref::CopyOp copy) {
    auto target = mlir::dyn_cast<mlir::BlockArgument>(copy.getTarget());
    if (!target || !target.hasOneUse() || copy.getSource().getType() != target.getType())
      return;
    mlir::Operation *reshape = copy.getSource().getDefiningOp();
    if (reshape && !mlir::isa<mlir::memref::ExpandShapeOp, mlir::memref::CollapseShapeOp>(reshape))
      reshape = nullptr;
    mlir::Value buffer = reshape ? reshape->getOperand(0) : copy.getSource();
    auto alloc = buffer.getDefiningOp<mlir::memref::AllocOp>();
    if (!alloc || alloc->getBlock() != copy->getBlock())
      return;
    auto usedBeforeCopy = [&](mlir::Operation *user) {
      mlir::Operation *top = copy->getBlock()->findAncestorOpInBlock(*user);
      return top && top->isBeforeInBlock(copy);
    };
    if (reshape &&
        !llvm::all_of(reshape->getUsers(), [&](mlir::Operation *user) { return user == copy || usedBeforeCopy(user); }))
      return;
    mlir::memref::DeallocOp dealloc;
    for (mlir::Operation *user : alloc->getUsers()) {
      if (user == copy || user == reshape)
        continue;
      if (auto free = mlir::dyn_cast<mlir::memref::DeallocOp>(user)) {
        dealloc = free;
        continue;
      }
      if (!usedBeforeCopy(user))
        return;
    }
    mlir::Value replacement = target;
    if (reshape) {
      // The target seen as the allocation: the reshape undone.
      mlir::OpBuilder builder(alloc);
      mlir::Operation *inverse = nullptr;
      if (auto expand = mlir::dyn_cast<mlir::memref::ExpandShapeOp>(reshape))
        inverse =
            mlir::memref::CollapseShapeOp::create(builder, alloc.getLoc(), target, expand.getReassociationIndices());
      else
        inverse = mlir::memref::ExpandShapeOp::create(
            builder, alloc.getLoc(), alloc.getType(), target,
            mlir::cast<mlir::memref::CollapseShapeOp>(reshape).getReassociationIndices());
      if (inverse->getResult(0).getType() != alloc.getType()) {
        inverse->erase();
        return;
      }
      replacement = inverse->getResult(0);
    }
    copy.erase();
    if (dealloc)
      dealloc.erase();
    alloc.getResult().replaceAllUsesWith(replacement);
    alloc.erase();
  }
};

} // namespace

} // namespace mlpipe
