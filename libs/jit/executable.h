// Executable: a lowered module (lower-nvvm's or lower-cpu's output) compiled
// by MLIR's ExecutionEngine at O3 and called by entry name.
//
//   Executable exe = Executable::load(std::move(module));
//   const EntrySignature &gelu = exe.entry("");        // the only entry
//   TargetStream stream(exe.target());                 // one per runner
//   TargetStream::Scope current(stream);
//   exe.enqueue(gelu, {x.data(), y.data()});            // inputs, then outputs: device pointers
//   y.download(host, bytes);                            // waits for the stream, then copies
//
// Each entry's signature comes from the mlpipe.inputs / mlpipe.outputs
// attributes trace put on the function, which survive every stage. Buffers
// are dense C-ordered arrays in the target's memory (TargetBuffer). On the
// GPU every call is queued asynchronously on the current stream; the
// temporaries live in the module's arena (mlpipe-buffer-plan), allocated
// once when the module loads, so a call allocates nothing.
#pragma once

#include "compiler/compiler.h"
#include "runtime/mgpu_runtime.h"
#include "support/tensor_types.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlpipe {

enum class Target { Gpu, Cpu };
const char *targetName(Target target);

struct TensorSpec {
  std::string name;
  DType dtype;
  Shape shape;
  std::string describe() const; // "64x256xf32"
};

// What mlpipe-buffer-plan recorded about an entry's temporaries.
struct ArenaInfo {
  bool planned = false;           // the function carries mlpipe.arena
  int64_t bytes = 0;              // the arena argument's size (no argument when 0)
  int64_t unplannedBytes = 0;     // what one allocation per temporary would take
  int64_t peakLiveBytes = 0;      // the most bytes live at once
  int64_t buffers = 0;            // temporaries in the arena
  int64_t allocatedAtRunTime = 0; // temporaries still allocated by each call
};

struct EntrySignature {
  std::string name;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  ArenaInfo arena;
  // Loops the host runs, reading their conditions back from the device
  // (mlpipe.host_loops): a CUDA graph would replay one trip count.
  int64_t hostLoops = 0;
};

// What lower-nvvm recorded about a kernel (module attribute mlpipe.kernels):
// bytes read plus written per launch (-1: the profiler counts each launch's
// memref arguments), floating-point operations, and per argument its memref
// rank (-1 for a scalar) and element bytes.
struct KernelCost {
  int64_t bytes = -1;
  int64_t flops = 0;
  std::vector<std::pair<int64_t, int64_t>> arguments;
};

// Reads the entry signatures of a module at any stage.
std::vector<EntrySignature> entrySignatures(const MlirModule &module);
// The entry called `name`; "" picks the only one (an error if there are several).
const EntrySignature &selectEntry(const std::vector<EntrySignature> &entries, const std::string &name);
// The kernels' costs by kernel name, from a lowered GPU module; empty for
// other modules.
std::map<std::string, KernelCost> kernelCosts(const MlirModule &module);

struct ExecutionOptions {
  // Where the GPU arena goes (device memory unless the tutorial's managed
  // path is asked for).
  gpu::Memory memory = gpu::Memory::Device;
  // Functions the compiled code calls, by symbol name, resolved ahead of the
  // runtime's own: a test stands a host function in for the cuBLAS GEMM
  // entry (then no cuBLAS session is opened).
  std::map<std::string, void *> symbolOverrides;
  // Where the module runs when its stage alone would mislead: a CPU-lowered
  // module whose matmuls call the GEMM entry reads as GPU work (a test runs
  // one on the host, the GEMM overridden).
  std::optional<Target> target;
};

class Executable {
public:
  // Throws mlpipe::Error if the module is not lowered, or is a GPU module and
  // no GPU is usable (saying why).
  static Executable load(MlirModule module, const ExecutionOptions &options = {});
  Executable(Executable &&) noexcept;
  Executable &operator=(Executable &&) noexcept;
  ~Executable();

