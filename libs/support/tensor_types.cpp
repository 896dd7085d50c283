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
  case DType::u32:
    return 4;
  case DType::f64:
  case DType::i64:
  case DType::u64:
    return 8;
  case DType::f16:
  case DType::bf16:
  case DType::i16:
  case DType::u16:
    return 2;
  case DType::i1:
  case DType::i8:
  case DType::u8:
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
  case DType::i8:
    return "i8";
  case DType::i16:
    return "i16";
  case DType::u8:
    return "u8";
  case DType::u16:
    return "u16";
  case DType::u32:
    return "u32";
  case DType::u64:
    return "u64";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::bf16, DType::i1, DType::i8,
                      DType::i16, DType::u8, DType::u16, DType::u32, DType::u64})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

bool isFloat(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::f16 || dtype == DType::bf16;
}

int significandBits(DType dtype) {
  switch (dtype) {
  case DType::bf16:
    return 8;
  case DType::f16:
    return 11;
  case DType::f32:
    return 24;
  case DType::f64:
    return 53;
  default:
    fail("{} is not a float type", dtypeName(dtype));
  }
}

double unitRoundoff(DType dtype) { return std::ldexp(1.0, -significandBits(dtype)); }

bool isInteger(DType dtype) { return !isFloat(dtype) && dtype != DType::i1; }

bool isUnsigned(DType dtype) {
  return dtype == DType::u8 || dtype == DType::u16 || dtype == DType::u32 || dtype == DType::u64;
}

int bitWidth(DType dtype) { return dtype == DType::i1 ? 1 : static_cast<int>(8 * dtypeSize(dtype)); }

double integerMinimum(DType dtype) { return isUnsigned(dtype) ? 0.0 : -std::ldexp(1.0, bitWidth(dtype) - 1); }

double integerMaximum(DType dtype) {
  int width = bitWidth(dtype);
  if (width == 64) // 2^64 - 1 and 2^63 - 1 are not doubles
    return std::ldexp(1.0, isUnsigned(dtype) ? 64 : 63);
  return std::ldexp(1.0, isUnsigned(dtype) ? width : width - 1) - 1;
}

int64_t saturatingInt64(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 9223372036854775807.0)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

uint64_t integerBits(double value) {
  if (std::isnan(value))
    return 0;
  // From 2^63 up a double can only be a u64 value: 2^64 is UINT64_MAX
  // rounded, as a u64 element reads into a double.
  if (value >= 9223372036854775808.0)
    return value >= 18446744073709551616.0 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(value);
  return static_cast<uint64_t>(saturatingInt64(value));
}

double integerValue(DType dtype, uint64_t bits) {
  int width = bitWidth(dtype);
  if (width < 64)
    bits &= (uint64_t(1) << width) - 1;
  if (isUnsigned(dtype) || dtype == DType::i1)
    return static_cast<double>(bits);
  if (width < 64 && (bits >> (width - 1)) & 1) // negative: sign-extend
    bits |= ~((uint64_t(1) << width) - 1);
  return static_cast<double>(static_cast<int64_t>(bits));
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
  case DType::i64: // saturating where a double is beyond the range (compatible with the 64-bit code paths)
    return static_cast<double>(saturatingInt64(value));
  case DType::i32: // two's complement wrap-around, as the compiled code does
  case DType::i8:
  case DType::i16:
  case DType::u8:
  case DType::u16:
  case DType::u32:
  case DType::u64:
    return integerValue(dtype, integerBits(value));
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
