// Fuzzes the BPE vocabulary and merges loader. The input is the vocabulary
// JSON and the merges text separated by the first NUL byte; a tokenizer that
// loads must then encode and decode a sample losslessly.
#include "models/tokenizer.h"
#include "support/error.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input(reinterpret_cast<const char *>(data), size);
  size_t separator = input.find('\0');
  std::string_view vocab = input.substr(0, separator);
  std::string_view merges = separator == std::string_view::npos ? std::string_view() : input.substr(separator + 1);
  try {
    mlpipe::Gpt2Tokenizer tokenizer = mlpipe::Gpt2Tokenizer::fromContents(vocab, merges);
    const std::string sample = "Hello world, it's 2026! \xc3\xa9\xe6\x97\xa5 \xff";
    if (tokenizer.decode(tokenizer.encode(sample)) != sample)
      __builtin_trap();
  } catch (const mlpipe::Error &) {
  }
  return 0;
}
