#define BOOST_TEST_MODULE tensor_types
#include <boost/test/unit_test.hpp>

#include "support/error.h"
#include "support/host_tensor.h"
#include "support/tensor_types.h"

#include <cmath>
#include <cstdint>
#include <tuple>

using namespace mlpipe;

BOOST_AUTO_TEST_CASE(parses_shapes) {
  BOOST_TEST(parseShape("64x256") == (Shape{64, 256}));
  BOOST_TEST(parseShape("7") == (Shape{7}));
  BOOST_TEST(formatShape({2, 3, 4}) == "2x3x4");
}

BOOST_AUTO_TEST_CASE(refuses_bad_shapes) {
  for (const char *text : {"", "x", "64x", "0x3", "-1x2", "64xq", "3.5", "99999999999x99999999999"})
    BOOST_CHECK_THROW(parseShape(text), Error);
}

BOOST_AUTO_TEST_CASE(refuses_overflowing_element_counts) {
  BOOST_CHECK_THROW(numElements({int64_t(1) << 40, int64_t(1) << 40}), Error);
  BOOST_CHECK_THROW(byteSize({int64_t(1) << 31, int64_t(1) << 31}, DType::f64), Error);
}

BOOST_AUTO_TEST_CASE(host_tensor_round_trips_doubles) {
  HostTensor t = HostTensor::fromDoubles(DType::i32, {2, 2}, {1, -2, 3, 4});
  BOOST_TEST(t.as<int32_t>()[1] == -2);
  BOOST_TEST(t.describe() == "2x2xi32");
}

// ---- integers of every width --------------------------------------------------

BOOST_AUTO_TEST_CASE(integer_types_know_their_width_range_and_signedness) {
  for (auto [dtype, width, low, high] : std::initializer_list<std::tuple<DType, int, double, double>>{
           {DType::i8, 8, -128, 127},
           {DType::i16, 16, -32768, 32767},
           {DType::i32, 32, -2147483648.0, 2147483647},
           {DType::i64, 64, -9223372036854775808.0, 9223372036854775808.0}, // 2^63 - 1 rounds up
           {DType::u8, 8, 0, 255},
           {DType::u16, 16, 0, 65535},
           {DType::u32, 32, 0, 4294967295.0},
           {DType::u64, 64, 0, 18446744073709551616.0}}) {
    BOOST_TEST_CONTEXT(dtypeName(dtype)) {
      BOOST_TEST(bitWidth(dtype) == width);
      BOOST_TEST(dtypeSize(dtype) * 8 == static_cast<size_t>(width));
      BOOST_TEST(integerMinimum(dtype) == low);
      BOOST_TEST(integerMaximum(dtype) == high);
      BOOST_TEST(isInteger(dtype));
      BOOST_TEST(!isFloat(dtype));
      BOOST_TEST(isUnsigned(dtype) == (low == 0));
      BOOST_TEST((parseDType(dtypeName(dtype)) == dtype));
    }
  }
  BOOST_TEST(!isInteger(DType::i1));
  BOOST_TEST(bitWidth(DType::i1) == 1);
}

BOOST_AUTO_TEST_CASE(integer_bits_are_twos_complement_and_saturate_past_64_bits) {
  BOOST_TEST(integerBits(-1) == UINT64_MAX);
  BOOST_TEST(integerBits(-2.9) == UINT64_MAX - 1); // truncated toward zero
  BOOST_TEST(integerBits(std::nan("")) == 0u);
  BOOST_TEST(integerBits(9223372036854775808.0) == uint64_t(1) << 63); // from 2^63 up: unsigned
  BOOST_TEST(integerBits(18446744073709551616.0) == UINT64_MAX);       // UINT64_MAX as a double
  BOOST_TEST(integerBits(1e30) == UINT64_MAX);
  BOOST_TEST(integerBits(-1e30) == uint64_t(1) << 63);
  BOOST_TEST(integerValue(DType::i8, 0x80) == -128);
  BOOST_TEST(integerValue(DType::u8, 0x80) == 128);
  BOOST_TEST(integerValue(DType::i16, 0x12345) == 0x2345);
  BOOST_TEST(integerValue(DType::u64, UINT64_MAX) == 18446744073709551616.0);
  BOOST_TEST(integerValue(DType::i64, UINT64_MAX) == -1);
}

