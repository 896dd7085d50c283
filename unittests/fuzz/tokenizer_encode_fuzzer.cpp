// Fuzzes the GPT-2 tokenizer's encode on arbitrary bytes: byte-level BPE is
// lossless, so decode(encode(bytes)) must give the bytes back, and every id
// must be in the vocabulary. Uses the published vocabulary
// ($MLPIPE_TOKENIZER_DIR or .cache/gpt2-tokenizer).
#include "models/tokenizer.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const mlpipe::Gpt2Tokenizer tokenizer =
      mlpipe::Gpt2Tokenizer::fromDirectory(mlpipe::Gpt2Tokenizer::defaultDirectory());
  std::string text(reinterpret_cast<const char *>(data), size);
  std::vector<int32_t> ids = tokenizer.encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocabSize())
      __builtin_trap();
  if (tokenizer.decode(ids) != text)
    __builtin_trap();
  return 0;
}
