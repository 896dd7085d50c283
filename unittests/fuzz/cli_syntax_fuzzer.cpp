// Fuzzes the command-line syntax the tools parse: NAME=@FILE bindings,
// shapes like 64x256 and dtype names. The input's lines are tried as each.
// Everything either parses into something well formed or is refused with
// mlpipe::Error.
#include "support/bindings.h"
#include "support/error.h"
#include "support/tensor_types.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    std::string_view line = input.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    try {
      mlpipe::Binding binding = mlpipe::parseBinding(line, "--input");
      if (binding.name.empty() || binding.path.empty())
        __builtin_trap();
    } catch (const mlpipe::Error &) {
    }
    try {
      mlpipe::Shape shape = mlpipe::parseShape(line);
      if (shape.empty() || mlpipe::numElements(shape) <= 0)
        __builtin_trap();
    } catch (const mlpipe::Error &) {
    }
    (void)mlpipe::parseDType(line);
    if (end == std::string_view::npos)
      break;
    start = end + 1;
  }
  return 0;
}
