// The mgpu* C ABI over the CUDA driver, and the host-side C++ API.
//
// Beside forwarding to the driver, the runtime keeps what a good error
// message needs (each function's kernel name, the last kernel launched on
// each stream) and what a leak check needs (every live allocation).
#include "runtime/mgpu_runtime.h"

#include "runtime/cuda_driver.h"
#include "runtime/fatal_error.h"
#include "support/error.h"
#include "support/memory.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

struct KernelInfo {
  std::string name;
  int32_t dynamicSharedAllowed = 0; // the largest dynamic shared size opted into
  // Compiled to wait in griddepcontrol for the kernel before it (its module
  // holds kProgrammaticLaunchMarker), so it may be launched while that one
  // finishes.
  bool programmaticLaunch = false;
};

// The global mlpipe-programmatic-launch puts in every module whose kernels
// wait for their predecessors before touching memory.
constexpr const char *kProgrammaticLaunchMarker = "mlpipe_programmatic_launch";

// MLPIPE_PROGRAMMATIC_LAUNCH=0 launches every kernel after the one before it
// has finished, as on chips before sm_90 (to measure what overlapping gains).
bool programmaticLaunchAllowed() {
  static const bool allowed = [] {
    const char *value = std::getenv("MLPIPE_PROGRAMMATIC_LAUNCH");
    return !value || std::string_view(value) != "0";
  }();
  return allowed;
}

// Finds functions by name without building a std::string per lookup.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return std::hash<std::string_view>()(name); }
};
using FunctionsByName = std::unordered_map<std::string, CUfunction, NameHash, std::equal_to<>>;

// What the runtime knows about the handles it gave out. One mutex: JIT code
// may call in from several threads, and none of this is on a hot path
// heavier than a kernel launch.
struct Registry {
  std::mutex mutex;
  std::unordered_map<CUfunction, KernelInfo> kernels;
  std::unordered_map<CUmodule, FunctionsByName> moduleFunctions;
  std::unordered_map<CUstream, std::string> lastKernelOnStream;
  std::unordered_map<CUevent, std::string> kernelBeforeEvent;
  std::string lastKernel;
  std::unordered_map<void *, Allocation> allocations;
  size_t liveBytes = 0;
  size_t peakBytes = 0;
};

Registry &registry() {
  // Never destroyed, like the driver: JIT global destructors may free or
  // unload after this library's static destructors have run.
  static Registry *r = new Registry();
  return *r;
}

std::atomic<uint64_t> launchCount{0};
// Set once a kernel fault is seen: the context is unusable from then on, so
// releasing memory, modules or streams fails too, and is skipped quietly
// (the fault itself has been reported).
std::atomic<bool> contextLost{false};
std::atomic<uint64_t> allocationCount{0};

// The calling thread's current stream (StreamScope), and whether it is
// being captured into a graph.
thread_local CUstream currentStreamOnThread = nullptr;
thread_local bool capturingOnThread = false;

// The events bracketing each launch while a LaunchProfiler is alive.
struct ProfiledLaunch {
  std::string kernel;
  CUevent start = nullptr;
  CUevent stop = nullptr;
  int64_t bytes = -1;
  int64_t flops = 0;
  int launches = 1; // between start and stop
};

std::mutex costMutex;
std::unordered_map<std::string, KernelCostModel> &costModels() {
  static auto *models = new std::unordered_map<std::string, KernelCostModel>();
  return *models;
}
struct ProfilerState {
  int replays = 0; // > 0: each kernel timed over a graph of this many launches
  std::vector<ProfiledLaunch> launches;
  std::vector<CUevent> spareEvents;
};
thread_local ProfilerState *profilerOnThread = nullptr;

// MLPIPE_SYNC_LAUNCHES=1: wait after every launch, so that a fault is
// reported by the launch that made it.
bool syncEveryLaunch() {
  static const bool enabled = [] {
    const char *value = std::getenv("MLPIPE_SYNC_LAUNCHES");
    return value && *value && std::string_view(value) != "0";
  }();
  return enabled;
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
  if (isKernelFault(r))
    contextLost = true;
  std::string message = CudaDriver::get().errorMessage(r, call, kernel);
  if (kernel.empty() && isKernelFault(r)) {
    std::string last = lastKernelAnywhere();
    if (!last.empty())
      message += ", most likely from kernel '" + last + "', launched earlier";
  }
  throw Error(message);
}

