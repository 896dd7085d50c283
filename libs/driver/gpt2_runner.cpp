#include "driver/gpt2_runner.h"

#include "runtime/mgpu_runtime.h"
#include "support/error.h"

#include <chrono>
#include <cstring>
#include <map>

namespace mlpipe {

namespace {

double millisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// One step of a forward: a call of an entry, or a copy on the target (a
// block's residual kept for the caller).
struct Step {
  const EntrySignature *entry = nullptr;
  std::vector<void *> buffers;
  void *copyTo = nullptr;
  const void *copyFrom = nullptr;
  size_t copyBytes = 0;
};

// What both strategies share: weights on the target, one compiled module,
// one set of activation buffers and one captured graph per padded length,
// and one stream.
class RunnerBase : public Gpt2Runner {
public:
  RunnerBase(const Gpt2Config &config, std::shared_ptr<const TargetWeights> weights, const Gpt2RunOptions &options)
      : config_(config), options_(options), weights_(std::move(weights)), stream_(options.compile.target) {
    if (weights_->target() != options.compile.target)
      fail("the weights were uploaded for the {}, not the {}", targetName(weights_->target()),
           targetName(options.compile.target));
    timing_.uploadMs = weights_->uploadMs();
  }

  void prepare(int64_t tokens) override { compiled(paddedLength(tokens, config_)); }

  void useGraphs(bool graphs) override { options_.graphs = graphs; }

  Gpt2ModuleInfo moduleInfo(int64_t tokens) override {
    Compiled &module = compiled(paddedLength(tokens, config_));
    Gpt2ModuleInfo info;
    info.arenaBytes = module.executable.arenaBytes();
    for (const EntrySignature &entry : module.executable.entries())
      info.unplannedBytes = std::max(info.unplannedBytes, entry.arena.unplannedBytes);
    for (auto &[name, buffer] : module.activations)
      info.activationBytes += static_cast<int64_t>(buffer.size());
    info.kernelCosts = module.executable.kernelCosts();
    return info;
  }

  // Compiles on first use of a length (timed as compile), then runs the
  // strategy's pass (timed as run): the ids go up, the steps are queued on
  // the runner's stream (or replayed as a graph), and the results come down.
  ForwardResult forward(const std::vector<int32_t> &tokens, bool everyRow, bool capture) final {
    int64_t count = static_cast<int64_t>(tokens.size()), length = paddedLength(count, config_);
    Compiled &module = compiled(length);
    auto start = std::chrono::steady_clock::now();
    TargetStream::Scope current(stream_);
    uploadIds(module, tokens, length);
    std::vector<Step> steps = plan(module, length, capture);
    std::vector<void *> used;
    for (const Step &step : steps) {
      used.insert(used.end(), step.buffers.begin(), step.buffers.end());
      used.push_back(step.copyTo);
    }
    module.replay.run(
        stream_, module.executable, used, [&] { enqueue(module, steps); }, options_.graphs);
    timing_.graphCaptures += module.replay.captures() - module.capturesSeen;
    module.capturesSeen = module.replay.captures();
    ForwardResult result = read(module, count, everyRow, capture);
    timing_.runMs += millisecondsSince(start);
    ++timing_.forwards;
    return result;
  }

protected:
  struct Compiled {
    Executable executable;
    std::map<std::string, TargetBuffer> activations; // by name, per length
    CallReplay replay;
    int capturesSeen = 0;
  };

  // The steps of one forward, with every buffer bound.
  virtual std::vector<Step> plan(Compiled &module, int64_t length, bool capture) = 0;
  // The logits (and with `capture` the kept residuals) back to the host.
  virtual ForwardResult read(Compiled &module, int64_t tokens, bool everyRow, bool capture) = 0;

