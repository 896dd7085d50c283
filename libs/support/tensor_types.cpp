#include "support/tensor_types.h"

#include "support/error.h"
#include "support/float16.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace mlpipe {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::f32:
  case DType::i32:
    return 4;
  case DType::f64:
  case DType::i64:
    return 8;
  case DType::f16:
  case DType::bf16:
    return 2;
  case DType::i1:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "f32";
  case DType::f64:
    return "f64";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::i1:
    return "i1";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::bf16, DType::i1})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

bool isFloat(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

bool isInteger(DType dtype) { return dtype == DType::i32 || dtype == DType::i64; }

int64_t saturatingInt64(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 9223372036854775807.0)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

double storedValue(DType dtype, double value) {
  switch (dtype) {
  case DType::f64:
    return value;
  case DType::f32:
    return static_cast<float>(value);
  case DType::f16:
    return f16BitsToFloat(floatToF16Bits(static_cast<float>(value)));
  case DType::bf16:
    return bf16BitsToFloat(floatToBf16Bits(static_cast<float>(value)));
  case DType::i32: // two's complement wrap-around, as the compiled code does
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(saturatingInt64(value))));
  case DType::i64:
    return static_cast<double>(saturatingInt64(value));
  case DType::i1:
    return value != 0 ? 1.0 : 0.0;
  }
  return value;
}

int64_t numElements(const Shape &shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      fail("shape {} has a negative dimension", formatShape(shape));
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      fail("shape {} has more elements than fit in 64 bits", formatShape(shape));
    count *= dim;
  }
  return count;
}

int64_t byteSize(const Shape &shape, DType dtype) {
  int64_t count = numElements(shape);
  int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  if (count > std::numeric_limits<int64_t>::max() / size)
    fail("shape {} of {} needs more bytes than fit in 64 bits", formatShape(shape), dtypeName(dtype));
  return count * size;
}

std::string formatShape(const Shape &shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += 'x';
    text += std::to_string(shape[i]);
  }
  return text;
}

Shape parseShape(std::string_view text) {
  Shape shape;
  size_t start = 0;
  while (true) {
    size_t end = text.find('x', start);
    std::string_view part = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    int64_t dim = 0;
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), dim);
    if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || dim <= 0)
      fail("bad shape '{}': expected positive dimensions joined by 'x', like 64x256", text);
    shape.push_back(dim);
    if (end == std::string_view::npos)
      break;
    start = end + 1;
  }
  try {
    numElements(shape); // refuse overflow here, not at allocation
  } catch (const Error &) {
    fail("bad shape '{}': it has more elements than fit in 64 bits", text);
  }
  return shape;
}

} // namespace mlpipe
