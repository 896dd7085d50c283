// The combination of split-key attention partials: see split_combine.h.
#include "compiler/emitters/split_combine.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

namespace mlpipe::emitters {

mlir::Value combineSplits(mlir::OpBuilder &b, mlir::Location loc, mlir::Value partials, mlir::Value position,
                          int64_t headSize, int64_t keysPerSplit, mlir::Value head, mlir::Value row, mlir::Value d) {
  auto type = mlir::cast<mlir::MemRefType>(partials.getType());
  mlir::Type element = type.getElementType();
  const int64_t S = type.getDimSize(2), D = headSize;
  auto index = [&](int64_t v) -> mlir::Value { return mlir::arith::ConstantIndexOp::create(b, loc, v); };
  auto constant = [&](double v) -> mlir::Value {
    return mlir::arith::ConstantOp::create(b, loc, element, b.getFloatAttr(element, v));
  };
  mlir::Value negInf = constant(-std::numeric_limits<double>::infinity()), zero = constant(0.0);
  // Splits in use: ceil(min(p + 1, S * keysPerSplit) / keysPerSplit), or S
  // for p < 0.
  mlir::Value used;
  if (position) {
    mlir::Value p = mlir::memref::LoadOp::create(b, loc, position, mlir::ValueRange{});
    p = mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), p);
    mlir::Value keys =
        mlir::arith::MinSIOp::create(b, loc, mlir::arith::AddIOp::create(b, loc, p, index(1)), index(S * keysPerSplit));
    mlir::Value splits = mlir::arith::DivUIOp::create(
        b, loc, mlir::arith::AddIOp::create(b, loc, keys, index(keysPerSplit - 1)), index(keysPerSplit));
    mlir::Value negative = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, p, index(0));
    used = mlir::arith::SelectOp::create(b, loc, negative, index(S), splits);
  }
  // Every split's (m, l, acc) loaded first; a split not in use is empty.
  struct Partial {
    mlir::Value max, sum, acc;
  };
  llvm::SmallVector<Partial> parts;
  for (int64_t s = 0; s < S; ++s) {
    auto load = [&](mlir::Value at) {
      return mlir::memref::LoadOp::create(b, loc, partials, mlir::ValueRange{head, row, index(s), at}).getResult();
    };
    if (!used || s == 0) {
      parts.push_back({load(index(D)), load(index(D + 1)), load(d)});
      continue;
    }
    mlir::Value inUse = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, index(s), used);
    auto read = mlir::scf::IfOp::create(b, loc, mlir::TypeRange{element, element, element}, inUse, true);
    {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(read.thenBlock());
      mlir::scf::YieldOp::create(b, loc, mlir::ValueRange{load(index(D)), load(index(D + 1)), load(d)});
      b.setInsertionPointToStart(read.elseBlock());
      mlir::scf::YieldOp::create(b, loc, mlir::ValueRange{negInf, zero, zero});
    }
    parts.push_back({read.getResult(0), read.getResult(1), read.getResult(2)});
  }
  mlir::Value overall = negInf;
  for (const Partial &part : parts)
    overall = mlir::arith::MaximumFOp::create(b, loc, overall, part.max);
  mlir::Value sum = zero, value = zero;
  for (const Partial &part : parts) {
    mlir::Value empty = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::OEQ, part.max, negInf);
    mlir::Value scale = mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, part.max, overall));
    scale = mlir::arith::SelectOp::create(b, loc, empty, zero, scale);
    sum = mlir::arith::AddFOp::create(b, loc, sum, mlir::arith::MulFOp::create(b, loc, part.sum, scale));
    value = mlir::arith::AddFOp::create(b, loc, value, mlir::arith::MulFOp::create(b, loc, part.acc, scale));
  }
  return mlir::arith::DivFOp::create(b, loc, value, sum);
}

} // namespace mlpipe::emitters
