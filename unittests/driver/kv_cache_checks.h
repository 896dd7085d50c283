// Checks of KV-cache decoding that the CPU suite (kv_cache_test) and the GPU
// suite (gpt2_runner_gpu_test) both run on their target: a model of the tiny
// shapes with a context of 8 positions and synthetic weights, so the cache
// fills within a few steps.
#pragma once

#include "driver/generate.h"
#include "driver/gpt2_runner.h"
#include "driver/verify_gpt2.h"
#include "models/safetensors.h"
#include "support/compare.h"
#include "test_support.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>
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

// shortContextWeights() with every MLP weight scaled up, so that a block's
// output is far from its input and greedy decoding wanders over the
// vocabulary, where the synthetic model repeats one token: a test that
// feeds each step's choice to the next one sees if the wrong one is fed.
inline constexpr float kWanderingMlpScale = 10;
inline const Gpt2Weights &wanderingWeights() {
  static Gpt2Weights weights = [] {
    std::map<std::string, HostTensor> tensors;
    for (const auto &[name, tensor] : shortContextWeights().tensors()) {
      HostTensor copy = tensor.convertedTo(DType::f32);
      if (name.find(".mlp.") != std::string::npos && name.ends_with(".weight"))
        for (int64_t i = 0; i < copy.numel(); ++i)
          copy.as<float>()[i] *= 100;
      tensors.emplace(name, std::move(copy));
    }
    std::string path =
        (std::filesystem::temp_directory_path() / ("mlpipe-wandering-" + std::to_string(::getpid()) + ".safetensors"))
            .string();
    writeSafetensors(path, tensors);
    Gpt2Weights loaded = Gpt2Weights::fromSafetensors(path, shortContextWeights().config());
    std::filesystem::remove(path);
    return loaded;
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

// Batched decoding against one sequence at a time: prompts of fresh random
// lengths (one of a single token) and tokens, each prefilled alone into its
// slot, then decode steps for the whole batch at once, each sequence at
// its own position, up to the end of the context for the longest; every
// step's logits of every sequence agree with the same sequence decoded
// alone (greedily), and so do the greedy tokens, token for token; the
// tokens the step chooses itself are its logits' first maxima. One
// batched program serves every step; a position outside the context is
// refused in a sentence.
inline void checkBatchedDecodingMatchesSingleSequences(const Gpt2RunOptions &options) {
  const Gpt2Weights &weights = shortContextWeights();
  const Gpt2Config &config = weights.config();
  const int64_t batch = 4, steps = 3;
  std::uniform_int_distribution<int64_t> length(1, config.nCtx - steps);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t sequence = 0; sequence < batch; ++sequence)
    prompts.push_back(randomTokens(sequence == 0 ? 1 : length(rng()), config.vocabSize));
  prompts.back() = randomTokens(config.nCtx - steps, config.vocabSize); // its last step fills the context
  double tolerance = cacheAgreement(options.dtype);

  // Each sequence alone: the prefill's logits, then each decode step's.
  std::vector<std::vector<HostTensor>> alone(batch);
  std::vector<std::vector<int32_t>> aloneTokens(batch);
  {
    std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, options);
    for (int64_t sequence = 0; sequence < batch; ++sequence) {
      std::vector<int32_t> tokens = prompts[sequence];
      ForwardResult result = runner->prefill(tokens, /*everyRow=*/false, /*capture=*/false);
      for (int64_t step = 0;; ++step) {
        alone[sequence].push_back(result.logits);
        tokens.push_back(greedyToken(result.logits, 0));
        if (step == steps)
          break;
        result = runner->decodeStep(tokens.back(), /*capture=*/false);
      }
      aloneTokens[sequence] = tokens;
    }
  }

  // The batch, fed each sequence's own tokens (so that a near tie cannot
  // make the sequences part): the same logits at every step, and the same
  // greedy token unless the top two logits are a near tie.
  auto checkToken = [&](const HostTensor &logits, int64_t row, int64_t sequence, size_t index) {
    int32_t expected = aloneTokens[sequence][index], actual = greedyToken(logits, row);
    if (actual == expected)
      return;
    const float *values = logits.as<float>() + row * config.vocabSize;
    BOOST_TEST(std::abs(values[actual] - values[expected]) <= tolerance,
               "sequence " << sequence << " picks token " << actual << ", alone " << expected << ", not a near tie");
  };
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, options);
  for (int64_t sequence = 0; sequence < batch; ++sequence) {
    ForwardResult result = runner->prefillSlot(batch, sequence, prompts[sequence]);
    checkClose(result.logits, alone[sequence][0], "prefill logits of sequence " + std::to_string(sequence), tolerance);
    checkToken(result.logits, 0, sequence, prompts[sequence].size());
  }
  for (int64_t step = 1; step <= steps; ++step) {
    std::vector<int32_t> next, positions;
    for (int64_t sequence = 0; sequence < batch; ++sequence) {
      size_t position = prompts[sequence].size() + static_cast<size_t>(step) - 1;
      next.push_back(aloneTokens[sequence][position]);
      positions.push_back(static_cast<int32_t>(position));
    }
    ForwardResult result = runner->decodeBatch(next, positions, /*withLogits=*/true);
    BOOST_REQUIRE(result.logits.shape() == (Shape{batch, config.vocabSize}));
    // The greedy tokens the step chose where it ran are the first maxima of
    // its logits; the same step again without the logits (it writes the
    // same keys and values at the same positions) chooses them again.
    BOOST_REQUIRE(result.nextTokens.size() == static_cast<size_t>(batch));
    for (int64_t sequence = 0; sequence < batch; ++sequence)
      BOOST_TEST(result.nextTokens[static_cast<size_t>(sequence)] == greedyToken(result.logits, sequence));
    ForwardResult tokensOnly = runner->decodeBatch(next, positions, /*withLogits=*/false);
    BOOST_TEST(tokensOnly.logits.byteSize() == 0);
    BOOST_TEST(tokensOnly.nextTokens == result.nextTokens);
    for (int64_t sequence = 0; sequence < batch; ++sequence) {
      BOOST_TEST_CONTEXT("sequence " << sequence << " (a prompt of " << prompts[sequence].size() << "), step "
                                     << step) {
        checkClose(rowOf(result.logits, sequence), alone[sequence][step], "batched decode logits", tolerance);
        checkToken(result.logits, sequence, sequence, positions[sequence] + 1);
      }
    }
  }
  int batchedPrograms = 0;
  for (const std::string &program : runner->timing().compiledPrograms)
    batchedPrograms += program == "decode batch 4";
  BOOST_TEST(batchedPrograms == 1);
  BOOST_TEST(runner->timing().batchDecodeSteps == 2 * steps);
  BOOST_TEST(messageOf([&] {
               runner->decodeBatch({1, 2}, {3, 8}, /*withLogits=*/true);
             }) == "sequence 1 of the batch is at position 8, outside the model's context of 8");
}