BOOST_AUTO_TEST_CASE(stored_integers_wrap_to_their_width) {
  BOOST_TEST(storedValue(DType::i8, 200) == -56);
  BOOST_TEST(storedValue(DType::u8, -1) == 255);
  BOOST_TEST(storedValue(DType::u16, 70000.9) == 70000 - 65536);
  BOOST_TEST(storedValue(DType::i32, 2147483648.0) == -2147483648.0);
  BOOST_TEST(storedValue(DType::u32, -1) == 4294967295.0);
  BOOST_TEST(storedValue(DType::u64, -1) == 18446744073709551616.0);
  BOOST_TEST(storedValue(DType::i64, 1e30) == 9223372036854775808.0); // INT64_MAX, saturated
  HostTensor bytes = HostTensor::fromDoubles(DType::u8, {3}, {255, 256, -1});
  BOOST_TEST(bytes.as<uint8_t>()[0] == 255);
  BOOST_TEST(bytes.as<uint8_t>()[1] == 0);
  BOOST_TEST(bytes.as<uint8_t>()[2] == 255);
  HostTensor wide = HostTensor::fromDoubles(DType::u64, {2}, {18446744073709551616.0, 9223372036854775808.0});
  BOOST_TEST(wide.as<uint64_t>()[0] == UINT64_MAX);
  BOOST_TEST(wide.as<uint64_t>()[1] == uint64_t(1) << 63);
  BOOST_TEST(wide.at(1) == 9223372036854775808.0);
  HostTensor narrow = HostTensor::fromDoubles(DType::i16, {2}, {-32768, 32768});
  BOOST_TEST(narrow.at(0) == -32768);
  BOOST_TEST(narrow.at(1) == -32768);
  BOOST_TEST(narrow.describe() == "2xi16");
}

// ---- f16, bf16, i1 ----------------------------------------------------------

#include "support/float16.h"

#include "test_support.h"

#include <bit>
#include <cmath>
#include <limits>

BOOST_AUTO_TEST_CASE(every_16_bit_float_survives_a_round_trip_through_f32) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    auto h = static_cast<uint16_t>(bits);
    float f16 = f16BitsToFloat(h), bf16 = bf16BitsToFloat(h);
    if (std::isnan(f16))
      BOOST_TEST(std::isnan(f16BitsToFloat(floatToF16Bits(f16))));
    else if (floatToF16Bits(f16) != h)
      BOOST_ERROR("f16 " << bits << " comes back as " << floatToF16Bits(f16));
    if (std::isnan(bf16))
      BOOST_TEST(std::isnan(bf16BitsToFloat(floatToBf16Bits(bf16))));
    else if (floatToBf16Bits(bf16) != h)
      BOOST_ERROR("bf16 " << bits << " comes back as " << floatToBf16Bits(bf16));
  }
}

// Rounding to nearest: no representable neighbour of the result is closer.
// Magnitudes from below the smallest f16 subnormal (2^-24) to just under the
// largest f16 (65504); overflow is tested on its own below.
BOOST_AUTO_TEST_CASE(narrowing_rounds_to_the_nearest_16_bit_float) {
  std::uniform_real_distribution<float> magnitude(-26.0f, 15.99f);
  for (int i = 0; i < 100000; ++i) {
    float x = std::exp2(magnitude(mlpipe::testing::rng())) * (i % 2 ? -1.0f : 1.0f);
    for (auto [narrow, widen] : {std::pair{&floatToF16Bits, &f16BitsToFloat}, {&floatToBf16Bits, &bf16BitsToFloat}}) {
      uint16_t bits = narrow(x);
      double error = std::fabs(static_cast<double>(widen(bits)) - x);
      for (int step : {-1, 1}) {
        float neighbour = widen(static_cast<uint16_t>(bits + step));
        if (std::isfinite(neighbour) && std::fabs(static_cast<double>(neighbour) - x) < error)
          BOOST_FAIL(x << " rounds to " << widen(bits) << " but " << neighbour << " is closer");
      }
    }
  }
}

// Whole tensors convert through the array loops: every 16-bit pattern
// widens to the value its fields spell (NaN payloads kept), in a tensor of
// all 65536 and in one of 7 (a count no vector width divides).
BOOST_AUTO_TEST_CASE(whole_tensors_widen_every_16_bit_float_to_its_value) {
  auto f16Value = [](uint32_t bits) {
    int exponent = static_cast<int>((bits >> 10) & 0x1f);
    double mantissa = bits & 0x3ff;
    double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
    return (bits & 0x8000) ? -magnitude : magnitude;
  };
  for (int64_t count : {int64_t{65536}, int64_t{7}}) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      HostTensor narrow(dtype, {count});
      for (int64_t i = 0; i < count; ++i)
        narrow.as<uint16_t>()[i] = static_cast<uint16_t>(count == 7 ? 0x3c00 + 977 * i : i);
      HostTensor wide = narrow.convertedTo(DType::f32);
      for (int64_t i = 0; i < count; ++i) {
        uint32_t bits = narrow.as<uint16_t>()[i];
        uint32_t got = std::bit_cast<uint32_t>(wide.as<float>()[i]);
        bool special = dtype == DType::f16 ? ((bits >> 10) & 0x1f) == 0x1f : ((bits >> 7) & 0xff) == 0xff;
        uint32_t expected = dtype == DType::bf16 ? bits << 16
                            : special            ? ((bits & 0x8000) << 16) | 0x7f800000 | ((bits & 0x3ff) << 13)
                                                 : std::bit_cast<uint32_t>(static_cast<float>(f16Value(bits)));
        if (got != expected)
          BOOST_FAIL(dtypeName(dtype) << " bits " << bits << " widen to f32 bits " << got << ", not " << expected);
      }
    }
  }
}

