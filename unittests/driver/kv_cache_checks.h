// Checks of KV-cache decoding that the CPU suite (kv_cache_test) and the GPU
// suite (gpt2_runner_gpu_test) both run on their target: a model of the tiny
// shapes with a context of 8 positions and synthetic weights, so the cache
// fills within a few steps.
#pragma once

#include "driver/gpt2_runner.h"
#include "driver/verify_gpt2.h"
#include "support/compare.h"
#include "test_support.h"

#include <cstring>
#include <string>
#include <vector>

namespace mlpipe::testing {

// The tiny model with a context of 8: a prompt of 3 fills it in 5 decode steps.
inline const Gpt2Weights &shortContextWeights() {
  static Gpt2Weights weights = [] {
    Gpt2Config config = Gpt2Config::tiny();
    config.nCtx = 8;
    return Gpt2Weights::synthetic(config, 11);
  }();
  return weights;
}

// Fresh random tokens of a vocabulary.
inline std::vector<int32_t> randomTokens(int64_t count, int64_t vocabulary) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocabulary - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (int32_t &id : tokens)
    id = token(rng());
  return tokens;
}

// Row `row` of a [rows, width] f32 tensor, as [1, width].
inline HostTensor rowOf(const HostTensor &tensor, int64_t row) {
  int64_t width = tensor.shape().back();
  HostTensor part(DType::f32, {1, width});
  std::memcpy(part.data(), tensor.as<float>() + row * width, part.byteSize());
  return part;
}

// Results of the same positions computed two ways (cache or not): in f32
// the sums differ in order only; in 16 bits the roundings of what each
// kernel stores may differ too, within verify gpt2's bound.
inline double cacheAgreement(DType dtype) { return dtype == DType::f32 ? 1e-4 : gpt2Tolerance(dtype, "f32"); }

inline void checkClose(const HostTensor &actual, const HostTensor &expected, const std::string &what,
                       double tolerance) {
  BOOST_TEST((actual.dtype() == DType::f32), what << " comes back as " << dtypeName(actual.dtype()));
  Comparison comparison = compareTensors(actual, expected, tolerance, tolerance);
  BOOST_TEST(comparison.pass, what << ": max abs error " << comparison.maxAbsError);
}

// Prefill a prompt, then decode until the cache holds the whole context:
// every prefilled position, and each decode step's one position, agree
// with a forward over the whole sequence (logits, and in sublayer mode the
// embedding and every block's residual); one decode program serves every
// position; a full cache refuses another step in a sentence; a second
// prefill starts over over the stale cache.
inline void checkDecodingFillsTheContext(const Gpt2RunOptions &options) {
  const Gpt2Weights &weights = shortContextWeights();
  const Gpt2Config &config = weights.config();
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, options);
  bool capture = options.mode == Gpt2Mode::Sublayer;
  double tolerance = cacheAgreement(options.dtype);
  for (int64_t promptLength : {3, 1}) {
    BOOST_TEST_CONTEXT("prompt of " << promptLength) {
      std::vector<int32_t> tokens = randomTokens(promptLength, config.vocabSize);
      ForwardResult prefilled = runner->prefill(tokens, /*everyRow=*/true, capture);
      ForwardResult whole = runner->forward(tokens, /*everyRow=*/true, capture);
      checkClose(prefilled.logits, whole.logits, "prefill logits", tolerance);
      BOOST_TEST(runner->cachedTokens() == promptLength);
      while (runner->cachedTokens() < config.nCtx) {
        tokens.push_back(randomTokens(1, config.vocabSize)[0]);
        int64_t position = static_cast<int64_t>(tokens.size()) - 1;
        BOOST_TEST_CONTEXT("position " << position) {
          ForwardResult step = runner->decodeStep(tokens.back(), capture);
          ForwardResult reference = runner->forward(tokens, /*everyRow=*/true, capture);
          BOOST_TEST(step.logits.shape() == (Shape{1, config.vocabSize}));
          checkClose(step.logits, rowOf(reference.logits, position), "decode logits", tolerance);
          BOOST_REQUIRE(step.captured.size() == reference.captured.size());
          for (size_t index = 0; index < step.captured.size(); ++index)
            checkClose(step.captured[index], rowOf(reference.captured[index], position),
                       index == 0 ? std::string("embedding") : "block residual " + std::to_string(index - 1),
                       tolerance);
        }
      }
      BOOST_TEST(messageOf([&] { runner->decodeStep(0, false); }) ==
                 "the KV cache is full: 8 tokens fill the model's context of 8");
    }
  }
  int decodePrograms = 0;
  for (const std::string &program : runner->timing().compiledPrograms)
    decodePrograms += program == "decode";
  BOOST_TEST(decodePrograms == 1);
  BOOST_TEST(runner->timing().decodeSteps == 5 + 7);
}

inline void checkDecodeNeedsAPrefill(const Gpt2RunOptions &options) {
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(shortContextWeights(), options);
  BOOST_TEST(messageOf([&] { runner->decodeStep(1, false); }) ==
             "a decode step needs a prefilled KV cache: run the prompt first");
}

} // namespace mlpipe::testing
