// Tests for compareTensors and formatComparison: the allclose boundary, NaN
// and infinity handling, the worst element, the error measures, and refusals.
#define BOOST_TEST_MODULE compare
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "support/compare.h"
#include "support/error.h"
#include "support/host_tensor.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlpipe;
using mlpipe::testing::rng;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A fresh seed every run, logged so that a failure can be replayed.

// Random values in [1, 100) with random signs: never zero, so relative
// errors are always defined.
HostTensor randomTensor(DType dtype, Shape shape) {
  HostTensor tensor(dtype, std::move(shape));
  std::uniform_real_distribution<double> magnitude(1, 100);
  for (int64_t i = 0; i < tensor.numel(); ++i)
    tensor.set(i, (rng()() % 2 ? 1 : -1) * magnitude(rng()));
  return tensor;
}

HostTensor vector(const std::vector<double> &values, DType dtype = DType::f64) {
  return HostTensor::fromDoubles(dtype, {static_cast<int64_t>(values.size())}, values);
}

HostTensor scalar(double value, DType dtype = DType::f64) { return HostTensor::fromDoubles(dtype, {}, {value}); }

bool passes(double actual, double expected, double rtol, double atol) {
  return compareTensors(scalar(actual), scalar(expected), rtol, atol).pass;
}

} // namespace

BOOST_AUTO_TEST_CASE(identical_tensors_pass_with_zero_error) {
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    HostTensor t = randomTensor(dtype, {3, 7});
    Comparison c = compareTensors(t, t, 0, 0);
    BOOST_TEST(c.pass);
    BOOST_TEST(c.mismatches == 0);
    BOOST_TEST(c.maxAbsError == 0);
    BOOST_TEST(c.maxRelError == 0);
    BOOST_TEST(c.relativeL2 == 0);
    BOOST_TEST(c.shape == (Shape{3, 7}));
    BOOST_TEST(c.worstIndex == 0); // the first of the equally small errors
  }
}

BOOST_AUTO_TEST_CASE(passes_exactly_up_to_the_allclose_bound) {
  // Allowed error: 0.5 + 0.25 * |4| = 1.5, all exact in binary.
  BOOST_TEST(passes(5.5, 4, 0.25, 0.5));
  BOOST_TEST(passes(2.5, 4, 0.25, 0.5));
  BOOST_TEST(!passes(std::nextafter(5.5, kInf), 4, 0.25, 0.5));
  BOOST_TEST(!passes(std::nextafter(2.5, -kInf), 4, 0.25, 0.5));
  // The relative part scales with |expected|, not |actual| (as in numpy).
  BOOST_TEST(passes(0, 1, 1, 0));
  BOOST_TEST(!passes(1, 0, 1, 0));
  BOOST_TEST(passes(-3, -2, 0.5, 0));
  // Zero tolerances demand equality.
  BOOST_TEST(passes(7, 7, 0, 0));
  BOOST_TEST(!passes(7, std::nextafter(7.0, 8.0), 0, 0));
}

BOOST_AUTO_TEST_CASE(random_perturbations_pass_or_fail_by_their_size) {
  HostTensor expected = randomTensor(DType::f64, {50});
  HostTensor inside = expected, outside = expected;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double b = expected.at(i);
    inside.set(i, b + 0.9 * (1e-6 + 1e-3 * std::fabs(b)));
    outside.set(i, b - 1.1 * (1e-6 + 1e-3 * std::fabs(b)));
  }
  BOOST_TEST(compareTensors(inside, expected, 1e-3, 1e-6).pass);
  Comparison c = compareTensors(outside, expected, 1e-3, 1e-6);
  BOOST_TEST(!c.pass);
  BOOST_TEST(c.mismatches == 50);
}

