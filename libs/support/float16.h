// The two 16-bit float formats XLA programs use, converted to and from f32 in
// software, so the host side (.npy, the reference, random inputs) needs no
// compiler support for them:
//   f16   IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits
//   bf16  bfloat16: the top 16 bits of an f32 (1 sign, 8 exponent, 7 mantissa)
// Narrowing rounds to nearest, ties to even, as arith.truncf does; NaN stays
// a (quiet) NaN and values past the largest finite one become infinities.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlpipe {

uint16_t floatToF16Bits(float value);
float f16BitsToFloat(uint16_t bits);

uint16_t floatToBf16Bits(float value);
float bf16BitsToFloat(uint16_t bits);

// `count` elements at once (weights, logits: up to millions), each
// converted exactly as above, in loops the compiler vectorizes.
void narrowToF16Bits(const float *from, uint16_t *to, size_t count);
void widenF16Bits(const uint16_t *from, float *to, size_t count);
void narrowToBf16Bits(const float *from, uint16_t *to, size_t count);
void widenBf16Bits(const uint16_t *from, float *to, size_t count);

} // namespace mlpipe
