// HLO constants and elementwise ops recorded into the front-end graph.
#include "frontend/hlo/hlo_builder.h"

#include <cmath>
#include <limits>

namespace mlpipe::fe::hlo {

// A constant's element must be a value of its type, as XLA's parser
// demands ("out of range for literal's primitive type"): nothing wraps,
// saturates or overflows to infinity.
void Builder::checkLiteralValue(const Instruction &ins, double v, DType dtype) const {
  if (isFloat(dtype)) {
    if (std::isfinite(v) && !std::isfinite(storedValue(dtype, v)))
      failOp(ins, fmt::format("{} is out of range for {}: its largest finite value is {:.9g}", v, hloTypeName(dtype),
                              largestFinite(dtype)));
    return;
  }
  if (v != std::trunc(v) || !std::isfinite(v) || (dtype == DType::i1 && v != 0 && v != 1))
    failOp(ins, fmt::format("{} is not a value of {}", v, hloTypeName(dtype)));
  // 2^31 and 2^63 are exact doubles: the bounds compare exactly.
  double limit = dtype == DType::i32 ? 2147483648.0 : 9223372036854775808.0;
  if (dtype != DType::i1 && (v < -limit || v >= limit))
    failOp(ins, fmt::format("{:.0f} is out of range for {}", v, hloTypeName(dtype)));
}

double Builder::largestFinite(DType dtype) {
  switch (dtype) {
  case DType::f16:
    return 65504.0;
  case DType::bf16:
    return 3.3895313892515355e38;
  case DType::f32:
    return std::numeric_limits<float>::max();
  default:
    return std::numeric_limits<double>::max();
  }
}

} // namespace mlpipe::fe::hlo
