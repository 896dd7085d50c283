// KV-cache decoding on the CPU target, in both modes: prefill and decode
// steps against forwards over the whole sequence, up to a full context
// (kv_cache_checks.h; gpt2_runner_gpu_test runs the same checks on the GPU).
#define BOOST_TEST_MODULE kv_cache
#include <boost/test/unit_test.hpp>

#include "kv_cache_checks.h"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

using namespace mlpipe;

namespace {

Gpt2RunOptions cpuOptions(Gpt2Mode mode, DType dtype = DType::f32) {
  Gpt2RunOptions options;
  options.mode = mode;
  options.dtype = dtype;
  options.compile.target = Target::Cpu;
  return options;
}

// A compile cache of its own: the test compiles what it runs.
struct PrivateCompileCache {
  PrivateCompileCache()
      : path(std::filesystem::temp_directory_path() / ("mlpipe-kv-cache-test-" + std::to_string(getpid()))) {
    setenv("MLPIPE_CACHE_DIR", path.c_str(), 1);
  }
  ~PrivateCompileCache() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};
BOOST_TEST_GLOBAL_FIXTURE(PrivateCompileCache);

} // namespace

BOOST_AUTO_TEST_CASE(decoding_fills_the_context_and_matches_forwards_sublayer) {
  testing::checkDecodingFillsTheContext(cpuOptions(Gpt2Mode::Sublayer));
}

BOOST_AUTO_TEST_CASE(decoding_fills_the_context_and_matches_forwards_fused) {
  testing::checkDecodingFillsTheContext(cpuOptions(Gpt2Mode::Fused));
}

BOOST_AUTO_TEST_CASE(a_decode_step_needs_a_prefill) { testing::checkDecodeNeedsAPrefill(cpuOptions(Gpt2Mode::Fused)); }

// 16-bit storage: the weights, activations, cache and logits in bf16 or f16.
BOOST_AUTO_TEST_CASE(decoding_in_bf16_matches_forwards_sublayer) {
  testing::checkDecodingFillsTheContext(cpuOptions(Gpt2Mode::Sublayer, DType::bf16));
}

BOOST_AUTO_TEST_CASE(decoding_in_f16_matches_forwards_fused) {
  testing::checkDecodingFillsTheContext(cpuOptions(Gpt2Mode::Fused, DType::f16));
}

// Batched decoding: each sequence as it decodes alone (kv_cache_checks.h).
BOOST_AUTO_TEST_CASE(batched_decoding_matches_single_sequences_sublayer) {
  testing::checkBatchedDecodingMatchesSingleSequences(cpuOptions(Gpt2Mode::Sublayer));
}

BOOST_AUTO_TEST_CASE(batched_decoding_matches_single_sequences_fused) {
  testing::checkBatchedDecodingMatchesSingleSequences(cpuOptions(Gpt2Mode::Fused));
}

BOOST_AUTO_TEST_CASE(batched_decoding_in_bf16_matches_single_sequences_fused) {
  testing::checkBatchedDecodingMatchesSingleSequences(cpuOptions(Gpt2Mode::Fused, DType::bf16));
}

BOOST_AUTO_TEST_CASE(batched_decoding_in_f16_matches_single_sequences_sublayer) {
  testing::checkBatchedDecodingMatchesSingleSequences(cpuOptions(Gpt2Mode::Sublayer, DType::f16));
}

// Greedy decoding chained on the target: the tokens of steps fed their own
// choices (kv_cache_checks.h).
BOOST_AUTO_TEST_CASE(greedy_decoding_chains_steps_fused) {
  testing::checkGreedyDecodingChainsSteps(cpuOptions(Gpt2Mode::Fused));
}

BOOST_AUTO_TEST_CASE(greedy_decoding_chains_steps_in_bf16_sublayer) {
  testing::checkGreedyDecodingChainsSteps(cpuOptions(Gpt2Mode::Sublayer, DType::bf16));
}

// Weights uploaded in one storage type serve no runner of another.
BOOST_AUTO_TEST_CASE(weights_uploaded_in_f32_do_not_serve_a_bf16_runner) {
  auto uploaded = TargetWeights::upload(testing::shortContextWeights(), Target::Cpu);
  BOOST_TEST(testing::messageOf([&] {
               makeGpt2Runner(testing::shortContextWeights().config(), uploaded,
                              cpuOptions(Gpt2Mode::Fused, DType::bf16));
             }) == "the weights were uploaded in f32, not bf16");
}
