// The combination of split-key attention partials: see split_combine.h.
#include "attention/split_combine.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>
#include <limits>

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

namespace {

// The pieces of the combination, built at the builder's insertion point.
// A split not in use (past the run-time position) is empty: its loads are
// not issued and its exponential not taken, since it adds exactly nothing.
class SplitCombiner {
public:
  SplitCombiner(mlir::OpBuilder &b, mlir::Location loc, mlir::Value partials, mlir::Value position, int64_t headSize,
                int64_t keysPerSplit, mlir::Value sequence)
      : b_(b), loc_(loc), partials_(partials), headSize_(headSize) {
    auto type = mlir::cast<mlir::MemRefType>(partials.getType());
    element_ = type.getElementType();
    splits_ = type.getDimSize(2);
    negInf_ = constant(-std::numeric_limits<double>::infinity());
    zero_ = constant(0.0);
    if (position)
      used_ = unitsUpToPosition(b, loc, position, keysPerSplit, splits_, sequence);
  }

  mlir::Value index(int64_t v) { return mlir::arith::ConstantIndexOp::create(b_, loc_, v); }
  mlir::Value constant(double v) {
    return mlir::arith::ConstantOp::create(b_, loc_, element_, b_.getFloatAttr(element_, v));
  }

  // Split s's element `at` (of the row [head, row, s, :]), or `otherwise`
  // where s is not in use. All such loads are issued before any is used.
  llvm::SmallVector<mlir::Value> load(mlir::Value head, mlir::Value row, mlir::Value at, mlir::Value otherwise) {
    llvm::SmallVector<mlir::Value> values;
    for (int64_t s = 0; s < splits_; ++s) {
      values.push_back(
          guarded(s, {otherwise}, [&] { return llvm::SmallVector<mlir::Value>{read(head, row, s, at)}; }).front());
    }
    return values;
  }

  // The scale of each split, exp(m_s - M) (0 for an empty split), and
  // L = sum_s l_s scale_s, for one row.
  std::pair<llvm::SmallVector<mlir::Value>, mlir::Value> scales(mlir::Value head, mlir::Value row) {
    llvm::SmallVector<mlir::Value> maxima = load(head, row, index(headSize_), negInf_);
    llvm::SmallVector<mlir::Value> sums = load(head, row, index(headSize_ + 1), zero_);
    mlir::Value overall = negInf_;
    for (mlir::Value m : maxima)
      overall = mlir::arith::MaximumFOp::create(b_, loc_, overall, m);
    llvm::SmallVector<mlir::Value> scale;
    mlir::Value total = zero_;
    for (int64_t s = 0; s < splits_; ++s) {
      llvm::SmallVector<mlir::Value> share = guarded(s, {zero_, total}, [&] {
        mlir::Value empty = mlir::arith::CmpFOp::create(b_, loc_, mlir::arith::CmpFPredicate::OEQ, maxima[s], negInf_);
        mlir::Value x = mlir::math::ExpOp::create(b_, loc_, mlir::arith::SubFOp::create(b_, loc_, maxima[s], overall));
        x = mlir::arith::SelectOp::create(b_, loc_, empty, zero_, x);
        mlir::Value next =
            mlir::arith::AddFOp::create(b_, loc_, total, mlir::arith::MulFOp::create(b_, loc_, sums[s], x));
        return llvm::SmallVector<mlir::Value>{x, next};
      });
      scale.push_back(share[0]);
      total = share[1];
    }
    return {scale, total};
  }

  // out[head, row, d] = sum_s acc_s scale_s / L.
  mlir::Value weighted(mlir::Value head, mlir::Value row, mlir::Value d, llvm::ArrayRef<mlir::Value> scale,
                       mlir::Value total) {
    llvm::SmallVector<mlir::Value> acc = load(head, row, d, zero_);
    mlir::Value value = zero_;
    for (int64_t s = 0; s < splits_; ++s) {
      value = guarded(s, {value}, [&] {
                return llvm::SmallVector<mlir::Value>{mlir::arith::AddFOp::create(
                    b_, loc_, value, mlir::arith::MulFOp::create(b_, loc_, acc[s], scale[s]))};
              }).front();
    }
    return mlir::arith::DivFOp::create(b_, loc_, value, total);
  }

private:
  mlir::Value read(mlir::Value head, mlir::Value row, int64_t s, mlir::Value at) {
    return mlir::memref::LoadOp::create(b_, loc_, partials_, mlir::ValueRange{head, row, index(s), at});
  }

  // `then`'s values where split s is in use (always for split 0, or with
  // no position), else `otherwise`.
  llvm::SmallVector<mlir::Value> guarded(int64_t s, llvm::SmallVector<mlir::Value> otherwise,
                                         const std::function<llvm::SmallVector<mlir::Value>()> &then) {
    if (!used_ || s == 0)
      return then();
    mlir::Value inUse = mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::slt, index(s), used_);
    llvm::SmallVector<mlir::Type> types;
    for (mlir::Value v : otherwise)
      types.push_back(v.getType());
    auto branch = mlir::scf::IfOp::create(b_, loc_, types, inUse, /*withElseRegion=*/true);
    {
      mlir::OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPointToStart(branch.thenBlock());
      mlir::scf::YieldOp::create(b_, loc_, then());
      b_.setInsertionPointToStart(branch.elseBlock());
      mlir::scf::YieldOp::create(b_, loc_, otherwise);
    }
    return llvm::SmallVector<mlir::Value>(branch.getResults());
  }

  mlir::OpBuilder &b_;
  mlir::Location loc_;
  mlir::Value partials_;
  int64_t headSize_;
  mlir::Type element_;
  int64_t splits_ = 1;
  mlir::Value negInf_, zero_, used_;
};

} // namespace

mlir::Value combineSplits(mlir::OpBuilder &b, mlir::Location loc, mlir::Value partials, mlir::Value position,
                          int64_t headSize, int64_t keysPerSplit, mlir::Value head, mlir::Value row, mlir::Value d,
                          mlir::Value sequence) {
  SplitCombiner combiner(b, loc, partials, position, headSize, keysPerSplit, sequence);
  auto [scale, total] = combiner.scales(head, row);
  return combiner.weighted(head, row, d, scale, total);
}

} // namespace mlpipe::emitters
