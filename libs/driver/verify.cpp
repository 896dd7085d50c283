#include "driver/verify.h"

#include "driver/compile.h"
#include "driver/matmul_choice.h"
#include "driver/trace.h"
#include "frontend/mlir_emitter.h"
#include "reference/evaluator.h"
#include "support/compare.h"
#include "support/error.h"
#include "support/memory.h"
#include "support/npy.h"
#include "support/output_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>

namespace mlpipe {

bool verifyFiles(const std::string &actual, const std::string &expected, double rtol, double atol) {
  HostTensor a = readNpy(actual), b = readNpy(expected);
  Comparison comparison = compareTensors(a, b, rtol, atol);
  std::cout << formatComparison(comparison, rtol, atol);
  return comparison.pass;
}

// Integers that index nothing are drawn from [-kIntegerRange, kIntegerRange):
// small, so products of a few stay far from overflow, and signed; unsigned
// ones from [0, 2 kIntegerRange).
constexpr int64_t kIntegerRange = 16;

std::vector<std::pair<std::string, HostTensor>> randomInputs(const fe::Graph &graph, uint64_t seed, double offset,
                                                             double scale) {
  std::mt19937_64 generator(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<std::pair<std::string, HostTensor>> inputs;
  for (int id : graph.inputs()) {
    const fe::Node &node = graph.node(id);
    HostTensor tensor(node.dtype, node.shape);
    std::uniform_int_distribution<int64_t> integers =
        !node.ints.empty()       ? std::uniform_int_distribution<int64_t>(0, node.ints[0] - 1)
        : isUnsigned(node.dtype) ? std::uniform_int_distribution<int64_t>(0, 2 * kIntegerRange - 1)
                                 : std::uniform_int_distribution<int64_t>(-kIntegerRange, kIntegerRange - 1);
    std::bernoulli_distribution truth;
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      if (isFloat(node.dtype))
        tensor.set(i, id == graph.inputs().front() ? offset + scale * uniform(generator) : uniform(generator));
      else if (node.dtype == DType::i1)
        tensor.set(i, truth(generator) ? 1.0 : 0.0);
      else
        tensor.set(i, static_cast<double>(integers(generator)));
    }
    inputs.emplace_back(node.name, std::move(tensor));
  }
  return inputs;
}

namespace {

std::string shapeText(DType dtype, const Shape &shape) {
  return fmt::format("{}[{}]", dtypeName(dtype), fmt::join(shape, ","));
}

// The inputs saved in DIR/in<i>.npy, one per parameter in order, each of the
// parameter's shape; a float file for a bf16 or f16 parameter is rounded to
// it, as `run` does.
std::vector<std::pair<std::string, HostTensor>> givenInputs(const fe::Graph &graph, const std::string &directory) {
  std::vector<std::pair<std::string, HostTensor>> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const fe::Node &node = graph.node(graph.inputs()[i]);
    std::string path = fmt::format("{}/in{}.npy", directory, i);
    if (!std::filesystem::exists(path))
      fail("--inputs: {} is missing: parameter {} ({}) is {}", path, i, node.name, shapeText(node.dtype, node.shape));
    HostTensor tensor = readNpy(path);
    if (tensor.shape() != node.shape)
      fail("--inputs: {} is {}, but parameter {} ({}) is {}", path, shapeText(tensor.dtype(), tensor.shape()), i,
           node.name, shapeText(node.dtype, node.shape));
    bool sameKind = isFloat(tensor.dtype()) == isFloat(node.dtype);
    if (!sameKind)
      fail("--inputs: {} holds {}, but parameter {} ({}) is {}", path, dtypeName(tensor.dtype()), i, node.name,
           shapeText(node.dtype, node.shape));
    inputs.emplace_back(node.name, tensor.dtype() == node.dtype ? tensor : tensor.convertedTo(node.dtype));
  }
  std::string extra = fmt::format("{}/in{}.npy", directory, graph.inputs().size());
  if (std::filesystem::exists(extra))
    fail("--inputs: {} has no parameter: the program takes {} inputs", extra, graph.inputs().size());
  return inputs;
}

// The elements of an integer result that hold the poison's bytes because
// the reference has that value there (an 8-bit result can well be 0xA5):
// written, not unwritten. A float poison is a NaN no program computes.
int64_t poisonValuesExpected(const HostTensor &actual, const HostTensor &reference) {
  if (isFloat(actual.dtype()))
    return 0;
  double poison = poisonedTensor(actual.dtype(), {}).at(0);
  int64_t count = 0;
  for (int64_t i = 0; i < actual.numel(); ++i)
    count += actual.at(i) == poison && reference.at(i) == poison ? 1 : 0;
  return count;
}

// Fixed bounds on ||out - ref|| / ||ref|| where no 16-bit float is stored:
// f32 with room for reductions; f64 and integer-only programs must match
// almost exactly.
constexpr double kF32Tolerance = 1e-5;
constexpr double kF64Tolerance = 1e-12;

// An output past its default bound (no --tolerance) still passes within
// this many times the error of the float64 reference evaluated in f32
// arithmetic (every f32 op's result rounded once, 16-bit values only where
// the program converts: ref::Rounding::F32Arithmetic). That error is how
// far f32 rounding alone moves the output: large for an ill-conditioned
// one, such as a long sequential sum that cancels to near zero (a scan's
// last carry), and about f32's unit roundoff elsewhere. The factor leaves
// room for an order of operations other than the reference's (a tree for a
// chain, a fused multiply-add for two roundings).
constexpr double kF32ArithmeticErrorFactor = 4;

// The longest reduction or matmul contraction of the graph: the number of
// terms one f32 accumulator sums.
int64_t longestReduction(const fe::Graph &graph) {
  int64_t longest = 1;
  for (const fe::Node &node : graph.nodes()) {
    if (node.kind == fe::OpKind::Reduce && !node.operands.empty()) {
      int64_t out = std::max<int64_t>(1, numElements(node.shape));
      longest = std::max(longest, numElements(graph.node(node.operands[0]).shape) / out);
    } else if (node.kind == fe::OpKind::MatMul && !node.operands.empty()) {
      const Shape &a = graph.node(node.operands[0]).shape;
      if (!a.empty())
        longest = std::max(longest, a.back());
    }
  }
  return longest;
}

struct OutputCheck {
  std::string output;
  double relativeError;
  double maxAbsError;
  int64_t unwritten; // elements still holding the NaN poison
  bool pass;
  // Where the output missed the bound: the relative error of the reference
  // in f32 arithmetic (kF32ArithmeticErrorFactor); else negative.
  double f32ArithmeticError = -1;
};

std::string describeInputs(const fe::Graph &graph) {
  std::string text;
  for (int id : graph.inputs()) {
    const fe::Node &node = graph.node(id);
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", node.name, formatShape(node.shape));
  }
  return text;
}

// The program `what` names: an HLO module (FILE.hlo) or a unit kernel.
fe::Program programFor(const std::string &what, const KernelOptions &options) {
  if (isHloFile(what)) {
    if (!options.shapes.empty() || options.batch != 0)
      fail("an HLO module's shapes come from the file: --shape and --batch do not apply to {}", what);
    return readHloFile(what);
  }
  return traceUnitKernel(what, options);
}

// What the table calls it: a kernel's name, an HLO file's name without the
// directory and extension.
std::string labelFor(const std::string &what) {
  return isHloFile(what) ? std::filesystem::path(what).stem().string() : what;
}

// Refuses, before anything is computed, a program whose inputs, outputs and
// float64 reference would not fit in the host memory available: the
// reference holds every node's value as doubles.
void checkFitsInMemory(const fe::Graph &graph, const std::string &what) {
  int64_t bytes = 0, largestBytes = -1;
  const fe::Node *largest = nullptr;
  for (const fe::Node &node : graph.nodes()) {
    int64_t size = byteSize(node.shape, node.dtype);
    bytes += numElements(node.shape) * int64_t(sizeof(double)) + size;
    if (size > largestBytes) {
      largestBytes = size;
      largest = &node;
    }
  }
  if (largest)
    checkHostMemory(fmt::format("checking {} against its float64 reference (its largest tensor{} is {}{})", what,
                                largest->name.empty() ? std::string() : fmt::format(" {}", largest->name),
                                formatShape(largest->shape), fmt::format("x{}", dtypeName(largest->dtype))),
                    bytes);
}

// The shell commands that replay a failed check: verify itself with the
// seed, then the stages one by one, run on the saved inputs, and the
// comparison by hand.
std::string replayScript(const std::string &what, const fe::Graph &graph, const KernelVerifyRequest &request,
                         uint64_t seed, double tolerance, const std::vector<std::string> &outputs) {
  const KernelOptions &kernel = request.options;
  // An HLO module is replayed from its copy beside the script.
  std::string program = isHloFile(what) ? std::filesystem::path(what).filename().string() : what;
  std::string verifyCommand =
      request.inputsDirectory.empty()
          ? fmt::format("verify {} --seed {} --target {}", program, seed, targetName(request.target))
          : fmt::format("verify {} --inputs {} --target {}", program, request.inputsDirectory,
                        targetName(request.target));
  if (!isHloFile(what)) {
    for (const Shape &shape : kernel.shapes)
      verifyCommand += " --shape " + formatShape(shape);
    verifyCommand += fmt::format(" --dtype {}", dtypeName(kernel.dtype));
    if (kernel.batch)
      verifyCommand += fmt::format(" --batch {}", kernel.batch);
    if (kernel.transposeA)
      verifyCommand += " --transpose-a";
    if (kernel.transposeB)
      verifyCommand += " --transpose-b";
    if (kernel.epilogue != "none")
      verifyCommand += " --epilogue " + kernel.epilogue;
    if (what == "attention")
      verifyCommand += fmt::format(" --heads {}", kernel.heads);
  }
  if (request.tolerance)
    verifyCommand += fmt::format(" --tolerance {:g}", *request.tolerance);
  bool gpu = request.target == Target::Gpu;
  if (gpu)
    verifyCommand += fmt::format(" --chip {} --format {} --matmul {} --precision {}", request.chip, request.format,
                                 request.matmul, request.precision);
  std::string passOptions;
  for (const std::string &entry : request.passOptions)
    passOptions += " --pass-option '" + entry + "'";
  verifyCommand += passOptions;
  if (request.inputOffset != 0 || request.inputScale != 1)
    verifyCommand += fmt::format(" --input-offset {} --input-scale {}", request.inputOffset, request.inputScale);
  std::string lower =
      gpu ? fmt::format("outline --chip {} --matmul {} --precision {}{} | lower-nvvm --chip {} --format {}{}",
                        request.chip, request.matmul, request.precision, passOptions, request.chip, request.format,
                        passOptions)
          : "lower-cpu" + passOptions;
  std::string bindings;
  for (int id : graph.inputs())
    bindings += fmt::format(" --input {0}=@{0}.npy", graph.node(id).name);
  for (const std::string &output : outputs)
    bindings += fmt::format(" --output {0}=@{0}.replayed.npy", output);
  std::string script =
      fmt::format("#!/bin/sh\n"
                  "# Replays verify's mismatch of {} (seed {}, bound {:g} on ||out - ref|| / ||ref||).\n"
                  "set -e\n"
                  "cd \"$(dirname \"$0\")\"\n"
                  "# The check itself, as verify ran it:\n"
                  "{}{} || true\n"
                  "# The stages one by one, on the inputs saved here:\n"
                  "fuse traced.mlir{} | bufferize{} | {} -o module.mlir\n"
                  "run module.mlir{}\n",
                  what, seed, tolerance, what == "-" ? "# (read from stdin, not kept) " : "", verifyCommand,
                  passOptions, passOptions, lower, bindings);
  for (const std::string &output : outputs)
    script +=
        fmt::format("verify {0}.replayed.npy {0}.expected.npy --rtol {1:g} --atol {1:g} || true\n", output, tolerance);
  return script;
}

// Checks one kernel or HLO module; with --save, its inputs, outputs and
// reference outputs join `saved` (written all together, or not at all);
// with --repro, a failing one leaves what replays it in `repro`.
std::vector<OutputCheck> checkKernel(const std::string &what, const fe::Program &program, double tolerance,
                                     const KernelVerifyRequest &request, uint64_t seed, std::string &inputText,
                                     OutputFiles &saved, OutputFiles &repro) {
  const fe::Graph &graph = *program.functions.front();
  std::string name = graph.name();
  checkFitsInMemory(graph, labelFor(what));
  inputText = describeInputs(graph);
  auto inputs = request.inputsDirectory.empty() ? randomInputs(graph, seed, request.inputOffset, request.inputScale)
                                                : givenInputs(graph, request.inputsDirectory);

  ref::Values referenceInputs;
  for (auto &[input, tensor] : inputs)
    referenceInputs[input] = ref::fromHost(tensor);
  ref::Values expected = ref::evaluate(graph, referenceInputs, ref::Rounding::ConvertsOnly);

  CompileOptions compile;
  compile.target = request.target;
  compile.chip = request.chip;
  compile.format = request.format;
  compile.matmul = request.matmul;
  compile.precision = request.precision;
  compile.passOptions = request.passOptions;
  ExecutionOptions execution;
  execution.memory = request.managed ? gpu::Memory::Managed : gpu::Memory::Device;
  Executable executable = Executable::load(compileProgram(program, labelFor(what) + ".mlir", compile), execution);
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
    HostTensor poison = poisonedTensor(spec.dtype, spec.shape);
    buffers.emplace_back(executable.target(), poison.byteSize(), execution.memory);
    buffers.back().upload(poison.data(), poison.byteSize());
  }
  for (auto &buffer : buffers)
    pointers.push_back(buffer.data());
  executable.enqueue(entry, pointers);

