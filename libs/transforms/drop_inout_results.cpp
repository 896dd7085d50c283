// mlpipe-drop-inout-results: the results that only carry an in-out input's
// update (a KV cache written in place) leave the signature, once it is
// certain bufferization wrote them in place.
// Passes.td holds its description, with IR before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mlpipe {

#define GEN_PASS_DEF_DROPINOUTRESULTSPASS
#include "transforms/Passes.h.inc"

namespace {

struct DropInoutResultsPass : impl::DropInoutResultsPassBase<DropInoutResultsPass> {
  void runOnOperation() final {
    for (auto function : getOperation().getOps<mlir::func::FuncOp>())
      if (!function.isExternal() && mlir::failed(dropUpdates(function)))
        return signalPassFailure();
  }

  static mlir::LogicalResult dropUpdates(mlir::func::FuncOp function) {
    llvm::BitVector dropped(function.getNumResults());
    for (unsigned result = 0; result < function.getNumResults(); ++result) {
      auto updates = function.getResultAttrOfType<mlir::StringAttr>(result, "mlpipe.updates");
      if (!updates)
        continue;
      mlir::BlockArgument input;
      for (mlir::BlockArgument argument : function.getArguments())
        if (auto name = function.getArgAttrOfType<mlir::StringAttr>(argument.getArgNumber(), "mlpipe.name");
            name && name == updates)
          input = argument;
      if (!input)
        return function.emitError() << "the update of '" << updates.getValue() << "' names no input";
      bool inPlace = true;
      function.walk([&](mlir::func::ReturnOp ret) { inPlace &= ret.getOperand(result) == input; });
      if (!inPlace)
        return function.emitError() << "the in-out input '" << updates.getValue()
                                    << "' was not updated in place: bufferization would copy it";
      dropped.set(result);
    }
    if (dropped.none())
      return mlir::success();
    function.walk([&](mlir::func::ReturnOp ret) {
      for (int result = static_cast<int>(dropped.size()) - 1; result >= 0; --result)
        if (dropped.test(result))
          ret->eraseOperand(result);
    });
    if (mlir::failed(function.eraseResults(dropped)))
      return function.emitError("could not drop the in-out results");
    return mlir::success();
  }
};

} // namespace

} // namespace mlpipe