// And narrow exactly as the element conversions do (which the rounding
// test checks), over an odd count of random f32 spanning both formats'
// ranges, with zeros, infinities and NaNs among them.
BOOST_AUTO_TEST_CASE(whole_tensors_narrow_as_each_element_does) {
  std::uniform_real_distribution<float> magnitude(-30.0f, 20.0f);
  HostTensor wide(DType::f32, {100003});
  for (int64_t i = 0; i < wide.numel(); ++i)
    wide.as<float>()[i] = std::exp2(magnitude(mlpipe::testing::rng())) * (i % 2 ? -1.0f : 1.0f);
  wide.as<float>()[10] = 0.0f;
  wide.as<float>()[11] = -std::numeric_limits<float>::infinity();
  wide.as<float>()[12] = std::numeric_limits<float>::quiet_NaN();
  wide.as<float>()[13] = -std::numeric_limits<float>::signaling_NaN();
  HostTensor f16 = wide.convertedTo(DType::f16), bf16 = wide.convertedTo(DType::bf16);
  for (int64_t i = 0; i < wide.numel(); ++i) {
    float x = wide.as<float>()[i];
    if (f16.as<uint16_t>()[i] != floatToF16Bits(x) || bf16.as<uint16_t>()[i] != floatToBf16Bits(x))
      BOOST_FAIL(x << " narrows to " << f16.as<uint16_t>()[i] << " / " << bf16.as<uint16_t>()[i] << ", not "
                   << floatToF16Bits(x) << " / " << floatToBf16Bits(x));
  }
}

