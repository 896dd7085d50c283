// Lines of global memory a kernel will read, brought into L2 before it
// waits for the kernel before it (programmatic dependent launch: its blocks
// are resident while that kernel runs). A prefetch neither reads a value
// nor writes one, so it is safe before the wait whatever the buffer holds:
// every later write lands in L2 too.
#pragma once

#include "mlir/IR/Builders.h"

namespace mlpipe::emitters {

// Rows [rowBegin, rowEnd) (at most maxRows) of the last two dimensions of
// `matrix` at the leading indices `outer` (none for a matrix), columns
// [colBegin, colEnd) (at most maxColumns) of each.
struct RowsToPrefetch {
  mlir::Value matrix;
  llvm::SmallVector<mlir::Value, 1> outer;
  mlir::Value rowBegin, rowEnd;
  int64_t maxRows = 0;
  mlir::Value colBegin, colEnd;
  int64_t maxColumns = 0;
  int64_t elementBytes = 0;
};

// The block's `threads` threads (thread `tid`) take the rows in turn, and
// each prefetches every 128-byte line its row's columns touch.
void prefetchRowsToL2(mlir::OpBuilder &b, mlir::Location loc, const RowsToPrefetch &rows, mlir::Value tid,
                      int64_t threads);

} // namespace mlpipe::emitters
