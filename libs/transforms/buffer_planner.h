// Buffer assignment: the offsets of a function's temporaries in one arena,
// from their lifetimes, as XLA's buffer assignment does. Two buffers share
// bytes only when their lifetimes do not overlap; every offset is a multiple
// of the alignment.
//
//   std::vector<BufferRequest> buffers = {{4096, 0, 3}, {4096, 4, 9}, {512, 2, 6}};
//   ArenaPlan plan = planArena(buffers, kArenaAlignment);
//   // plan.offsets = {0, 0, 4096}: the first two share bytes; plan.arenaBytes = 4608
//
// Pure C++ (no MLIR) so that it is tested on its own; mlpipe-buffer-plan
// (buffer_plan.cpp) measures the lifetimes on the IR and calls it.
#pragma once

#include <cstdint>
#include <vector>

namespace mlpipe {

// Every temporary starts on a 256-byte boundary: kernels may then use
// 128-bit vector accesses on any of them, and 256 bytes is also what
// cuMemAlloc guarantees for the arena's own start.
inline constexpr int64_t kArenaAlignment = 256;

// One temporary: its size and the first and last positions (inclusive, in
// program order) at which it is live.
struct BufferRequest {
  int64_t bytes = 0;
  int64_t firstUse = 0;
  int64_t lastUse = 0;
};

struct ArenaPlan {
  std::vector<int64_t> offsets; // one per request, in request order
  int64_t arenaBytes = 0;       // the arena's size: the end of the highest buffer, aligned
  int64_t unplannedBytes = 0;   // the sum of every buffer's size: what separate allocations would take
  int64_t peakLiveBytes = 0;    // the most bytes live at one position: no plan can do better
};

// Greedy by size: the largest buffer first, each at the lowest aligned
// offset that overlaps no already placed buffer live at the same time.
// Throws mlpipe::Error for a negative size, an inverted lifetime or an
// alignment that is not a positive power of two.
ArenaPlan planArena(const std::vector<BufferRequest> &buffers, int64_t alignment = kArenaAlignment);

// Whether two lifetimes share a position.
inline bool lifetimesOverlap(const BufferRequest &a, const BufferRequest &b) {
  return a.firstUse <= b.lastUse && b.firstUse <= a.lastUse;
}

} // namespace mlpipe