// A wait on `stream` failed: the error is most likely the last kernel's, but
// launches are asynchronous, so say how to find the exact one.
void checkWait(CUresult r, const char *call, CUstream stream);

// Calls that release something also run from global destructors at exit,
// when the driver may already have torn the context down and freed it all.
void checkRelease(CUresult r, const char *call, std::string_view kernel = {}) {
  if (r == CUDA_ERROR_DEINITIALIZED || (r != CUDA_SUCCESS && contextLost))
    return;
  check(r, call, kernel);
}

std::string lastKernelOn(CUstream stream) {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.lastKernelOnStream.find(stream);
  return it == reg.lastKernelOnStream.end() ? std::string() : it->second;
}

void checkWait(CUresult r, const char *call, CUstream stream) {
  if (r == CUDA_SUCCESS)
    return;
  if (isKernelFault(r))
    contextLost = true;
  std::string kernel = lastKernelOn(stream);
  std::string message = CudaDriver::get().errorMessage(r, call, kernel);
  if (isKernelFault(r) && !kernel.empty() && !syncEveryLaunch())
    message += " (the last kernel launched before the wait; MLPIPE_SYNC_LAUNCHES=1 stops at the faulting launch)";
  else if (isKernelFault(r) && kernel.empty())
    if (std::string last = lastKernelAnywhere(); !last.empty())
      message += ", most likely from kernel '" + last + "', launched earlier";
  throw Error(message);
}

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
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.allocations[p] = {bytes, managed};
  reg.liveBytes += bytes;
  reg.peakBytes = std::max(reg.peakBytes, reg.liveBytes);
  return p;
}

void releaseFrom(void *ptr, const char *caller) {
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

// "sm_90" for the device in use.
std::string chipOfDevice(CudaDriver &d) {
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.device()),
        "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.device()),
        "cuDeviceGetAttribute");
  return fmt::format("sm_{}{}", major, minor);
}

int chipNumber(const std::string &chip) { return std::atoi(chip.c_str() + 3); }

// A cubin runs on its own compute capability and on later minor versions of
// the same major one (sm_80 code on an sm_86 GPU), never across majors.
bool cubinRunsOn(const std::string &cubin, const std::string &device) {
  int made = chipNumber(cubin), have = chipNumber(device);
  return made / 10 == have / 10 && made % 10 <= have % 10;
}

std::string wrongChipMessage(const std::string &cubin, CudaDriver &d, const std::string &device) {
  char name[256] = {};
  d.cuDeviceGetName(name, sizeof(name) - 1, d.device());
  return fmt::format("the GPU module is a cubin made for {}, which this GPU ({}, {}) cannot run: compile it with "
                     "--chip {}",
                     cubin, name, device, device);
}

CUmodule loadModule(const void *image, size_t bytes, const int *optLevel) {
  CudaDriver &d = driver();
  if (!image)
    fail("cannot load a GPU module from a null image");
  // A cubin for another chip is refused before the driver sees it, in words.
  std::string cubin = optLevel ? std::string() : cubinChip(image, bytes);
  std::string device = cubin.empty() ? std::string() : chipOfDevice(d);
  if (!cubin.empty() && !cubinRunsOn(cubin, device))
    throw Error(wrongChipMessage(cubin, d, device));
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
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU && !cubin.empty())
      throw Error(wrongChipMessage(cubin, d, device));
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

// The kernel's name and whether its dynamic shared memory limit must be
// raised first, in one look-up. Dynamic shared memory beyond the default
// limit must be opted into per function. The default (48 KiB) counts static
// shared memory too, so the limit is raised for any dynamic size not yet
// allowed, and remembered so repeated launches skip the call.
// The kernel's name, after opting it into `smem` bytes of dynamic shared
// memory where it needs more than before; `programmatic` says whether it may
// be launched programmatically (KernelInfo).
std::string prepareLaunch(CudaDriver &d, CUfunction f, int32_t smem, bool &programmatic) {
  Registry &reg = registry();
  std::string name;
  bool raise = false;
  programmatic = false;
  {
    std::lock_guard lock(reg.mutex);
    auto it = reg.kernels.find(f);
    if (it != reg.kernels.end()) {
      name = it->second.name;
      programmatic = it->second.programmaticLaunch;
      raise = smem > it->second.dynamicSharedAllowed;
    } else {
      raise = smem > 0;
    }
  }
  if (raise) {
    check(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem), "cuFuncSetAttribute", name);
    std::lock_guard lock(reg.mutex);
    if (auto it = reg.kernels.find(f); it != reg.kernels.end())
      it->second.dynamicSharedAllowed = smem;
  }
  return name;
}

