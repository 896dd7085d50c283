// Fuzzes the safetensors header and index: any bytes either open or are
// refused with mlpipe::Error, and every listed tensor can be described and
// read (or refused) without touching memory outside the file.
#include "models/safetensors.h"
#include "support/error.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlpipe::SafetensorsFile file =
        mlpipe::SafetensorsFile::fromBytes(std::string(reinterpret_cast<const char *>(data), size), "fuzz.safetensors");
    for (const std::string &name : file.names()) {
      const auto &info = file.info(name);
      if (info.end < info.begin || info.end > size)
        __builtin_trap();
      try {
        (void)file.read(name);
      } catch (const mlpipe::Error &) {
      }
    }
  } catch (const mlpipe::Error &) {
  }
  return 0;
}
