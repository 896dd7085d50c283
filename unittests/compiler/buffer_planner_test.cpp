// The arena planner (buffer_planner.h) on hand-made and random lifetimes:
// no two buffers live at the same time overlap in the arena, bytes are
// shared when lifetimes allow, every offset is aligned, and the arena lies
// between the peak live size and the sum of all sizes.
#define BOOST_TEST_MODULE buffer_planner
#include <boost/test/unit_test.hpp>

#include "test_support.h"
#include "transforms/buffer_planner.h"

#include <algorithm>
#include <random>

using namespace mlpipe;

namespace {

int64_t alignUp(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// Every pair of buffers live at the same time occupies disjoint bytes.
size_t overlappingLivePairs(const std::vector<BufferRequest> &buffers, const ArenaPlan &plan) {
  size_t bad = 0;
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (buffers[i].bytes == 0 || buffers[j].bytes == 0 || !lifetimesOverlap(buffers[i], buffers[j]))
        continue;
      int64_t iEnd = plan.offsets[i] + buffers[i].bytes, jEnd = plan.offsets[j] + buffers[j].bytes;
      bad += plan.offsets[i] < jEnd && plan.offsets[j] < iEnd;
    }
  return bad;
}

std::vector<BufferRequest> randomBuffers(std::mt19937 &rng, int count, int positions) {
  std::uniform_int_distribution<int64_t> size(1, 1 << 20), position(0, positions - 1);
  std::vector<BufferRequest> buffers;
  for (int i = 0; i < count; ++i) {
    int64_t a = position(rng), b = position(rng);
    buffers.push_back({size(rng), std::min(a, b), std::max(a, b)});
  }
  return buffers;
}

} // namespace

BOOST_AUTO_TEST_CASE(buffers_with_disjoint_lifetimes_share_bytes) {
  // a chain: each buffer dies where the next one after it is born
  std::vector<BufferRequest> chain = {{4096, 0, 1}, {4096, 2, 3}, {4096, 4, 5}};
  ArenaPlan plan = planArena(chain);
  BOOST_TEST(plan.offsets == std::vector<int64_t>({0, 0, 0}), boost::test_tools::per_element());
  BOOST_TEST(plan.arenaBytes == 4096);
  BOOST_TEST(plan.unplannedBytes == 3 * 4096);
  BOOST_TEST(plan.peakLiveBytes == 4096);
}

BOOST_AUTO_TEST_CASE(buffers_live_together_do_not_share_bytes) {
  // b is used at 3, where a is still live: they cannot share
  std::vector<BufferRequest> buffers = {{1000, 0, 3}, {1000, 3, 5}, {100, 4, 9}};
  ArenaPlan plan = planArena(buffers);
  BOOST_TEST(overlappingLivePairs(buffers, plan) == 0u);
  BOOST_TEST(plan.offsets[0] != plan.offsets[1]);
  // c is born after a dies: it reuses a's bytes rather than growing the arena
  BOOST_TEST(plan.offsets[2] == plan.offsets[0]);
  BOOST_TEST(plan.arenaBytes == 2 * alignUp(1000, kArenaAlignment));
}

BOOST_AUTO_TEST_CASE(a_small_buffer_fills_a_gap_between_large_ones) {
  // a and c are large and live at once; b is small and lives with both, so
  // it goes above them; d lives after a and fits in a's place.
  std::vector<BufferRequest> buffers = {{8192, 0, 4}, {300, 1, 6}, {8192, 2, 8}, {512, 5, 8}};
  ArenaPlan plan = planArena(buffers);
  BOOST_TEST(overlappingLivePairs(buffers, plan) == 0u);
  BOOST_TEST(plan.offsets[3] == plan.offsets[0]);
  BOOST_TEST(plan.arenaBytes == 8192 * 2 + alignUp(300, kArenaAlignment));
}

BOOST_AUTO_TEST_CASE(every_offset_is_aligned) {
  for (int64_t alignment : {1, 16, 256, 4096}) {
    std::vector<BufferRequest> buffers = randomBuffers(testing::rng(), 60, 40);
    for (BufferRequest &buffer : buffers)
      buffer.bytes = buffer.bytes % 1000 + 1; // odd sizes
    ArenaPlan plan = planArena(buffers, alignment);
    size_t misaligned = 0;
    for (int64_t offset : plan.offsets)
      misaligned += offset % alignment != 0;
    BOOST_TEST(misaligned == 0u, "alignment " << alignment);
    BOOST_TEST(plan.arenaBytes % alignment == 0);
    BOOST_TEST(overlappingLivePairs(buffers, plan) == 0u);
  }
}

BOOST_AUTO_TEST_CASE(random_lifetimes_never_overlap_and_stay_between_the_bounds) {
  for (int round = 0; round < 50; ++round) {
    std::vector<BufferRequest> buffers = randomBuffers(testing::rng(), 1 + round * 4, 2 + round);
    ArenaPlan plan = planArena(buffers);
    BOOST_REQUIRE(plan.offsets.size() == buffers.size());
    BOOST_TEST(overlappingLivePairs(buffers, plan) == 0u);
    int64_t end = 0, sumAligned = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      end = std::max(end, plan.offsets[i] + buffers[i].bytes);
      sumAligned += alignUp(buffers[i].bytes, kArenaAlignment);
    }
    BOOST_TEST(plan.arenaBytes >= end);
    BOOST_TEST(plan.arenaBytes >= plan.peakLiveBytes);
    BOOST_TEST(plan.arenaBytes <= sumAligned);
  }
}

BOOST_AUTO_TEST_CASE(a_transformer_like_chain_stays_near_the_peak) {
  // Twelve blocks of the same shape, each making temporaries that die within
  // the block: the arena must not grow with the number of blocks.
  std::vector<BufferRequest> buffers;
  for (int block = 0; block < 12; ++block) {
    int64_t base = block * 10;
    buffers.push_back({3 << 20, base + 0, base + 4});
    buffers.push_back({12 << 20, base + 2, base + 6});
    buffers.push_back({1 << 20, base + 5, base + 9});
  }
  ArenaPlan plan = planArena(buffers);
  BOOST_TEST(overlappingLivePairs(buffers, plan) == 0u);
  BOOST_TEST(plan.arenaBytes <= (3 << 20) + (12 << 20) + (1 << 20));
  BOOST_TEST(plan.unplannedBytes == 12 * ((3 << 20) + (12 << 20) + (1 << 20)));
}

BOOST_AUTO_TEST_CASE(empty_and_zero_sized_buffers) {
  BOOST_TEST(planArena({}).arenaBytes == 0);
  ArenaPlan plan = planArena({{0, 0, 5}, {64, 0, 5}});
  BOOST_TEST(plan.arenaBytes == kArenaAlignment);
  BOOST_TEST(plan.offsets[1] == 0);
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused) {
  BOOST_TEST(testing::messageOf([] { planArena({{-1, 0, 1}}); }) == "buffer 0 has a negative size (-1 bytes)");
  BOOST_TEST(testing::messageOf([] {
               planArena({{8, 0, 1}, {8, 5, 2}});
             }) == "buffer 1 is last used (at 2) before it is first used (at 5)");
  BOOST_TEST(testing::messageOf([] {
               planArena({{8, 0, 1}}, 48);
             }) == "the arena alignment must be a positive power of two, not 48");
}
