// The mgpu* C ABI over the CUDA driver, and the host-side C++ API.
//
// Beside forwarding to the driver, the runtime keeps what a good error
// message needs (each function's kernel name, the last kernel launched on
// each stream) and what a leak check needs (every live allocation).
#include "runtime/mgpu_runtime.h"

#include "runtime/cuda_driver.h"
#include "runtime/fatal_error.h"
#include "support/error.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace mlpipe::gpu {
namespace {

struct Allocation {
  size_t bytes = 0;
  bool managed = false;
};

// What the runtime knows about the handles it gave out. One mutex: JIT code
// may call in from several threads, and none of this is on a hot path
// heavier than a kernel launch.
struct Registry {
  std::mutex mutex;
  std::unordered_map<CUfunction, std::string> kernelNames;
  std::unordered_map<CUfunction, int32_t> dynamicSharedSet;
  std::unordered_map<CUmodule, std::vector<CUfunction>> moduleFunctions;
  std::unordered_map<CUstream, std::string> lastKernelOnStream;
  std::unordered_map<CUevent, std::string> kernelBeforeEvent;
  std::string lastKernel;
  std::unordered_map<void *, Allocation> allocations;
  size_t liveBytes = 0;
};

Registry &registry() {
  // Never destroyed, like the driver: JIT global destructors may free or
  // unload after this library's static destructors have run.
  static Registry *r = new Registry();
  return *r;
}

// The driver with the context current on this thread; throws the
// "no GPU" sentence when there is none.
CudaDriver &driver() {
  CudaDriver &d = CudaDriver::get();
  d.makeCurrent();
  return d;
}

CUdeviceptr devicePointer(const void *p) { return reinterpret_cast<CUdeviceptr>(p); }

// Errors that a kernel leaves behind: the context is unusable afterwards and
// every later call reports the same code, whatever that call was.
bool isKernelFault(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ASSERT:
    return true;
  default:
    return false;
  }
}

std::string lastKernelAnywhere() {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.lastKernel;
}

// Throws for a failed call. `kernel` is the kernel the call is about (or the
// one last launched on the stream being waited for). A kernel fault reported
// by a call about no kernel is named after the last kernel launched, its
// likeliest source.
void check(CUresult r, const char *call, std::string_view kernel = {}) {
  if (r == CUDA_SUCCESS)
    return;
  std::string message = CudaDriver::get().errorMessage(r, call, kernel);
  if (kernel.empty() && isKernelFault(r)) {
    std::string last = lastKernelAnywhere();
    if (!last.empty())
      message += ", most likely from kernel '" + last + "', launched earlier";
  }
  throw Error(message);
}

// Calls that release something also run from global destructors at exit,
// when the driver may already have torn the context down and freed it all.
void checkRelease(CUresult r, const char *call, std::string_view kernel = {}) {
  if (r == CUDA_ERROR_DEINITIALIZED)
    return;
  check(r, call, kernel);
}

std::string kernelName(CUfunction f) {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.kernelNames.find(f);
  return it == reg.kernelNames.end() ? std::string() : it->second;
}

std::string lastKernelOn(CUstream stream) {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.lastKernelOnStream.find(stream);
  return it == reg.lastKernelOnStream.end() ? std::string() : it->second;
}

void *allocate(size_t bytes, bool managed) {
  if (bytes == 0)
    return nullptr;
  CudaDriver &d = driver();
  CUdeviceptr ptr = 0;
  if (managed)
    check(d.cuMemAllocManaged(&ptr, bytes, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
  else
    check(d.cuMemAlloc(&ptr, bytes), "cuMemAlloc");
  void *p = reinterpret_cast<void *>(ptr);
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.allocations[p] = {bytes, managed};
  reg.liveBytes += bytes;
  return p;
}

void release(void *ptr, const char *caller) {
  if (!ptr)
    return;
  Registry &reg = registry();
  {
    std::lock_guard lock(reg.mutex);
    // Catches double frees and foreign pointers before the driver, which
    // would report them only as an invalid value, or not at all.
    if (!reg.allocations.count(ptr))
      fail("{}: {} was not allocated by the mlpipe GPU runtime, or was already freed", caller, ptr);
  }
  checkRelease(driver().cuMemFree(devicePointer(ptr)), "cuMemFree");
  std::lock_guard lock(reg.mutex);
  auto it = reg.allocations.find(ptr);
  if (it != reg.allocations.end()) {
    reg.liveBytes -= it->second.bytes;
    reg.allocations.erase(it);
  }
}

// The JIT log is a multi-line buffer; errors are one line.
std::string oneLine(const char *log) {
  std::string text(log);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  std::string line;
  for (char c : text) {
    if (c == '\n')
      line += "; ";
    else if (c != '\r')
      line += c;
  }
  return line;
}

CUmodule loadModule(const void *image, const int *optLevel) {
  CudaDriver &d = driver();
  if (!image)
    fail("cannot load a GPU module from a null image");
  char errorLog[8192] = {};
  CUjit_option options[3] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL};
  // Option values are passed in pointer-sized slots, integers by value. The
  // last byte of the log is kept for the terminating NUL.
  void *values[3] = {errorLog, reinterpret_cast<void *>(uintptr_t(sizeof(errorLog) - 1)), nullptr};
  unsigned count = 2;
  if (optLevel) {
    // The driver accepts levels 0-4 only; MLIR passes the pipeline's -O.
    values[2] = reinterpret_cast<void *>(uintptr_t(std::clamp(*optLevel, 0, 4)));
    count = 3;
  }
  CUmodule module = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&module, image, count, options, values);
  if (r != CUDA_SUCCESS) {
    std::string message = d.errorMessage(r, "cuModuleLoadDataEx");
    if (std::string log = oneLine(errorLog); !log.empty())
      message += "; JIT log: " + log;
    throw Error(message);
  }
  return module;
}

