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

// What both strategies share: weights on the target, one compiled module
// and one set of activation buffers per padded length.
class RunnerBase : public Gpt2Runner {
public:
  RunnerBase(const Gpt2Config &config, std::shared_ptr<const TargetWeights> weights, const Gpt2RunOptions &options)
      : config_(config), options_(options), weights_(std::move(weights)) {
    if (weights_->target() != options.compile.target)
      fail("the weights were uploaded for the {}, not the {}", targetName(weights_->target()),
           targetName(options.compile.target));
    timing_.uploadMs = weights_->uploadMs();
  }

  void prepare(int64_t tokens) override { compiled(paddedLength(tokens, config_)); }

  // Compiles on first use of a length (timed as compile), then runs the
  // strategy's pass (timed as run).
  ForwardResult forward(const std::vector<int32_t> &tokens, bool everyRow, bool capture) final {
    int64_t count = static_cast<int64_t>(tokens.size()), length = paddedLength(count, config_);
    Compiled &module = compiled(length);
    auto start = std::chrono::steady_clock::now();
    ForwardResult result = run(module, tokens, length, everyRow, capture);
    timing_.runMs += millisecondsSince(start);
    ++timing_.forwards;
    return result;
  }

protected:
  struct Compiled {
    Executable executable;
    std::map<std::string, TargetBuffer> activations; // by name, per length
  };

  virtual ForwardResult run(Compiled &module, const std::vector<int32_t> &tokens, int64_t length, bool everyRow,
                            bool capture) = 0;

  Compiled &compiled(int64_t length) {
    auto found = modules_.find(length);
    if (found != modules_.end())
      return found->second;
    auto start = std::chrono::steady_clock::now();
    fe::Program program = traceGpt2(config_, options_.mode, length);
    std::string name = fmt::format("gpt2-{}-{}-L{}C{}H{}V{}", options_.mode == Gpt2Mode::Fused ? "fused" : "sublayer",
                                   length, config_.nLayer, config_.nEmbd, config_.nHead, config_.vocabSize);
    Executable executable = Executable::load(compileProgram(program, name, options_.compile));
    timing_.compileMs += millisecondsSince(start);
    timing_.compiledLengths.push_back(length);
    return modules_.emplace(length, Compiled{std::move(executable), {}}).first->second;
  }

  void *activation(Compiled &module, const std::string &name, const Shape &shape, DType dtype) {
    auto found = module.activations.find(name);
    if (found == module.activations.end())
      found = module.activations
                  .emplace(name, TargetBuffer(options_.compile.target, static_cast<size_t>(byteSize(shape, dtype))))
                  .first;
    return found->second.data();
  }

  // The ids, padded with token 0 up to the compiled length (the causal mask
  // keeps the padding from touching the real positions).
  void *ids(Compiled &module, const std::vector<int32_t> &tokens, int64_t length) {
    auto *buffer = static_cast<int32_t *>(activation(module, "ids", {length}, DType::i32));
    std::memset(buffer, 0, static_cast<size_t>(length) * sizeof(int32_t));
    std::memcpy(buffer, tokens.data(), tokens.size() * sizeof(int32_t));
    return buffer;
  }

  // Rows [first, first + rows) of a [length, width] f32 buffer.
  static HostTensor rowsOf(const void *buffer, int64_t first, int64_t rows, int64_t width) {
    HostTensor tensor(DType::f32, {rows, width});
    std::memcpy(tensor.data(), static_cast<const float *>(buffer) + first * width, tensor.byteSize());
    return tensor;
  }

  HostTensor logitsOf(const void *buffer, int64_t tokens, bool everyRow) const {
    return everyRow ? rowsOf(buffer, 0, tokens, config_.vocabSize) : rowsOf(buffer, tokens - 1, 1, config_.vocabSize);
  }

  // Calls `entry` with inputs bound by name: activations first, then weights.
  void call(Compiled &module, const std::string &entryName, const std::map<std::string, void *> &bound,
            const std::string &weightPrefix) {
    const EntrySignature &entry = module.executable.entry(entryName);
    std::vector<void *> pointers;
    for (const TensorSpec &spec : entry.inputs) {
      auto found = bound.find(spec.name);
      pointers.push_back(found != bound.end() ? found->second : (*weights_)[weightPrefix + spec.name]);
    }
    for (const TensorSpec &spec : entry.outputs)
      pointers.push_back(bound.at(spec.name + ":out"));
    module.executable.call(entry, pointers);
  }

  Gpt2Config config_;
  Gpt2RunOptions options_;
  std::shared_ptr<const TargetWeights> weights_;
  std::map<int64_t, Compiled> modules_;
};

class FusedRunner final : public RunnerBase {
public:
  using RunnerBase::RunnerBase;

protected:
  ForwardResult run(Compiled &module, const std::vector<int32_t> &tokens, int64_t length, bool everyRow,
                    bool /*capture*/) override {
    void *logits = activation(module, "logits", {length, config_.vocabSize}, DType::f32);
    call(module, "gpt2", {{"ids", ids(module, tokens, length)}, {"logits:out", logits}}, "");
    return {logitsOf(logits, static_cast<int64_t>(tokens.size()), everyRow), {}};
  }
};

class SublayerRunner final : public RunnerBase {
public:
  using RunnerBase::RunnerBase;

protected:
  ForwardResult run(Compiled &module, const std::vector<int32_t> &tokens, int64_t length, bool everyRow,
                    bool capture) override {
    int64_t count = static_cast<int64_t>(tokens.size());
    Shape residual{length, config_.nEmbd};
    // The residual stream alternates between two buffers on the target.
    void *x = activation(module, "x0", residual, DType::f32);
    void *y = activation(module, "x1", residual, DType::f32);
    void *logits = activation(module, "logits", {length, config_.vocabSize}, DType::f32);
    ForwardResult result;
    call(module, "embed", {{"ids", ids(module, tokens, length)}, {"x:out", x}}, "");
    if (capture)
      result.captured.push_back(rowsOf(x, 0, count, config_.nEmbd));
    for (int64_t block = 0; block < config_.nLayer; ++block) {
      std::string prefix = "h." + std::to_string(block) + ".";
      call(module, "attend", {{"x", x}, {"x:out", y}}, prefix);
      call(module, "feedforward", {{"x", y}, {"x:out", x}}, prefix);
      if (capture)
        result.captured.push_back(rowsOf(x, 0, count, config_.nEmbd));
    }
    call(module, "project", {{"x", x}, {"logits:out", logits}}, "");
    result.logits = logitsOf(logits, count, everyRow);
    return result;
  }
};

} // namespace

std::shared_ptr<const TargetWeights> TargetWeights::upload(const Gpt2Weights &weights, Target target) {
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<TargetWeights> uploaded(new TargetWeights);
  uploaded->target_ = target;
  for (auto &[name, tensor] : weights.tensors()) {
    TargetBuffer buffer(target, tensor.byteSize());
    std::memcpy(buffer.data(), tensor.data(), tensor.byteSize());
    if (target == Target::Gpu)
      gpu::prefetchToDevice(buffer.data(), tensor.byteSize());
    uploaded->buffers_.emplace(name, std::move(buffer));
  }
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
  return makeGpt2Runner(weights.config(), TargetWeights::upload(weights, options.compile.target), options);
}

} // namespace mlpipe
