#include "support/host_tensor.h"

#include "support/error.h"
#include "support/float16.h"
#include "support/memory.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlpipe {

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(numElements(shape_)) {
  int64_t bytes = mlpipe::byteSize(shape_, dtype_);
  try {
    bytes_.assign(static_cast<size_t>(bytes), 0);
  } catch (const std::bad_alloc &) {
    fail("out of host memory: a {} tensor needs {}", describe(), humanBytes(double(bytes)));
  }
}

double HostTensor::at(int64_t i) const {
  switch (dtype_) {
  case DType::f32:
    return as<float>()[i];
  case DType::f64:
    return as<double>()[i];
  case DType::i32:
    return as<int32_t>()[i];
  case DType::i64:
    return static_cast<double>(as<int64_t>()[i]);
  case DType::f16:
    return f16BitsToFloat(as<uint16_t>()[i]);
  case DType::bf16:
    return bf16BitsToFloat(as<uint16_t>()[i]);
  case DType::i1: // 0 or 1; any other byte reads as itself, so damage shows
    return as<uint8_t>()[i];
  case DType::i8:
    return as<int8_t>()[i];
  case DType::i16:
    return as<int16_t>()[i];
  case DType::u8:
    return as<uint8_t>()[i];
  case DType::u16:
    return as<uint16_t>()[i];
  case DType::u32:
    return as<uint32_t>()[i];
  case DType::u64:
    return static_cast<double>(as<uint64_t>()[i]);
  }
  return 0;
}

void HostTensor::set(int64_t i, double value) {
  switch (dtype_) {
  case DType::f32:
    as<float>()[i] = static_cast<float>(value);
    break;
  case DType::f64:
    as<double>()[i] = value;
    break;
  case DType::i32:
    as<int32_t>()[i] = static_cast<int32_t>(storedValue(DType::i32, value));
    break;
  case DType::i64:
    as<int64_t>()[i] = saturatingInt64(value);
    break;
  case DType::f16:
    as<uint16_t>()[i] = floatToF16Bits(static_cast<float>(value));
    break;
  case DType::bf16:
    as<uint16_t>()[i] = floatToBf16Bits(static_cast<float>(value));
    break;
  case DType::i1:
    as<uint8_t>()[i] = value != 0 ? 1 : 0;
    break;
  case DType::i8: // the low bits of the value, wrapped as storedValue wraps it
    as<int8_t>()[i] = static_cast<int8_t>(integerBits(value));
    break;
  case DType::i16:
    as<int16_t>()[i] = static_cast<int16_t>(integerBits(value));
    break;
  case DType::u8:
    as<uint8_t>()[i] = static_cast<uint8_t>(integerBits(value));
    break;
  case DType::u16:
    as<uint16_t>()[i] = static_cast<uint16_t>(integerBits(value));
    break;
  case DType::u32:
    as<uint32_t>()[i] = static_cast<uint32_t>(integerBits(value));
    break;
  case DType::u64:
    as<uint64_t>()[i] = integerBits(value);
    break;
  }
}

std::vector<double> HostTensor::toDoubles() const {
  std::vector<double> values(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i)
    values[i] = at(i);
  return values;
}

HostTensor HostTensor::fromDoubles(DType dtype, Shape shape, const std::vector<double> &values) {
  HostTensor tensor(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != tensor.numel())
    fail("{} values do not fill a tensor of shape {}", values.size(), formatShape(tensor.shape()));
  for (int64_t i = 0; i < tensor.numel(); ++i)
    tensor.set(i, values[i]);
  return tensor;
}

HostTensor HostTensor::convertedTo(DType dtype) const {
  if (dtype == dtype_)
    return *this;
  HostTensor converted(dtype, shape_);
  // f32 to and from the 16-bit floats (weights, logits: millions of
  // elements) directly; every f32 is a double, so the result is the same.
  auto count = static_cast<size_t>(numel_);
  if (dtype_ == DType::f32 && dtype == DType::bf16) {
    narrowToBf16Bits(as<float>(), converted.as<uint16_t>(), count);
    return converted;
  }
  if (dtype_ == DType::f32 && dtype == DType::f16) {
    narrowToF16Bits(as<float>(), converted.as<uint16_t>(), count);
    return converted;
  }
  if (dtype_ == DType::bf16 && dtype == DType::f32) {
    widenBf16Bits(as<uint16_t>(), converted.as<float>(), count);
    return converted;
  }
  if (dtype_ == DType::f16 && dtype == DType::f32) {
    widenF16Bits(as<uint16_t>(), converted.as<float>(), count);
    return converted;
  }
  for (int64_t i = 0; i < numel_; ++i)
    converted.set(i, at(i));
  return converted;
}

std::string HostTensor::describe() const {
  return shape_.empty() ? std::string(dtypeName(dtype_)) : formatShape(shape_) + "x" + dtypeName(dtype_);
}

namespace {

// Integer and i1 elements: this byte in every byte.
constexpr unsigned char kPoisonByte = 0xA5;

// Float elements: a signalling NaN with a payload. Arithmetic never makes
// one (it returns quiet NaNs), so a NaN a program computes is told apart
// from an element it never wrote.
constexpr uint64_t kPoisonF64 = 0x7FF5A5A5A5A5A5A5ull;
constexpr uint32_t kPoisonF32 = 0x7FA5A5A5u;
constexpr uint16_t kPoisonF16 = 0x7CA5u;
constexpr uint16_t kPoisonBf16 = 0x7FA5u;

// The poison's bytes for one element of `dtype`.
std::vector<unsigned char> poisonElement(DType dtype) {
  std::vector<unsigned char> bytes(dtypeSize(dtype), kPoisonByte);
  auto copy = [&](auto bits) { std::memcpy(bytes.data(), &bits, sizeof(bits)); };
  switch (dtype) {
  case DType::f64:
    copy(kPoisonF64);
    break;
  case DType::f32:
    copy(kPoisonF32);
    break;
  case DType::f16:
    copy(kPoisonF16);
    break;
  case DType::bf16:
    copy(kPoisonBf16);
    break;
  default:
    break;
  }
  return bytes;
}

} // namespace

HostTensor poisonedTensor(DType dtype, Shape shape) {
  HostTensor tensor(dtype, std::move(shape));
  std::vector<unsigned char> element = poisonElement(dtype);
  auto *bytes = static_cast<unsigned char *>(tensor.data());
  for (int64_t i = 0; i < tensor.numel(); ++i)
    std::memcpy(bytes + i * element.size(), element.data(), element.size());
  return tensor;
}

int64_t countPoisoned(const HostTensor &tensor) {
  std::vector<unsigned char> element = poisonElement(tensor.dtype());
  const auto *bytes = static_cast<const unsigned char *>(tensor.data());
  int64_t count = 0;
  for (int64_t i = 0; i < tensor.numel(); ++i)
    count += std::memcmp(bytes + i * element.size(), element.data(), element.size()) == 0 ? 1 : 0;
  return count;
}

} // namespace mlpipe