  Compiled &compiled(int64_t length) {
    auto found = modules_.find(length);
    if (found != modules_.end())
      return found->second;
    auto start = std::chrono::steady_clock::now();
    CompileTimings stages;
    fe::Program program = traceGpt2(config_, options_.mode, length);
    stages.traceMs += millisecondsSince(start);
    std::string name = fmt::format("gpt2-{}-{}-L{}C{}H{}V{}", options_.mode == Gpt2Mode::Fused ? "fused" : "sublayer",
                                   length, config_.nLayer, config_.nEmbd, config_.nHead, config_.vocabSize);
    MlirModule lowered = compileProgram(program, name, options_.compile, &stages);
    auto loadStart = std::chrono::steady_clock::now();
    Executable executable = Executable::load(std::move(lowered), options_.execution);
    stages.loadMs += millisecondsSince(loadStart);
    timing_.stages.add(stages);
    timing_.compileMs += millisecondsSince(start);
    timing_.compiledLengths.push_back(length);
    return modules_.emplace(length, Compiled{std::move(executable), {}, {}, 0}).first->second;
  }

  TargetBuffer &activation(Compiled &module, const std::string &name, const Shape &shape, DType dtype) {
    auto found = module.activations.find(name);
    if (found == module.activations.end())
      found = module.activations
                  .emplace(name, TargetBuffer(options_.compile.target, static_cast<size_t>(byteSize(shape, dtype)),
                                              options_.execution.memory))
                  .first;
    return found->second;
  }

  // The ids, padded with token 0 up to the compiled length (the causal mask
  // keeps the padding from touching the real positions).
  void uploadIds(Compiled &module, const std::vector<int32_t> &tokens, int64_t length) {
    std::vector<int32_t> padded(static_cast<size_t>(length), 0);
    std::copy(tokens.begin(), tokens.end(), padded.begin());
    activation(module, "ids", {length}, DType::i32).upload(padded.data(), padded.size() * sizeof(int32_t));
  }

  void *ids(Compiled &module, int64_t length) { return activation(module, "ids", {length}, DType::i32).data(); }

  // Rows [first, first + rows) of a [length, width] f32 buffer.
  static HostTensor rowsOf(const TargetBuffer &buffer, int64_t first, int64_t rows, int64_t width) {
    HostTensor tensor(DType::f32, {rows, width});
    buffer.download(tensor.data(), tensor.byteSize(), static_cast<size_t>(first * width) * sizeof(float));
    return tensor;
  }

  HostTensor logitsOf(const TargetBuffer &buffer, int64_t tokens, bool everyRow) const {
    return everyRow ? rowsOf(buffer, 0, tokens, config_.vocabSize) : rowsOf(buffer, tokens - 1, 1, config_.vocabSize);
  }

  // A call of `entryName` with inputs bound by name: activations first,
  // then weights.
  Step call(Compiled &module, const std::string &entryName, const std::map<std::string, void *> &bound,
            const std::string &weightPrefix) {
    Step step;
    step.entry = &module.executable.entry(entryName);
    for (const TensorSpec &spec : step.entry->inputs) {
      auto found = bound.find(spec.name);
      step.buffers.push_back(found != bound.end() ? found->second : (*weights_)[weightPrefix + spec.name]);
    }
    for (const TensorSpec &spec : step.entry->outputs)
      step.buffers.push_back(bound.at(spec.name + ":out"));
    return step;
  }

  void enqueue(Compiled &module, const std::vector<Step> &steps) {
    for (const Step &step : steps) {
      if (step.entry)
        module.executable.enqueue(*step.entry, step.buffers);
      else if (options_.compile.target == Target::Gpu)
        gpu::copyOnDevice(step.copyTo, step.copyFrom, step.copyBytes);
      else
        std::memcpy(step.copyTo, step.copyFrom, step.copyBytes);
    }
  }

  Gpt2Config config_;
  Gpt2RunOptions options_;
  std::shared_ptr<const TargetWeights> weights_;
  TargetStream stream_;
  std::map<int64_t, Compiled> modules_;
};

class FusedRunner final : public RunnerBase {
public:
  using RunnerBase::RunnerBase;

protected:
  std::vector<Step> plan(Compiled &module, int64_t length, bool /*capture*/) override {
    void *logits = activation(module, "logits", {length, config_.vocabSize}, DType::f32).data();
    return {call(module, "gpt2", {{"ids", ids(module, length)}, {"logits:out", logits}}, "")};
  }

