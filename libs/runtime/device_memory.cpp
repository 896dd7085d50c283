// Device memory: allocations (device or managed, each one registered, so
// that leaks, double frees and the peak are known), copies and fills on a
// stream, page-locked host memory, and the host memrefs MLIR registers.
#include "runtime/runtime_internal.h"

#include "support/error.h"
#include "support/memory.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace mlpipe::gpu {
namespace {

struct Allocation {
  size_t bytes = 0;
  bool managed = false;
};

// Every live allocation. One mutex: JIT code may call in from several
// threads.
struct Allocations {
  std::mutex mutex;
  std::unordered_map<void *, Allocation> live;
  size_t liveBytes = 0;
  size_t peakBytes = 0;
};

Allocations &allocations() {
  // Never destroyed, like the driver: JIT global destructors may free after
  // this library's static destructors have run.
  static Allocations *all = new Allocations();
  return *all;
}

std::atomic<uint64_t> allocationCount{0};

void releaseFrom(void *ptr, const char *caller) {
  if (!ptr)
    return;
  Allocations &all = allocations();
  {
    std::lock_guard lock(all.mutex);
    // Catches double frees and foreign pointers before the driver, which
    // would report them only as an invalid value, or not at all.
    if (!all.live.count(ptr))
      fail("{}: {} was not allocated by the mlpipe GPU runtime, or was already freed", caller, ptr);
  }
  checkRelease(driver().cuMemFree(devicePointer(ptr)), "cuMemFree");
  std::lock_guard lock(all.mutex);
  auto it = all.live.find(ptr);
  if (it != all.live.end()) {
    all.liveBytes -= it->second.bytes;
    all.live.erase(it);
  }
}

// The host span a strided memref covers: from its lowest to its highest
// element, whatever the signs of the strides. Empty when any size is 0.
struct HostSpan {
  char *begin = nullptr;
  size_t bytes = 0;
};

HostSpan memrefSpan(int64_t rank, void *descriptor, int64_t elementSizeBytes) {
  if (rank < 0 || elementSizeBytes <= 0 || !descriptor)
    fail("invalid memref descriptor (rank {}, element size {})", rank, elementSizeBytes);
  struct Head {
    void *allocated;
    void *aligned;
    int64_t offset;
  };
  auto *head = static_cast<Head *>(descriptor);
  auto *sizes = reinterpret_cast<int64_t *>(head + 1);
  const int64_t *strides = sizes + rank;
  int64_t low = 0, high = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (sizes[i] == 0)
      return {};
    int64_t reach = (sizes[i] - 1) * strides[i];
    (reach < 0 ? low : high) += reach;
  }
  char *base = static_cast<char *>(head->aligned) + head->offset * elementSizeBytes;
  return {base + low * elementSizeBytes, size_t(high - low + 1) * size_t(elementSizeBytes)};
}

} // namespace

// ---- The mgpuMem* entry points ----------------------------------------------

void *allocateOn(size_t bytes, bool managed) {
  if (bytes == 0)
    return nullptr;
  if (capturingOnThread)
    fail("GPU memory was allocated ({} bytes) while a CUDA graph was being captured: a captured forward must "
         "use only memory allocated before it",
         bytes);
  CudaDriver &d = driver();
  CUdeviceptr ptr = 0;
  const char *call = managed ? "cuMemAllocManaged" : "cuMemAlloc";
  CUresult r = managed ? d.cuMemAllocManaged(&ptr, bytes, CU_MEM_ATTACH_GLOBAL) : d.cuMemAlloc(&ptr, bytes);
  if (r != CUDA_SUCCESS) {
    size_t free = 0, total = 0;
    bool known = d.cuMemGetInfo(&free, &total) == CUDA_SUCCESS;
    if (known && (r == CUDA_ERROR_OUT_OF_MEMORY || bytes > free))
      fail("out of GPU memory: {} asked for {} ({} bytes), but only {} ({} bytes) of the GPU's {} are free ({})", call,
           humanBytes(double(bytes)), bytes, humanBytes(double(free)), free, humanBytes(double(total)), d.describe(r));
    check(r, call);
  }
  ++allocationCount;
  void *p = reinterpret_cast<void *>(ptr);
  Allocations &all = allocations();
  std::lock_guard lock(all.mutex);
  all.live[p] = {bytes, managed};
  all.liveBytes += bytes;
  all.peakBytes = std::max(all.peakBytes, all.liveBytes);
  return p;
}

void freeAfterStream(void *ptr, CUstream stream) {
  if (!ptr)
    return;
  // Work already queued on `stream` may still read the buffer, so this
  // waits even for the current stream (planned code frees nothing).
  if (stream) {
    if (capturingOnThread)
      fail("GPU memory was freed while a CUDA graph was being captured: a captured forward must not free memory");
    checkWait(driver().cuStreamSynchronize(stream), "cuStreamSynchronize", stream);
  }
  releaseFrom(ptr, "mgpuMemFree");
}

