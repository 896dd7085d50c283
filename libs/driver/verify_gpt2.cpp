#include "driver/verify_gpt2.h"

#include "driver/matmul_choice.h"
#include "models/tokenizer.h"
#include "reference/evaluator.h"
#include "support/compare.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
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

  ref::Values referenceWeights;
  for (auto &[name, tensor] : weights.tensors())
    referenceWeights[name] = ref::fromHost(tensor);
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, model.run);

  const CompileOptions &compile = model.run.compile;
  std::cout << fmt::format("verify gpt2: {} steps, {} mode on the {}{}, L={} H={} C={} V={}, {}\n", request.steps,
                           sublayer ? "sublayer" : "fused", targetName(compile.target),
                           compile.target == Target::Gpu
                               ? " (" + compile.chip + ", " + describeMatmuls(compile.matmul, compile.precision) + ")"
                               : "",
                           config.nLayer, config.nHead, config.nEmbd, config.vocabSize, weights.description());
  std::cout << fmt::format("prompt: \"{}\" ({} tokens); tensors within {:g} absolute and relative{}\n", prompt,
                           tokens.size(), request.tolerance, compile.precision == "tf32" ? " (tf32)" : "");
  std::cout << fmt::format("{:>4} {:>6} {:>8} {:>8} {:>11} {:>11} {:>11}  {}\n", "step", "tokens", "token", "ref",
                           "embedding", "residuals", "logits", "result");
  Miss embeddingMiss, residualMiss, logitsMiss;
  int matches = 0;
  for (int64_t step = 1; step <= request.steps; ++step) {
    int64_t count = static_cast<int64_t>(tokens.size());
    ForwardResult result = runner->forward(tokens, /*everyRow=*/true, /*capture=*/sublayer);

    ref::Values inputs = referenceWeights;
    HostTensor ids = HostTensor::fromDoubles(DType::i32, {count}, std::vector<double>(tokens.begin(), tokens.end()));
    inputs["ids"] = ref::fromHost(ids);
    fe::Program reference = traceGpt2Reference(config, count);
    ref::Values expected = ref::evaluate(*reference.functions.front(), inputs);

    Miss stepEmbedding, stepResiduals, stepLogits;
    if (sublayer) {
      stepEmbedding.add(result.captured[0], referenceRows(*expected.at("embedding"), 0, count), request.tolerance);
      for (int64_t block = 0; block < config.nLayer; ++block)
        stepResiduals.add(result.captured[block + 1],
                          referenceRows(*expected.at("blocks." + std::to_string(block) + ".residual"), 0, count),
                          request.tolerance);
    }
    HostTensor expectedLogits = referenceRows(*expected.at("logits"), 0, count);
    stepLogits.add(result.logits, expectedLogits, request.tolerance);

    int32_t token = greedyToken(result.logits, count - 1);
    const double *lastRow = expectedLogits.as<double>() + (count - 1) * config.vocabSize;
    int32_t referenceToken = static_cast<int32_t>(std::max_element(lastRow, lastRow + config.vocabSize) - lastRow);
    bool tokenMatches = token == referenceToken;
    matches += tokenMatches;
    bool pass = tokenMatches && stepEmbedding.pass && stepResiduals.pass && stepLogits.pass;
    auto cell = [&](const Miss &miss) {
      return sublayer ? fmt::format("{:11.3e}", miss.maxAbs) : fmt::format("{:>11}", "-");
    };
    std::cout << fmt::format("{:>4} {:>6} {:>8} {:>8} {} {} {:11.3e}  {}\n", step, count, token, referenceToken,
                             cell(stepEmbedding), cell(stepResiduals), stepLogits.maxAbs, pass ? "PASS" : "FAIL");
    embeddingMiss.maxAbs = std::max(embeddingMiss.maxAbs, stepEmbedding.maxAbs);
    embeddingMiss.pass &= stepEmbedding.pass;
    residualMiss.maxAbs = std::max(residualMiss.maxAbs, stepResiduals.maxAbs);
    residualMiss.pass &= stepResiduals.pass;
    logitsMiss.maxAbs = std::max(logitsMiss.maxAbs, stepLogits.maxAbs);
    logitsMiss.pass &= stepLogits.pass;
    tokens.push_back(token);
  }
  bool pass = matches == request.steps && embeddingMiss.pass && residualMiss.pass && logitsMiss.pass;
  std::cout << "max abs error:";
  if (sublayer)
    std::cout << fmt::format(" embedding {:.3e}, block residuals {:.3e},", embeddingMiss.maxAbs, residualMiss.maxAbs);
  std::cout << fmt::format(" logits {:.3e}; tokens {}/{} match\n", logitsMiss.maxAbs, matches, request.steps);
  std::cout << "text: " << tokenizer.decode(tokens) << "\n";
  std::cout << (pass ? "PASS\n" : "FAIL\n");
  return pass;
}

} // namespace mlpipe
