// Software conversions between f32 and the 16-bit float formats. See float16.h.
#include "support/float16.h"

#include <bit>

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

// The conversions proper, internal so that the array loops below inline
// them. Converting element by element through a call of the exported
// function took 1.7 ns an element: 86 us for one row of GPT-2's bf16
// logits, four times the decode step's logits kernel.

// Each conversion computes every case and selects one with masks, without
// branches, so that a loop of it vectorizes.

// All ones where `condition` holds, else zero.
inline uint32_t maskOf(bool condition) { return 0u - static_cast<uint32_t>(condition); }

inline uint16_t narrowToF16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits >> 16) & 0x8000;
  uint32_t magnitude = bits & kF32AbsMask;
  // A normal f16: the exponent rebiased from 127 to 15, the mantissa cut to
  // 10 bits and rounded to nearest even; a carry into the exponent is the
  // right next value, up to the infinity.
  uint32_t dropped = magnitude & 0x1fff;
  uint32_t normal = ((magnitude - ((127 - 15) << 23)) >> 13);
  normal += (dropped > 0x1000) | ((dropped == 0x1000) & normal);
  // A subnormal f16 holds m * 2^-24: scaling by 2^24 is exact in f32, and
  // adding and taking away 2^23 rounds it (under 2^10) to nearest even.
  // m == 1024 is the smallest normal, whose encoding is the same number.
  // Larger magnitudes (and NaN) are capped so that the conversion to an
  // integer stays defined; their result is not selected.
  uint32_t capped = magnitude < kF16SmallestNormal ? magnitude : kF16SmallestNormal;
  float scaled = std::bit_cast<float>(capped) * 16777216.0f;
  auto subnormal = static_cast<uint32_t>(static_cast<int32_t>((scaled + 0x1p23f) - 0x1p23f));
  uint32_t isNan = maskOf(magnitude > kF32Infinity);
  uint32_t isInfinite = maskOf(magnitude >= kF16OverflowThreshold) & ~isNan;
  uint32_t isSubnormal = maskOf(magnitude < kF16SmallestNormal);
  uint32_t isNormal = ~(isNan | isInfinite | isSubnormal);
  uint32_t half =
      (kF16QuietNan & isNan) | (kF16Infinity & isInfinite) | (subnormal & isSubnormal) | (normal & isNormal);
  return static_cast<uint16_t>(sign | half);
}

inline float widenF16(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  // Normal: the exponent rebiased from 15 to 127.
  uint32_t normal = ((exponent + 127 - 15) << 23) | (mantissa << 13);
  // Infinity or NaN, its payload kept.
  uint32_t special = kF32Infinity | (mantissa << 13);
  // Zero or subnormal: m * 2^-24, exact in f32.
  uint32_t small = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  uint32_t isSmall = maskOf(exponent == 0), isSpecial = maskOf(exponent == 31);
  uint32_t magnitude = (small & isSmall) | (special & isSpecial) | (normal & ~(isSmall | isSpecial));
  return std::bit_cast<float>(sign | magnitude);
}

inline uint16_t narrowToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t quietNan = (bits >> 16) | 0x40; // a NaN stays a quiet NaN
  uint32_t roundingBias = 0x7fff + ((bits >> 16) & 1);
  uint32_t rounded = (bits + roundingBias) >> 16;
  uint32_t isNan = maskOf((bits & kF32AbsMask) > kF32Infinity);
  return static_cast<uint16_t>((quietNan & isNan) | (rounded & ~isNan));
}

inline float widenBf16(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

} // namespace

uint16_t floatToF16Bits(float value) { return narrowToF16(value); }
float f16BitsToFloat(uint16_t bits) { return widenF16(bits); }
uint16_t floatToBf16Bits(float value) { return narrowToBf16(value); }
float bf16BitsToFloat(uint16_t bits) { return widenBf16(bits); }

void narrowToF16Bits(const float *from, uint16_t *to, size_t count) {
  for (size_t i = 0; i < count; ++i)
    to[i] = narrowToF16(from[i]);
}

void widenF16Bits(const uint16_t *from, float *to, size_t count) {
  for (size_t i = 0; i < count; ++i)
    to[i] = widenF16(from[i]);
}

void narrowToBf16Bits(const float *from, uint16_t *to, size_t count) {
  for (size_t i = 0; i < count; ++i)
    to[i] = narrowToBf16(from[i]);
}

void widenBf16Bits(const uint16_t *from, float *to, size_t count) {
  for (size_t i = 0; i < count; ++i)
    to[i] = widenBf16(from[i]);
}

} // namespace mlpipe
