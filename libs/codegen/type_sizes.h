// Sizes of shaped types, as kernels count the bytes they move
// (KernelSignature::bytesMoved). Counts saturate at INT64_MAX: a
// hand-written memref of 2^60 elements gives a huge cost, never a negative
// one.
#pragma once

#include "mlir/IR/Types.h"

#include <cstdint>

namespace mlpipe::emitters {

// Elements of a shaped type (a memref or a tensor).
int64_t elementsOf(mlir::Type shapedType);
// Its bytes: the elements times the element's size (a byte at least, for
// i1).
int64_t bytesOf(mlir::Type shapedType);

} // namespace mlpipe::emitters
