// The GPU runtime: the mgpu* C ABI that MLIR 22's gpu-to-llvm lowering and
// gpu.binary translation emit calls to, and the C++ API the host side of
// `run` uses. Both sit on the CUDA driver loaded at run time (cuda_driver.h),
// so nothing here needs a GPU until GPU work is asked for.
//
// The C ABI is mgpu_abi.cpp, a thin layer over the rest: driver_access.cpp
// (the context, the device, errors), module_loading.cpp, kernel_launch.cpp,
// kernel_profiler.cpp, streams_and_graphs.cpp and device_memory.cpp, which
// share runtime_internal.h.
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
#include <functional>
#include <memory>
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
// The device's compute capability as a chip name, e.g. "sm_90".
std::string deviceChip();
// The device's L2 cache in bytes (benchmarks use inputs larger than this).
size_t deviceL2Bytes();

// ---- Streams ---------------------------------------------------------------
//
// Every runner (run, verify, a GPT-2 runner, bench) owns one Stream and puts
// all its GPU work on it, asynchronously: launches, copies, and runtime calls
// such as a GEMM. While a StreamScope is alive on a thread, that stream is
// the thread's *current stream*, and the mgpu* ABI follows it:
//
//   - mgpuStreamCreate returns the current stream (borrowed, not a new one);
//   - mgpuStreamSynchronize of it returns at once: waiting is deferred to
//     the moment the host reads a result (copyToHost, Stream::synchronize);
//   - mgpuStreamDestroy of it does nothing.
//
// That turns MLIR's synchronous gpu.launch_func (create a stream, launch,
// synchronize, destroy) into one asynchronous launch on one stream, and lets
// a whole forward be captured as a CUDA graph, with no change to the ABI or
// to the generated code. Outside any StreamScope the ABI keeps its plain
// meaning (a fresh stream per call, real synchronization).
//
// Errors a kernel leaves are then found when the host next waits; they name
// the last kernel launched on the stream, the likeliest culprit. With
// MLPIPE_SYNC_LAUNCHES=1 in the environment every launch is waited for, so
// a fault names exactly the kernel that made it.

// The stream the calling thread's GPU work goes on: the innermost
// StreamScope's, or nullptr (the legacy default stream, which orders with
// every stream the runtime makes) when there is none. Runtime entry points
// called from generated code (a GEMM, say) launch their work on it.
void *currentStream();

// A CUDA stream owned by a runner. Blocking with respect to the legacy
// default stream (CU_STREAM_DEFAULT), so work put there still orders with it.
class Stream {
public:
  Stream(); // throws mlpipe::Error (the reason above when there is no GPU)
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  void *handle() const { return stream_; }
  // Waits for everything queued so far; throws naming the last kernel.
  void synchronize() const;

private:
  void *stream_ = nullptr;
};

// Makes `stream` the calling thread's current stream until destroyed
// (scopes nest).
class StreamScope {
public:
  explicit StreamScope(const Stream &stream);
  ~StreamScope();
  StreamScope(const StreamScope &) = delete;
  StreamScope &operator=(const StreamScope &) = delete;

private:
  void *previous_;
};

// ---- Memory ----------------------------------------------------------------

// Device memory (cuMemAlloc) is the default for everything; managed memory
// (cuMemAllocManaged), which the host can also address, is the tutorial's
// path and stays available behind --managed.
enum class Memory { Device, Managed };

// nullptr for 0 bytes. Out of memory, the error names the bytes asked for
// and the bytes free. Both throw mlpipe::Error (the reason above when there
// is no GPU).
void *allocate(size_t bytes, Memory memory);
void release(void *ptr);
// The old names, for managed memory.
inline void *allocateManaged(size_t bytes) { return allocate(bytes, Memory::Managed); }
void freeManaged(void *ptr);

// Copies on the current stream. copyToDevice returns once `host` may be
// reused; copyToHost waits for the stream (and so for every kernel queued
// before it), which is where a deferred kernel error is reported.
void copyToDevice(void *device, const void *host, size_t bytes);
void copyToHost(void *host, const void *device, size_t bytes);
// Any copy the GPU does on its own, queued on the current stream (between
// device buffers, or with pinned host memory): nothing waits.
void copyOnDevice(void *target, const void *source, size_t bytes);
// Page-locked host memory: copies to and from it run on the GPU without
// the host staging them, and a CUDA graph may hold them. nullptr for 0
// bytes; throws mlpipe::Error where it cannot be pinned.
void *allocatePinned(size_t bytes);
void releasePinned(void *ptr);

// Waits for all GPU work (cuCtxSynchronize); throws naming the last kernel.
void synchronize();
// Waits for the current stream (all GPU work when there is none).
void waitForCurrentStream();
// Hints the driver to move managed memory to the GPU now; errors ignored.
void prefetchToDevice(void *ptr, size_t bytes);

// Allocations made through mgpuMemAlloc and allocate() not yet freed.
size_t liveAllocationCount();
size_t liveAllocationBytes();
// The most bytes live at once since the last reset.
size_t peakAllocationBytes();
void resetPeakAllocationBytes();
// Free and total device memory as the driver reports them.
std::pair<size_t, size_t> deviceMemoryInfo();

