// Element types and shapes shared by every layer: the .npy reader, the front
// end, the reference and the runtime all speak these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlpipe {

// f16 and bf16 are the 16-bit floats of XLA programs (support/float16.h);
// i1 is XLA's pred, a boolean held in one byte (0 or 1).
enum class DType { f32, f64, i32, i64, f16, bf16, i1 };

// Bytes per element.
size_t dtypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "f16", "bf16", "i1": the spelling used on the
// command line and in MLIR.
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
// f32, f64, f16 and bf16.
bool isFloat(DType dtype);
// i32 and i64 (not i1, which holds truth values).
bool isInteger(DType dtype);
// The value an element of `dtype` holds once `value` is stored in it: f32,
// f16 and bf16 round to nearest even, integers truncate toward zero and wrap
// to their width (NaN becomes 0), i1 is value != 0. f64 keeps it as it is.
double storedValue(DType dtype, double value);
// A double as int64: truncated toward zero, saturating at the int64 range
// (NaN gives 0), so that no value converts with undefined behaviour. (A
// double holds integers exactly only up to 2^53.)
int64_t saturatingInt64(double value);

using Shape = std::vector<int64_t>;

// Product of the dimensions; throws mlpipe::Error if a dimension is negative
// or the product overflows int64 (a hostile header can claim anything).
int64_t numElements(const Shape &shape);
// numElements * dtypeSize, again refusing overflow.
int64_t byteSize(const Shape &shape, DType dtype);
// "64x256"; "scalar" for rank 0.
std::string formatShape(const Shape &shape);
// Parses "64x256" (or "64" for rank 1). Dimensions must be positive integers.
// Throws mlpipe::Error naming the text on anything else.
Shape parseShape(std::string_view text);

} // namespace mlpipe
