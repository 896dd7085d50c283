// mlpipe-fill-per-use: every use of a tensor linalg.fill gets its own fill.
// Passes.td holds its description, with IR before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_FILLPERUSEPASS
#include "transforms/Passes.h.inc"

namespace {

struct FillPerUsePass : impl::FillPerUsePassBase<FillPerUsePass> {
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

} // namespace mlpipe
