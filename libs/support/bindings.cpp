#include "support/bindings.h"

#include "support/error.h"

namespace mlpipe {

Binding parseBinding(std::string_view text, std::string_view flag) {
  size_t equals = text.find('=');
  if (equals == std::string_view::npos || equals == 0 || equals + 1 >= text.size() || text[equals + 1] != '@' ||
      equals + 2 == text.size())
    fail("bad {} '{}': expected NAME=@FILE, like x=@x.npy", flag, text);
  std::string_view name = text.substr(0, equals);
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == '@')
      fail("bad {} '{}': the name has a character that no argument name has", flag, text);
  return {std::string(name), std::string(text.substr(equals + 2))};
}

} // namespace mlpipe
