// Host memory: what this machine has free, checked before large allocations
// so that a tensor too big is refused at once, by name and size, instead of
// after minutes of filling it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlpipe {

// Bytes of host memory available now (MemAvailable in /proc/meminfo), or -1
// where that cannot be read.
int64_t availableHostMemory();

// "1.50 GiB" (or "512 bytes").
std::string humanBytes(double bytes);

// Throws mlpipe::Error when `bytes` exceeds the host memory available:
// "WHAT would take 28.00 GiB of host memory, but 21.40 GiB are available".
void checkHostMemory(std::string_view what, int64_t bytes);

} // namespace mlpipe