// Every dimension must fit the driver's unsigned int and be at least 1; the
// driver's own message for a zero or huge dimension names no dimension.
void checkLaunchShape(std::string_view name, const intptr_t (&dims)[6], int32_t smem) {
  bool ok = smem >= 0;
  for (intptr_t v : dims)
    ok = ok && v >= 1 && static_cast<uintmax_t>(v) <= UINT_MAX;
  if (!ok)
    fail("invalid launch of {}: grid {}x{}x{}, block {}x{}x{}, {} bytes of dynamic shared "
         "memory (each dimension must be 1 to {})",
         name.empty() ? std::string("a kernel") : "kernel '" + std::string(name) + "'", dims[0], dims[1], dims[2],
         dims[3], dims[4], dims[5], smem, UINT_MAX);
}

// Dynamic shared memory beyond the default limit must be opted into per
// function. The default (48 KiB) counts static shared memory too, so the
// limit is raised for any dynamic size not yet allowed, and remembered so
// repeated launches skip the call.
void allowDynamicShared(CudaDriver &d, CUfunction f, int32_t smem, std::string_view name) {
  if (smem == 0)
    return;
  Registry &reg = registry();
  {
    std::lock_guard lock(reg.mutex);
    auto it = reg.dynamicSharedSet.find(f);
    if (it != reg.dynamicSharedSet.end() && it->second >= smem)
      return;
  }
  check(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute", name);
  std::lock_guard lock(reg.mutex);
  reg.dynamicSharedSet[f] = smem;
}

void noteLaunch(CUstream stream, const std::string &name) {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.lastKernelOnStream[stream] = name;
  reg.lastKernel = name;
}

void launch(CUfunction f, const intptr_t (&dims)[6], int32_t smem, CUstream stream, void **params, void **extra) {
  CudaDriver &d = driver();
  std::string name = kernelName(f);
  checkLaunchShape(name, dims, smem);
  allowDynamicShared(d, f, smem, name);
  CUresult r = d.cuLaunchKernel(f, unsigned(dims[0]), unsigned(dims[1]), unsigned(dims[2]), unsigned(dims[3]),
                                unsigned(dims[4]), unsigned(dims[5]), unsigned(smem), stream, params, extra);
  if (r != CUDA_SUCCESS) {
    // A fault reported at launch was left by a kernel that ran before.
    std::string message = d.errorMessage(r, "cuLaunchKernel", name);
    std::string last = lastKernelAnywhere();
    if (isKernelFault(r) && !last.empty())
      message += ", left by an earlier kernel, most likely '" + last + "'";
    throw Error(message);
  }
  noteLaunch(stream, name);
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
} // namespace mlpipe::gpu

using namespace mlpipe::gpu;

extern "C" {

void *mgpuModuleLoad(void *data, uint64_t sizeBytes) {
  // The size is not needed: cubin and fatbin images describe their length.
  return orDie([&] { return static_cast<void *>(loadModule(data, nullptr)); });
}

void *mgpuModuleLoadJIT(void *ptx, int optLevel) {
  return orDie([&] { return static_cast<void *>(loadModule(ptx, &optLevel)); });
}

void mgpuModuleUnload(void *module) {
  orDie([&] {
    CUmodule m = static_cast<CUmodule>(module);
    {
      Registry &reg = registry();
      std::lock_guard lock(reg.mutex);
      for (CUfunction f : reg.moduleFunctions[m]) {
        reg.kernelNames.erase(f);
        reg.dynamicSharedSet.erase(f);
      }
      reg.moduleFunctions.erase(m);
    }
    checkRelease(driver().cuModuleUnload(m), "cuModuleUnload");
  });
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  return orDie([&] {
    CUmodule m = static_cast<CUmodule>(module);
    std::string kernel = name ? name : "";
    CUfunction f = nullptr;
    check(driver().cuModuleGetFunction(&f, m, kernel.c_str()), "cuModuleGetFunction", kernel);
    // Generated code asks again before every launch and gets the same
    // handle, so only the first answer is recorded.
    Registry &reg = registry();
    std::lock_guard lock(reg.mutex);
    if (reg.kernelNames.emplace(f, kernel).second)
      reg.moduleFunctions[m].push_back(f);
    return static_cast<void *>(f);
  });
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream, void **params, void **extra, size_t paramsCount) {
  // paramsCount is implied by the kernel's signature; the driver does not
  // take it.
  orDie([&] {
    const intptr_t dims[6] = {gridX, gridY, gridZ, blockX, blockY, blockZ};
    launch(static_cast<CUfunction>(function), dims, smem, static_cast<CUstream>(stream), params, extra);
  });
}

void *mgpuStreamCreate() {
  return orDie([&] {
    CUstream stream = nullptr;
    // A blocking stream (not CU_STREAM_NON_BLOCKING, as MLIR's own runtime
    // uses): work on the legacy default stream, such as EventTimer's events
    // and prefetches, then orders with the kernels on it.
    check(driver().cuStreamCreate(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
    return static_cast<void *>(stream);
  });
}

void mgpuStreamDestroy(void *stream) {
  orDie([&] {
    CUstream s = static_cast<CUstream>(stream);
    {
      Registry &reg = registry();
      std::lock_guard lock(reg.mutex);
      reg.lastKernelOnStream.erase(s);
    }
    checkRelease(driver().cuStreamDestroy(s), "cuStreamDestroy");
  });
}

void mgpuStreamSynchronize(void *stream) {
  orDie([&] {
    CUstream s = static_cast<CUstream>(stream);
    check(driver().cuStreamSynchronize(s), "cuStreamSynchronize", lastKernelOn(s));
  });
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  orDie([&] {
    check(driver().cuStreamWaitEvent(static_cast<CUstream>(stream), static_cast<CUevent>(event), 0),
          "cuStreamWaitEvent");
  });
}

void *mgpuEventCreate() {
  return orDie([&] {
    CUevent event = nullptr;
    // These events only order streams; timing them would cost for nothing.
    check(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    return static_cast<void *>(event);
  });
}

void mgpuEventDestroy(void *event) {
  orDie([&] {
    CUevent e = static_cast<CUevent>(event);
    {
      Registry &reg = registry();
      std::lock_guard lock(reg.mutex);
      reg.kernelBeforeEvent.erase(e);
    }
    checkRelease(driver().cuEventDestroy(e), "cuEventDestroy");
  });
}

void mgpuEventSynchronize(void *event) {
  orDie([&] {
    CUevent e = static_cast<CUevent>(event);
    std::string kernel;
    {
      Registry &reg = registry();
      std::lock_guard lock(reg.mutex);
      if (auto it = reg.kernelBeforeEvent.find(e); it != reg.kernelBeforeEvent.end())
        kernel = it->second;
    }
    check(driver().cuEventSynchronize(e), "cuEventSynchronize", kernel);
  });
}

void mgpuEventRecord(void *event, void *stream) {
  orDie([&] {
    CUevent e = static_cast<CUevent>(event);
    CUstream s = static_cast<CUstream>(stream);
    check(driver().cuEventRecord(e, s), "cuEventRecord");
    // Waiting for this event waits for the stream's last kernel, so an
    // error found then is most likely that kernel's.
    std::string kernel = lastKernelOn(s);
    Registry &reg = registry();
    std::lock_guard lock(reg.mutex);
    reg.kernelBeforeEvent[e] = kernel;
  });
}

void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, uint8_t isHostShared) {
  // cuMemAlloc is not stream-ordered, so the memory is ready before any work
  // on `stream` that could use it.
  return orDie([&] { return allocate(sizeBytes, isHostShared != 0); });
}

void mgpuMemFree(void *ptr, void *stream) {
  orDie([&] {
    if (!ptr)
      return;
    // Work already queued on `stream` may still read the buffer.
    if (stream) {
      CUstream s = static_cast<CUstream>(stream);
      check(driver().cuStreamSynchronize(s), "cuStreamSynchronize", lastKernelOn(s));
    }
    release(ptr, "mgpuMemFree");
  });
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream) {
  orDie([&] {
    if (sizeBytes == 0)
      return;
    // With unified addressing the driver tells host from device pointers.
    check(driver().cuMemcpyAsync(devicePointer(dst), devicePointer(src), sizeBytes, static_cast<CUstream>(stream)),
          "cuMemcpyAsync");
  });
}

void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream) {
  orDie([&] {
    if (count == 0)
      return;
    check(driver().cuMemsetD32Async(devicePointer(dst), value, count, static_cast<CUstream>(stream)),
          "cuMemsetD32Async");
  });
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream) {
  orDie([&] {
    if (count == 0)
      return;
    check(driver().cuMemsetD16Async(devicePointer(dst), value, count, static_cast<CUstream>(stream)),
          "cuMemsetD16Async");
  });
}

void mgpuMemHostRegisterMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes) {
  orDie([&] {
    HostSpan span = memrefSpan(rank, memrefDescriptor, elementSizeBytes);
    if (span.bytes == 0)
      return;
    check(driver().cuMemHostRegister(span.begin, span.bytes, 0), "cuMemHostRegister");
  });
}

void mgpuMemHostUnregisterMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes) {
  orDie([&] {
    HostSpan span = memrefSpan(rank, memrefDescriptor, elementSizeBytes);
    if (span.bytes == 0)
      return;
    checkRelease(driver().cuMemHostUnregister(span.begin), "cuMemHostUnregister");
  });
}

void mgpuSetDefaultDevice(int32_t device) {
  // Only records the choice: the context is made on first GPU work.
  orDie([&] { CudaDriver::get().setDevice(device); });
}

} // extern "C"

