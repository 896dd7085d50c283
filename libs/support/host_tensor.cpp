#include "support/host_tensor.h"

#include "support/error.h"

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
    as<int32_t>()[i] = static_cast<int32_t>(value);
    break;
  case DType::i64:
    as<int64_t>()[i] = static_cast<int64_t>(value);
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

std::string HostTensor::describe() const {
  return shape_.empty() ? std::string(dtypeName(dtype_)) : formatShape(shape_) + "x" + dtypeName(dtype_);
}

} // namespace mlpipe
