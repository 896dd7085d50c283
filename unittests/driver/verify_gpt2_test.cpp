// verify gpt2's policy for reduced precision: the tolerance per storage type
// and the near-tie rule for greedy tokens.
#define BOOST_TEST_MODULE verify_gpt2
#include <boost/test/unit_test.hpp>

#include "driver/verify_gpt2.h"

#include <cmath>

using namespace mlpipe;

BOOST_AUTO_TEST_CASE(the_tolerance_follows_the_storage_types_unit_roundoff) {
  BOOST_TEST(gpt2Tolerance(DType::f32, "f32") == kGpt2F32Tolerance);
  BOOST_TEST(gpt2Tolerance(DType::f32, "tf32") == kGpt2Tf32Tolerance);
  BOOST_TEST(gpt2Tolerance(DType::bf16, "f32") == kGpt2SixteenBitRoundings * std::ldexp(1.0, -8));
  BOOST_TEST(gpt2Tolerance(DType::f16, "f32") == kGpt2SixteenBitRoundings * std::ldexp(1.0, -11));
  // bf16 keeps 3 fewer bits than f16: a bound 8 times looser.
  BOOST_TEST(gpt2Tolerance(DType::bf16, "f32") == 8 * gpt2Tolerance(DType::f16, "f32"));
}

BOOST_AUTO_TEST_CASE(a_near_tie_is_within_the_tolerance_of_the_top_logit) {
  double tolerance = gpt2Tolerance(DType::bf16, "f32");
  // Relative to the top logit: at 10, ties reach 11 tolerances below it.
  BOOST_TEST(isNearTie(10.0, 10.0 - 10.9 * tolerance, tolerance));
  BOOST_TEST(!isNearTie(10.0, 10.0 - 11.1 * tolerance, tolerance));
  // Near zero the absolute part holds.
  BOOST_TEST(isNearTie(0.0, -0.9 * tolerance, tolerance));
  BOOST_TEST(!isNearTie(0.0, -1.1 * tolerance, tolerance));
  // Negative logits: relative to their magnitude.
  BOOST_TEST(isNearTie(-5.0, -5.0 - 5.9 * tolerance, tolerance));
  BOOST_TEST(!isNearTie(-5.0, -5.0 - 6.1 * tolerance, tolerance));
}
