// CudaDriver: the CUDA driver API, loaded at run time from libcuda.so.1.
//
// mlpipe never links libcuda: every tool must start on a machine without a
// GPU and fail only when GPU work is asked for, with one sentence saying why.
// This header is internal to libs/runtime (it includes cuda.h, which only the
// runtime's own sources see); other layers use runtime/mgpu_runtime.h.
//
// cuda.h is used for types, enum values and prototypes only. The prototypes
// give each entry point its exact type, and because cuda.h #defines plain
// names to versioned ones (cuMemAlloc -> cuMemAlloc_v2, cuStreamDestroy ->
// cuStreamDestroy_v2, ...), the symbol looked up with dlsym is the versioned
// one whose ABI matches that type.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

namespace mlpipe::gpu {

// Entry points without which the runtime cannot work. X(name) is expanded
// with the plain name; cuda.h's #defines turn it into the versioned one.
#define MLPIPE_CUDA_REQUIRED_ENTRY_POINTS(X)                                                                           \
  X(cuGetErrorName)                                                                                                    \
  X(cuGetErrorString)                                                                                                  \
  X(cuInit)                                                                                                            \
  X(cuDriverGetVersion)                                                                                                \
  X(cuDeviceGet)                                                                                                       \
  X(cuDeviceGetCount)                                                                                                  \
  X(cuDeviceGetName)                                                                                                   \
  X(cuDevicePrimaryCtxRetain)                                                                                          \
  X(cuDevicePrimaryCtxRelease)                                                                                         \
  X(cuCtxSetCurrent)                                                                                                   \
  X(cuCtxSynchronize)                                                                                                  \
  X(cuModuleLoadDataEx)                                                                                                \
  X(cuModuleLoadData)                                                                                                  \
  X(cuModuleUnload)                                                                                                    \
  X(cuModuleGetFunction)                                                                                               \
  X(cuLaunchKernel)                                                                                                    \
  X(cuFuncSetAttribute)                                                                                                \
  X(cuStreamCreate)                                                                                                    \
  X(cuStreamDestroy)                                                                                                   \
  X(cuStreamSynchronize)                                                                                               \
  X(cuStreamWaitEvent)                                                                                                 \
  X(cuEventCreate)                                                                                                     \
  X(cuEventDestroy)                                                                                                    \
  X(cuEventRecord)                                                                                                     \
  X(cuEventSynchronize)                                                                                                \
  X(cuMemAlloc)                                                                                                        \
  X(cuMemAllocManaged)                                                                                                 \
  X(cuMemFree)                                                                                                         \
  X(cuMemcpy)                                                                                                          \
  X(cuMemcpyAsync)                                                                                                     \
  X(cuMemsetD32Async)                                                                                                  \
  X(cuMemsetD16Async)                                                                                                  \
  X(cuMemHostRegister)                                                                                                 \
  X(cuMemHostUnregister)                                                                                               \
  X(cuMemGetInfo)                                                                                                      \
  X(cuDeviceGetAttribute)                                                                                              \
  X(cuStreamBeginCapture)                                                                                              \
  X(cuStreamEndCapture)                                                                                                \
  X(cuGraphInstantiate)                                                                                                \
  X(cuGraphLaunch)                                                                                                     \
  X(cuGraphGetNodes)                                                                                                   \
  X(cuGraphNodeGetType)                                                                                                \
  X(cuGraphExecDestroy)                                                                                                \
  X(cuGraphDestroy)

// cuDevicePrimaryCtxRelease is resolved but not called: the primary context
// lives until the process exits, since JIT code may still unload modules from
// its global destructors.

// Entry points the runtime can do without: prefetching is only a hint;
// without cuLaunchKernelEx (drivers before CUDA 12) or cuModuleGetGlobal
// kernels launch one after another, without programmatic dependent launch;
// without cuStreamIsCapturing GEMMs take cuBLASLt's first algorithm untimed.
#define MLPIPE_CUDA_OPTIONAL_ENTRY_POINTS(X)                                                                           \
  X(cuMemPrefetchAsync) X(cuLaunchKernelEx) X(cuModuleGetGlobal) X(cuStreamIsCapturing)

class CudaDriver {
public:
  // The process-wide driver. Loading happens on the first call of
  // available() or of anything that needs the GPU, never at start-up.
  static CudaDriver &get();

  // Loads libcuda.so.1, resolves the entry points and calls cuInit(0) once;
  // false when any step failed (or the driver sees no device).
  bool available();
  // One sentence saying why available() is false; empty when it is true.
  // It starts "no NVIDIA GPU driver: " (no libcuda.so.1), "the NVIDIA GPU
  // driver is too old for mlpipe: " (an entry point is missing) or
  // "no usable NVIDIA GPU: " (cuInit failed or there is no device).
  std::string unavailableReason();
  // Throws mlpipe::Error(unavailableReason()) when there is no usable GPU.
  void requireAvailable();

  // Chooses the device whose primary context the runtime will use. Only
  // allowed before that context exists (or with the device already in use),
  // because modules and memory already made belong to the first context.
  void setDevice(int ordinal);
  // The device ordinal chosen (0 unless setDevice said otherwise).
  int deviceOrdinal();

  // Creates (once) the primary context of the chosen device and makes it
  // current on the calling thread. Every runtime entry calls this first, so
  // JIT code may call in from any thread. Throws mlpipe::Error.
  void makeCurrent();
  // The CUdevice of the chosen device; calls makeCurrent().
  CUdevice device();

  // Throws mlpipe::Error when r is not CUDA_SUCCESS, e.g.
  //   "CUDA error in cuLaunchKernel for kernel 'gelu_kernel':
  //    CUDA_ERROR_INVALID_VALUE (invalid argument)".
  void check(CUresult r, const char *call, std::string_view kernel = {});
  // "CUDA_ERROR_INVALID_VALUE (invalid argument)".
  std::string describe(CUresult r);
  // The whole message check() would throw.
  std::string errorMessage(CUresult r, const char *call, std::string_view kernel = {});

  // The resolved entry points, named as cuda.h names them (so a member
  // written cuMemAlloc is cuMemAlloc_v2). Valid only when available().
#define MLPIPE_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  MLPIPE_CUDA_REQUIRED_ENTRY_POINTS(MLPIPE_CUDA_DECLARE)
  MLPIPE_CUDA_OPTIONAL_ENTRY_POINTS(MLPIPE_CUDA_DECLARE)
  // cuEventElapsedTime_v2 (CUDA 12.8+), else the older cuEventElapsedTime
  // with the same signature.
  MLPIPE_CUDA_DECLARE(cuEventElapsedTime)
#undef MLPIPE_CUDA_DECLARE

private:
  CudaDriver() = default;
  void load();
  bool resolve(void *&slot, const char *symbol, bool required);
  std::string missingEntryPoint(const char *symbol);
  void createContext();

  std::once_flag loadOnce_;
  void *library_ = nullptr;
  bool available_ = false;
  std::string reason_;

  std::mutex contextMutex_;
  int ordinal_ = 0;
  std::atomic<bool> contextReady_{false};
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

} // namespace mlpipe::gpu