BOOST_AUTO_TEST_CASE(nan_never_passes_and_infinities_must_match) {
  BOOST_TEST(!passes(kNaN, kNaN, 1, 1));
  BOOST_TEST(!passes(kNaN, 1, 1, 1));
  BOOST_TEST(!passes(1, kNaN, 1, 1));
  BOOST_TEST(passes(kInf, kInf, 0, 0));
  BOOST_TEST(passes(-kInf, -kInf, 0, 0));
  BOOST_TEST(!passes(kInf, -kInf, 1, 1));
  // An expected infinity allows no finite value however loose the tolerance.
  BOOST_TEST(!passes(1e308, kInf, 1e10, 1e10));
  BOOST_TEST(!passes(kInf, 1e308, 1e10, 1e10));

  Comparison c = compareTensors(vector({1, kNaN, kInf, 4, kInf}), vector({1, 2, kInf, kNaN, -kInf}), 0.1, 0.1);
  BOOST_TEST(!c.pass);
  BOOST_TEST(c.mismatches == 3);
  BOOST_TEST(c.maxAbsError == kInf);
  BOOST_TEST(c.maxRelError == kInf);
  BOOST_TEST(c.relativeL2 == kInf);
  BOOST_TEST(c.worstIndex == 1); // the first non-finite mismatch
  BOOST_TEST(std::isnan(c.worstActual));
  BOOST_TEST(c.worstExpected == 2);

  // Matching infinities pass and add no error.
  Comparison same = compareTensors(vector({kInf, 3, -kInf}), vector({kInf, 3, -kInf}), 0, 0);
  BOOST_TEST(same.pass);
  BOOST_TEST(same.maxAbsError == 0);
  BOOST_TEST(same.relativeL2 == 0);
}

BOOST_AUTO_TEST_CASE(equal_nan_matches_nan_against_nan_only) {
  // As where a program and its reference both leave a function's domain.
  Comparison both = compareTensors(vector({kNaN, 2, -kInf}), vector({kNaN, 2, -kInf}), 0, 0, /*equalNan=*/true);
  BOOST_TEST(both.pass);
  BOOST_TEST(both.maxAbsError == 0);
  BOOST_TEST(both.relativeL2 == 0);
  // NaN against a number, or a number against NaN, still fails.
  Comparison one = compareTensors(vector({kNaN, 2}), vector({1, kNaN}), 1, 1, /*equalNan=*/true);
  BOOST_TEST(!one.pass);
  BOOST_TEST(one.mismatches == 2);
  BOOST_TEST(one.relativeL2 == kInf);
  // Without it, numpy's default: NaN never passes.
  BOOST_TEST(!compareTensors(vector({kNaN}), vector({kNaN}), 1, 1).pass);
}

BOOST_AUTO_TEST_CASE(reports_the_element_furthest_outside_tolerance) {
  HostTensor expected = randomTensor(DType::f32, {3, 4});
  HostTensor actual = expected;
  // Element [1, 2] is far off; [2, 3] only just outside; [0, 1] has a larger
  // absolute error than [2, 3] but is inside its (relative) tolerance.
  expected.set(1, 1000);
  actual.set(1, 1040); // allowed 0.5 + 0.05 * 1000 = 50.5
  expected.set(6, 10);
  actual.set(6, 40); // allowed 1, 29 outside
  expected.set(11, 10);
  actual.set(11, 12); // allowed 1, 1 outside
  Comparison c = compareTensors(actual, expected, 0.05, 0.5);
  BOOST_TEST(c.mismatches == 2);
  BOOST_TEST(c.worstIndex == 6);
  BOOST_TEST(c.worstPosition == (Shape{1, 2}));
  BOOST_TEST(c.worstActual == static_cast<double>(actual.as<float>()[6]));
  BOOST_TEST(c.worstExpected == static_cast<double>(expected.as<float>()[6]));
  BOOST_TEST(c.maxAbsError == 40);

  // When everything passes, the worst is the largest absolute error.
  Comparison loose = compareTensors(actual, expected, 0.05, 100);
  BOOST_TEST(loose.pass);
  BOOST_TEST(loose.worstIndex == 1);
  BOOST_TEST(loose.worstPosition == (Shape{0, 1}));

  // A NaN is further outside than any finite error.
  actual.set(9, kNaN);
  BOOST_TEST(compareTensors(actual, expected, 0.05, 0.5).worstIndex == 9);
}

