#include "driver/verify.h"

#include "driver/compile.h"
#include "reference/evaluator.h"
#include "support/compare.h"
#include "support/error.h"
#include "support/npy.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>

namespace mlpipe {

bool verifyFiles(const std::string &actual, const std::string &expected, double rtol, double atol) {
  HostTensor a = readNpy(actual), b = readNpy(expected);
  Comparison comparison = compareTensors(a, b, rtol, atol);
  std::cout << formatComparison(comparison, rtol, atol);
  return comparison.pass;
}

std::vector<std::pair<std::string, HostTensor>> randomInputs(const fe::Graph &graph, uint64_t seed, double offset,
                                                             double scale) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<std::pair<std::string, HostTensor>> inputs;
  for (int id : graph.inputs()) {
    const fe::Node &node = graph.node(id);
    HostTensor tensor(node.dtype, node.shape);
    if (isFloat(node.dtype)) {
      for (int64_t i = 0; i < tensor.numel(); ++i)
        tensor.set(i, id == graph.inputs().front() ? offset + scale * uniform(generator) : uniform(generator));
    } else {
      int64_t rows = node.ints.empty() ? 1 << 16 : node.ints[0];
      std::uniform_int_distribution<int64_t> row(0, rows - 1);
      for (int64_t i = 0; i < tensor.numel(); ++i)
        tensor.set(i, static_cast<double>(row(generator)));
    }
    inputs.emplace_back(node.name, std::move(tensor));
  }
  return inputs;
}

namespace {

struct OutputCheck {
  std::string output;
  double relativeError;
  double maxAbsError;
  int64_t unwritten; // elements still holding the NaN poison
  bool pass;
};

std::string describeInputs(const fe::Graph &graph) {
  std::string text;
  for (int id : graph.inputs()) {
    const fe::Node &node = graph.node(id);
    text += (text.empty() ? "" : " ") + node.name + "=" + formatShape(node.shape);
  }
  return text;
}

std::vector<OutputCheck> checkKernel(const std::string &name, const KernelVerifyRequest &request, uint64_t seed,
                                     std::string &inputText) {
  fe::Program program = traceUnitKernel(name, request.options);
  const fe::Graph &graph = *program.functions.front();
  inputText = describeInputs(graph);
  auto inputs = randomInputs(graph, seed, request.inputOffset, request.inputScale);

  ref::Values referenceInputs;
  for (auto &[input, tensor] : inputs)
    referenceInputs[input] = ref::fromHost(tensor);
  ref::Values expected = ref::evaluate(graph, referenceInputs);

  CompileOptions compile{request.target, request.chip, ""};
  compile.format = request.format;
  ExecutionOptions execution;
  execution.memory = request.managed ? gpu::Memory::Managed : gpu::Memory::Device;
  Executable executable = Executable::load(compileProgram(program, name + ".mlir", compile), execution);
  const EntrySignature &entry = executable.entry(name);
  TargetStream stream(executable.target());
  TargetStream::Scope current(stream);
  std::vector<TargetBuffer> buffers;
  std::vector<void *> pointers;
  for (auto &[input, tensor] : inputs) {
    buffers.emplace_back(executable.target(), tensor.byteSize(), execution.memory);
    buffers.back().upload(tensor.data(), tensor.byteSize());
  }
  for (const TensorSpec &spec : entry.outputs) {
    HostTensor poison = HostTensor::fromDoubles(spec.dtype, spec.shape,
                                                std::vector<double>(static_cast<size_t>(numElements(spec.shape)), NAN));
    buffers.emplace_back(executable.target(), poison.byteSize(), execution.memory);
    buffers.back().upload(poison.data(), poison.byteSize());
  }
  for (auto &buffer : buffers)
    pointers.push_back(buffer.data());
  executable.enqueue(entry, pointers);

  double tolerance = request.tolerance.value_or(request.options.dtype == DType::f64 ? 1e-12 : 1e-5);
  std::string saveTo = request.saveDirectory.empty() ? "" : request.saveDirectory + "/" + name;
  if (!saveTo.empty()) {
    std::error_code error;
    std::filesystem::create_directories(saveTo, error);
    if (error)
      fail("cannot create {}: {}", saveTo, error.message());
    for (auto &[input, tensor] : inputs)
      writeNpy(saveTo + "/" + input + ".npy", tensor);
  }
  std::vector<OutputCheck> checks;
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    const TensorSpec &spec = entry.outputs[i];
    HostTensor actual(spec.dtype, spec.shape);
    buffers[inputs.size() + i].download(actual.data(), actual.byteSize());
    HostTensor reference = ref::toHost(*expected.at(spec.name), DType::f64);
    if (!saveTo.empty()) {
      writeNpy(saveTo + "/" + spec.name + ".npy", actual);
      writeNpy(saveTo + "/" + spec.name + ".reference.npy", reference);
    }
    Comparison comparison = compareTensors(actual, reference, 0.0, 0.0);
    int64_t unwritten = 0;
    for (int64_t j = 0; j < actual.numel(); ++j)
      unwritten += std::isnan(actual.at(j)) ? 1 : 0;
    bool pass = unwritten == 0 && std::isfinite(comparison.relativeL2) && comparison.relativeL2 < tolerance;
    checks.push_back({spec.name, comparison.relativeL2, comparison.maxAbsError, unwritten, pass});
  }
  return checks;
}

} // namespace

bool verifyKernels(const KernelVerifyRequest &request) {
  std::vector<std::string> kernels;
  for (const std::string &kernel : request.kernels) {
    if (kernel == "all")
      for (auto &unit : unitKernels())
        kernels.push_back(unit.name);
    else
      kernels.push_back(kernel);
  }
  uint64_t seed = request.seed ? *request.seed : std::random_device{}();
  std::cout << fmt::format("verify: {} on the {}{}, {} inputs from seed {}, float64 reference\n",
                           kernels.size() == 1 ? kernels[0] : std::to_string(kernels.size()) + " kernels",
                           targetName(request.target), request.target == Target::Gpu ? " (" + request.chip + ")" : "",
                           dtypeName(request.options.dtype), seed);
  std::cout << fmt::format("{:<10} {:<34} {:<6} {:>12} {:>12} {:>9}  {}\n", "kernel", "inputs", "output", "rel error",
                           "max abs err", "unwritten", "result");
  bool allPass = true;
  for (const std::string &kernel : kernels) {
    std::string inputs;
    for (const OutputCheck &check : checkKernel(kernel, request, seed, inputs)) {
      allPass &= check.pass;
      std::cout << fmt::format("{:<10} {:<34} {:<6} {:>12.3e} {:>12.3e} {:>9}  {}\n", kernel, inputs, check.output,
                               check.relativeError, check.maxAbsError, check.unwritten, check.pass ? "PASS" : "FAIL");
    }
  }
  std::cout << (allPass ? "PASS\n" : "FAIL\n");
  return allPass;
}

} // namespace mlpipe
