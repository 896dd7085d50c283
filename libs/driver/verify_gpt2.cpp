#include "driver/verify_gpt2.h"

#include "driver/matmul_choice.h"
#include "models/tokenizer.h"
#include "reference/evaluator.h"
#include "support/compare.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iostream>

namespace mlpipe {

const char *const kDefaultGpt2Prompt = "The quick brown fox jumps over the lazy dog and";

namespace {

// The largest error of one comparison, and whether it is within tolerance.
struct Miss {
  double maxAbs = 0;
  bool pass = true;
  void add(const HostTensor &actual, const HostTensor &expected, double tolerance) {
    Comparison comparison = compareTensors(actual, expected, tolerance, tolerance);
    maxAbs = std::max(maxAbs, comparison.maxAbsError);
    pass = pass && comparison.pass;
  }
};

HostTensor referenceRows(const ref::Array &array, int64_t first, int64_t rows) {
  int64_t width = array.shape.back();
  std::vector<double> values(array.data.begin() + first * width, array.data.begin() + (first + rows) * width);
  return HostTensor::fromDoubles(DType::f64, {rows, width}, values);
}

} // namespace

double gpt2Tolerance(DType dtype, const std::string &precision) {
  if (dtype == DType::bf16 || dtype == DType::f16)
    return kGpt2SixteenBitRoundings * unitRoundoff(dtype);
  return precision == "tf32" ? kGpt2Tf32Tolerance : kGpt2F32Tolerance;
}

bool isNearTie(double top, double chosen, double tolerance) { return top - chosen <= tolerance * (1 + std::abs(top)); }

Gpt2CacheCheck parseGpt2CacheCheck(const std::string &name) {
  if (name == "on")
    return Gpt2CacheCheck::Cache;
  if (name == "off")
    return Gpt2CacheCheck::NoCache;
  if (name == "compare")
    return Gpt2CacheCheck::Compare;
  fail("unknown --cache '{}': expected on, off or compare", name);
}

namespace {

// Rows [first, first + rows) of every tensor of a result: the logits and
// the captured residuals.
ForwardResult resultRows(const ForwardResult &result, int64_t first, int64_t rows) {
  auto slice = [&](const HostTensor &tensor) {
    int64_t width = tensor.shape().back();
    HostTensor part(tensor.dtype(), {rows, width});
    std::memcpy(part.data(), static_cast<const char *>(tensor.data()) + first * width * dtypeSize(tensor.dtype()),
                part.byteSize());
    return part;
  };
  ForwardResult part{slice(result.logits), {}, {}};
  for (const HostTensor &captured : result.captured)
    part.captured.push_back(slice(captured));
  return part;
}

} // namespace

bool verifyGpt2(const Gpt2VerifyRequest &request) {
  const GenerateRequest &model = request.model;
  Gpt2Weights weights = loadGpt2Weights(model.weights, model.config, model.seed);
  if (!request.saveWeights.empty())
    weights.save(request.saveWeights);
  const Gpt2Config &config = weights.config();
  std::string prompt = model.prompt.empty() ? kDefaultGpt2Prompt : model.prompt;
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::fromDirectory(Gpt2Tokenizer::defaultDirectory());
  std::vector<int32_t> tokens = promptTokens(prompt, request.steps, config, tokenizer);
  bool sublayer = model.run.mode == Gpt2Mode::Sublayer;
  bool cached = request.cache != Gpt2CacheCheck::NoCache, compare = request.cache == Gpt2CacheCheck::Compare;

  // The reference runs in float64 on the weights the target holds: rounded
  // to the storage type.
  DType dtype = model.run.dtype;
  ref::Values referenceWeights;
  for (auto &[name, tensor] : weights.tensors())
    referenceWeights[name] = ref::fromHost(tensor.convertedTo(dtype));
  std::shared_ptr<const TargetWeights> targetWeights =
      TargetWeights::upload(weights, model.run.compile.target, model.run.execution.memory, dtype);
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(config, targetWeights, model.run);
  std::unique_ptr<Gpt2Runner> uncachedRunner = compare ? makeGpt2Runner(config, targetWeights, model.run) : nullptr;

  const CompileOptions &compile = model.run.compile;
  std::cout << fmt::format("verify gpt2: {} steps, {} mode, {} on the {}{}, L={} H={} C={} V={}, {}\n", request.steps,
                           sublayer ? "sublayer" : "fused", dtypeName(dtype), targetName(compile.target),
                           compile.target == Target::Gpu
                               ? " (" + compile.chip + ", " + describeMatmuls(compile.matmul, compile.precision) + ")"
                               : "",
                           config.nLayer, config.nHead, config.nEmbd, config.vocabSize, weights.description());
  std::string boundNote = compile.precision == "tf32" ? " (tf32)"
                          : dtype != DType::f32 ? fmt::format(" ({:g} x {}'s u = 2^-{})", kGpt2SixteenBitRoundings,
                                                              dtypeName(dtype), significandBits(dtype))
                                                : "";
  std::cout << fmt::format("prompt: \"{}\" ({} token{}); tensors within {:g} absolute and relative{}; {}\n", prompt,
                           tokens.size(), tokens.size() == 1 ? "" : "s", request.tolerance, boundNote,
                           compare  ? "KV cache, also against no cache"
                           : cached ? "KV cache: prefill, then decode steps"
                                    : "no cache: every step a whole forward");
  std::cout << fmt::format("{:>4} {:>6} {:>8} {:>8} {:>8} {:>11} {:>11} {:>11}{}  {}\n", "step", "tokens", "run",
                           "token", "ref", "embedding", "residuals", "logits",
                           compare ? fmt::format(" {:>11}", "no-cache") : "", "result")
            << std::flush;
  Miss embeddingMiss, residualMiss, logitsMiss, uncachedMiss;
  int matches = 0, nearTies = 0;
  for (int64_t step = 1; step <= request.steps; ++step) {
    int64_t count = static_cast<int64_t>(tokens.size());
    // The positions this step computes: every one for a forward or the
    // prefill, the last one for a decode step.
    bool decode = cached && step > 1;
    int64_t first = decode ? count - 1 : 0;
    ForwardResult result = !cached   ? runner->forward(tokens, /*everyRow=*/true, /*capture=*/sublayer)
                           : !decode ? runner->prefill(tokens, /*everyRow=*/true, /*capture=*/sublayer)
                                     : runner->decodeStep(tokens.back(), /*capture=*/sublayer);
    int64_t rows = count - first;

    ref::Values inputs = referenceWeights;
    HostTensor ids = HostTensor::fromDoubles(DType::i32, {count}, std::vector<double>(tokens.begin(), tokens.end()));
    inputs["ids"] = ref::fromHost(ids);
    fe::Program reference = traceGpt2Reference(config, count);
    ref::Values expected = ref::evaluate(*reference.functions.front(), inputs);

    Miss stepEmbedding, stepResiduals, stepLogits, stepUncached;
    if (sublayer) {
      stepEmbedding.add(result.captured[0], referenceRows(*expected.at("embedding"), first, rows), request.tolerance);
      for (int64_t block = 0; block < config.nLayer; ++block)
        stepResiduals.add(result.captured[block + 1],
                          referenceRows(*expected.at("blocks." + std::to_string(block) + ".residual"), first, rows),
                          request.tolerance);
    }
    HostTensor expectedLogits = referenceRows(*expected.at("logits"), first, rows);
    stepLogits.add(result.logits, expectedLogits, request.tolerance);

    int32_t token = greedyToken(result.logits, rows - 1);
    const double *lastRow = expectedLogits.as<double>() + (rows - 1) * config.vocabSize;
    int32_t referenceToken = static_cast<int32_t>(std::max_element(lastRow, lastRow + config.vocabSize) - lastRow);
    bool nearTie = token != referenceToken && isNearTie(lastRow[referenceToken], lastRow[token], request.tolerance);
    nearTies += nearTie;
    bool tokenMatches = token == referenceToken || nearTie;
    if (compare) {
      // The same positions run without the cache: every tensor and the
      // token agree.
      ForwardResult uncached =
          resultRows(uncachedRunner->forward(tokens, /*everyRow=*/true, /*capture=*/sublayer), first, rows);
      stepUncached.add(result.logits, uncached.logits, request.tolerance);
      for (size_t index = 0; index < result.captured.size(); ++index)
        stepUncached.add(result.captured[index], uncached.captured[index], request.tolerance);
      stepUncached.pass = stepUncached.pass && greedyToken(uncached.logits, rows - 1) == token;
    }
    matches += tokenMatches;
    bool pass = tokenMatches && stepEmbedding.pass && stepResiduals.pass && stepLogits.pass && stepUncached.pass;
    auto cell = [&](const Miss &miss) {
      return sublayer ? fmt::format("{:11.3e}", miss.maxAbs) : fmt::format("{:>11}", "-");
    };
    std::cout << fmt::format("{:>4} {:>6} {:>8} {:>8} {:>8} {} {} {:11.3e}{}  {}\n", step, count,
                             !cached  ? "forward"
                             : decode ? "decode"
                                      : "prefill",
                             token, referenceToken, cell(stepEmbedding), cell(stepResiduals), stepLogits.maxAbs,
                             compare ? fmt::format(" {:11.3e}", stepUncached.maxAbs) : "",
                             !pass     ? "FAIL"
                             : nearTie ? "PASS (near tie)"
                                       : "PASS")
              << std::flush; // a step takes seconds: show it as it ends, also through a pipe
    for (auto [total, part] : {std::pair{&embeddingMiss, &stepEmbedding}, std::pair{&residualMiss, &stepResiduals},
                               std::pair{&logitsMiss, &stepLogits}, std::pair{&uncachedMiss, &stepUncached}}) {
      total->maxAbs = std::max(total->maxAbs, part->maxAbs);
      total->pass &= part->pass;
    }
    tokens.push_back(token);
  }
  bool pass =
      matches == request.steps && embeddingMiss.pass && residualMiss.pass && logitsMiss.pass && uncachedMiss.pass;
  std::cout << "max abs error:";
  if (sublayer)
    std::cout << fmt::format(" embedding {:.3e}, block residuals {:.3e},", embeddingMiss.maxAbs, residualMiss.maxAbs);
  std::cout << fmt::format(" logits {:.3e}; tokens {}/{} match{}\n", logitsMiss.maxAbs, matches - nearTies,
                           request.steps,
                           nearTies ? fmt::format(", {} near tie{} (the reference's top two logits within the bound)",
                                                  nearTies, nearTies == 1 ? "" : "s")
                                    : "");
  if (compare)
    std::cout << fmt::format("with the cache against without: max abs difference {:.3e}, {}\n", uncachedMiss.maxAbs,
                             uncachedMiss.pass ? "agree" : "DISAGREE");
  std::cout << "text: " << tokenizer.decode(tokens) << "\n";
  std::cout << (pass ? "PASS\n" : "FAIL\n");
  return pass;
}

} // namespace mlpipe
