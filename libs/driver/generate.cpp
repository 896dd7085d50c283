#include "driver/generate.h"

#include "driver/matmul_choice.h"
#include "models/tokenizer.h"
#include "support/error.h"
#include "support/output_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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

namespace {

double perSecond(double count, double ms) { return ms > 0 ? count * 1000.0 / ms : 0.0; }

// "sublayer mode, f32 on the CPU, synthetic weights": what ran, for the
// report's first line.
std::string describeRun(const GenerateRequest &request, const Gpt2Weights &weights) {
  return fmt::format("{} mode, {} on the {}{}, {}", request.run.mode == Gpt2Mode::Fused ? "fused" : "sublayer",
                     dtypeName(request.run.dtype), targetName(request.run.compile.target),
                     request.run.compile.target == Target::Gpu
                         ? " (" + describeMatmuls(request.run.compile.matmul, request.run.compile.precision) + ")"
                         : "",
                     weights.description());
}

std::string compileLine(const Gpt2Timing &timing) {
  return fmt::format("  compile {:9.1f} ms  ({} program{}: {})\n", timing.compileMs, timing.compiledPrograms.size(),
                     timing.compiledPrograms.size() == 1 ? "" : "s", fmt::join(timing.compiledPrograms, ", "));
}

std::string weightsLine(const GenerateRequest &request, const Gpt2Timing &timing, double loadMs) {
  std::string converting =
      timing.convertMs > 0 ? fmt::format("converting to {} {:.1f} ms, ", dtypeName(request.run.dtype), timing.convertMs)
                           : "";
  return fmt::format("  weights {:9.1f} ms  (loading {:.1f} ms, {}to the {} {:.1f} ms)\n", loadMs + timing.uploadMs,
                     loadMs, converting, targetName(request.run.compile.target), timing.uploadMs - timing.convertMs);
}

// How the decode steps ran: chained on the target, and on the GPU how many
// to a graph (Gpt2RunOptions::chainedSteps).
std::string describeChaining(const Gpt2RunOptions &run) {
  if (run.compile.target != Target::Gpu)
    return fmt::format("chained on the {}", targetName(run.compile.target));
  return run.graphs ? fmt::format("chained on the gpu, {} a graph", run.chainedSteps)
                    : std::string("chained on the gpu, direct launches");
}

void warnIfNotFinite(const Gpt2Weights &weights) {
  if (auto [tensor, count] = weights.nonFiniteValues(); count > 0)
    std::cerr << fmt::format("generate: warning: {} holds {} NaN or infinite value{}: the tokens below mean nothing\n",
                             tensor, count, count == 1 ? "" : "s");
}

} // namespace

std::vector<std::string> readPrompts(const std::string &path) {
  std::string text = readInput(path);
  std::vector<std::string> prompts;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty())
      fail("{}:{}: the line is empty: give one prompt a line, with no empty lines", path, prompts.size() + 1);
    prompts.push_back(std::move(line));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  if (prompts.empty())
    fail("{} holds no prompts: give one prompt a line", path);
  return prompts;
}

void generate(const GenerateRequest &request, std::ostream &out) {
  if (request.tokens < 0)
    fail("--tokens must not be negative");
  auto start = std::chrono::steady_clock::now();
  Gpt2Weights weights = loadGpt2Weights(request.weights, request.config, request.seed);
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::fromDirectory(Gpt2Tokenizer::defaultDirectory());
  std::vector<int32_t> tokens = promptTokens(request.prompt, request.tokens, weights.config(), tokenizer);
  warnIfNotFinite(weights);
  double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, request.run);
  out << request.prompt << std::flush;
  auto append = [&](int32_t next) {
    tokens.push_back(next);
    out << tokenizer.decodeToken(next) << std::flush;
  };
  if (!request.kvCache) {
    for (int64_t step = 0; step < request.tokens; ++step)
      append(greedyToken(runner->forward(tokens, /*everyRow=*/false, /*capture=*/false).logits, 0));
  } else if (request.tokens > 0) {
    // The prompt into a batch of one, then every later token chained on the
    // target, each step's greedy choice the next step's token: the host
    // takes the tokens a graph of steps at a time and prints them.
    append(greedyToken(runner->prefillSlot(1, 0, tokens).logits, 0));
    if (request.tokens > 1)
      runner->decodeGreedy({tokens.back()}, {static_cast<int32_t>(tokens.size()) - 1}, request.tokens - 1,
                           [&](int64_t, const std::vector<int32_t> &chosen) { append(chosen.front()); });
  }
  const Gpt2Timing &timing = runner->timing();
  double runMs = timing.runMs + timing.prefillMs + timing.batchDecodeMs;
  out << "\n\n"
      << fmt::format("{} tokens, {}{}\n", request.tokens, describeRun(request, weights),
                     request.kvCache ? ", KV cache" : ", no cache")
      << compileLine(timing)
      << fmt::format("  run     {:9.1f} ms  ({:.2f} ms per token, {:.1f} tokens/s)\n", runMs,
                     request.tokens ? runMs / request.tokens : 0.0, perSecond(request.tokens, runMs));
  if (request.kvCache)
    out << fmt::format("  prefill {:9.1f} ms  ({} prompt token{}, {:.1f} tokens/s)\n", timing.prefillMs,
                       timing.prefillTokens, timing.prefillTokens == 1 ? "" : "s",
                       perSecond(timing.prefillTokens, timing.prefillMs))
        << fmt::format("  decode  {:9.1f} ms  ({} step{}, {}, {:.2f} ms per token, {:.1f} tokens/s)\n",
                       timing.batchDecodeMs, timing.batchDecodeSteps, timing.batchDecodeSteps == 1 ? "" : "s",
                       describeChaining(request.run),
                       timing.batchDecodeSteps ? timing.batchDecodeMs / timing.batchDecodeSteps : 0.0,
                       perSecond(timing.batchDecodeSteps, timing.batchDecodeMs));
  out << weightsLine(request, timing, loadMs);
}