void noteLaunch(CUstream stream, const std::string &name) {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.lastKernelOnStream[stream] = name;
  reg.lastKernel = name;
}

CUevent profilerEvent(CudaDriver &d, ProfilerState &profiler) {
  if (!profiler.spareEvents.empty()) {
    CUevent event = profiler.spareEvents.back();
    profiler.spareEvents.pop_back();
    return event;
  }
  CUevent event = nullptr;
  check(d.cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
  return event;
}

// A memref descriptor's extent in bytes, from its sizes and strides.
int64_t descriptorBytes(void **params, int64_t rank, int64_t elementBytes) {
  int64_t low = 0, high = 0;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t size = *static_cast<int64_t *>(params[3 + i]);
    int64_t stride = *static_cast<int64_t *>(params[3 + rank + i]);
    if (size == 0)
      return 0;
    int64_t reach = (size - 1) * stride;
    (reach < 0 ? low : high) += reach;
  }
  return (high - low + 1) * elementBytes;
}

// Bytes and flops of one launch for the profiler: the kernel's own count,
// else the extents of its memref arguments (each memref is a descriptor of
// 3 + 2 * rank parameters: pointers, offset, sizes, strides).
std::pair<int64_t, int64_t> launchCost(const std::string &name, void **params, size_t paramsCount) {
  std::lock_guard lock(costMutex);
  auto found = costModels().find(name);
  if (found == costModels().end())
    return {-1, 0};
  const KernelCostModel &model = found->second;
  if (model.bytes >= 0 || !params)
    return {model.bytes, model.flops};
  int64_t bytes = 0;
  size_t at = 0;
  for (auto [rank, elementBytes] : model.arguments) {
    if (rank < 0) {
      ++at;
      continue;
    }
    if (at + 3 + 2 * size_t(rank) > paramsCount)
      return {-1, model.flops};
    bytes += descriptorBytes(params + at, rank, elementBytes);
    at += 3 + 2 * size_t(rank);
  }
  return {at == paramsCount ? bytes : -1, model.flops};
}

