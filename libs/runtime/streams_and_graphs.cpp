// Streams, events and CUDA graphs: the mgpuStream* and mgpuEvent* entry
// points (which follow the calling thread's current stream), a runner's
// Stream and StreamScope, Graph capture and replay, and EventTimer.
#include "runtime/runtime_internal.h"

#include "support/error.h"

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mlpipe::gpu {

thread_local CUstream currentStreamOnThread = nullptr;
thread_local bool capturingOnThread = false;

namespace {

// Whether `stream` is the calling thread's current stream, whose waits and
// destruction belong to the runner that owns it.
bool isCurrentStream(CUstream stream) { return stream && stream == currentStreamOnThread; }

// The kernel last launched on an event's stream when it was recorded: an
// error found when waiting for the event is most likely that kernel's.
struct KernelsBeforeEvents {
  std::mutex mutex;
  std::unordered_map<CUevent, std::string> kernels;
};

KernelsBeforeEvents &kernelsBeforeEvents() {
  // Never destroyed: JIT global destructors may destroy events after this
  // library's static destructors have run.
  static KernelsBeforeEvents *events = new KernelsBeforeEvents();
  return *events;
}

} // namespace

// ---- The mgpuStream* and mgpuEvent* entry points ----------------------------

CUstream createStream() {
  // Inside a StreamScope: the runner's stream, borrowed (see the header).
  if (currentStreamOnThread)
    return currentStreamOnThread;
  CUstream stream = nullptr;
  // A blocking stream (not CU_STREAM_NON_BLOCKING, as MLIR's own runtime
  // uses): work on the legacy default stream, such as EventTimer's events
  // and prefetches, then orders with the kernels on it.
  check(driver().cuStreamCreate(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
  return stream;
}

void destroyStream(CUstream stream) {
  if (isCurrentStream(stream))
    return; // borrowed: its owner destroys it
  forgetStream(stream);
  checkRelease(driver().cuStreamDestroy(stream), "cuStreamDestroy");
}

void synchronizeStream(CUstream stream) {
  // The runner's stream: the wait is deferred to the host's next read.
  if (isCurrentStream(stream))
    return;
  checkWait(driver().cuStreamSynchronize(stream), "cuStreamSynchronize", stream);
}

void waitForEvent(CUstream stream, CUevent event) {
  check(driver().cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
}

CUevent createEvent() {
  CUevent event = nullptr;
  // These events only order streams; timing them would cost for nothing.
  check(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  return event;
}

void destroyEvent(CUevent event) {
  {
    KernelsBeforeEvents &before = kernelsBeforeEvents();
    std::lock_guard lock(before.mutex);
    before.kernels.erase(event);
  }
  checkRelease(driver().cuEventDestroy(event), "cuEventDestroy");
}

void synchronizeEvent(CUevent event) {
  std::string kernel;
  {
    KernelsBeforeEvents &before = kernelsBeforeEvents();
    std::lock_guard lock(before.mutex);
    if (auto it = before.kernels.find(event); it != before.kernels.end())
      kernel = it->second;
  }
  check(driver().cuEventSynchronize(event), "cuEventSynchronize", kernel);
}

void recordEvent(CUevent event, CUstream stream) {
  check(driver().cuEventRecord(event, stream), "cuEventRecord");
  // Waiting for this event waits for the stream's last kernel, so an
  // error found then is most likely that kernel's.
  std::string kernel = lastKernelOn(stream);
  KernelsBeforeEvents &before = kernelsBeforeEvents();
  std::lock_guard lock(before.mutex);
  before.kernels[event] = kernel;
}

// ---- Streams ----------------------------------------------------------------

void *currentStream() { return currentStreamOnThread; }

Stream::Stream() {
  CUstream stream = nullptr;
  check(driver().cuStreamCreate(&stream, CU_STREAM_DEFAULT), "cuStreamCreate");
  stream_ = stream;
}

Stream::~Stream() {
  CUstream s = static_cast<CUstream>(stream_);
  forgetStream(s);
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

void synchronize() { check(driver().cuCtxSynchronize(), "cuCtxSynchronize"); }

void waitForCurrentStream() {
  if (!currentStreamOnThread)
    return synchronize();
  checkWait(driver().cuStreamSynchronize(currentStreamOnThread), "cuStreamSynchronize", currentStreamOnThread);
}

// ---- CUDA graphs ------------------------------------------------------------

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

// ---- Marks ------------------------------------------------------------------

StreamMark::StreamMark() {
  CUevent event = nullptr;
  check(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  event_ = event;
}

StreamMark::~StreamMark() { CudaDriver::get().cuEventDestroy(static_cast<CUevent>(event_)); }

void StreamMark::record() {
  check(driver().cuEventRecord(static_cast<CUevent>(event_), static_cast<CUstream>(currentStreamOnThread)),
        "cuEventRecord");
}

void StreamMark::wait() const {
  check(driver().cuEventSynchronize(static_cast<CUevent>(event_)), "cuEventSynchronize", lastKernelAnywhere());
}

// ---- Timing -----------------------------------------------------------------

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

} // namespace mlpipe::gpu
