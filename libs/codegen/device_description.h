// What the emitters' heuristics know about the GPU they compile for, one
// description per --chip. The numbers are those of one representative part
// of each compute capability (named in `part`); launch heuristics read them
// (threads per block, blocks to fill every SM, how much shared memory a
// tile may take) instead of hard-coding an H100.
#pragma once

#include <cstdint>
#include <string>

namespace mlpipe {

struct DeviceDescription {
  std::string chip; // "sm_90"
  std::string part; // "H100/H200 SXM": whose numbers these are
  int smCount = 0;
  int warpSize = 32;
  int maxThreadsPerBlock = 1024;
  int maxThreadsPerSm = 2048;
  int registersPerSm = 65536;
  int maxRegistersPerThread = 255;
  // Shared memory a block may use without opting in (all a block's static
  // shared memory must fit here), and with (dynamic shared memory, the
  // launch raising its limit).
  int64_t sharedMemoryPerBlock = 48 * 1024;
  int64_t sharedMemoryPerBlockOptIn = 48 * 1024;
  // Shared memory of one SM, shared by its resident blocks, each of which
  // also takes sharedMemoryReservedPerBlock of it (1 KiB from sm_80 on).
  int64_t sharedMemoryPerSm = 48 * 1024;
  int64_t sharedMemoryReservedPerBlock = 0;
  int64_t l2CacheBytes = 0;
  // Programmatic dependent launch (sm_90 and later): a kernel may be
  // scheduled while the one before it finishes, waiting in griddepcontrol
  // for its writes.
  bool programmaticDependentLaunch = false;
  // mma.sync m16n8k16 on bf16 and f16 with f32 accumulation (sm_80 and
  // later): the tensor-core kernels' instruction.
  bool sixteenBitMma = false;
  // mma.sync m16n8k8 on TF32 (f32 operands rounded to 10 bits of mantissa
  // by cvt.rna.tf32.f32) with f32 accumulation, sm_80 and later: the
  // tensor-core form's instruction for f32 products under precision=tf32.
  bool tf32Mma = false;
  // wgmma.mma_async (warpgroup products from shared memory descriptors):
  // sm_90a only, the architecture-specific target ("sm_90" code must also
  // run on later chips, which lack it).
  bool warpgroupMma = false;

  // Resident threads the whole GPU can hold: the width a grid-stride loop
  // needs to keep every SM busy.
  int64_t residentThreads() const { return static_cast<int64_t>(smCount) * maxThreadsPerSm; }
};

// The description for a chip name as --chip takes it ("sm_90", "sm_90a");
// throws mlpipe::Error naming the chips it knows otherwise.
const DeviceDescription &deviceDescription(const std::string &chip);

} // namespace mlpipe