BOOST_AUTO_TEST_CASE(ties_round_to_even_and_overflow_becomes_infinity) {
  BOOST_TEST(f16BitsToFloat(floatToF16Bits(1.0f + std::ldexp(1.0f, -11))) == 1.0f);
  BOOST_TEST(f16BitsToFloat(floatToF16Bits(1.0f + 3 * std::ldexp(1.0f, -11))) == 1.0f + std::ldexp(1.0f, -9));
  BOOST_TEST(f16BitsToFloat(floatToF16Bits(65519.0f)) == 65504.0f);
  BOOST_TEST(std::isinf(f16BitsToFloat(floatToF16Bits(65520.0f))));
  BOOST_TEST(floatToF16Bits(std::ldexp(1.0f, -24)) == 1u);     // the smallest subnormal
  BOOST_TEST(floatToF16Bits(std::ldexp(1.0f, -25)) == 0u);     // a tie, to the even zero
  BOOST_TEST(floatToF16Bits(3 * std::ldexp(1.0f, -25)) == 2u); // a tie, to the even 2
  BOOST_TEST(floatToF16Bits(-0.0f) == 0x8000u);
  BOOST_TEST(bf16BitsToFloat(floatToBf16Bits(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  BOOST_TEST(bf16BitsToFloat(floatToBf16Bits(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  BOOST_TEST(std::isinf(bf16BitsToFloat(floatToBf16Bits(std::numeric_limits<float>::max()))));
  BOOST_TEST(std::isnan(bf16BitsToFloat(floatToBf16Bits(std::numeric_limits<float>::quiet_NaN()))));
}

BOOST_AUTO_TEST_CASE(stored_values_round_wrap_and_truncate) {
  BOOST_TEST(storedValue(DType::i32, 2147483648.0) == -2147483648.0);
  BOOST_TEST(storedValue(DType::i32, -7.9) == -7.0);
  BOOST_TEST(storedValue(DType::i32, std::nan("")) == 0.0);
  BOOST_TEST(storedValue(DType::i64, 1e300) == static_cast<double>(std::numeric_limits<int64_t>::max()));
  BOOST_TEST(storedValue(DType::i1, -0.5) == 1.0);
  BOOST_TEST(storedValue(DType::i1, 0.0) == 0.0);
  BOOST_TEST(storedValue(DType::bf16, 1.0 + std::ldexp(1.0, -8)) == 1.0);
  BOOST_TEST(storedValue(DType::f32, 0.1) == static_cast<double>(0.1f));
  BOOST_TEST(storedValue(DType::f64, 0.1) == 0.1);
}

BOOST_AUTO_TEST_CASE(host_tensors_hold_16_bit_floats_and_truth_values) {
  HostTensor half = HostTensor::fromDoubles(DType::f16, {3}, {0.1, -2.5, 70000});
  BOOST_TEST(half.byteSize() == 6u);
  BOOST_TEST(half.at(0) == static_cast<double>(f16BitsToFloat(floatToF16Bits(0.1f))));
  BOOST_TEST(half.at(1) == -2.5);
  BOOST_TEST(std::isinf(half.at(2)));
  HostTensor brain = half.convertedTo(DType::bf16);
  BOOST_TEST(brain.at(1) == -2.5);
  HostTensor truth = HostTensor::fromDoubles(DType::i1, {2, 2}, {0, 3, -1, 0});
  BOOST_TEST(truth.byteSize() == 4u);
  BOOST_TEST(truth.as<uint8_t>()[1] == 1);
  BOOST_TEST(truth.describe() == "2x2xi1");
}

// f32 to and from the 16-bit floats takes a direct path (weights and logits
// are millions of elements): the same values as storedValue() element by
// element, specials included, and back to f32 exactly.
BOOST_AUTO_TEST_CASE(converting_f32_to_16_bits_rounds_as_stored_values_do) {
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  std::vector<double> values = {0.0, -0.0, 1e-40, 65520.0, -1e30, INFINITY, -INFINITY, NAN, 1.0 + 1.0 / 512};
  for (int i = 0; i < 1001; ++i)
    values.push_back(value(testing::rng()));
  HostTensor wide = HostTensor::fromDoubles(DType::f32, {static_cast<int64_t>(values.size())}, values);
  for (DType narrow : {DType::bf16, DType::f16}) {
    BOOST_TEST_CONTEXT(dtypeName(narrow)) {
      HostTensor narrowed = wide.convertedTo(narrow);
      HostTensor back = narrowed.convertedTo(DType::f32);
      BOOST_TEST((back.dtype() == DType::f32));
      for (int64_t i = 0; i < wide.numel(); ++i) {
        double expected = storedValue(narrow, wide.at(i));
        if (std::isnan(expected)) {
          BOOST_TEST(std::isnan(narrowed.at(i)));
          BOOST_TEST(std::isnan(back.at(i)));
        } else {
          BOOST_TEST(narrowed.at(i) == expected, "element " << i << " = " << wide.at(i));
          BOOST_TEST(back.at(i) == expected, "element " << i << " = " << wide.at(i));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(float_types_know_their_unit_roundoff) {
  BOOST_TEST(significandBits(DType::bf16) == 8);
  BOOST_TEST(significandBits(DType::f16) == 11);
  BOOST_TEST(significandBits(DType::f32) == 24);
  BOOST_TEST(significandBits(DType::f64) == 53);
  BOOST_TEST(unitRoundoff(DType::bf16) == 1.0 / 256);
  // 1 + u is the tie between 1 and the next float: it rounds to even (1).
  for (DType dtype : {DType::bf16, DType::f16, DType::f32})
    BOOST_TEST(storedValue(dtype, 1.0 + unitRoundoff(dtype)) == 1.0, dtypeName(dtype));
  BOOST_TEST(storedValue(DType::bf16, 1.0 + 3 * unitRoundoff(DType::bf16)) == 1.0 + 4 * unitRoundoff(DType::bf16));
  BOOST_TEST(testing::messageOf([] { significandBits(DType::i32); }) == "i32 is not a float type");
}

BOOST_AUTO_TEST_CASE(poison_shows_unwritten_elements_of_every_type) {
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::bf16, DType::i1, DType::i8,
                      DType::i16, DType::u8, DType::u16, DType::u32, DType::u64}) {
    BOOST_TEST_CONTEXT(dtypeName(dtype)) {
      HostTensor poisoned = poisonedTensor(dtype, {5});
      BOOST_TEST(countPoisoned(poisoned) == 5);
      poisoned.set(2, 1.0);
      poisoned.set(4, 0.0);
      BOOST_TEST(countPoisoned(poisoned) == 3);
      // A NaN a program computes (a quiet one) is a value, not the poison.
      if (isFloat(dtype)) {
        poisoned.set(0, std::numeric_limits<double>::quiet_NaN());
        poisoned.set(1, -std::numeric_limits<double>::quiet_NaN());
        BOOST_TEST(countPoisoned(poisoned) == 1);
        BOOST_TEST(std::isnan(poisonedTensor(dtype, {1}).at(0)));
      }
    }
  }
}
