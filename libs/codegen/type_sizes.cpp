#include "codegen/type_sizes.h"

#include "mlir/IR/BuiltinTypeInterfaces.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>

namespace mlpipe::emitters {

int64_t elementsOf(mlir::Type type) {
  auto shaped = mlir::cast<mlir::ShapedType>(type);
  int64_t count = 1;
  for (int64_t extent : shaped.getShape()) {
    uint64_t product = llvm::SaturatingMultiply<uint64_t>(count, extent);
    count = product > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(product);
  }
  return count;
}

int64_t bytesOf(mlir::Type type) {
  auto shaped = mlir::cast<mlir::ShapedType>(type);
  uint64_t bytes = llvm::SaturatingMultiply<uint64_t>(
      elementsOf(type), std::max<int64_t>(1, shaped.getElementType().getIntOrFloatBitWidth() / 8));
  return bytes > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(bytes);
}

} // namespace mlpipe::emitters