// Greedy decoding chained on the target (decodeGreedy) chooses the tokens
// that decodeBatch steps, each fed the last one's choices, choose: three
// sequences with prompts of 1, 4 and 2 tokens in a context of 8, the
// longest one's last step filling it, in graphs of 3 steps (so 3 and 1);
// every step's tokens handed over once, in order; the same again once the
// graphs are captured. A batch of one decodes as decodeStep() does. It
// refuses a step past the context.
inline void checkGreedyDecodingChainsSteps(Gpt2RunOptions options) {
  const Gpt2Weights &weights = wanderingWeights();
  const Gpt2Config &config = weights.config();
  options.chainedSteps = 3;
  const std::vector<std::vector<int32_t>> prompts = {
      randomTokens(1, config.vocabSize), randomTokens(4, config.vocabSize), randomTokens(2, config.vocabSize)};
  const int64_t batch = static_cast<int64_t>(prompts.size());
  const int64_t steps = config.nCtx - 4;
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(weights, options);
  // Each prompt into its slot: the first tokens, chosen from the prefills'
  // logits, and the positions they go at.
  std::vector<int32_t> first, positions;
  auto prefillSlots = [&] {
    first.clear();
    positions.clear();
    for (int64_t slot = 0; slot < batch; ++slot) {
      ForwardResult result = runner->prefillSlot(batch, slot, prompts[slot]);
      first.push_back(greedyToken(result.logits, 0));
      positions.push_back(static_cast<int32_t>(prompts[slot].size()));
    }
  };

  prefillSlots();
  std::vector<std::vector<int32_t>> stepped;
  std::vector<int32_t> next = first, at = positions;
  for (int64_t step = 0; step < steps; ++step) {
    stepped.push_back(runner->decodeBatch(next, at, /*withLogits=*/false).nextTokens);
    next = stepped.back();
    for (int32_t &position : at)
      ++position;
  }

  for (int round = 0; round < 2; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      prefillSlots();
      int capturesBefore = runner->timing().graphCaptures;
      std::vector<std::vector<int32_t>> seen;
      std::vector<std::vector<int32_t>> chained =
          runner->decodeGreedy(first, positions, steps, [&](int64_t step, const std::vector<int32_t> &tokens) {
            BOOST_TEST(step == static_cast<int64_t>(seen.size()));
            seen.push_back(tokens);
          });
      BOOST_TEST(chained == stepped);
      BOOST_TEST(seen == stepped);
      // The first round runs each graph's steps directly, the second
      // captures them: a graph of 3 steps and one of 1.
      if (options.compile.target == Target::Gpu && options.graphs)
        BOOST_TEST(runner->timing().graphCaptures - capturesBefore == (round == 0 ? 0 : 2));
    }
  }
  // A batch of one (generate's one prompt), its slot's cache the single
  // sequence's: the logits of prefill() and decodeStep() at every step, and
  // chained, their tokens (each step's logits' first maximum) up to a near
  // tie (where the two programs may part), until the context is full.
  {
    const std::vector<int32_t> &prompt = prompts[1];
    double tolerance = cacheAgreement(options.dtype);
    std::vector<int32_t> alone;
    std::vector<HostTensor> aloneLogits;
    ForwardResult result = runner->prefill(prompt, /*everyRow=*/false, /*capture=*/false);
    while (true) {
      aloneLogits.push_back(result.logits);
      alone.push_back(greedyToken(result.logits, 0));
      if (runner->cachedTokens() == config.nCtx)
        break;
      result = runner->decodeStep(alone.back(), /*capture=*/false);
    }
    ForwardResult slotted = runner->prefillSlot(1, 0, prompt);
    checkClose(slotted.logits, aloneLogits.front(), "prefill logits of a batch of one", tolerance);
    int32_t firstAlone = greedyToken(slotted.logits, 0);
    BOOST_TEST(firstAlone == alone.front());
    // Fed decodeStep's tokens, the batched step's logits are decodeStep's.
    for (int64_t step = 0; step < steps; ++step) {
      BOOST_TEST_CONTEXT("a batch of one, step " << step) {
        ForwardResult batched =
            runner->decodeBatch({alone[step]}, {static_cast<int32_t>(prompt.size() + step)}, /*withLogits=*/true);
        checkClose(batched.logits, aloneLogits[step + 1], "batched decode logits", tolerance);
      }
    }
    runner->prefillSlot(1, 0, prompt);
    std::vector<std::vector<int32_t>> chained =
        runner->decodeGreedy({firstAlone}, {static_cast<int32_t>(prompt.size())}, steps);
    BOOST_REQUIRE(chained.size() == static_cast<size_t>(steps));
    for (int64_t step = 0; step < steps; ++step) {
      int32_t actual = chained[step].front(), expected = alone[step + 1];
      if (actual == expected)
        continue;
      const float *values = aloneLogits[step + 1].as<float>();
      BOOST_TEST(std::abs(values[actual] - values[expected]) <= tolerance,
                 "step " << step << " picks token " << actual << ", decodeStep " << expected << ", not a near tie");
      break; // the sequences part here
    }
  }

  BOOST_TEST(messageOf([&] { runner->decodeGreedy(first, positions, steps + 1); }) ==
             "sequence 1 of the batch is at position 4: 5 steps would go past the model's context of 8");
  BOOST_TEST(messageOf([&] { runner->decodeGreedy(first, positions, 0); }) ==
             "greedy decoding needs at least one step, not 0");
}

inline void checkDecodeNeedsAPrefill(const Gpt2RunOptions &options) {
  std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(shortContextWeights(), options);
  BOOST_TEST(messageOf([&] { runner->decodeStep(1, false); }) ==
             "a decode step needs a prefilled KV cache: run the prompt first");
}

} // namespace mlpipe::testing
