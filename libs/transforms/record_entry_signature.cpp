// mlpipe-record-entry-signature: each entry's argument types recorded as an
// attribute, and checked against mlpipe.inputs/outputs, before lowering to
// LLVM erases them. Passes.td holds its description, with IR before and after.
#include "transforms/entry_signature.h"
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_RECORDENTRYSIGNATUREPASS
#include "transforms/Passes.h.inc"

namespace {

struct RecordEntrySignaturePass : impl::RecordEntrySignaturePassBase<RecordEntrySignaturePass> {
  void runOnOperation() final {
    mlir::Builder builder(&getContext());
    for (auto function : getOperation().getOps<mlir::func::FuncOp>()) {
      if (!function->hasAttr("mlpipe.inputs"))
        continue;
      llvm::ArrayRef<mlir::Type> types = function.getArgumentTypes();
      if (std::string mismatch = entrySignatureMismatch(function, types); !mismatch.empty()) {
        function.emitError(mismatch);
        return signalPassFailure();
      }
      llvm::SmallVector<mlir::Attribute> recorded;
      for (mlir::Type type : types)
        recorded.push_back(mlir::TypeAttr::get(type));
      function->setAttr(kArgumentTypesAttribute, builder.getArrayAttr(recorded));
    }
  }
};

} // namespace

} // namespace mlpipe
