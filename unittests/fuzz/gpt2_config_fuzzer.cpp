// Fuzzes GPT-2's config.json reader: any text either gives a validated
// config or is refused with mlpipe::Error.
#include "models/gpt2_config.h"
#include "support/error.h"

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlpipe::Gpt2Config config =
        mlpipe::Gpt2Config::fromJsonText(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz.json");
    if (config.nEmbd % config.nHead != 0 || config.nLayer <= 0 || config.nCtx <= 0)
      __builtin_trap();
  } catch (const mlpipe::Error &) {
  }
  return 0;
}
