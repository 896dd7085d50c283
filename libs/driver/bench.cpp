#include "driver/bench.h"

#include "driver/matmul_choice.h"
#include "runtime/mgpu_runtime.h"
#include "support/error.h"
#include "support/statistics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <random>

namespace mlpipe {

void benchGpt2(const BenchRequest &request) {
  if (request.repeat <= 0 || request.warmup < 0)
    fail("--repeat must be positive and --warmup not negative");
  Gpt2Weights weights = loadGpt2Weights(request.model.weights, request.model.config, request.model.seed);
  const Gpt2Config &config = weights.config();
  Target target = request.model.run.compile.target;
  const CompileOptions &compile = request.model.run.compile;
  std::string where = target == Target::Gpu
                          ? " (" + gpu::deviceName() + ", " + describeMatmuls(compile.matmul, compile.precision) + ")"
                          : "";
  std::cout << fmt::format("bench gpt2: L={} H={} C={} V={}, {}, on the {}{}; median of {} after {} warm-up\n",
                           config.nLayer, config.nHead, config.nEmbd, config.vocabSize, weights.description(),
                           targetName(target), where, request.repeat, request.warmup);
  std::cout << fmt::format("{:<9} {:>6} {:>12} {:>12} {:>12}\n", "mode", "T", "median ms", "min ms", "compile ms");
  std::mt19937 generator(12345);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocabSize - 1));
  // Uploaded once, shared by the runner of each mode.
  std::shared_ptr<const TargetWeights> onTarget = TargetWeights::upload(weights, target);
  for (Gpt2Mode mode : request.modes) {
    Gpt2RunOptions options = request.model.run;
    options.mode = mode;
    std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(config, onTarget, options);
    for (int64_t length : request.lengths) {
      if (length > config.nCtx)
        fail("T={} is longer than the model's context of {}", length, config.nCtx);
      std::vector<int32_t> tokens(static_cast<size_t>(length));
      for (int32_t &id : tokens)
        id = token(generator);
      double compileBefore = runner->timing().compileMs;
      runner->prepare(length);
      double compileMs = runner->timing().compileMs - compileBefore;
      for (int i = 0; i < request.warmup; ++i)
        runner->forward(tokens, false, false);
      std::vector<double> times;
      for (int i = 0; i < request.repeat; ++i)
        times.push_back(timeOnTarget(target, [&] { runner->forward(tokens, false, false); }));
      std::cout << fmt::format("{:<9} {:>6} {:>12.3f} {:>12.3f} {:>12.0f}\n",
                               mode == Gpt2Mode::Fused ? "fused" : "sublayer", length, median(times),
                               *std::min_element(times.begin(), times.end()), compileMs);
    }
  }
}

} // namespace mlpipe
