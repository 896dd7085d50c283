// mlpipe::Error: the one exception type for bad input and failed steps.
//
// Every message is one sentence a user can act on, e.g.
//   "x.npy: data holds 12 bytes but the header's shape 4x4 (f32) needs 64".
// Tools catch it in main, print "TOOL: error: MESSAGE" to stderr and exit 1.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mlpipe {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

// An error already in MLIR's "file:line:col: error: message" form. Tools
// print it as it is, without their own prefix.
class DiagnosticError : public Error {
public:
  using Error::Error;
};

// Throws mlpipe::Error with a fmt-formatted message.
template <typename... Args> [[noreturn]] void fail(fmt::format_string<Args...> format, Args &&...args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

} // namespace mlpipe
