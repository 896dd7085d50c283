// The GPU runtime: the mgpu* C ABI that MLIR 22's gpu-to-llvm lowering and
// gpu.binary translation emit calls to, and the C++ API the host side of
// `run` uses. Both sit on the CUDA driver loaded at run time (cuda_driver.h),
// so nothing here needs a GPU until GPU work is asked for.
//
// Error policy. The C functions are called from JIT-compiled code, which
// cannot handle errors, and a failed CUDA call usually means device memory is
// already wrong; so on any error they print one line to stderr, e.g.
//   mlpipe: CUDA error in cuStreamSynchronize for kernel 'matmul_kernel':
//   CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)
// and end the process with exit status 1. Errors found when a stream or event
// is synchronized name the kernel last launched on that stream, the likeliest
// culprit. The C++ API (namespace mlpipe::gpu) throws mlpipe::Error instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#define MLPIPE_RUNTIME_EXPORT __attribute__((visibility("default")))

// Handles (modules, functions, streams, events) are the driver's pointer-sized
// handles passed as void *; device pointers are void * too.
extern "C" {
// Loads a cubin or fatbin (PTX also works if NUL-terminated).
MLPIPE_RUNTIME_EXPORT void *mgpuModuleLoad(void *data, uint64_t sizeBytes);
// JIT-compiles NUL-terminated PTX at optimisation level optLevel (0-4).
MLPIPE_RUNTIME_EXPORT void *mgpuModuleLoadJIT(void *ptx, int optLevel);
MLPIPE_RUNTIME_EXPORT void mgpuModuleUnload(void *module);
MLPIPE_RUNTIME_EXPORT void *mgpuModuleGetFunction(void *module, const char *name);
// params[i] points at the value of the kernel's i-th argument.
MLPIPE_RUNTIME_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                                            intptr_t blockX, intptr_t blockY, intptr_t blockZ, int32_t smem,
                                            void *stream, void **params, void **extra, size_t paramsCount);

MLPIPE_RUNTIME_EXPORT void *mgpuStreamCreate();
MLPIPE_RUNTIME_EXPORT void mgpuStreamDestroy(void *stream);
MLPIPE_RUNTIME_EXPORT void mgpuStreamSynchronize(void *stream);
MLPIPE_RUNTIME_EXPORT void mgpuStreamWaitEvent(void *stream, void *event);

MLPIPE_RUNTIME_EXPORT void *mgpuEventCreate();
MLPIPE_RUNTIME_EXPORT void mgpuEventDestroy(void *event);
MLPIPE_RUNTIME_EXPORT void mgpuEventSynchronize(void *event);
MLPIPE_RUNTIME_EXPORT void mgpuEventRecord(void *event, void *stream);

// isHostShared != 0: managed memory, usable from host and device. A size of
// 0 gives nullptr.
MLPIPE_RUNTIME_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, uint8_t isHostShared);
// Waits for `stream`, then frees; nullptr is ignored.
MLPIPE_RUNTIME_EXPORT void mgpuMemFree(void *ptr, void *stream);
MLPIPE_RUNTIME_EXPORT void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream);
// Sets `count` 32-bit (16-bit) words at dst to value.
MLPIPE_RUNTIME_EXPORT void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream);
MLPIPE_RUNTIME_EXPORT void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream);

// memrefDescriptor points at {void *allocated, void *aligned, int64_t offset,
// int64_t sizes[rank], int64_t strides[rank]}; the host span it covers is
// page-locked (registered) or released.
MLPIPE_RUNTIME_EXPORT void mgpuMemHostRegisterMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes);
MLPIPE_RUNTIME_EXPORT void mgpuMemHostUnregisterMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes);

// Chooses the GPU; only before any GPU work (see CudaDriver::setDevice).
MLPIPE_RUNTIME_EXPORT void mgpuSetDefaultDevice(int32_t device);
}

namespace mlpipe::gpu {

// Whether a GPU can be used, and if not, one sentence saying why, e.g.
// "no NVIDIA GPU driver: libcuda.so.1 could not be loaded (...)".
bool available();
std::string unavailableReason();
// The name of the device in use, e.g. "NVIDIA H200".
std::string deviceName();

// Managed memory for host-side tensors; nullptr for 0 bytes. Both throw
// mlpipe::Error (the reason above when there is no GPU).
void *allocateManaged(size_t bytes);
void freeManaged(void *ptr);
// Waits for all GPU work (cuCtxSynchronize); throws naming the last kernel.
void synchronize();
// Hints the driver to move managed memory to the GPU now; errors ignored.
void prefetchToDevice(void *ptr, size_t bytes);

// Allocations made through mgpuMemAlloc and allocateManaged not yet freed.
size_t liveAllocationCount();
size_t liveAllocationBytes();

// GPU time between start() and stop(), measured by two events recorded on
// the legacy default stream, which waits for work on the runtime's streams.
class EventTimer {
public:
  EventTimer(); // throws mlpipe::Error
  ~EventTimer();
  EventTimer(const EventTimer &) = delete;
  EventTimer &operator=(const EventTimer &) = delete;

  void start();
  void stop();
  // Waits for stop() to be reached on the GPU, then gives the time in ms.
  float milliseconds();

private:
  void *start_ = nullptr;
  void *stop_ = nullptr;
};

// Every mgpu* function above with its address, to hand to MLIR's
// ExecutionEngine::registerSymbols.
std::vector<std::pair<std::string, void *>> runtimeSymbols();

} // namespace mlpipe::gpu
