// One description per compute capability, from the vendors' published
// figures for the part named.
#include "codegen/device_description.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace mlpipe {

namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;
// griddepcontrol and CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
// came with Hopper.
constexpr int kFirstProgrammaticLaunchSm = 90;
// mma.sync m16n8k16 on bf16 came with Ampere (f16's m16n8k16 too; Turing
// has f16 at m16n8k8 only).
constexpr int kFirstSixteenBitMmaSm = 80;
// mma.sync m16n8k8 .tf32 and cvt.rna.tf32.f32 came with sm_80 too.
constexpr int kFirstTf32MmaSm = 80;
// From Ampere on, the system takes 1 KiB of an SM's shared memory for each
// resident block (cudaDevAttrReservedSharedMemoryPerBlock).
constexpr int kFirstReservedSharedSm = 80;

DeviceDescription describe(const char *chip, const char *part, int sms, int threadsPerSm, int64_t sharedOptIn,
                           int64_t sharedPerSm, int64_t l2) {
  DeviceDescription d;
  d.chip = chip;
  d.part = part;
  d.smCount = sms;
  d.maxThreadsPerSm = threadsPerSm;
  d.sharedMemoryPerBlockOptIn = sharedOptIn;
  d.sharedMemoryPerSm = sharedPerSm;
  d.sharedMemoryReservedPerBlock = std::atoi(chip + 3) >= kFirstReservedSharedSm ? kKiB : 0;
  d.l2CacheBytes = l2;
  d.programmaticDependentLaunch = std::atoi(chip + 3) >= kFirstProgrammaticLaunchSm;
  d.sixteenBitMma = std::atoi(chip + 3) >= kFirstSixteenBitMmaSm;
  d.tf32Mma = std::atoi(chip + 3) >= kFirstTf32MmaSm;
  return d;
}

const std::map<std::string, DeviceDescription> &descriptions() {
  static const std::map<std::string, DeviceDescription> table = [] {
    std::vector<DeviceDescription> all = {
        describe("sm_50", "GTX 750 Ti", 5, 2048, 48 * kKiB, 64 * kKiB, 2 * kMiB),
        describe("sm_52", "GTX 980", 16, 2048, 48 * kKiB, 96 * kKiB, 2 * kMiB),
        describe("sm_53", "Jetson TX1", 2, 2048, 48 * kKiB, 64 * kKiB, 256 * kKiB),
        describe("sm_60", "Tesla P100", 56, 2048, 48 * kKiB, 64 * kKiB, 4 * kMiB),
        describe("sm_61", "Tesla P40", 30, 2048, 48 * kKiB, 96 * kKiB, 3 * kMiB),
        describe("sm_62", "Jetson TX2", 2, 2048, 48 * kKiB, 64 * kKiB, 512 * kKiB),
        describe("sm_70", "Tesla V100", 80, 2048, 96 * kKiB, 96 * kKiB, 6 * kMiB),
        describe("sm_72", "Jetson AGX Xavier", 8, 2048, 96 * kKiB, 96 * kKiB, 512 * kKiB),
        describe("sm_75", "Tesla T4", 40, 1024, 64 * kKiB, 64 * kKiB, 4 * kMiB),
        describe("sm_80", "A100 SXM", 108, 2048, 163 * kKiB, 164 * kKiB, 40 * kMiB),
        describe("sm_86", "A10", 72, 1536, 99 * kKiB, 100 * kKiB, 6 * kMiB),
        describe("sm_87", "Jetson AGX Orin", 16, 1536, 163 * kKiB, 164 * kKiB, 4 * kMiB),
        describe("sm_89", "L40S", 142, 1536, 99 * kKiB, 100 * kKiB, 96 * kMiB),
        describe("sm_90", "H100/H200 SXM", 132, 2048, 227 * kKiB, 228 * kKiB, 50 * kMiB),
        describe("sm_100", "B200", 148, 2048, 227 * kKiB, 228 * kKiB, 126 * kMiB),
        describe("sm_101", "Jetson Thor", 20, 1536, 227 * kKiB, 228 * kKiB, 32 * kMiB),
        describe("sm_103", "B300", 148, 2048, 227 * kKiB, 228 * kKiB, 126 * kMiB),
        describe("sm_120", "RTX PRO 6000 Blackwell", 188, 1536, 99 * kKiB, 100 * kKiB, 128 * kMiB),
        describe("sm_121", "DGX Spark (GB10)", 48, 1536, 99 * kKiB, 100 * kKiB, 24 * kMiB),
    };
    std::map<std::string, DeviceDescription> byChip;
    for (DeviceDescription &d : all)
      byChip[d.chip] = d;
    return byChip;
  }();
  return table;
}

} // namespace

const DeviceDescription &deviceDescription(const std::string &chip) {
  // "sm_90a" (architecture-specific features) has the numbers of "sm_90",
  // and wgmma.
  static const DeviceDescription sm90a = [] {
    DeviceDescription d = descriptions().at("sm_90");
    d.chip = "sm_90a";
    d.warpgroupMma = true;
    return d;
  }();
  if (chip == "sm_90a")
    return sm90a;
  std::string base = !chip.empty() && chip.back() == 'a' ? chip.substr(0, chip.size() - 1) : chip;
  auto found = descriptions().find(base);
  if (found == descriptions().end()) {
    std::vector<std::string> known;
    for (auto &[name, description] : descriptions())
      known.push_back(name);
    fail("no device description for chip '{}': known chips are {}", chip, fmt::join(known, ", "));
  }
  return found->second;
}

} // namespace mlpipe
