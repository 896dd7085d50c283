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

enum class DType { f32, f64, i32, i64 };

// Bytes per element.
size_t dtypeSize(DType dtype);
// "f32", "f64", "i32", "i64": the spelling used on the command line and in MLIR.
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
bool isFloat(DType dtype);

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
