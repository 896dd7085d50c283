// The combination of split-key attention partials: mlpipe-fused-attention's
// decode kernel splits each query row's keys over blocks, each writing its
// split's max m_s, sum l_s and weighted values acc_s (the last block of a
// query tile to finish combines them); one output element (head, row, d)
// is then exactly
//
//   M = max_s m_s,  out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M)
//
// where an empty split (m_s = -inf, l_s = 0, acc_s = 0: every key masked,
// or past the run-time position) adds nothing.
#pragma once

#include "mlir/IR/Builders.h"

namespace mlpipe::emitters {

// Of `units` consecutive runs of `keysPerUnit` keys (key tiles, splits),
// how many hold a key up to the run-time position p loaded from
// `position` (a memref<i32>, or with a `sequence` a memref<Bxi32> read
// there): keys after p are masked to exact zeros while key 0 is not (p >=
// 0); all of them for p < 0.
mlir::Value unitsUpToPosition(mlir::OpBuilder &b, mlir::Location loc, mlir::Value position, int64_t keysPerUnit,
                              int64_t units, mlir::Value sequence = {});

} // namespace mlpipe::emitters
