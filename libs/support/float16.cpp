// Software conversions between f32 and the 16-bit float formats. See float16.h.
#include "support/float16.h"

#include <bit>
#include <cmath>

namespace mlpipe {

namespace {
constexpr uint32_t kF32AbsMask = 0x7fffffff;
constexpr uint32_t kF32Infinity = 0x7f800000;
// The smallest f32 that rounds to an f16 infinity: halfway between the
// largest f16, 65504, and 65536 (ties go to the even infinity).
constexpr uint32_t kF16OverflowThreshold = 0x477ff000;
// 2^-14, the smallest normal f16; below it f16 values are subnormal.
constexpr uint32_t kF16SmallestNormal = 0x38800000;
constexpr uint16_t kF16Infinity = 0x7c00;
constexpr uint16_t kF16QuietNan = 0x7e00;
} // namespace

uint16_t floatToF16Bits(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & kF32AbsMask;
  if (magnitude > kF32Infinity)
    return sign | kF16QuietNan;
  if (magnitude >= kF16OverflowThreshold)
    return sign | kF16Infinity;
  if (magnitude < kF16SmallestNormal) {
    // A subnormal f16 holds m * 2^-24: scaling by 2^24 is exact in f32, and
    // rint rounds to nearest even. m == 1024 is the smallest normal, whose
    // encoding is the same number.
    float scaled = std::fabs(value) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::rint(scaled));
  }
  uint32_t exponent = (magnitude >> 23) - 127 + 15;
  uint32_t mantissa = magnitude & 0x7fffff;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t dropped = mantissa & 0x1fff;
  if (dropped > 0x1000 || (dropped == 0x1000 && (half & 1)))
    ++half; // a carry into the exponent is the right next value
  return sign | static_cast<uint16_t>(half);
}

float f16BitsToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return std::bit_cast<float>(sign | kF32Infinity | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t floatToBf16Bits(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & kF32AbsMask) > kF32Infinity)
    return static_cast<uint16_t>((bits >> 16) | 0x40); // keep it a quiet NaN
  uint32_t roundingBias = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

float bf16BitsToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

} // namespace mlpipe