void launch(CUfunction f, const intptr_t (&dims)[6], int32_t smem, CUstream stream, void **params, void **extra,
            size_t paramsCount) {
  CudaDriver &d = driver();
  bool programmatic = false;
  std::string name = prepareLaunch(d, f, smem, programmatic);
  checkLaunchShape(name, dims, smem);
  ProfilerState *profiler = capturingOnThread ? nullptr : profilerOnThread;
  ProfiledLaunch timed;
  bool bracketed = profiler && profiler->replays == 0;
  if (profiler) {
    auto [bytes, flops] = launchCost(name, params, paramsCount);
    timed = {name, profilerEvent(d, *profiler), profilerEvent(d, *profiler), bytes, flops};
  }
  if (bracketed)
    check(d.cuEventRecord(timed.start, stream), "cuEventRecord");
  // A kernel compiled to wait for its predecessor in griddepcontrol is
  // launched with programmatic stream serialisation: it may be scheduled
  // while the kernel before it on the stream (or in the graph) finishes.
  CUlaunchAttribute overlap{};
  overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = unsigned(dims[0]), config.gridDimY = unsigned(dims[1]), config.gridDimZ = unsigned(dims[2]);
  config.blockDimX = unsigned(dims[3]), config.blockDimY = unsigned(dims[4]), config.blockDimZ = unsigned(dims[5]);
  config.sharedMemBytes = unsigned(smem);
  config.hStream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  auto launchOnce = [&] {
    if (programmatic)
      return d.cuLaunchKernelEx(&config, f, params, extra);
    return d.cuLaunchKernel(f, unsigned(dims[0]), unsigned(dims[1]), unsigned(dims[2]), unsigned(dims[3]),
                            unsigned(dims[4]), unsigned(dims[5]), unsigned(smem), stream, params, extra);
  };
  CUresult r = launchOnce();
  if (r != CUDA_SUCCESS) {
    // A fault reported at launch was left by a kernel that ran before.
    std::string message = d.errorMessage(r, "cuLaunchKernel", name);
    std::string last = lastKernelAnywhere();
    if (isKernelFault(r) && !last.empty())
      message += ", left by an earlier kernel, most likely '" + last + "'";
    throw Error(message);
  }
  ++launchCount;
  noteLaunch(stream, name);
  if (bracketed)
    check(d.cuEventRecord(timed.stop, stream), "cuEventRecord");
  if (profiler && !bracketed) {
    // The same launch, `replays` times in a graph, replayed once to warm
    // up and once between the events.
    timed.launches = profiler->replays;
    check(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    CUresult captured = CUDA_SUCCESS;
    for (int i = 0; i < profiler->replays && captured == CUDA_SUCCESS; ++i)
      captured = launchOnce();
    CUgraph graph = nullptr;
    CUresult ended = d.cuStreamEndCapture(stream, &graph);
    CUgraphExec exec = nullptr;
    CUresult instantiated = CUDA_SUCCESS;
    if (captured == CUDA_SUCCESS && ended == CUDA_SUCCESS)
      instantiated = d.cuGraphInstantiate(&exec, graph, 0);
    if (graph)
      d.cuGraphDestroy(graph);
    check(captured, "cuLaunchKernel", name);
    check(ended, "cuStreamEndCapture", name);
    check(instantiated, "cuGraphInstantiate", name);
    CUresult replayed = d.cuGraphLaunch(exec, stream);
    if (replayed == CUDA_SUCCESS)
      replayed = d.cuEventRecord(timed.start, stream);
    if (replayed == CUDA_SUCCESS)
      replayed = d.cuGraphLaunch(exec, stream);
    if (replayed == CUDA_SUCCESS)
      replayed = d.cuEventRecord(timed.stop, stream);
    d.cuGraphExecDestroy(exec); // freed once the replays finish
    check(replayed, "cuGraphLaunch", name);
  }
  if (profiler)
    profiler->launches.push_back(std::move(timed));
  if (syncEveryLaunch() && !capturingOnThread)
    check(d.cuStreamSynchronize(stream), "cuStreamSynchronize", name);
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

// Whether `stream` is the calling thread's current stream, whose waits and
// destruction belong to the runner that owns it.
bool isCurrentStream(CUstream stream) { return stream && stream == currentStreamOnThread; }

} // namespace

bool launchesProgrammatically(void *function) {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.kernels.find(static_cast<CUfunction>(function));
  return it != reg.kernels.end() && it->second.programmaticLaunch;
}

} // namespace mlpipe::gpu

using namespace mlpipe::gpu;