BOOST_AUTO_TEST_CASE(measures_absolute_relative_and_l2_errors) {
  Comparison c = compareTensors(vector({3.3, 4.4}), vector({3, 4}), 0, 0);
  BOOST_TEST(c.maxAbsError == 0.4, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.maxRelError == 0.1, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(c.relativeL2 == 0.1, boost::test_tools::tolerance(1e-12));

  // Relative error against an expected zero is infinite unless both are zero.
  BOOST_TEST(compareTensors(vector({0, 1}), vector({0, 0}), 0, 0).maxRelError == kInf);
  BOOST_TEST(compareTensors(vector({0, 1}), vector({0, 0}), 0, 0).relativeL2 == kInf);
  Comparison zeros = compareTensors(vector({0, 0}), vector({0, 0}), 0, 0);
  BOOST_TEST(zeros.relativeL2 == 0);
  BOOST_TEST(zeros.pass);

  // Huge values do not overflow the norms.
  Comparison huge = compareTensors(vector({3.3e200, 4.4e200}), vector({3e200, 4e200}), 0, 0);
  BOOST_TEST(huge.relativeL2 == 0.1, boost::test_tools::tolerance(1e-12));
  Comparison tiny = compareTensors(vector({3.3e-200, 4.4e-200}), vector({3e-200, 4e-200}), 0, 0);
  BOOST_TEST(tiny.relativeL2 == 0.1, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(compares_across_dtypes) {
  // 0.1f differs from 0.1 by about 1.5e-9.
  BOOST_TEST(compareTensors(scalar(0.1, DType::f32), scalar(0.1), 1e-7, 0).pass);
  BOOST_TEST(!compareTensors(scalar(0.1, DType::f32), scalar(0.1), 0, 0).pass);
  BOOST_TEST(compareTensors(vector({1, -2, 3}, DType::i32), vector({1, -2, 3}, DType::f32), 0, 0).pass);
  BOOST_TEST(compareTensors(vector({1, -2, 3}, DType::i64), vector({1, -2, 3.5}, DType::f64), 0, 0.5).pass);
  BOOST_TEST(!compareTensors(vector({1, -2, 3}, DType::i64), vector({1, -2, 3.5}, DType::f64), 0, 0.4).pass);
}

BOOST_AUTO_TEST_CASE(refuses_different_shapes_and_bad_tolerances) {
  BOOST_CHECK_THROW(compareTensors(HostTensor(DType::f32, {2, 3}), HostTensor(DType::f32, {3, 2}), 0, 0), Error);
  BOOST_CHECK_THROW(compareTensors(HostTensor(DType::f32, {6}), HostTensor(DType::f32, {2, 3}), 0, 0), Error);
  BOOST_CHECK_THROW(compareTensors(HostTensor(DType::f32, {}), HostTensor(DType::f32, {1}), 0, 0), Error);
  try {
    compareTensors(HostTensor(DType::f32, {2, 3}), HostTensor(DType::f64, {3, 2}), 0, 0);
  } catch (const Error &error) {
    BOOST_TEST(std::string(error.what()) == "cannot compare actual 2x3xf32 with expected 3x2xf64: their shapes differ");
  }
  HostTensor t = randomTensor(DType::f32, {2});
  BOOST_CHECK_THROW(compareTensors(t, t, -1e-5, 0), Error);
  BOOST_CHECK_THROW(compareTensors(t, t, 0, -1), Error);
  BOOST_CHECK_THROW(compareTensors(t, t, kNaN, 0), Error);
}

BOOST_AUTO_TEST_CASE(empty_tensors_and_scalars) {
  Comparison empty = compareTensors(HostTensor(DType::f32, {0, 3}), HostTensor(DType::f64, {0, 3}), 0, 0);
  BOOST_TEST(empty.pass);
  BOOST_TEST(empty.worstIndex == -1);
  BOOST_TEST(empty.worstPosition.empty());

  Comparison one = compareTensors(scalar(2), scalar(3), 0, 0);
  BOOST_TEST(!one.pass);
  BOOST_TEST(one.worstIndex == 0);
  BOOST_TEST(one.worstPosition.empty());
  BOOST_TEST(one.mismatches == 1);
}

BOOST_AUTO_TEST_CASE(formats_a_short_report) {
  HostTensor expected = vector({1, 2, 3, 4}, DType::f32);
  HostTensor actual = vector({1, 2, 3.5, 4}, DType::f32);
  Comparison fail = compareTensors(actual, expected, 1e-5, 1e-8);
  BOOST_TEST(formatComparison(fail, 1e-5, 1e-8) == "shape 4, 4 elements\n"
                                                   "max abs error 0.5, max rel error 0.167, relative L2 error 0.0913\n"
                                                   "worst: element [2] (flat index 2): actual 3.5, expected 3\n"
                                                   "1 of 4 elements fail |actual - expected| <= 1e-08 + 1e-05 * "
                                                   "|expected|\n"
                                                   "FAIL");
  std::string pass = formatComparison(compareTensors(actual, expected, 0.2, 0), 0.2, 0);
  BOOST_TEST(pass.substr(pass.size() - 5) == "\nPASS");
  BOOST_TEST(pass.find("all elements pass") != std::string::npos);

  // Values that differ past 9 digits are printed with all 17.
  std::string close = formatComparison(compareTensors(scalar(1 + 1e-12), scalar(1), 0, 0), 0, 0);
  BOOST_TEST(close.find("worst: the scalar: actual 1.0000000000010001, expected 1\n") != std::string::npos);
  BOOST_TEST(close.find("shape scalar, 1 element\n") == 0u);
}
