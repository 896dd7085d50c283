// The kernel profiler: each kernel's cost model (bytes and flops per
// launch), the events that time every launch while a LaunchProfiler is
// alive (or a graph of replays of it), and library work (a cuBLAS call)
// timed and counted as if it were a launch.
#include "runtime/runtime_internal.h"

#include "runtime/fatal_error.h"
#include "support/error.h"

#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mlpipe::gpu {

struct ProfilerState {
  int replays = 0; // > 0: each kernel timed over a graph of this many launches
  std::vector<ProfiledLaunch> launches;
  std::vector<CUevent> spareEvents;
};

namespace {

std::mutex costMutex;
std::unordered_map<std::string, KernelCostModel> &costModels() {
  static auto *models = new std::unordered_map<std::string, KernelCostModel>();
  return *models;
}

thread_local ProfilerState *profilerOnThread = nullptr;

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

// The same launch, `replays` times in a graph, replayed once to warm up and
// once between `timed`'s events.
void timeReplays(CudaDriver &d, const KernelLaunch &launch, ProfiledLaunch &timed, int replays) {
  const std::string &name = timed.kernel;
  CUstream stream = launch.stream;
  timed.launches = replays;
  check(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  CUresult captured = CUDA_SUCCESS;
  for (int i = 0; i < replays && captured == CUDA_SUCCESS; ++i)
    captured = launch.enqueue(d);
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

} // namespace

void describeKernel(const std::string &name, const KernelCostModel &model) {
  std::lock_guard lock(costMutex);
  costModels()[name] = model;
}

// ---- Kernel launches --------------------------------------------------------

LaunchTiming::LaunchTiming(CudaDriver &d, const std::string &kernel, void **params, size_t paramsCount, CUstream stream)
    : driver_(d), stream_(stream), profiler_(capturingOnThread ? nullptr : profilerOnThread) {
  if (!profiler_)
    return;
  auto [bytes, flops] = launchCost(kernel, params, paramsCount);
  timed_ = {kernel, profilerEvent(d, *profiler_), profilerEvent(d, *profiler_), bytes, flops};
  if (profiler_->replays == 0)
    check(d.cuEventRecord(timed_.start, stream_), "cuEventRecord");
}

void LaunchTiming::finish(const KernelLaunch &launch) {
  if (!profiler_)
    return;
  if (profiler_->replays == 0)
    check(driver_.cuEventRecord(timed_.stop, stream_), "cuEventRecord");
  else
    timeReplays(driver_, launch, timed_, profiler_->replays);
  profiler_->launches.push_back(std::move(timed_));
}

// ---- Library work -----------------------------------------------------------

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
    countLaunch(state_->stream, state_->timed.kernel);
    if (state_->profiler) {
      check(d.cuEventRecord(state_->timed.stop, state_->stream), "cuEventRecord");
      state_->profiler->launches.push_back(std::move(state_->timed));
    }
  } catch (const std::exception &e) {
    die(e.what());
  }
}

// ---- LaunchProfiler ---------------------------------------------------------

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

} // namespace mlpipe::gpu
