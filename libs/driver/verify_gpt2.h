// verify gpt2: greedy steps after a prompt, each checked against the float64
// reference (the same model source, evaluated eagerly). In sublayer mode
// the embedding, every block's residual, the logits and the chosen token
// are compared; in fused mode the logits and the token. Tokens must match
// exactly; tensors within 3e-4 (absolute and relative).
#pragma once

#include "driver/generate.h"

#include <string>

namespace mlpipe {

struct Gpt2VerifyRequest {
  GenerateRequest model; // weights, config, seed, mode, target
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
