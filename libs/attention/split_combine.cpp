// The splits of keys up to a run-time position: see split_combine.h.
#include "attention/split_combine.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlpipe::emitters {

mlir::Value unitsUpToPosition(mlir::OpBuilder &b, mlir::Location loc, mlir::Value position, int64_t keysPerUnit,
                              int64_t units, mlir::Value sequence) {
  auto index = [&](int64_t v) -> mlir::Value { return mlir::arith::ConstantIndexOp::create(b, loc, v); };
  // ceil(min(p + 1, units * keysPerUnit) / keysPerUnit), or all for p < 0.
  llvm::SmallVector<mlir::Value, 1> at;
  if (sequence)
    at.push_back(sequence);
  mlir::Value p = mlir::memref::LoadOp::create(b, loc, position, at);
  p = mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), p);
  mlir::Value keys = mlir::arith::MinSIOp::create(b, loc, mlir::arith::AddIOp::create(b, loc, p, index(1)),
                                                  index(units * keysPerUnit));
  mlir::Value used = mlir::arith::DivUIOp::create(
      b, loc, mlir::arith::AddIOp::create(b, loc, keys, index(keysPerUnit - 1)), index(keysPerUnit));
  mlir::Value negative = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, p, index(0));
  return mlir::arith::SelectOp::create(b, loc, negative, index(units), used);
}

} // namespace mlpipe::emitters
