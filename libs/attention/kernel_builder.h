// What the attention kernels' bodies share (private to libs/attention): a
// small builder of index arithmetic, vector accesses and conversions; the
// butterfly over a group of lanes; and the softmax's prologue (the traced
// scale and mask) evaluated on one score.
#pragma once

#include "attention/attention_matching.h"
#include "emitters/elemental_emitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace mlpipe::emitters::fused_attention {

struct Builder {
  mlir::OpBuilder &b;
  mlir::Location loc;
  Value c(int64_t v) const { return mlir::arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) const { return b.createOrFold<mlir::arith::AddIOp>(loc, x, y); }
  Value add(Value x, int64_t y) const { return y == 0 ? x : add(x, c(y)); }
  Value mul(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::MulIOp>(loc, x, c(y)); }
  Value div(Value x, int64_t y) const { return y == 1 ? x : b.createOrFold<mlir::arith::DivUIOp>(loc, x, c(y)); }
  Value rem(Value x, int64_t y) const { return y == 1 ? c(0) : b.createOrFold<mlir::arith::RemUIOp>(loc, x, c(y)); }
  Value min(Value x, int64_t y) const { return b.createOrFold<mlir::arith::MinSIOp>(loc, x, c(y)); }
  Value lt(Value x, int64_t y) const {
    return b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::slt, x, c(y));
  }
  Value fconst(mlir::Type type, double v) const {
    return mlir::arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
  }
  Value vzero(mlir::Type element, int64_t width) const;
  Value extract(Value v, int64_t i) const { return mlir::vector::ExtractOp::create(b, loc, v, i); }
  Value broadcast(Value scalar, int64_t width) const {
    return mlir::vector::BroadcastOp::create(b, loc, mlir::VectorType::get({width}, scalar.getType()), scalar);
  }
  // `width` consecutive elements along the last dimension of a memref, as
  // a vector (one access when `vectorOk`, else element by element).
  Value load(Value memref, llvm::SmallVector<Value> index, int64_t width, bool vectorOk, int64_t elementBytes) const;
  void store(Value vector, Value memref, llvm::SmallVector<Value> index, int64_t width, bool vectorOk,
             int64_t elementBytes) const;
  // `value` (a float or a vector of them) as elements of `to`.
  Value convert(Value value, mlir::Type to) const;
  // `body` under `condition` (always where the condition is null).
  void guarded(Value condition, const std::function<void()> &body) const;
};

// `value` combined over the `lanes` lanes of a row's group by a butterfly
// (xor offsets stay inside aligned groups): a sum, or with `maximum` the
// largest (NaN propagating).
Value sumOverLanes(const Builder &x, Value value, int64_t lanes);
Value maxOverLanes(const Builder &x, Value value, int64_t lanes);

// The logit x at (head, query, key) from the score there, through the
// softmax's prologue as traced (the scale, the mask); `readKey` is the key
// at which the prologue reads memory (a mask in memory: the key itself,
// or the last one for keys past the end, which the caller masks). The
// mask's own emitter computes the mask's elements where `maskGraph` is
// set. With `visible` (the key known not to be after the query), the
// causal penalty is its constant there, not computed. Null where the
// prologue cannot be evaluated.
Value evaluatePrologue(ElementalEmitter &elemental, ElementalEmitter *mask, const FusionGraph *maskGraph,
                       const FusionGraph &graph, const Softmax &softmax, Value head, Value query, Value readKey,
                       Value score, const VisibleCausalPenalty *visible = nullptr);

} // namespace mlpipe::emitters::fused_attention