  std::string saveTo = request.saveDirectory.empty() ? "" : request.saveDirectory + "/" + labelFor(what);
  if (!saveTo.empty()) {
    saved.createDirectories(saveTo);
    for (auto &[input, tensor] : inputs)
      saved.write(saveTo + "/" + input + ".npy", serializeNpy(tensor));
  }
  std::vector<OutputCheck> checks;
  std::vector<std::pair<HostTensor, HostTensor>> results; // actual, reference
  std::optional<ref::Values> inF32Arithmetic;             // evaluated once an output misses the bound
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    const TensorSpec &spec = entry.outputs[i];
    HostTensor actual(spec.dtype, spec.shape);
    buffers[inputs.size() + i].download(actual.data(), actual.byteSize());
    HostTensor reference = ref::toHost(*expected.at(spec.name), DType::f64);
    if (!saveTo.empty()) {
      saved.write(saveTo + "/" + spec.name + ".npy", serializeNpy(actual));
      saved.write(saveTo + "/" + spec.name + ".reference.npy", serializeNpy(reference));
    }
    results.push_back({actual, reference});
    // NaN where the reference has NaN (a log or sqrt of a negative input) is
    // a match; an element never written still holds the poison.
    Comparison comparison = compareTensors(actual, reference, 0.0, 0.0, /*equalNan=*/true);
    int64_t unwritten = countPoisoned(actual) - poisonValuesExpected(actual, reference);
    bool pass = unwritten == 0 && std::isfinite(comparison.relativeL2) && comparison.relativeL2 < tolerance;
    double f32ArithmeticError = -1;
    if (!pass && !request.tolerance && unwritten == 0 && std::isfinite(comparison.relativeL2)) {
      if (!inF32Arithmetic)
        inF32Arithmetic = ref::evaluate(graph, referenceInputs, ref::Rounding::F32Arithmetic);
      HostTensor rounded = ref::toHost(*inF32Arithmetic->at(spec.name), DType::f64);
      f32ArithmeticError = compareTensors(rounded, reference, 0.0, 0.0, /*equalNan=*/true).relativeL2;
      pass = std::isfinite(f32ArithmeticError) &&
             comparison.relativeL2 < tolerance + kF32ArithmeticErrorFactor * f32ArithmeticError;
    }
    checks.push_back({spec.name, comparison.relativeL2, comparison.maxAbsError, unwritten, pass, f32ArithmeticError});
  }
  // The given outputs, compared after the reference's rows: the program must
  // agree with them as closely as with the float64 reference.
  for (size_t i = 0; i < entry.outputs.size() && !request.inputsDirectory.empty(); ++i) {
    std::string path = fmt::format("{}/out{}.npy", request.inputsDirectory, i);
    if (!std::filesystem::exists(path))
      continue;
    const TensorSpec &spec = entry.outputs[i];
    HostTensor given = readNpy(path);
    if (given.shape() != spec.shape)
      fail("--inputs: {} is {}, but output {} ({}) is {}", path, shapeText(given.dtype(), given.shape()), i, spec.name,
           shapeText(spec.dtype, spec.shape));
    Comparison comparison =
        compareTensors(results[i].first, given.convertedTo(DType::f64), 0.0, 0.0, /*equalNan=*/true);
    bool pass = std::isfinite(comparison.relativeL2) && comparison.relativeL2 < tolerance;
    checks.push_back(
        {fmt::format("{}=out{}.npy", spec.name, i), comparison.relativeL2, comparison.maxAbsError, 0, pass});
  }
  bool failed = std::any_of(checks.begin(), checks.end(), [](const OutputCheck &check) { return !check.pass; });
  if (failed && !request.reproDirectory.empty()) {
    std::string to = request.reproDirectory + "/" + labelFor(what);
    repro.createDirectories(to);
    repro.write(to + "/traced.mlir", fe::emitMlir(program));
    if (isHloFile(what) && what != "-")
      repro.write(to + "/" + std::filesystem::path(what).filename().string(), readInput(what));
    for (auto &[input, tensor] : inputs)
      repro.write(to + "/" + input + ".npy", serializeNpy(tensor));
    std::vector<std::string> outputs;
    for (size_t i = 0; i < entry.outputs.size(); ++i) {
      const std::string &output = entry.outputs[i].name;
      outputs.push_back(output);
      repro.write(to + "/" + output + ".actual.npy", serializeNpy(results[i].first));
      repro.write(to + "/" + output + ".expected.npy", serializeNpy(results[i].second));
    }
    repro.write(to + "/replay.sh", replayScript(what, graph, request, seed, tolerance, outputs));
  }
  return checks;
}

} // namespace

