// Executable: a lowered module (lower-nvvm's or lower-cpu's output) compiled
// by MLIR's ExecutionEngine at O3 and called by entry name.
//
//   Executable exe = Executable::load(std::move(module));
//   const EntrySignature &gelu = exe.entry("");        // the only entry
//   exe.call(gelu, {x.data(), y.data()});               // inputs, then outputs
//
// Each entry's signature comes from the mlpipe.inputs / mlpipe.outputs
// attributes trace put on the function, which survive every stage. Buffers
// are dense C-ordered arrays; for a GPU module they must be managed memory
// (TargetBuffer allocates the right kind).
#pragma once

#include "compiler/compiler.h"
#include "support/tensor_types.h"

#include <functional>
#include <memory>
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

struct EntrySignature {
  std::string name;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// Reads the entry signatures of a module at any stage.
std::vector<EntrySignature> entrySignatures(const MlirModule &module);
// The entry called `name`; "" picks the only one (an error if there are several).
const EntrySignature &selectEntry(const std::vector<EntrySignature> &entries, const std::string &name);

class Executable {
public:
  // Throws mlpipe::Error if the module is not lowered, or is a GPU module and
  // no GPU is usable (saying why).
  static Executable load(MlirModule module);
  Executable(Executable &&) noexcept;
  Executable &operator=(Executable &&) noexcept;
  ~Executable();

  Target target() const;
  const std::vector<EntrySignature> &entries() const;
  // The entry called `name`; "" picks the only one (an error if there are several).
  const EntrySignature &entry(const std::string &name) const;
  // Runs the entry to completion (on the GPU: synchronized, unless
  // `synchronize` is false, when GPU work may still be running on return, as
  // benchmarks timing back-to-back calls want).
  void call(const EntrySignature &entry, const std::vector<void *> &buffers, bool synchronize = true) const;

private:
  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Milliseconds `work` takes on the target: GPU time between two CUDA events
// on the default stream (launch gaps included), or the host clock on the CPU.
double timeOnTarget(Target target, const std::function<void()> &work);

// A buffer where a target's code can read and write it: managed memory for
// the GPU, 64-byte aligned host memory for the CPU. Freed on destruction.
class TargetBuffer {
public:
  TargetBuffer(Target target, size_t bytes);
  TargetBuffer(TargetBuffer &&other) noexcept;
  TargetBuffer &operator=(TargetBuffer &&other) noexcept;
  ~TargetBuffer();
  void *data() const { return data_; }
  size_t size() const { return bytes_; }

private:
  void release();
  Target target_;
  void *data_ = nullptr;
  size_t bytes_ = 0;
};

} // namespace mlpipe