extern "C" {

void *mgpuModuleLoad(void *data, uint64_t sizeBytes) {
  // cubin and fatbin images describe their own length; the size is used only
  // to read the chip a cubin was made for.
  return orDie([&] { return static_cast<void *>(loadModule(data, sizeBytes, nullptr)); });
}

void *mgpuModuleLoadJIT(void *ptx, int optLevel) {
  return orDie([&] { return static_cast<void *>(loadModule(ptx, 0, &optLevel)); });
}

void mgpuModuleUnload(void *module) {
  orDie([&] {
    CUmodule m = static_cast<CUmodule>(module);
    {
      Registry &reg = registry();
      std::lock_guard lock(reg.mutex);
      if (auto it = reg.moduleFunctions.find(m); it != reg.moduleFunctions.end()) {
        for (auto &[name, f] : it->second)
          reg.kernels.erase(f);
        reg.moduleFunctions.erase(it);
      }
    }
    checkRelease(driver().cuModuleUnload(m), "cuModuleUnload");
  });
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  return orDie([&] {
    CUmodule m = static_cast<CUmodule>(module);
    std::string_view kernel = name ? name : "";
    // Generated code asks again before every launch: the answer is kept.
    Registry &reg = registry();
    {
      std::lock_guard lock(reg.mutex);
      auto functions = reg.moduleFunctions.find(m);
      if (functions != reg.moduleFunctions.end())
        if (auto found = functions->second.find(kernel); found != functions->second.end())
          return static_cast<void *>(found->second);
    }
    std::string owned(kernel);
    CudaDriver &d = driver();
    CUfunction f = nullptr;
    check(d.cuModuleGetFunction(&f, m, owned.c_str()), "cuModuleGetFunction", owned);
    KernelInfo info{owned};
    CUdeviceptr marker = 0;
    size_t markerBytes = 0;
    info.programmaticLaunch = programmaticLaunchAllowed() && d.cuLaunchKernelEx && d.cuModuleGetGlobal &&
                              d.cuModuleGetGlobal(&marker, &markerBytes, m, kProgrammaticLaunchMarker) == CUDA_SUCCESS;
    std::lock_guard lock(reg.mutex);
    reg.moduleFunctions[m].emplace(owned, f);
    reg.kernels.try_emplace(f, std::move(info));
    return static_cast<void *>(f);
  });
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream, void **params, void **extra, size_t paramsCount) {
  // The driver does not take paramsCount (the kernel's signature implies
  // it); the profiler uses it to find memref descriptors.
  orDie([&] {
    const intptr_t dims[6] = {gridX, gridY, gridZ, blockX, blockY, blockZ};
    launch(static_cast<CUfunction>(function), dims, smem, static_cast<CUstream>(stream), params, extra, paramsCount);
  });
}

void *mgpuStreamCreate() {
  return orDie([&] {
    // Inside a StreamScope: the runner's stream, borrowed (see the header).
    if (currentStreamOnThread)
      return static_cast<void *>(currentStreamOnThread);
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
    if (isCurrentStream(s))
      return; // borrowed: its owner destroys it
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
    // The runner's stream: the wait is deferred to the host's next read.
    if (isCurrentStream(s))
      return;
    checkWait(driver().cuStreamSynchronize(s), "cuStreamSynchronize", s);
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
  return orDie([&] { return allocateOn(sizeBytes, isHostShared != 0); });
}

void mgpuMemFree(void *ptr, void *stream) {
  orDie([&] {
    if (!ptr)
      return;
    // Work already queued on `stream` may still read the buffer, so this
    // waits even for the current stream (planned code frees nothing).
    if (stream) {
      CUstream s = static_cast<CUstream>(stream);
      if (capturingOnThread)
        mlpipe::fail(
            "GPU memory was freed while a CUDA graph was being captured: a captured forward must not free memory");
      checkWait(driver().cuStreamSynchronize(s), "cuStreamSynchronize", s);
    }
    releaseFrom(ptr, "mgpuMemFree");
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

std::string deviceChip() { return chipOfDevice(driver()); }

size_t deviceL2Bytes() {
  CudaDriver &d = driver();
  int bytes = 0;
  check(d.cuDeviceGetAttribute(&bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d.device()), "cuDeviceGetAttribute");
  return static_cast<size_t>(bytes);
}

// ---- Streams ---------------------------------------------------------------

void *currentStream() { return currentStreamOnThread; }

Stream::Stream() {
  CUstream stream = nullptr;
  check(driver().cuStreamCreate(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
  stream_ = stream;
}

Stream::~Stream() {
  CUstream s = static_cast<CUstream>(stream_);
  {
    Registry &reg = registry();
    std::lock_guard lock(reg.mutex);
    reg.lastKernelOnStream.erase(s);
  }
  // A destructor must not throw; the stream's work was waited for by
  // whoever read its results.
  CudaDriver::get().cuStreamDestroy(s);
}

void Stream::synchronize() const {
  CUstream s = static_cast<CUstream>(stream_);
  checkWait(driver().cuStreamSynchronize(s), "cuStreamSynchronize", s);
}

StreamScope::StreamScope(const Stream &stream) : previous_(currentStreamOnThread) {
  currentStreamOnThread = static_cast<CUstream>(stream.handle());
}

StreamScope::~StreamScope() { currentStreamOnThread = static_cast<CUstream>(previous_); }

// ---- Memory ----------------------------------------------------------------

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

void synchronize() { check(driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

void waitForCurrentStream() {
  if (!currentStreamOnThread)
    return synchronize();
  checkWait(driver().cuStreamSynchronize(currentStreamOnThread), "cuStreamSynchronize", currentStreamOnThread);
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
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.allocations.size();
}

size_t liveAllocationBytes() {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.liveBytes;
}

size_t peakAllocationBytes() {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  return reg.peakBytes;
}

void resetPeakAllocationBytes() {
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  reg.peakBytes = reg.liveBytes;
}

std::pair<size_t, size_t> deviceMemoryInfo() {
  size_t free = 0, total = 0;
  check(driver().cuMemGetInfo(&free, &total), "cuMemGetInfo");
  return {free, total};
}

Counters counters() { return {launchCount.load(), allocationCount.load()}; }

// ---- CUDA graphs -----------------------------------------------------------

Graph::~Graph() { reset(); }

Graph::Graph(Graph &&other) noexcept : graph_(other.graph_), exec_(other.exec_), kernels_(other.kernels_) {
  other.graph_ = other.exec_ = nullptr;
  other.kernels_ = 0;
}

Graph &Graph::operator=(Graph &&other) noexcept {
  if (this != &other) {
    reset();
    std::swap(graph_, other.graph_);
    std::swap(exec_, other.exec_);
    std::swap(kernels_, other.kernels_);
  }
  return *this;
}

void Graph::reset() {
  CudaDriver &d = CudaDriver::get();
  if (exec_)
    d.cuGraphExecDestroy(static_cast<CUgraphExec>(exec_));
  if (graph_)
    d.cuGraphDestroy(static_cast<CUgraph>(graph_));
  graph_ = exec_ = nullptr;
  kernels_ = 0;
}

void Graph::capture(const Stream &stream, const std::function<void()> &enqueue) {
  reset();
  CudaDriver &d = driver();
  CUstream s = static_cast<CUstream>(stream.handle());
  StreamScope scope(stream);
  // Thread-local mode: another thread's unsafe call (a synchronous copy,
  // say) does not break this capture, while one of this thread's does.
  check(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  capturingOnThread = true;
  CUgraph graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    capturingOnThread = false;
    if (d.cuStreamEndCapture(s, &graph) == CUDA_SUCCESS && graph)
      d.cuGraphDestroy(graph);
    throw;
  }
  capturingOnThread = false;
  check(d.cuStreamEndCapture(s, &graph), "cuStreamEndCapture", lastKernelOn(s));
  graph_ = graph;
  size_t count = 0;
  check(d.cuGraphGetNodes(graph, nullptr, &count), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(count);
  if (count)
    check(d.cuGraphGetNodes(graph, nodes.data(), &count), "cuGraphGetNodes");
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    check(d.cuGraphNodeGetType(node, &type), "cuGraphNodeGetType");
    kernels_ += type == CU_GRAPH_NODE_TYPE_KERNEL ? 1 : 0;
  }
  CUgraphExec exec = nullptr;
  check(d.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  exec_ = exec;
}

void Graph::launch(const Stream &stream) const {
  if (!exec_)
    fail("a CUDA graph was launched before anything was captured");
  CUstream s = static_cast<CUstream>(stream.handle());
  check(driver().cuGraphLaunch(static_cast<CUgraphExec>(exec_), s), "cuGraphLaunch", lastKernelOn(s));
}

// ---- Timing ----------------------------------------------------------------

EventTimer::EventTimer() : stream_(currentStreamOnThread) {
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

void EventTimer::start() {
  check(driver().cuEventRecord(static_cast<CUevent>(start_), static_cast<CUstream>(stream_)), "cuEventRecord");
}

void EventTimer::stop() {
  check(driver().cuEventRecord(static_cast<CUevent>(stop_), static_cast<CUstream>(stream_)), "cuEventRecord");
}

float EventTimer::milliseconds() {
  CudaDriver &d = driver();
  check(d.cuEventSynchronize(static_cast<CUevent>(stop_)), "cuEventSynchronize", lastKernelAnywhere());
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)), "cuEventElapsedTime");
  return ms;
}

struct LibraryWork::State {
  CUstream stream = nullptr;
  ProfilerState *profiler = nullptr;
  ProfiledLaunch timed;
};

LibraryWork::LibraryWork(std::string name, int64_t bytes, int64_t flops, void *stream)
    : state_(std::make_unique<State>()) {
  CudaDriver &d = driver();
  state_->stream = static_cast<CUstream>(stream);
  state_->profiler = capturingOnThread ? nullptr : profilerOnThread;
  if (state_->profiler) {
    state_->timed = {std::move(name), profilerEvent(d, *state_->profiler), profilerEvent(d, *state_->profiler), bytes,
                     flops};
    check(d.cuEventRecord(state_->timed.start, state_->stream), "cuEventRecord");
  } else {
    state_->timed.kernel = std::move(name);
  }
}

LibraryWork::~LibraryWork() {
  try {
    CudaDriver &d = driver();
    ++launchCount;
    noteLaunch(state_->stream, state_->timed.kernel);
    if (state_->profiler) {
      check(d.cuEventRecord(state_->timed.stop, state_->stream), "cuEventRecord");
      state_->profiler->launches.push_back(std::move(state_->timed));
    }
  } catch (const std::exception &e) {
    die(e.what());
  }
}

LaunchProfiler::LaunchProfiler(int replays) {
  driver();
  if (profilerOnThread)
    fail("a LaunchProfiler is already active on this thread");
  if (replays < 0)
    fail("a LaunchProfiler cannot replay a kernel {} times", replays);
  profilerOnThread = new ProfilerState();
  profilerOnThread->replays = replays;
}

LaunchProfiler::~LaunchProfiler() {
  CudaDriver &d = CudaDriver::get();
  for (ProfiledLaunch &launch : profilerOnThread->launches) {
    d.cuEventDestroy(launch.start);
    d.cuEventDestroy(launch.stop);
  }
  for (CUevent event : profilerOnThread->spareEvents)
    d.cuEventDestroy(event);
  delete profilerOnThread;
  profilerOnThread = nullptr;
}

std::vector<KernelTime> LaunchProfiler::take() {
  CudaDriver &d = driver();
  ProfilerState &state = *profilerOnThread;
  std::vector<KernelTime> times;
  if (!state.launches.empty())
    check(d.cuEventSynchronize(state.launches.back().stop), "cuEventSynchronize", state.launches.back().kernel);
  for (ProfiledLaunch &launch : state.launches) {
    float ms = 0;
    check(d.cuEventElapsedTime(&ms, launch.start, launch.stop), "cuEventElapsedTime");
    times.push_back({launch.kernel, ms * 1000.0 / launch.launches, launch.bytes, launch.flops});
    state.spareEvents.push_back(launch.start);
    state.spareEvents.push_back(launch.stop);
  }
  state.launches.clear();
  return times;
}

void checkCubinRunsHere(const void *image, size_t bytes) {
  std::string cubin = cubinChip(image, bytes);
  if (cubin.empty())
    return;
  CudaDriver &d = driver();
  std::string device = chipOfDevice(d);
  if (!cubinRunsOn(cubin, device))
    throw Error(wrongChipMessage(cubin, d, device));
}

void describeKernel(const std::string &name, const KernelCostModel &model) {
  std::lock_guard lock(costMutex);
  costModels()[name] = model;
}

// ---- Cubin images -----------------------------------------------------------

std::string cubinChip(const void *image, size_t bytes) {
  // ELF64: e_ident[EI_ABIVERSION] at 8, e_machine at 18, e_flags at 48.
  constexpr size_t kHeaderBytes = 64;
  constexpr uint16_t kMachineCuda = 190;
  constexpr uint8_t kAbiVersionSmInSecondByte = 8;
  if (!image || bytes < kHeaderBytes)
    return "";
  const auto *header = static_cast<const unsigned char *>(image);
  if (std::memcmp(header,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      header[4] != 2 /* 64-bit */)
    return "";
  uint16_t machine = 0;
  uint32_t flags = 0;
  std::memcpy(&machine, header + 18, sizeof(machine));
  std::memcpy(&flags, header + 48, sizeof(flags));
  if (machine != kMachineCuda)
    return "";
  // Before Blackwell's toolkits the SM number sat in the low byte of
  // e_flags; from ELF ABI version 8 on it sits in the second byte.
  unsigned sm = header[8] >= kAbiVersionSmInSecondByte ? (flags >> 8) & 0xff : flags & 0xff;
  return sm ? fmt::format("sm_{}", sm) : "";
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