VerificationBound verificationBound(const fe::Graph &graph, const KernelVerifyRequest &request) {
  if (request.tolerance)
    return {*request.tolerance, ""};
  bool bf16 = false, f16 = false, f32 = false;
  for (const fe::Node &node : graph.nodes()) {
    bf16 |= node.dtype == DType::bf16;
    f16 |= node.dtype == DType::f16;
    f32 |= node.dtype == DType::f32 && node.kind != fe::OpKind::Constant;
  }
  if (bf16 || f16) {
    DType narrowest = bf16 ? DType::bf16 : DType::f16;
    int bits = significandBits(narrowest);
    int64_t terms = longestReduction(graph);
    double tolerance = kStoredRoundings * unitRoundoff(narrowest) + double(terms) * unitRoundoff(DType::f32);
    return {tolerance,
            fmt::format("{}: {} x 2^-{} + {} x 2^-24", bf16 ? "bf16" : "f16", kStoredRoundings, bits, terms)};
  }
  if (request.precision == "tf32" && (f32 || request.options.dtype == DType::f32))
    return {kTf32Tolerance, "tf32"};
  return {f32 ? kF32Tolerance : kF64Tolerance, ""};
}

bool verifyKernels(const KernelVerifyRequest &request) {
  checkPrecision(request.precision);
  if (request.precision == "tf32" && (request.target != Target::Gpu || request.options.dtype != DType::f32))
    fail("--precision tf32 applies to f32 matmuls on the GPU");
  KernelVerifyRequest resolved = request;
  if (request.target == Target::Gpu)
    resolved.matmul = resolveMatmulChoice(request.matmul);
  std::vector<std::string> kernels;
  for (const std::string &kernel : request.kernels) {
    if (kernel == "all")
      for (auto &unit : unitKernels())
        kernels.push_back(unit.name);
    else
      kernels.push_back(kernel);
  }
  bool anyHlo = std::any_of(kernels.begin(), kernels.end(), isHloFile);
  if (!request.inputsDirectory.empty() && kernels.size() != 1)
    fail("--inputs gives the inputs of one program, not of {}", kernels.size());
  uint64_t seed = request.seed ? *request.seed : std::random_device{}();
  std::string what = kernels.size() == 1 ? labelFor(kernels[0])
                                         : fmt::format("{} {}", kernels.size(), anyHlo ? "programs" : "kernels");
  // An HLO module's inputs have the types it declares.
  std::string inputKind = anyHlo ? "" : std::string(dtypeName(request.options.dtype)) + " ";
  std::string where = request.target == Target::Gpu
                          ? " (" + request.chip + ", " + describeMatmuls(resolved.matmul, request.precision) + ")"
                          : "";
  std::vector<fe::Program> programs;
  std::vector<VerificationBound> bounds;
  for (const std::string &kernel : kernels) {
    programs.push_back(programFor(kernel, request.options));
    bounds.push_back(verificationBound(*programs.back().functions.front(), request));
  }
  // One bound for all is said once; programs with bounds of their own get
  // a column.
  bool oneBound = std::all_of(bounds.begin(), bounds.end(), [&](const VerificationBound &bound) {
    return bound.tolerance == bounds.front().tolerance && bound.derivation == bounds.front().derivation;
  });
  auto describe = [](const VerificationBound &bound) {
    return bound.derivation.empty() ? fmt::format("{:g}", bound.tolerance)
                                    : fmt::format("{:.3g} ({})", bound.tolerance, bound.derivation);
  };
  std::string source = request.inputsDirectory.empty() ? fmt::format("{}inputs from seed {}", inputKind, seed)
                                                       : fmt::format("inputs from {}", request.inputsDirectory);
  std::cout << fmt::format("verify: {} on the {}{}, {}, float64 reference, tolerance {}\n", what,
                           targetName(request.target), where, source,
                           oneBound ? describe(bounds.front()) : "per program (the bound column)");
  size_t width = 10;
  for (const std::string &kernel : kernels)
    width = std::max(width, labelFor(kernel).size());
  std::cout << fmt::format("{:<{}} {:<34} {:<6} {:>12} {:>12} {:>9}  {}{}\n", "kernel", width, "inputs", "output",
                           "rel error", "max abs err", "unwritten", oneBound ? "" : "bound      ", "result");
  bool allPass = true;
  OutputFiles saved, repro;
  std::vector<std::string> failed;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const std::string &kernel = kernels[k];
    std::string inputs;
    for (const OutputCheck &check :
         checkKernel(kernel, programs[k], bounds[k].tolerance, resolved, seed, inputs, saved, repro)) {
      allPass &= check.pass;
      if (!check.pass && (failed.empty() || failed.back() != labelFor(kernel)))
        failed.push_back(labelFor(kernel));
      std::cout << fmt::format("{:<{}} {:<34} {:<6} {:>12.3e} {:>12.3e} {:>9}  {}{}\n", labelFor(kernel), width, inputs,
                               check.output, check.relativeError, check.maxAbsError, check.unwritten,
                               oneBound ? "" : fmt::format("{:<11.3g}", bounds[k].tolerance),
                               check.pass ? "PASS" : "FAIL");
      if (check.f32ArithmeticError >= 0)
        std::cout << fmt::format("  {} {}: past the bound; the reference in f32 arithmetic is {:.3e} off "
                                 "(an ill-conditioned output), so the bound is {:.3g} + {:g} x that\n",
                                 labelFor(kernel), check.output, check.f32ArithmeticError, bounds[k].tolerance,
                                 kF32ArithmeticErrorFactor);
    }
  }
  saved.commit();
  repro.commit();
  if (!request.reproDirectory.empty())
    for (const std::string &label : failed)
      std::cout << fmt::format("to replay {}: sh {}/{}/replay.sh\n", label, request.reproDirectory, label);
  std::cout << (allPass ? "PASS\n" : "FAIL\n");
  return allPass;
}

} // namespace mlpipe
