// The GPT-2 runners on a real GPU, on the tiny configuration with synthetic
// weights: a forward replayed as a CUDA graph gives exactly the bits of the
// same forward launched directly (and of managed memory), in both modes and
// with the residuals kept; after the first forward of a length no GPU
// memory is allocated or freed; a change of buffers captures a new graph.
// KV-cache decoding: the checks the CPU suite runs (kv_cache_checks.h),
// decode steps replayed give the bits of direct launches, and a decode
// step is one graph replay that allocates nothing.
// Without a GPU the suite prints why and exits 77 (ctest: Skipped).
#define BOOST_TEST_MODULE gpt2_runner_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "driver/gpt2_runner.h"
#include "kv_cache_checks.h"
#include "runtime/mgpu_runtime.h"
#include "test_support.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>

using namespace mlpipe;

namespace {

// Fresh random tokens of the tiny model's vocabulary.
std::vector<int32_t> randomTokens(int64_t count, int64_t vocabulary) {
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocabulary - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (int32_t &id : tokens)
    id = token(testing::rng());
  return tokens;
}

Gpt2RunOptions optionsFor(Gpt2Mode mode, bool graphs, gpu::Memory memory = gpu::Memory::Device) {
  Gpt2RunOptions options;
  options.mode = mode;
  options.compile.target = Target::Gpu;
  options.compile.chip = gpu::deviceChip();
  options.graphs = graphs;
  options.execution.memory = memory;
  return options;
}

bool sameBits(const HostTensor &a, const HostTensor &b) {
  return a.shape() == b.shape() && a.byteSize() == b.byteSize() && std::memcmp(a.data(), b.data(), a.byteSize()) == 0;
}

const Gpt2Weights &weights() {
  static Gpt2Weights tiny = Gpt2Weights::synthetic(Gpt2Config::tiny(), 7);
  return tiny;
}

} // namespace

BOOST_AUTO_TEST_CASE(graph_replay_gives_the_bits_of_direct_launches) {
  for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused}) {
    BOOST_TEST_CONTEXT((mode == Gpt2Mode::Fused ? "fused" : "sublayer")) {
      auto uploaded = TargetWeights::upload(weights(), Target::Gpu);
      auto direct = makeGpt2Runner(weights().config(), uploaded, optionsFor(mode, false));
      auto replayed = makeGpt2Runner(weights().config(), uploaded, optionsFor(mode, true));
      bool keep = mode == Gpt2Mode::Sublayer;
      for (int64_t count : {5, 8, 13}) { // padded to 8, 8 and 16
        std::vector<int32_t> tokens = randomTokens(count, weights().config().vocabSize);
        // The replaying runner runs a length's first forward directly and
        // captures the second; later ones replay.
        ForwardResult a = direct->forward(tokens, true, keep);
        ForwardResult b = replayed->forward(tokens, true, keep);
        ForwardResult again = replayed->forward(tokens, true, keep);
        BOOST_TEST(sameBits(a.logits, b.logits));
        BOOST_TEST(sameBits(a.logits, again.logits));
        BOOST_REQUIRE(a.captured.size() == b.captured.size());
        for (size_t i = 0; i < a.captured.size(); ++i)
          BOOST_TEST(sameBits(a.captured[i], again.captured[i]), "kept residual " << i);
      }
      BOOST_TEST(direct->timing().graphCaptures == 0);
      // One capture per length and per kept-or-not; lengths 8 and 16 here.
      BOOST_TEST(replayed->timing().graphCaptures == 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(managed_memory_gives_the_same_bits) {
  std::vector<int32_t> tokens = randomTokens(7, weights().config().vocabSize);
  auto device = makeGpt2Runner(weights(), optionsFor(Gpt2Mode::Sublayer, true));
  auto managed = makeGpt2Runner(weights(), optionsFor(Gpt2Mode::Sublayer, true, gpu::Memory::Managed));
  BOOST_TEST(sameBits(device->forward(tokens, true, false).logits, managed->forward(tokens, true, false).logits));
}

BOOST_AUTO_TEST_CASE(no_gpu_memory_is_allocated_or_freed_after_the_first_forward) {
  for (bool graphs : {true, false}) {
    for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused}) {
      BOOST_TEST_CONTEXT((mode == Gpt2Mode::Fused ? "fused" : "sublayer") << (graphs ? ", graphs" : ", direct")) {
        auto runner = makeGpt2Runner(weights(), optionsFor(mode, graphs));
        std::vector<int32_t> tokens = randomTokens(6, weights().config().vocabSize);
        runner->forward(tokens, false, false); // compiles, allocates the arena and activations
        size_t live = gpu::liveAllocationCount();
        uint64_t allocations = gpu::counters().allocations;
        for (int i = 0; i < 4; ++i) {
          tokens.back() = randomTokens(1, weights().config().vocabSize)[0];
          runner->forward(tokens, false, false);
        }
        BOOST_TEST(gpu::counters().allocations == allocations);
        BOOST_TEST(gpu::liveAllocationCount() == live);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_forward_is_one_graph_of_every_launch) {
  auto runner = makeGpt2Runner(weights(), optionsFor(Gpt2Mode::Sublayer, true));
  std::vector<int32_t> tokens = randomTokens(4, weights().config().vocabSize);
  runner->prepare(4);
  uint64_t before = gpu::counters().launches;
  runner->forward(tokens, false, false); // direct
  uint64_t perForward = gpu::counters().launches - before;
  BOOST_TEST(perForward > 0u);
  runner->forward(tokens, false, false); // captured: each launch goes into the graph once
  BOOST_TEST(gpu::counters().launches - before == 2 * perForward);
  BOOST_TEST(runner->timing().graphCaptures == 1);
  runner->forward(tokens, false, false); // replayed: no launch through the runtime
  runner->forward(tokens, false, false);
  BOOST_TEST(gpu::counters().launches - before == 2 * perForward);
}

// With graphs only: that direct launches give the same bits is
// decode_steps_replayed_give_the_bits_of_direct_launches' check, and each
// runner here compiles five programs from cold.
BOOST_AUTO_TEST_CASE(decoding_fills_the_context_and_matches_forwards) {
  for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused})
    BOOST_TEST_CONTEXT((mode == Gpt2Mode::Fused ? "fused" : "sublayer")) {
      testing::checkDecodingFillsTheContext(optionsFor(mode, /*graphs=*/true));
    }
  testing::checkDecodeNeedsAPrefill(optionsFor(Gpt2Mode::Fused, true));
}

// Batched decoding on the GPU, both modes, f32 and 16 bits: each sequence
// as it decodes alone (kv_cache_checks.h).
BOOST_AUTO_TEST_CASE(batched_decoding_matches_single_sequences) {
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused})
      BOOST_TEST_CONTEXT(dtypeName(dtype) << (mode == Gpt2Mode::Fused ? " fused" : " sublayer")) {
        Gpt2RunOptions options = optionsFor(mode, /*graphs=*/true);
        options.dtype = dtype;
        testing::checkBatchedDecodingMatchesSingleSequences(options);
      }
}

