#include "driver/generate.h"

#include "driver/matmul_choice.h"
#include "models/tokenizer.h"
#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <iostream>

namespace mlpipe {

std::vector<int32_t> promptTokens(const std::string &prompt, int64_t continuation, const Gpt2Config &config,
                                  const Gpt2Tokenizer &tokenizer) {
  if (prompt.empty())
    fail("the prompt is empty: give some text to continue");
  std::vector<int32_t> ids = tokenizer.encode(prompt);
  int64_t count = static_cast<int64_t>(ids.size());
  if (count > config.nCtx)
    fail("the prompt is {} tokens, longer than the model's context of {}", count, config.nCtx);
  if (count + continuation > config.nCtx)
    fail("the prompt's {} tokens and {} more would not fit the model's context of {}", count, continuation,
         config.nCtx);
  for (int32_t id : ids)
    if (id >= config.vocabSize)
      fail("the prompt has token {}, outside the model's vocabulary of {}", id, config.vocabSize);
  return ids;
}

int32_t greedyToken(const HostTensor &logits, int64_t row) {
  int64_t width = logits.shape().back();
  const float *values = logits.as<float>() + row * width;
  int64_t best = 0;
  for (int64_t i = 1; i < width; ++i)
    if (values[i] > values[best])
      best = i;
  return static_cast<int32_t>(best);
}

void generate(const GenerateRequest &request, std::ostream &out) {
  if (request.tokens < 0)
    fail("--tokens must not be negative");
  auto start = std::chrono::steady_clock::now();
  Gpt2Weights weights = loadGpt2Weights(request.weights, request.config, request.seed);
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::fromDirectory(Gpt2Tokenizer::defaultDirectory());
  std::vector<int32_t> tokens = promptTokens(request.prompt, request.tokens, weights.config(), tokenizer);
  if (auto [tensor, count] = weights.nonFiniteValues(); count > 0)
    std::cerr << fmt::format("generate: warning: {} holds {} NaN or infinite value{}: the tokens below mean nothing\n",
                             tensor, count, count == 1 ? "" : "s");
  double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, request.run);
  out << request.prompt << std::flush;
  for (int64_t step = 0; step < request.tokens; ++step) {
    ForwardResult result;
    if (!request.kvCache)
      result = runner->forward(tokens, /*everyRow=*/false, /*capture=*/false);
    else if (step == 0)
      result = runner->prefill(tokens, /*everyRow=*/false, /*capture=*/false);
    else
      result = runner->decodeStep(tokens.back(), /*capture=*/false);
    int32_t next = greedyToken(result.logits, 0);
    tokens.push_back(next);
    out << tokenizer.decodeToken(next) << std::flush;
  }
  const Gpt2Timing &timing = runner->timing();
  auto perSecond = [](double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; };
  double runMs = timing.runMs + timing.prefillMs + timing.decodeMs;
  out << "\n\n"
      << fmt::format("{} tokens, {} mode, {} on the {}{}, {}{}\n", request.tokens,
                     request.run.mode == Gpt2Mode::Fused ? "fused" : "sublayer", dtypeName(request.run.dtype),
                     targetName(request.run.compile.target),
                     request.run.compile.target == Target::Gpu
                         ? " (" + describeMatmuls(request.run.compile.matmul, request.run.compile.precision) + ")"
                         : "",
                     weights.description(), request.kvCache ? ", KV cache" : ", no cache")
      << fmt::format("  compile {:9.1f} ms  ({} program{}: {})\n", timing.compileMs, timing.compiledPrograms.size(),
                     timing.compiledPrograms.size() == 1 ? "" : "s", fmt::join(timing.compiledPrograms, ", "))
      << fmt::format("  run     {:9.1f} ms  ({:.2f} ms per token, {:.1f} tokens/s)\n", runMs,
                     request.tokens ? runMs / request.tokens : 0.0, perSecond(request.tokens, runMs));
  if (request.kvCache)
    out << fmt::format("  prefill {:9.1f} ms  ({} prompt token{}, {:.1f} tokens/s)\n", timing.prefillMs,
                       timing.prefillTokens, timing.prefillTokens == 1 ? "" : "s",
                       perSecond(timing.prefillTokens, timing.prefillMs))
        << fmt::format("  decode  {:9.1f} ms  ({} step{}, {:.2f} ms per token, {:.1f} tokens/s)\n", timing.decodeMs,
                       timing.decodeSteps, timing.decodeSteps == 1 ? "" : "s",
                       timing.decodeSteps ? timing.decodeMs / timing.decodeSteps : 0.0,
                       perSecond(timing.decodeSteps, timing.decodeMs));
  std::string converting =
      timing.convertMs > 0 ? fmt::format("converting to {} {:.1f} ms, ", dtypeName(request.run.dtype), timing.convertMs)
                           : "";
  out << fmt::format("  weights {:9.1f} ms  (loading {:.1f} ms, {}to the {} {:.1f} ms)\n", loadMs + timing.uploadMs,
                     loadMs, converting, targetName(request.run.compile.target), timing.uploadMs - timing.convertMs);
}

} // namespace mlpipe
