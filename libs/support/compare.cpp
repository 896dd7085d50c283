// Element-wise tensor comparison with numpy's allclose rule; see compare.h
// for the exact definitions of each number it reports.
#include "support/compare.h"

#include "support/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace mlpipe {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// How one element compares.
struct ElementError {
  double absolute = 0;
  double relative = 0;
  // How far the error is beyond what the tolerance allows (negative or zero
  // when the element passes; +inf for a non-finite mismatch).
  double excess = 0;
  bool pass = false;
};

// numpy.isclose for one pair, plus the error measures defined in compare.h.
// Non-finite values are compared for equality only, as numpy does: without
// that, an expected infinity would allow any finite actual value.
ElementError compareElement(double actual, double expected, double rtol, double atol, bool equalNan) {
  ElementError e;
  if (!std::isfinite(actual) || !std::isfinite(expected)) {
    // false for NaN, even against NaN, unless equalNan
    e.pass = actual == expected || (equalNan && std::isnan(actual) && std::isnan(expected));
    e.absolute = e.relative = e.pass ? 0 : kInfinity;
    e.excess = e.pass ? -kInfinity : kInfinity;
    return e;
  }
  e.absolute = std::fabs(actual - expected); // may overflow to inf, which then fails
  double allowed = atol + rtol * std::fabs(expected);
  e.pass = e.absolute <= allowed;
  e.excess = e.absolute - allowed;
  if (expected != 0)
    e.relative = e.absolute / std::fabs(expected);
  else
    e.relative = e.absolute == 0 ? 0 : kInfinity;
  return e;
}

// Euclidean norm without overflow or underflow of the squares (the scaled
// sum of squares of LAPACK's dnrm2): values near 1e200 must not make the
// relative L2 error inf/inf.
class Norm {
public:
  void add(double x) {
    double magnitude = std::fabs(x);
    if (magnitude == 0)
      return;
    if (std::isinf(magnitude)) {
      infinite_ = true;
      return;
    }
    if (scale_ < magnitude) {
      double ratio = scale_ / magnitude;
      sumOfSquares_ = 1 + sumOfSquares_ * ratio * ratio;
      scale_ = magnitude;
    } else {
      double ratio = magnitude / scale_;
      sumOfSquares_ += ratio * ratio;
    }
  }
  double value() const { return infinite_ ? kInfinity : scale_ * std::sqrt(sumOfSquares_); }

private:
  double scale_ = 0;
  double sumOfSquares_ = 0;
  bool infinite_ = false;
};

// The C-order multi-index of flat index `flat` in `shape`.
Shape unravel(int64_t flat, const Shape &shape) {
  Shape position(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    position[d] = flat % shape[d];
    flat /= shape[d];
  }
  return position;
}

// Both values with enough digits to tell them apart: 9 significant digits
// show any f32 exactly; if that prints two different values the same, all
// 17 that a double needs.
std::pair<std::string, std::string> distinguishable(double a, double b) {
  std::string first = fmt::format("{:.9g}", a), second = fmt::format("{:.9g}", b);
  if (first == second && a != b)
    return {fmt::format("{:.17g}", a), fmt::format("{:.17g}", b)};
  return {first, second};
}

std::string formatPosition(const Shape &position) {
  std::string text = "[";
  for (size_t i = 0; i < position.size(); ++i)
    text += (i ? ", " : "") + std::to_string(position[i]);
  return text + "]";
}

} // namespace

Comparison compareTensors(const HostTensor &actual, const HostTensor &expected, double rtol, double atol,
                          bool equalNan) {
  if (actual.shape() != expected.shape())
    fail("cannot compare actual {} with expected {}: their shapes differ", actual.describe(), expected.describe());
  if (!(rtol >= 0) || !(atol >= 0))
    fail("tolerances must be non-negative numbers, but rtol is {} and atol is {}", rtol, atol);

  Comparison c;
  c.shape = expected.shape();
  Norm errorNorm, expectedNorm;
  double worstExcess = -kInfinity, largestError = -1;
  int64_t worstFailing = -1, largestErrorIndex = -1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double a = actual.at(i), b = expected.at(i);
    ElementError e = compareElement(a, b, rtol, atol, equalNan);
    c.maxAbsError = std::max(c.maxAbsError, e.absolute);
    c.maxRelError = std::max(c.maxRelError, e.relative);
    errorNorm.add(e.absolute);
    if (std::isfinite(b))
      expectedNorm.add(b);
    // Strict comparisons keep the first of equals, so that reports are stable.
    if (e.absolute > largestError) {
      largestError = e.absolute;
      largestErrorIndex = i;
    }
    if (!e.pass) {
      ++c.mismatches;
      if (worstFailing < 0 || e.excess > worstExcess) {
        worstExcess = e.excess;
        worstFailing = i;
      }
    }
  }

  double errorL2 = errorNorm.value(), expectedL2 = expectedNorm.value();
  c.relativeL2 = errorL2 == 0 ? 0 : expectedL2 == 0 ? kInfinity : errorL2 / expectedL2;
  c.pass = c.mismatches == 0;
  c.worstIndex = c.pass ? largestErrorIndex : worstFailing;
  if (c.worstIndex >= 0) {
    c.worstPosition = unravel(c.worstIndex, c.shape);
    c.worstActual = actual.at(c.worstIndex);
    c.worstExpected = expected.at(c.worstIndex);
  }
  return c;
}

std::string formatComparison(const Comparison &c, double rtol, double atol) {
  int64_t count = 1;
  for (int64_t dim : c.shape)
    count *= dim;
  std::string report = fmt::format("shape {}, {} element{}\n", formatShape(c.shape), count, count == 1 ? "" : "s");
  if (c.worstIndex >= 0) {
    report += fmt::format("max abs error {:.3g}, max rel error {:.3g}, relative L2 error {:.3g}\n", c.maxAbsError,
                          c.maxRelError, c.relativeL2);
    auto [actual, expected] = distinguishable(c.worstActual, c.worstExpected);
    std::string where = c.shape.empty()
                            ? "the scalar"
                            : fmt::format("element {} (flat index {})", formatPosition(c.worstPosition), c.worstIndex);
    report += fmt::format("worst: {}: actual {}, expected {}\n", where, actual, expected);
  }
  std::string rule = fmt::format("|actual - expected| <= {:g} + {:g} * |expected|", atol, rtol);
  if (c.mismatches > 0)
    report += fmt::format("{} of {} elements fail {}\n", c.mismatches, count, rule);
  else
    report += fmt::format("all elements pass {}\n", rule);
  return report + (c.pass ? "PASS" : "FAIL");
}

} // namespace mlpipe
