// Checks of numeric flags the tools share, for CLI11's ->check(): a NaN, an
// infinity or a wrong sign is refused when the flags are parsed, in one line
// naming the flag.
#pragma once

#include "support/error.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

namespace mlpipe {

namespace detail {
enum class Sign { Any, Positive, NonNegative };
inline CLI::Validator numberCheck(const char *description, Sign sign) {
  return CLI::Validator(
      [sign](std::string &text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value))
          return "Value " + text + " is not a finite number";
        if (sign == Sign::Positive && !(value > 0))
          return "Value " + text + " is not a positive number";
        if (sign == Sign::NonNegative && value < 0)
          return "Value " + text + " is negative";
        return "";
      },
      description);
}
} // namespace detail

// A finite number (no nan, no inf).
inline const CLI::Validator kFinite = detail::numberCheck("FINITE", detail::Sign::Any);
// A finite number above zero.
inline const CLI::Validator kPositive = detail::numberCheck("POSITIVE", detail::Sign::Positive);
// A finite number of zero or more.
inline const CLI::Validator kNonNegative = detail::numberCheck("NON-NEGATIVE", detail::Sign::NonNegative);

// A string that is not empty.
inline const CLI::Validator
    kNonEmpty([](std::string &text) -> std::string { return text.empty() ? "Value is empty" : ""; }, "TEXT");

// Refuses, in one line, any of `flags` that was given: they do not apply to
// `what` ("gpt2", "a comparison of two files", ...).
inline void refuseFlags(const CLI::App &app, std::initializer_list<const char *> flags, const std::string &what) {
  std::vector<std::string> given;
  for (const char *flag : flags)
    if (app.count(flag) > 0)
      given.push_back(flag);
  if (!given.empty())
    fail("{} do{} not apply to {}", fmt::join(given, ", "), given.size() == 1 ? "es" : "", what);
}

} // namespace mlpipe
