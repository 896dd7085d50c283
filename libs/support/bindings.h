// Command-line syntax shared by the tools: NAME=@FILE bindings, as in
//   run gelu.mlir --input x=@x.npy --output y=@y.npy
#pragma once

#include <string>
#include <string_view>

namespace mlpipe {

struct Binding {
  std::string name;
  std::string path;
};

// Parses "NAME=@PATH". `flag` ("--input") names the option in messages.
// Throws mlpipe::Error on anything else.
Binding parseBinding(std::string_view text, std::string_view flag);

} // namespace mlpipe
