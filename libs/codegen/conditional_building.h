// What the kernel builders of codegen share to build a branch: `body`,
// built under an scf.if on `condition` (no else branch), with the same
// builder, whose insertion point is restored after.
#pragma once

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace mlpipe::emitters {

inline void buildUnder(mlir::OpBuilder &b, mlir::Location loc, mlir::Value condition,
                       const std::function<void()> &body) {
  auto branch = mlir::scf::IfOp::create(b, loc, condition, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&branch.getThenRegion().front());
  body();
}

} // namespace mlpipe::emitters
