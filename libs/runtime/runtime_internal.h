// What the GPU runtime's sources share, and nothing outside libs/runtime
// sees (it includes cuda.h through cuda_driver.h): the driver made current,
// the checks that turn a failed driver call into an error naming the kernel
// most likely at fault, the calling thread's stream, and what each part of
// the runtime offers the others. The mgpu* C ABI (mgpu_abi.cpp) is a thin
// layer over the functions declared here.
//
// Beside forwarding to the driver, the runtime keeps what a good error
// message needs (each function's kernel name, the last kernel launched on
// each stream) and what a leak check needs (every live allocation).
#pragma once

#include "runtime/cuda_driver.h"
#include "runtime/mgpu_runtime.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mlpipe::gpu {

// ---- The driver and its errors (driver_access.cpp) --------------------------

// The driver with the context current on this thread; throws the
// "no GPU" sentence when there is none.
CudaDriver &driver();

inline CUdeviceptr devicePointer(const void *p) { return reinterpret_cast<CUdeviceptr>(p); }

// Errors that a kernel leaves behind: the context is unusable afterwards and
// every later call reports the same code, whatever that call was.
bool isKernelFault(CUresult r);

// Throws for a failed call. `kernel` is the kernel the call is about (or the
// one last launched on the stream being waited for). A kernel fault reported
// by a call about no kernel is named after the last kernel launched, its
// likeliest source.
void check(CUresult r, const char *call, std::string_view kernel = {});
// A wait on `stream` failed: the error is most likely the last kernel's, but
// launches are asynchronous, so say how to find the exact one.
void checkWait(CUresult r, const char *call, CUstream stream);
// Calls that release something also run from global destructors at exit,
// when the driver may already have torn the context down and freed it all;
// after a kernel fault they fail too, and are skipped quietly.
void checkRelease(CUresult r, const char *call, std::string_view kernel = {});

// MLPIPE_SYNC_LAUNCHES=1: wait after every launch, so that a fault is
// reported by the launch that made it.
bool syncEveryLaunch();

// "sm_90" for the device in use.
std::string chipOfDevice(CudaDriver &d);

// Which kernel was launched last, on each stream and anywhere, for the
// error messages above.
void noteLaunch(CUstream stream, const std::string &name);
std::string lastKernelOn(CUstream stream);
std::string lastKernelAnywhere();
// `stream` is being destroyed.
void forgetStream(CUstream stream);

// ---- Streams and graphs (streams_and_graphs.cpp) ----------------------------

// The calling thread's current stream (StreamScope), and whether it is
// being captured into a graph.
extern thread_local CUstream currentStreamOnThread;
extern thread_local bool capturingOnThread;

// The bodies of the mgpuStream* and mgpuEvent* entry points: inside a
// StreamScope they borrow the current stream (mgpu_runtime.h says how).
CUstream createStream();
void destroyStream(CUstream stream);
void synchronizeStream(CUstream stream);
void waitForEvent(CUstream stream, CUevent event);
CUevent createEvent();
void destroyEvent(CUevent event);
void synchronizeEvent(CUevent event);
void recordEvent(CUevent event, CUstream stream);

// ---- Device memory (device_memory.cpp) --------------------------------------

// The bodies of the mgpuMem* entry points.
void *allocateOn(size_t bytes, bool managed);
void freeAfterStream(void *ptr, CUstream stream);
void copyOnStream(void *target, const void *source, size_t bytes, CUstream stream);
void setWords32(void *target, unsigned int value, size_t count, CUstream stream);
void setWords16(void *target, unsigned short value, size_t count, CUstream stream);
// memrefDescriptor as mgpu_runtime.h describes it; the host span it covers
// is page-locked or released.
void registerHostMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes);
void unregisterHostMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes);
// Allocations made since the process started.
uint64_t allocationsMade();

// ---- Modules and their kernels (module_loading.cpp) -------------------------

// A cubin, fatbin or PTX image (optLevel set: PTX for the driver's JIT).
// A cubin for another chip is refused in one sentence.
CUmodule loadModule(const void *image, size_t bytes, const int *optLevel);
void unloadModule(CUmodule module);
// The kernel `name` of `module`, remembered with its name for launches and
// error messages.
CUfunction moduleFunction(CUmodule module, const char *name);

// What a launch needs to know about a kernel.
struct LaunchableKernel {
  std::string name; // empty for a function the runtime did not hand out
  // Compiled to wait in griddepcontrol for the kernel before it, so it may
  // be launched while that one finishes.
  bool programmatic = false;
};
// The kernel behind `f`, after opting it into `sharedBytes` of dynamic
// shared memory where it needs more than before.
LaunchableKernel prepareKernelLaunch(CudaDriver &d, CUfunction f, int32_t sharedBytes);

// ---- Kernel launches (kernel_launch.cpp) ------------------------------------

// One kernel launch as the driver takes it.
struct KernelLaunch {
  CUfunction function = nullptr;
  intptr_t dims[6] = {}; // grid x, y, z, then block x, y, z
  int32_t sharedBytes = 0;
  CUstream stream = nullptr;
  void **params = nullptr;
  void **extra = nullptr;
  bool programmatic = false; // launched with programmatic stream serialisation
  // Queues the launch once.
  CUresult enqueue(CudaDriver &d) const;
};

// The body of mgpuLaunchKernel.
void launchKernel(CUfunction f, const intptr_t (&dims)[6], int32_t sharedBytes, CUstream stream, void **params,
                  void **extra, size_t paramsCount);
// Counts work queued on `stream` as one launch of `name`: kernels, and
// library work (LibraryWork) too.
void countLaunch(CUstream stream, const std::string &name);

// ---- The kernel profiler (kernel_profiler.cpp) ------------------------------

struct ProfilerState;

// The events bracketing one launch (or `launches` replays of it) while a
// LaunchProfiler is alive.
struct ProfiledLaunch {
  std::string kernel;
  CUevent start = nullptr;
  CUevent stop = nullptr;
  int64_t bytes = -1;
  int64_t flops = 0;
  int launches = 1; // between start and stop
};

// The profiler's part in one kernel launch: nothing unless a LaunchProfiler
// is alive on this thread and no graph is being captured.
class LaunchTiming {
public:
  // Before the launch: takes the events and, when each launch is
  // bracketed, records the first.
  LaunchTiming(CudaDriver &d, const std::string &kernel, void **params, size_t paramsCount, CUstream stream);
  // After `launch` was queued: records the second event, or times the
  // profiler's number of replays of `launch` in a graph.
  void finish(const KernelLaunch &launch);

private:
  CudaDriver &driver_;
  CUstream stream_;
  ProfilerState *profiler_;
  ProfiledLaunch timed_;
};

} // namespace mlpipe::gpu
