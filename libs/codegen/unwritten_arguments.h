// Whether a host-side buffer is one that no kernel writes while the
// program runs: a view of an argument of its function (a weight, say)
// that nothing in the function, nor in the fusions and kernels it passes
// the argument to, writes. A kernel may read such a buffer before it waits
// for the kernel before it (programmatic dependent launch): no kernel of
// the program can be writing it.
//
//   func @step(%w: memref<768x768xbf16>, %cache: memref<...>) {
//     call @attention(%cache, ...)   // writes %cache: written
//     call @c_proj(%x, %w, %y)       // reads %w only: unwritten
//   }
//
// The analysis is conservative: a use it cannot see through (an address
// taken from the buffer, an op with unknown effects, an external callee)
// counts as a write.
#pragma once

#include "mlir/IR/Value.h"

namespace mlpipe::emitters {

bool isUnwrittenArgument(mlir::Value memref);

} // namespace mlpipe::emitters