void generateBatched(const GenerateRequest &request, std::ostream &out) {
  if (request.tokens < 0)
    fail("--tokens must not be negative");
  if (request.batch < 0)
    fail("--batch must be at least 1, not {}", request.batch);
  if (!request.kvCache)
    fail("--prompts decodes with the KV cache: --no-cache does not apply");
  std::vector<std::string> prompts = readPrompts(request.promptsFile);
  auto start = std::chrono::steady_clock::now();
  Gpt2Weights weights = loadGpt2Weights(request.weights, request.config, request.seed);
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::fromDirectory(Gpt2Tokenizer::defaultDirectory());
  std::vector<std::vector<int32_t>> sequences;
  for (size_t line = 0; line < prompts.size(); ++line) {
    try {
      sequences.push_back(promptTokens(prompts[line], request.tokens, weights.config(), tokenizer));
    } catch (const Error &error) {
      fail("{}:{}: {}", request.promptsFile, line + 1, error.what());
    }
  }
  warnIfNotFinite(weights);
  double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  const int64_t count = static_cast<int64_t>(prompts.size());
  const int64_t batch = std::min(count, request.batch > 0 ? request.batch : kDefaultBatch);
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, request.run);
  int64_t decodedTokens = 0; // by the batched steps, the padding rows not counted
  for (int64_t first = 0; first < count && request.tokens > 0; first += batch) {
    // A last group smaller than the batch fills the batch with padding rows
    // (token 0 at position 0 of their own slots), so that one program serves
    // every step.
    int64_t size = std::min(batch, count - first);
    std::vector<int32_t> next(static_cast<size_t>(batch), 0), positions(static_cast<size_t>(batch), 0);
    for (int64_t slot = 0; slot < size; ++slot) {
      std::vector<int32_t> &tokens = sequences[first + slot];
      ForwardResult result = runner->prefillSlot(batch, slot, tokens);
      tokens.push_back(greedyToken(result.logits, 0));
    }
    if (request.tokens > 1) {
      // Every later token chained on the target, each step's greedy choices
      // the next step's tokens (the padding rows' steps go on in their own
      // slots, a position a step, and are dropped).
      for (int64_t slot = 0; slot < size; ++slot) {
        const std::vector<int32_t> &tokens = sequences[first + slot];
        next[slot] = tokens.back();
        positions[slot] = static_cast<int32_t>(tokens.size()) - 1;
      }
      runner->decodeGreedy(next, positions, request.tokens - 1, [&](int64_t, const std::vector<int32_t> &chosen) {
        for (int64_t slot = 0; slot < size; ++slot)
          sequences[first + slot].push_back(chosen[static_cast<size_t>(slot)]);
      });
      decodedTokens += size * (request.tokens - 1);
    }
  }
  for (int64_t sequence = 0; sequence < count; ++sequence) {
    const std::vector<int32_t> &tokens = sequences[sequence];
    out << prompts[sequence];
    for (size_t i = tokens.size() - static_cast<size_t>(request.tokens); i < tokens.size(); ++i)
      out << tokenizer.decodeToken(tokens[i]);
    out << "\n\n";
  }
  const Gpt2Timing &timing = runner->timing();
  double runMs = timing.prefillMs + timing.batchDecodeMs;
  int64_t generated = count * request.tokens;
  out << fmt::format("{} prompt{}, {} tokens each, {}, KV cache, {} sequence{} at once\n", count, count == 1 ? "" : "s",
                     request.tokens, describeRun(request, weights), batch, batch == 1 ? "" : "s")
      << compileLine(timing)
      << fmt::format("  run     {:9.1f} ms  ({} tokens, {:.1f} tokens/s)\n", runMs, generated,
                     perSecond(generated, runMs))
      << fmt::format("  prefill {:9.1f} ms  ({} prompt token{}, each prompt alone, {:.1f} tokens/s)\n",
                     timing.prefillMs, timing.prefillTokens, timing.prefillTokens == 1 ? "" : "s",
                     perSecond(timing.prefillTokens, timing.prefillMs))
      << fmt::format("  decode  {:9.1f} ms  ({} step{} of {} sequence{}, {}, {:.2f} ms per step, {:.1f} tokens/s)\n",
                     timing.batchDecodeMs, timing.batchDecodeSteps, timing.batchDecodeSteps == 1 ? "" : "s", batch,
                     batch == 1 ? "" : "s", describeChaining(request.run),
                     timing.batchDecodeSteps ? timing.batchDecodeMs / timing.batchDecodeSteps : 0.0,
                     perSecond(static_cast<double>(decodedTokens), timing.batchDecodeMs))
      << weightsLine(request, timing, loadMs);
}

} // namespace mlpipe