namespace mlpipe::gpu {

bool available() { return CudaDriver::get().available(); }

std::string unavailableReason() { return CudaDriver::get().unavailableReason(); }

std::string deviceName() {
  CudaDriver &d = driver();
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, d.device()), "cuDeviceGetName");
  return name;
}

void *allocateManaged(size_t bytes) { return allocate(bytes, /*managed=*/true); }

void freeManaged(void *ptr) { release(ptr, "freeManaged"); }

void synchronize() { check(driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

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
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.allocations.size();
}

size_t liveAllocationBytes() {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.liveBytes;
}

EventTimer::EventTimer() {
  CudaDriver &d = driver();
  CUevent start = nullptr, stop = nullptr;
  check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  if (CUresult r = d.cuEventCreate(&stop, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
    d.cuEventDestroy(start);
    check(r, "cuEventCreate");
  }
  start_ = start;
  stop_ = stop;
}

EventTimer::~EventTimer() {
  // Errors here have nothing left to corrupt; a destructor must not throw.
  CudaDriver &d = CudaDriver::get();
  d.cuEventDestroy(static_cast<CUevent>(start_));
  d.cuEventDestroy(static_cast<CUevent>(stop_));
}

void EventTimer::start() { check(driver().cuEventRecord(static_cast<CUevent>(start_), nullptr), "cuEventRecord"); }

void EventTimer::stop() { check(driver().cuEventRecord(static_cast<CUevent>(stop_), nullptr), "cuEventRecord"); }

float EventTimer::milliseconds() {
  CudaDriver &d = driver();
  check(d.cuEventSynchronize(static_cast<CUevent>(stop_)), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)), "cuEventElapsedTime");
  return ms;
}

