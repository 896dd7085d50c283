// Helpers the Boost.Test suites share.
#pragma once

#include "support/error.h"

#include <boost/test/unit_test.hpp>

#include <functional>
#include <random>
#include <string>

namespace mlpipe::testing {

// The mlpipe::Error message `action` throws, or "(no error)".
inline std::string messageOf(const std::function<void()> &action) {
  try {
    action();
  } catch (const Error &error) {
    return error.what();
  }
  return "(no error)";
}

// One generator per test binary, freshly seeded each run; the seed is
// logged so a failure can be replayed.
inline std::mt19937 &rng() {
  static std::mt19937 generator = [] {
    unsigned seed = std::random_device{}();
    BOOST_TEST_MESSAGE("random seed " << seed);
    return std::mt19937(seed);
  }();
  return generator;
}

} // namespace mlpipe::testing
