// verify gpt2: greedy steps after a prompt, each checked against the float64
// reference (the same model source, evaluated eagerly). In sublayer mode
// the embedding, every block's residual, the logits and the chosen token
// are compared; in fused mode the logits and the token. Tokens must match
// exactly; tensors within 3e-4 (absolute and relative).
//
// With the KV cache (the default) the first step prefills the prompt and
// checks every prompt position; each later step is one decode step, whose
// one position is checked against the last position of the reference run
// over the whole sequence. Without it every step is a forward over the
// whole sequence; `compare` runs both and also checks the cached results
// against the uncached ones.
#pragma once

#include "driver/generate.h"

#include <string>

namespace mlpipe {

enum class Gpt2CacheCheck {
  Cache,   // prefill, then decode steps against the KV cache
  NoCache, // a forward over the whole sequence every step
  Compare, // both, each against the reference and against each other
};
Gpt2CacheCheck parseGpt2CacheCheck(const std::string &name); // "on" | "off" | "compare"

struct Gpt2VerifyRequest {
  GenerateRequest model; // weights, config, seed, mode, target
  Gpt2CacheCheck cache = Gpt2CacheCheck::Cache;
  int64_t steps = 10;
  std::string saveWeights; // when set, the weights used are also written there
  double tolerance = 3e-4;
};

// The tensor tolerance with --precision tf32: TF32 products are good to
// about 1e-3 relative, and twelve blocks compound it.
inline constexpr double kGpt2Tf32Tolerance = 1e-2;

// Prints a line per step and the worst error per kind of tensor; true on PASS.
bool verifyGpt2(const Gpt2VerifyRequest &request);

// The default prompt: ten GPT-2 tokens.
extern const char *const kDefaultGpt2Prompt;

} // namespace mlpipe
