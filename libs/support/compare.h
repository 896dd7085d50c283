// Comparing a computed tensor with an expected one: what `verify A.npy B.npy`
// prints and what numeric tests assert on.
//
// An element passes when it is close by numpy's allclose rule:
//   |actual - expected| <= atol + rtol * |expected|
// except that NaN never passes (not even against NaN, unless equalNan asks
// for it, as numpy's equal_nan) and an infinity passes only against the same
// infinity, as in numpy.isclose.
#pragma once

#include "support/host_tensor.h"

#include <cstdint>
#include <string>

namespace mlpipe {

struct Comparison {
  Shape shape;
  // Per element, the absolute error is |a - b| when both are finite, 0 when
  // both are the same infinity, and +inf otherwise (NaN in either, or
  // infinities that differ); so a non-finite mismatch shows as an infinite
  // error. The relative error is that divided by |b|, with 0/0 = 0 and
  // x/0 = +inf for x > 0. These are the maxima over all elements.
  double maxAbsError = 0, maxRelError = 0;
  // ||a - b|| / ||b|| over the per-element absolute errors and the finite
  // expected values: 0 when the errors are all zero (so also when both are
  // all zero), +inf when they are not but the expected values are.
  double relativeL2 = 0;
  // Flat index of the element furthest outside tolerance (largest error
  // minus allowed error; a non-finite mismatch is infinitely far, the first
  // one wins), or of the largest absolute error if every element passes;
  // -1 for an empty tensor.
  int64_t worstIndex = -1;
  Shape worstPosition; // the same as a multi-index; empty for a scalar
  double worstActual = 0, worstExpected = 0;
  // Elements that do not pass.
  int64_t mismatches = 0;
  bool pass = false;
};

// Compares element by element as doubles, so the dtypes may differ (f32
// against f64, or integers against floats); i64 values beyond 2^53 lose
// precision in the conversion. Throws mlpipe::Error when the shapes differ
// or a tolerance is negative or NaN.
// With `equalNan`, NaN against NaN is a match (error 0), as where a program
// and its reference both leave a function's domain.
Comparison compareTensors(const HostTensor &actual, const HostTensor &expected, double rtol, double atol,
                          bool equalNan = false);

// A short report for people: shape, max abs and rel error, relative L2, the
// worst element with both values, the mismatch count, and a last line that
// is PASS or FAIL.
std::string formatComparison(const Comparison &c, double rtol, double atol);

} // namespace mlpipe
