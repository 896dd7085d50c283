// planArena: greedy-by-size offset assignment over lifetimes.
#include "transforms/buffer_planner.h"

#include "support/error.h"

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace mlpipe {

namespace {

int64_t alignUp(int64_t value, int64_t alignment) { return llvm::divideCeilSigned(value, alignment) * alignment; }

// The most bytes live at once, by sweeping over the positions where
// lifetimes start and end.
int64_t peakLive(const std::vector<BufferRequest> &buffers) {
  std::map<int64_t, int64_t> change;
  for (const BufferRequest &buffer : buffers) {
    change[buffer.firstUse] += buffer.bytes;
    change[buffer.lastUse + 1] -= buffer.bytes;
  }
  int64_t live = 0, peak = 0;
  for (auto &[position, delta] : change)
    peak = std::max(peak, live += delta);
  return peak;
}

} // namespace

ArenaPlan planArena(const std::vector<BufferRequest> &buffers, int64_t alignment) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    fail("the arena alignment must be a positive power of two, not {}", alignment);
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].bytes < 0)
      fail("buffer {} has a negative size ({} bytes)", i, buffers[i].bytes);
    if (buffers[i].lastUse < buffers[i].firstUse)
      fail("buffer {} is last used (at {}) before it is first used (at {})", i, buffers[i].lastUse,
           buffers[i].firstUse);
  }

  ArenaPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  plan.peakLiveBytes = peakLive(buffers);
  for (const BufferRequest &buffer : buffers)
    plan.unplannedBytes += buffer.bytes;

  // Largest first (ties: earlier first, then request order, so the plan is
  // the same on every run): large buffers placed early pack tightly, and the
  // small ones fill the gaps between them.
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].firstUse < buffers[b].firstUse;
  });

  struct Placed {
    int64_t begin, end; // [begin, end) in the arena, end aligned
  };
  std::vector<size_t> placed;
  for (size_t index : order) {
    const BufferRequest &buffer = buffers[index];
    if (buffer.bytes == 0)
      continue; // takes no bytes: offset 0 overlaps nothing
    int64_t size = alignUp(buffer.bytes, alignment);
    // The ranges of placed buffers live at the same time, by offset.
    std::vector<Placed> busy;
    for (size_t other : placed)
      if (lifetimesOverlap(buffer, buffers[other]))
        busy.push_back({plan.offsets[other], plan.offsets[other] + alignUp(buffers[other].bytes, alignment)});
    std::sort(busy.begin(), busy.end(), [](const Placed &a, const Placed &b) { return a.begin < b.begin; });
    // The lowest gap that fits; offsets stay aligned because every placed
    // range starts and ends on the alignment.
    int64_t offset = 0;
    for (const Placed &range : busy) {
      if (range.begin >= offset + size)
        break;
      offset = std::max(offset, range.end);
    }
    plan.offsets[index] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
    placed.push_back(index);
  }
  return plan;
}

} // namespace mlpipe
