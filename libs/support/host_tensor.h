// HostTensor: a dense, C-ordered array in host memory with its element type
// and shape. It is what .npy files hold, what the reference computes, and
// what `run` binds to a module's named arguments.
#pragma once

#include "support/tensor_types.h"

#include <cstring>
#include <string>
#include <vector>

namespace mlpipe {

class HostTensor {
public:
  HostTensor() = default;
  // Zero-filled tensor of the given type and shape.
  HostTensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t byteSize() const { return bytes_.size(); }

  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes_.data()); }
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(bytes_.data()); }

  // Element i (flat, C order) converted to / from double, whatever the dtype.
  // set() stores as storedValue() says (rounding, truncating, wrapping).
  double at(int64_t i) const;
  void set(int64_t i, double value);

  // Copies of the data as doubles, or built from doubles.
  std::vector<double> toDoubles() const;
  static HostTensor fromDoubles(DType dtype, Shape shape, const std::vector<double> &values);
  // A copy with every element converted to `dtype` as set() converts.
  HostTensor convertedTo(DType dtype) const;

  // "64x256xf32", used in messages.
  std::string describe() const;

private:
  DType dtype_ = DType::f32;
  Shape shape_;
  int64_t numel_ = 0;
  std::vector<unsigned char> bytes_;
};

// A tensor of values no program writes by accident, to fill outputs before a
// run so that an element it never writes shows: a signalling NaN with a
// payload for floats (arithmetic only makes quiet NaNs, so a computed NaN is
// not counted), the byte 0xA5 in every byte of an integer or i1 element.
HostTensor poisonedTensor(DType dtype, Shape shape);
// How many elements of `tensor` still hold that poison.
int64_t countPoisoned(const HostTensor &tensor);

} // namespace mlpipe