  ForwardResult read(Compiled &module, int64_t tokens, bool everyRow, bool /*capture*/) override {
    return {logitsOf(module.activations.at("logits"), tokens, everyRow), {}};
  }
};

class SublayerRunner final : public RunnerBase {
public:
  using RunnerBase::RunnerBase;

protected:
  std::vector<Step> plan(Compiled &module, int64_t length, bool capture) override {
    Shape residual{length, config_.nEmbd};
    // The residual stream alternates between two buffers on the target;
    // with capture, the embedding and each block's residual are copied, on
    // the target, into one buffer read back at the end.
    void *x = activation(module, "x0", residual, DType::f32).data();
    void *y = activation(module, "x1", residual, DType::f32).data();
    void *logits = activation(module, "logits", {length, config_.vocabSize}, DType::f32).data();
    size_t residualBytes = static_cast<size_t>(byteSize(residual, DType::f32));
    char *kept = capture
                     ? static_cast<char *>(
                           activation(module, "kept", {config_.nLayer + 1, length, config_.nEmbd}, DType::f32).data())
                     : nullptr;
    std::vector<Step> steps;
    auto keep = [&](int64_t index) {
      if (capture)
        steps.push_back({nullptr, {}, kept + index * residualBytes, x, residualBytes});
    };
    steps.push_back(call(module, "embed", {{"ids", ids(module, length)}, {"x:out", x}}, ""));
    keep(0);
    for (int64_t block = 0; block < config_.nLayer; ++block) {
      std::string prefix = "h." + std::to_string(block) + ".";
      steps.push_back(call(module, "attend", {{"x", x}, {"x:out", y}}, prefix));
      steps.push_back(call(module, "feedforward", {{"x", y}, {"x:out", x}}, prefix));
      keep(block + 1);
    }
    steps.push_back(call(module, "project", {{"x", x}, {"logits:out", logits}}, ""));
    return steps;
  }

  ForwardResult read(Compiled &module, int64_t tokens, bool everyRow, bool capture) override {
    ForwardResult result;
    result.logits = logitsOf(module.activations.at("logits"), tokens, everyRow);
    if (capture) {
      int64_t length = paddedLength(tokens, config_);
      const TargetBuffer &kept = module.activations.at("kept");
      for (int64_t index = 0; index <= config_.nLayer; ++index)
        result.captured.push_back(rowsOf(kept, index * length, tokens, config_.nEmbd));
    }
    return result;
  }
};

} // namespace

std::shared_ptr<const TargetWeights> TargetWeights::upload(const Gpt2Weights &weights, Target target,
                                                           gpu::Memory memory) {
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<TargetWeights> uploaded(new TargetWeights);
  uploaded->target_ = target;
  for (auto &[name, tensor] : weights.tensors()) {
    TargetBuffer buffer(target, tensor.byteSize(), memory);
    buffer.upload(tensor.data(), tensor.byteSize());
    if (target == Target::Gpu && memory == gpu::Memory::Managed)
      gpu::prefetchToDevice(buffer.data(), tensor.byteSize());
    uploaded->buffers_.emplace(name, std::move(buffer));
  }
  if (target == Target::Gpu)
    gpu::synchronize();
  uploaded->uploadMs_ = millisecondsSince(start);
  return uploaded;
}

void *TargetWeights::operator[](const std::string &name) const {
  auto found = buffers_.find(name);
  if (found == buffers_.end())
    fail("no weight named '{}'", name);
  return found->second.data();
}

std::unique_ptr<Gpt2Runner> makeGpt2Runner(const Gpt2Config &config, std::shared_ptr<const TargetWeights> weights,
                                           const Gpt2RunOptions &options) {
  if (options.mode == Gpt2Mode::Fused)
    return std::make_unique<FusedRunner>(config, std::move(weights), options);
  return std::make_unique<SublayerRunner>(config, std::move(weights), options);
}

std::unique_ptr<Gpt2Runner> makeGpt2Runner(const Gpt2Weights &weights, const Gpt2RunOptions &options) {
  return makeGpt2Runner(weights.config(),
                        TargetWeights::upload(weights, options.compile.target, options.execution.memory), options);
}

} // namespace mlpipe