// Greedy decoding chained on the GPU, graphs of several steps each fed the
// last step's choices, both modes, f32 and bf16 (kv_cache_checks.h).
BOOST_AUTO_TEST_CASE(greedy_decoding_chains_steps) {
  for (DType dtype : {DType::f32, DType::bf16})
    for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused})
      BOOST_TEST_CONTEXT(dtypeName(dtype) << (mode == Gpt2Mode::Fused ? " fused" : " sublayer")) {
        Gpt2RunOptions options = optionsFor(mode, /*graphs=*/true);
        options.dtype = dtype;
        testing::checkGreedyDecodingChainsSteps(options);
      }
}

// 16-bit storage on the GPU: the cache, the activations and the logits in
// bf16 or f16, matmuls on tensor cores.
BOOST_AUTO_TEST_CASE(decoding_in_16_bits_matches_forwards) {
  for (DType dtype : {DType::bf16, DType::f16})
    for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused})
      BOOST_TEST_CONTEXT(dtypeName(dtype) << (mode == Gpt2Mode::Fused ? " fused" : " sublayer")) {
        Gpt2RunOptions options = optionsFor(mode, /*graphs=*/true);
        options.dtype = dtype;
        testing::checkDecodingFillsTheContext(options);
      }
}

BOOST_AUTO_TEST_CASE(decode_steps_replayed_give_the_bits_of_direct_launches) {
  for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused}) {
    BOOST_TEST_CONTEXT((mode == Gpt2Mode::Fused ? "fused" : "sublayer")) {
      auto uploaded = TargetWeights::upload(weights(), Target::Gpu);
      auto direct = makeGpt2Runner(weights().config(), uploaded, optionsFor(mode, false));
      auto replayed = makeGpt2Runner(weights().config(), uploaded, optionsFor(mode, true));
      bool keep = mode == Gpt2Mode::Sublayer;
      std::vector<int32_t> prompt = randomTokens(5, weights().config().vocabSize);
      BOOST_TEST(sameBits(direct->prefill(prompt, true, keep).logits, replayed->prefill(prompt, true, keep).logits));
      for (int32_t token : randomTokens(6, weights().config().vocabSize)) {
        ForwardResult a = direct->decodeStep(token, keep);
        ForwardResult b = replayed->decodeStep(token, keep);
        BOOST_TEST(sameBits(a.logits, b.logits));
        BOOST_REQUIRE(a.captured.size() == b.captured.size());
        for (size_t i = 0; i < a.captured.size(); ++i)
          BOOST_TEST(sameBits(a.captured[i], b.captured[i]), "kept residual " << i);
      }
      BOOST_TEST(direct->timing().graphCaptures == 0);
      // The prefill ran once (directly); the decode program is captured on
      // its second step and replayed for every later position.
      BOOST_TEST(replayed->timing().graphCaptures == 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_decode_step_is_one_graph_replay_that_allocates_nothing) {
  for (Gpt2Mode mode : {Gpt2Mode::Sublayer, Gpt2Mode::Fused}) {
    BOOST_TEST_CONTEXT((mode == Gpt2Mode::Fused ? "fused" : "sublayer")) {
      auto runner = makeGpt2Runner(weights(), optionsFor(mode, true));
      runner->prefill(randomTokens(3, weights().config().vocabSize), false, false);
      runner->decodeStep(1, false); // direct
      runner->decodeStep(2, false); // captured
      uint64_t launches = gpu::counters().launches, allocations = gpu::counters().allocations;
      size_t live = gpu::liveAllocationCount();
      for (int32_t token : randomTokens(4, weights().config().vocabSize))
        runner->decodeStep(token, false); // replayed: no launch through the runtime
      BOOST_TEST(gpu::counters().launches == launches);
      BOOST_TEST(gpu::counters().allocations == allocations);
      BOOST_TEST(gpu::liveAllocationCount() == live);
      BOOST_TEST(runner->timing().graphCaptures == 1);
    }
  }
}

int main(int argc, char **argv) {
  if (!gpu::available()) {
    std::printf("SKIPPED: no GPU (%s)\n", gpu::unavailableReason().c_str());
    return 77;
  }
  // A cache of its own: the test compiles what it runs.
  std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("mlpipe-gpt2-test-" + std::to_string(getpid()));
  setenv("MLPIPE_CACHE_DIR", cache.c_str(), 1);
  int status = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
  std::filesystem::remove_all(cache);
  return status;
}
