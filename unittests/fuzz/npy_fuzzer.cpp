// Fuzzes the .npy reader: any bytes either parse or are refused with
// mlpipe::Error; what parses survives a write and a second read unchanged.
#include "support/error.h"
#include "support/npy.h"

#include <cstdint>
#include <cstring>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    mlpipe::HostTensor tensor =
        mlpipe::parseNpy(std::string_view(reinterpret_cast<const char *>(data), size), "fuzz.npy");
    mlpipe::HostTensor again = mlpipe::parseNpy(mlpipe::serializeNpy(tensor), "again.npy");
    if (again.dtype() != tensor.dtype() || again.shape() != tensor.shape() ||
        (tensor.byteSize() != 0 && std::memcmp(again.data(), tensor.data(), tensor.byteSize()) != 0))
      __builtin_trap();
  } catch (const mlpipe::Error &) {
  }
  return 0;
}
