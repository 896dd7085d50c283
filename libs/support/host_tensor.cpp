#include "support/host_tensor.h"

#include "support/error.h"
#include "support/float16.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mlpipe {

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(numElements(shape_)),
      bytes_(static_cast<size_t>(mlpipe::byteSize(shape_, dtype_)), 0) {}

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
  for (int64_t i = 0; i < numel_; ++i)
    converted.set(i, at(i));
  return converted;
}

std::string HostTensor::describe() const {
  return shape_.empty() ? std::string(dtypeName(dtype_)) : formatShape(shape_) + "x" + dtypeName(dtype_);
}

namespace {
constexpr unsigned char kPoisonByte = 0xA5;
}

HostTensor poisonedTensor(DType dtype, Shape shape) {
  HostTensor tensor(dtype, std::move(shape));
  if (isFloat(dtype)) {
    for (int64_t i = 0; i < tensor.numel(); ++i)
      tensor.set(i, std::numeric_limits<double>::quiet_NaN());
  } else if (tensor.byteSize() > 0) {
    std::memset(tensor.data(), kPoisonByte, tensor.byteSize());
  }
  return tensor;
}

int64_t countPoisoned(const HostTensor &tensor) {
  int64_t count = 0;
  size_t size = dtypeSize(tensor.dtype());
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    if (isFloat(tensor.dtype())) {
      count += std::isnan(tensor.at(i)) ? 1 : 0;
      continue;
    }
    const auto *bytes = static_cast<const unsigned char *>(tensor.data()) + i * size;
    count += std::all_of(bytes, bytes + size, [](unsigned char byte) { return byte == kPoisonByte; }) ? 1 : 0;
  }
  return count;
}

} // namespace mlpipe
