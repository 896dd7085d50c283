#include "driver/run_module.h"

#include "driver/stage_tool.h"
#include "jit/executable.h"
#include "runtime/mgpu_runtime.h"
#include "support/bindings.h"
#include "support/error.h"
#include "support/npy.h"
#include "support/output_file.h"
#include "support/statistics.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>

namespace mlpipe {

namespace {

std::string names(const std::vector<TensorSpec> &specs) {
  std::vector<std::string> list;
  for (auto &spec : specs)
    list.push_back(spec.name);
  return list.empty() ? "none" : fmt::format("{}", fmt::join(list, ", "));
}

// Parses NAME=@FILE bindings and checks each NAME is one of `specs`, once.
std::map<std::string, std::string> bindTo(const std::vector<std::string> &texts, const std::vector<TensorSpec> &specs,
                                          const char *flag, const char *kind, const std::string &entry) {
  std::map<std::string, std::string> bound;
  for (const std::string &text : texts) {
    Binding binding = parseBinding(text, flag);
    bool known = std::any_of(specs.begin(), specs.end(), [&](auto &spec) { return spec.name == binding.name; });
    if (!known)
      fail("{} has no {} named '{}': its {}s are {}", entry, kind, binding.name, kind, names(specs));
    if (!bound.emplace(binding.name, binding.path).second)
      fail("{} {} is given twice", flag, binding.name);
  }
  return bound;
}

// numpy has no bf16: an f32 file given for a bf16 input is rounded to
// nearest even.
HostTensor readInputFor(const TensorSpec &spec, const std::string &path, const std::string &entry) {
  HostTensor tensor = readNpy(path);
  if (spec.dtype == DType::bf16 && tensor.dtype() == DType::f32 && tensor.shape() == spec.shape)
    return tensor.convertedTo(DType::bf16);
  if (tensor.dtype() != spec.dtype || tensor.shape() != spec.shape)
    fail("input '{}' from {} is {}, but {} wants {}{}", spec.name, path, tensor.describe(), entry, spec.describe(),
         spec.dtype == DType::bf16 ? " (give bf16 inputs as f32)" : "");
  return tensor;
}

// NaN in every float output, so an element the program never writes shows.
void poison(void *data, const TensorSpec &spec) {
  HostTensor poisoned = poisonedTensor(spec.dtype, spec.shape);
  std::memcpy(data, poisoned.data(), poisoned.byteSize());
}

} // namespace

std::string gpuInfo() {
  if (!gpu::available())
    fail("{}", gpu::unavailableReason());
  return gpu::deviceName();
}

void runModule(const RunRequest &request) {
  MlirModule module = MlirModule::parse(readInput(request.module), bufferName(request.module));
  std::vector<EntrySignature> entries = entrySignatures(module);
  if (entries.empty())
    fail("the module has no entry function (one with mlpipe.inputs, as trace writes)");
  EntrySignature entry = selectEntry(entries, request.entry);

  // Bindings first: a misnamed input is reported before any compilation.
  auto inputPaths = bindTo(request.inputs, entry.inputs, "--input", "input", entry.name);
  auto outputPaths = bindTo(request.outputs, entry.outputs, "--output", "output", entry.name);
  for (const TensorSpec &spec : entry.inputs)
    if (!inputPaths.count(spec.name))
      fail("missing --input {}=@FILE: {} takes {}", spec.name, entry.name, names(entry.inputs));
  // Every output file is checked before the run and written after it, all
  // or none.
  OutputFiles outputFiles;
  std::map<std::string, size_t> outputIndex;
  for (const TensorSpec &spec : entry.outputs)
    if (auto path = outputPaths.find(spec.name); path != outputPaths.end())
      outputIndex[spec.name] = outputFiles.add(path->second);
  std::vector<HostTensor> inputs;
  for (const TensorSpec &spec : entry.inputs)
    inputs.push_back(readInputFor(spec, inputPaths.at(spec.name), entry.name));

  size_t liveBefore = gpu::liveAllocationCount();
  std::vector<HostTensor> results;
  {
    ExecutionOptions options;
    options.memory = request.managed ? gpu::Memory::Managed : gpu::Memory::Device;
    Executable executable = Executable::load(std::move(module), options);
    // Inputs go up and outputs (poisoned first) come down with explicit
    // copies, all on one stream.
    TargetStream stream(executable.target());
    TargetStream::Scope current(stream);
    std::vector<TargetBuffer> buffers;
    std::vector<void *> pointers;
    for (const HostTensor &input : inputs) {
      buffers.emplace_back(executable.target(), input.byteSize(), options.memory);
      buffers.back().upload(input.data(), input.byteSize());
    }
    for (const TensorSpec &spec : entry.outputs) {
      HostTensor poisoned(spec.dtype, spec.shape);
      poison(poisoned.data(), spec);
      buffers.emplace_back(executable.target(), poisoned.byteSize(), options.memory);
      buffers.back().upload(poisoned.data(), poisoned.byteSize());
    }
    for (auto &buffer : buffers)
      pointers.push_back(buffer.data());

    executable.enqueue(entry, pointers);
    for (size_t i = 0; i < entry.outputs.size(); ++i) {
      HostTensor result(entry.outputs[i].dtype, entry.outputs[i].shape);
      buffers[inputs.size() + i].download(result.data(), result.byteSize());
      results.push_back(std::move(result));
    }
    if (request.repeat > 0) {
      CallReplay replay;
      auto once = [&] {
        replay.run(
            stream, executable, pointers, [&] { executable.enqueue(entry, pointers); }, request.graphs);
      };
      once(); // direct: every kernel loaded and set up
      once(); // a graph is captured here, outside the timing
      std::vector<double> times;
      for (int i = 0; i < request.repeat; ++i)
        times.push_back(timeOnTarget(executable.target(), once));
      bool replayed = replay.captures() > 0;
      std::cout << fmt::format("{}: median {:.4f} ms over {} runs on the {} ({}{})\n", entry.name, median(times),
                               request.repeat, targetName(executable.target()),
                               executable.target() == Target::Gpu ? "CUDA events" : "host clock",
                               replayed ? ", replaying a CUDA graph" : "");
    }
  }
  if (gpu::liveAllocationCount() != liveBefore)
    fail("{} GPU allocations were not freed", gpu::liveAllocationCount() - liveBefore);
  for (size_t i = 0; i < entry.outputs.size(); ++i)
    if (auto index = outputIndex.find(entry.outputs[i].name); index != outputIndex.end())
      outputFiles.write(index->second, serializeNpy(results[i]));
  outputFiles.commit();
  // NumPy has no bf16: say where an f32 file holds a bf16 result.
  for (const TensorSpec &spec : entry.outputs)
    if (spec.dtype == DType::bf16 && outputIndex.count(spec.name))
      std::cerr << fmt::format("run: note: output '{}' is bf16, written to {} as f32 (every bf16 is an f32 exactly; "
                               "NumPy has no bf16)\n",
                               spec.name, outputPaths.at(spec.name));
}

} // namespace mlpipe