std::vector<std::pair<std::string, void *>> runtimeSymbols() {
  return {
#define MLPIPE_SYMBOL(name) {#name, reinterpret_cast<void *>(&::name)}
      MLPIPE_SYMBOL(mgpuModuleLoad),
      MLPIPE_SYMBOL(mgpuModuleLoadJIT),
      MLPIPE_SYMBOL(mgpuModuleUnload),
      MLPIPE_SYMBOL(mgpuModuleGetFunction),
      MLPIPE_SYMBOL(mgpuLaunchKernel),
      MLPIPE_SYMBOL(mgpuStreamCreate),
      MLPIPE_SYMBOL(mgpuStreamDestroy),
      MLPIPE_SYMBOL(mgpuStreamSynchronize),
      MLPIPE_SYMBOL(mgpuStreamWaitEvent),
      MLPIPE_SYMBOL(mgpuEventCreate),
      MLPIPE_SYMBOL(mgpuEventDestroy),
      MLPIPE_SYMBOL(mgpuEventSynchronize),
      MLPIPE_SYMBOL(mgpuEventRecord),
      MLPIPE_SYMBOL(mgpuMemAlloc),
      MLPIPE_SYMBOL(mgpuMemFree),
      MLPIPE_SYMBOL(mgpuMemcpy),
      MLPIPE_SYMBOL(mgpuMemset32),
      MLPIPE_SYMBOL(mgpuMemset16),
      MLPIPE_SYMBOL(mgpuMemHostRegisterMemRef),
      MLPIPE_SYMBOL(mgpuMemHostUnregisterMemRef),
      MLPIPE_SYMBOL(mgpuSetDefaultDevice),
#undef MLPIPE_SYMBOL
  };
}

} // namespace mlpipe::gpu