// Counts since the process started, for tests and bench: kernels launched
// (through mgpuLaunchKernel) and allocations made (mgpuMemAlloc and
// allocate()).
struct Counters {
  uint64_t launches = 0;
  uint64_t allocations = 0;
};
Counters counters();

// ---- CUDA graphs -----------------------------------------------------------

// The GPU work `enqueue` puts on a stream, captured once and replayed.
class Graph {
public:
  Graph() = default;
  ~Graph();
  Graph(Graph &&other) noexcept;
  Graph &operator=(Graph &&other) noexcept;

  // Captures what `enqueue` puts on `stream` (which it must make current,
  // e.g. with a StreamScope); nothing runs. Fails (throws) if `enqueue`
  // synchronizes, allocates or frees memory. Replaces any earlier capture.
  void capture(const Stream &stream, const std::function<void()> &enqueue);
  // Queues one replay on `stream`.
  void launch(const Stream &stream) const;
  bool empty() const { return exec_ == nullptr; }
  // Kernel launches in the graph.
  size_t kernelCount() const { return kernels_; }

private:
  void reset();
  void *graph_ = nullptr;
  void *exec_ = nullptr;
  size_t kernels_ = 0;
};

// A point on the current stream the host can wait for without waiting for
// everything queued after it: record() marks what is queued so far, wait()
// returns once the GPU has done it (throwing, naming the last kernel, if a
// kernel failed). Lets the host take one batch of results while the GPU
// runs the next.
class StreamMark {
public:
  StreamMark(); // throws mlpipe::Error
  ~StreamMark();
  StreamMark(const StreamMark &) = delete;
  StreamMark &operator=(const StreamMark &) = delete;
  void record();
  void wait() const;

private:
  void *event_ = nullptr;
};

// ---- Timing ----------------------------------------------------------------

// GPU time between start() and stop(), measured by two events recorded on
// the current stream (the legacy default stream when there is none, which
// waits for work on the runtime's streams).
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
  void *stream_ = nullptr;
};

// What a kernel moves and computes per launch (lower-nvvm's mlpipe.kernels
// table), for LaunchProfiler.
struct KernelCostModel {
  int64_t bytes = -1; // read plus written; -1: counted at each launch from the memref arguments
  int64_t flops = 0;
  // Per kernel argument: its memref rank (-1 for a scalar) and element
  // bytes, to find the memref descriptors among a launch's parameters.
  std::vector<std::pair<int64_t, int64_t>> arguments;
};
// Tells the profiler about a kernel (by the name it is launched under).
void describeKernel(const std::string &name, const KernelCostModel &model);

// Whether launches of `function` (an mgpuModuleGetFunction result) overlap
// the end of the kernel before them: its module was compiled for
// programmatic dependent launch (mlpipe-programmatic-launch), the driver
// has cuLaunchKernelEx, and MLPIPE_PROGRAMMATIC_LAUNCH is not 0.
bool launchesProgrammatically(void *function);

// One kernel launch timed by the profiler.
struct KernelTime {
  std::string kernel;
  double microseconds = 0;
  int64_t bytes = -1; // -1: not known
  int64_t flops = 0;
};

// While one is alive, every kernel launched on this thread is bracketed by
// two events, so each launch's GPU time is known (a little more than the
// kernel alone: the events' own cost, a few microseconds). With `replays`
// > 0 each kernel instead runs as launched, then that launch is captured
// `replays` times into a CUDA graph, replayed once to warm up, and the
// graph's second replay is what the events bracket (divided by
// `replays`): the kernel's own time to well under a microsecond, with its
// operands as warm in L2 as repeated calls leave them. The profiled work's results are then not meaningful (a
// kernel that updates its output in place runs more than once). Library
// work (a cuBLAS call) is bracketed once either way. Not usable during
// graph capture.
class LaunchProfiler {
public:
  explicit LaunchProfiler(int replays = 0);
  ~LaunchProfiler();
  LaunchProfiler(const LaunchProfiler &) = delete;
  LaunchProfiler &operator=(const LaunchProfiler &) = delete;
  // Waits for the GPU, then gives every launch since construction (or the
  // last take()) in launch order.
  std::vector<KernelTime> take();
};

// Brackets work the runtime queues on `stream` by other means than a kernel
// launch (a cuBLAS GEMM) as if it were one: it counts as a launch, is named
// in fault reports, and shows in a LaunchProfiler's rows under `name`.
class LibraryWork {
public:
  LibraryWork(std::string name, int64_t bytes, int64_t flops, void *stream);
  ~LibraryWork();
  LibraryWork(const LibraryWork &) = delete;
  LibraryWork &operator=(const LibraryWork &) = delete;

private:
  struct State;
  std::unique_ptr<State> state_;
};

// The compute capability a cubin (an ELF image from ptxas) was made for,
// as "sm_90"; empty when `image` is not a CUDA ELF image.
std::string cubinChip(const void *image, size_t bytes);
// Throws mlpipe::Error with one sentence when `image` is a cubin this GPU
// cannot run (made for another chip); anything else passes.
void checkCubinRunsHere(const void *image, size_t bytes);

// Every mgpu* function above with its address, to hand to the host JIT
// (jit/host_jit.h, HostJit::defineSymbols).
std::vector<std::pair<std::string, void *>> runtimeSymbols();

} // namespace mlpipe::gpu
