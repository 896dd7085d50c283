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
// i1 is XLA's pred, a boolean held in one byte (0 or 1). i8 ... i64 are
// signed integers (XLA's s8 ... s64), u8 ... u64 unsigned ones; both are
// signless iN in MLIR, where each op says how it reads the bits.
enum class DType { f32, f64, i32, i64, f16, bf16, i1, i8, i16, u8, u16, u32, u64 };

// Bytes per element.
size_t dtypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "f16", "bf16", "i1", "i8", "i16", "u8",
// "u16", "u32", "u64": the spelling used on the command line and in
// messages (MLIR spells an unsigned type as the signless iN of its width).
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
// f32, f64, f16 and bf16.
bool isFloat(DType dtype);
// Significand bits of a float type, the hidden one included: 8 bf16, 11 f16,
// 24 f32, 53 f64; its unit roundoff (round to nearest) is 2^-bits.
int significandBits(DType dtype);
double unitRoundoff(DType dtype);
// The signed and unsigned integers (not i1, which holds truth values).
bool isInteger(DType dtype);
// u8, u16, u32 and u64.
bool isUnsigned(DType dtype);
// Bits of an integer or i1 element: 8 ... 64, and 1 for i1.
int bitWidth(DType dtype);
// The smallest and largest values of an integer type (as doubles: exact
// except for the 64-bit maxima, which round up to 2^63 and 2^64).
double integerMinimum(DType dtype);
double integerMaximum(DType dtype);
// The value an element of `dtype` holds once `value` is stored in it: f32,
// f16 and bf16 round to nearest even, integers truncate toward zero and wrap
// to their width (NaN becomes 0), i1 is value != 0. f64 keeps it as it is.
// (A double holds integers exactly up to 2^53: beyond that a 64-bit value
// is the nearest double.)
double storedValue(DType dtype, double value);
// An integer element's bits, as two's complement in 64 bits: the value
// truncated toward zero, saturating at [-2^63, 2^64 - 1] (NaN gives 0; a
// double from 2^63 up reads as unsigned, so UINT64_MAX, which a double
// rounds to 2^64, keeps its bits). integerValue is the value `bits` hold in
// `dtype`: the low bitWidth bits, sign- or zero-extended.
uint64_t integerBits(double value);
double integerValue(DType dtype, uint64_t bits);
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