  Target target() const;
  const std::vector<EntrySignature> &entries() const;
  // The entry called `name`; "" picks the only one (an error if there are several).
  const EntrySignature &entry(const std::string &name) const;
  // Queues the entry on the current stream (GPU; it returns before the GPU
  // is done) or runs it (CPU).
  void enqueue(const EntrySignature &entry, const std::vector<void *> &buffers) const;
  // enqueue, then wait for the GPU.
  void call(const EntrySignature &entry, const std::vector<void *> &buffers) const;
  // Whether every call can be captured in a CUDA graph: a GPU module whose
  // entries were all planned, allocate nothing when called and run no
  // loop on the host.
  bool capturable() const;
  // Whether an entry runs loops on the host (mlpipe.host_loops).
  bool hasHostLoops() const;
  // The arena's bytes (0 on the CPU or without temporaries).
  int64_t arenaBytes() const;
  const std::map<std::string, KernelCost> &kernelCosts() const;
  // Milliseconds load() took: compiling the host code, then loading the
  // kernels on the GPU (the global constructors).
  double jitMs() const;
  double moduleLoadMs() const;

private:
  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The stream a runner's GPU work goes on (a gpu::Stream; nothing on the CPU).
class TargetStream {
public:
  explicit TargetStream(Target target);
  ~TargetStream();
  Target target() const { return target_; }
  // nullptr on the CPU.
  const gpu::Stream *gpu() const { return stream_.get(); }
  // Waits for every call queued so far.
  void synchronize() const;

  // Makes the stream current on this thread while it lives.
  class Scope {
  public:
    explicit Scope(const TargetStream &stream);
    ~Scope();

  private:
    std::unique_ptr<gpu::StreamScope> scope_;
  };

private:
  Target target_;
  std::unique_ptr<gpu::Stream> stream_;
};

// A sequence of calls replayed as a CUDA graph: run directly the first time
// (so every kernel is loaded and set up outside any capture), captured the
// second time, replayed after, captured again when the buffers it uses
// change (`buffers` names them all). Without graphs, on the CPU, or for a
// module that is not capturable, the calls are simply queued.
class CallReplay {
public:
  // Queues the calls `enqueue` makes (Executable::enqueue) on `stream`.
  void run(const TargetStream &stream, const Executable &executable, const std::vector<void *> &buffers,
           const std::function<void()> &enqueue, bool graphs);
  int captures() const { return captures_; }
  // Kernels in the captured graph (0 before any capture).
  size_t kernelCount() const { return graph_.kernelCount(); }

private:
  gpu::Graph graph_;
  std::vector<void *> capturedBuffers_;
  int captures_ = 0;
  bool ranDirectly_ = false;
  bool warned_ = false;
};

// Milliseconds `work` takes on the target: GPU time between two CUDA events
// on the current stream (launch gaps included), or the host clock on the CPU.
double timeOnTarget(Target target, const std::function<void()> &work);

// A buffer where a target's code can read and write it: device memory for
// the GPU (managed memory if asked), 64-byte aligned host memory for the
// CPU. Freed on destruction. Copies go on the current stream.
class TargetBuffer {
public:
  TargetBuffer(Target target, size_t bytes, gpu::Memory memory = gpu::Memory::Device);
  TargetBuffer(TargetBuffer &&other) noexcept;
  TargetBuffer &operator=(TargetBuffer &&other) noexcept;
  ~TargetBuffer();
  void *data() const { return data_; }
  size_t size() const { return bytes_; }
  // Host bytes into the buffer, from offset 0; returns once `host` may be
  // reused.
  void upload(const void *host, size_t bytes);
  // Bytes [offset, offset + bytes) of the buffer to the host; on the GPU it
  // waits for the stream first, so it is where results become visible.
  void download(void *host, size_t bytes, size_t offset = 0) const;

private:
  void release();
  Target target_;
  void *data_ = nullptr;
  size_t bytes_ = 0;
};

} // namespace mlpipe