void copyOnStream(void *target, const void *source, size_t bytes, CUstream stream) {
  if (bytes == 0)
    return;
  // With unified addressing the driver tells host from device pointers.
  check(driver().cuMemcpyAsync(devicePointer(target), devicePointer(source), bytes, stream), "cuMemcpyAsync");
}

void setWords32(void *target, unsigned int value, size_t count, CUstream stream) {
  if (count == 0)
    return;
  check(driver().cuMemsetD32Async(devicePointer(target), value, count, stream), "cuMemsetD32Async");
}

void setWords16(void *target, unsigned short value, size_t count, CUstream stream) {
  if (count == 0)
    return;
  check(driver().cuMemsetD16Async(devicePointer(target), value, count, stream), "cuMemsetD16Async");
}

void registerHostMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes) {
  HostSpan span = memrefSpan(rank, memrefDescriptor, elementSizeBytes);
  if (span.bytes == 0)
    return;
  check(driver().cuMemHostRegister(span.begin, span.bytes, 0), "cuMemHostRegister");
}

void unregisterHostMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes) {
  HostSpan span = memrefSpan(rank, memrefDescriptor, elementSizeBytes);
  if (span.bytes == 0)
    return;
  checkRelease(driver().cuMemHostUnregister(span.begin), "cuMemHostUnregister");
}

uint64_t allocationsMade() { return allocationCount.load(); }

// ---- The C++ API ------------------------------------------------------------

void *allocate(size_t bytes, Memory memory) { return allocateOn(bytes, memory == Memory::Managed); }

void release(void *ptr) { releaseFrom(ptr, "release"); }

void freeManaged(void *ptr) { releaseFrom(ptr, "freeManaged"); }

void copyToDevice(void *device, const void *host, size_t bytes) {
  if (bytes == 0)
    return;
  // From pageable host memory the driver stages the bytes before returning,
  // so `host` may be reused at once.
  check(driver().cuMemcpyAsync(devicePointer(device), devicePointer(host), bytes, currentStreamOnThread),
        "cuMemcpyAsync");
}

void copyToHost(void *host, const void *device, size_t bytes) {
  CudaDriver &d = driver();
  if (bytes > 0)
    check(d.cuMemcpyAsync(devicePointer(host), devicePointer(device), bytes, currentStreamOnThread), "cuMemcpyAsync");
  checkWait(d.cuStreamSynchronize(currentStreamOnThread), "cuStreamSynchronize", currentStreamOnThread);
}

void copyOnDevice(void *target, const void *source, size_t bytes) {
  if (bytes == 0)
    return;
  check(driver().cuMemcpyAsync(devicePointer(target), devicePointer(source), bytes, currentStreamOnThread),
        "cuMemcpyAsync");
}

void *allocatePinned(size_t bytes) {
  if (bytes == 0)
    return nullptr;
  constexpr size_t kPage = 4096;
  size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void *ptr = std::aligned_alloc(kPage, rounded);
  if (!ptr)
    fail("cannot allocate {} bytes of host memory", bytes);
  if (CUresult r = driver().cuMemHostRegister(ptr, rounded, 0); r != CUDA_SUCCESS) {
    std::free(ptr);
    check(r, "cuMemHostRegister");
  }
  return ptr;
}

void releasePinned(void *ptr) {
  if (!ptr)
    return;
  checkRelease(driver().cuMemHostUnregister(ptr), "cuMemHostUnregister");
  std::free(ptr);
}

void prefetchToDevice(void *ptr, size_t bytes) {
  CudaDriver &d = CudaDriver::get();
  if (!ptr || bytes == 0 || !d.available() || !d.cuMemPrefetchAsync)
    return;
  try {
    d.makeCurrent();
    CUmemLocation location = {};
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = d.deviceOrdinal();
    // On the legacy default stream, which the runtime's streams wait for.
    // A hint only: a refusal (e.g. memory that is not managed) changes
    // nothing, and a real fault will be reported by the next call.
    (void)d.cuMemPrefetchAsync(devicePointer(ptr), bytes, location, 0, nullptr);
  } catch (const Error &) {
  }
}

size_t liveAllocationCount() {
  Allocations &all = allocations();
  std::lock_guard lock(all.mutex);
  return all.live.size();
}

size_t liveAllocationBytes() {
  Allocations &all = allocations();
  std::lock_guard lock(all.mutex);
  return all.liveBytes;
}

size_t peakAllocationBytes() {
  Allocations &all = allocations();
  std::lock_guard lock(all.mutex);
  return all.peakBytes;
}

void resetPeakAllocationBytes() {
  Allocations &all = allocations();
  std::lock_guard lock(all.mutex);
  all.peakBytes = all.liveBytes;
}

std::pair<size_t, size_t> deviceMemoryInfo() {
  size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return {free, total};
}

} // namespace mlpipe::gpu
