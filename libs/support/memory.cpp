#include "support/memory.h"

#include "support/error.h"

#include <fmt/format.h>

#include <fstream>
#include <string>
#include <unistd.h>

namespace mlpipe {

int64_t availableHostMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (meminfo >> key >> value >> unit)
    if (key == "MemAvailable:")
      return value * 1024;
  long pages = ::sysconf(_SC_AVPHYS_PAGES), pageSize = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? static_cast<int64_t>(pages) * pageSize : -1;
}

std::string humanBytes(double bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.2f} {}", bytes, units[unit]);
}

void checkHostMemory(std::string_view what, int64_t bytes) {
  int64_t available = availableHostMemory();
  if (available >= 0 && bytes > available)
    fail("{} would take {} of host memory, but {} are available", what, humanBytes(double(bytes)),
         humanBytes(double(available)));
}

} // namespace mlpipe
