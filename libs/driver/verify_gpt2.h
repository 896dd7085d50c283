// verify gpt2: greedy steps after a prompt, each checked against the float64
// reference (the same model source, evaluated eagerly). In sublayer mode
// the embedding, every block's residual, the logits and the chosen token
// are compared; in fused mode the logits and the token. Tensors must be
// within gpt2Tolerance() (absolute and relative); tokens must match, except
// in a near tie: where the reference's logit for the token chosen is within
// that tolerance of its top logit, the step is reported as a near tie, not
// failed (a 16-bit model may fairly pick either). The reference runs on the
// weights rounded to the storage type, as the target holds them.
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
  double tolerance = 3e-4; // set by gpt2Tolerance()
};

// The tensor tolerance in f32: f32 sums of 768 to 3072 products, through
// twelve blocks.
inline constexpr double kGpt2F32Tolerance = 3e-4;
// With --precision tf32: TF32 products are good to about 1e-3 relative, and
// twelve blocks compound it.
inline constexpr double kGpt2Tf32Tolerance = 1e-2;
// With bf16 or f16 storage, every tensor a kernel writes is rounded to the
// storage type (relative error at most u: 2^-8 bf16, 2^-11 f16), and the
// layer norms rescale what the residual carries: the bound allows this many
// roundings of u on the way to any compared tensor (as TF32's 1e-2 is about
// twenty of its 2^-11).
inline constexpr double kGpt2SixteenBitRoundings = 20;
// The tolerance for the storage type and --precision.
double gpt2Tolerance(DType dtype, const std::string &precision);
// Whether a token whose reference logit is `chosen` ties the reference's top
// logit `top` within `tolerance` (absolute plus relative to the top one, as
// tensors are compared): a near tie, reported rather than failed.
bool isNearTie(double top, double chosen, double tolerance);

// Prints a line per step and the worst error per kind of tensor; true on PASS.
bool verifyGpt2(const Gpt2VerifyRequest &request);

// The default prompt: ten GPT-2 tokens.
extern const char *const kDefaultGpt2Prompt;

} // namespace mlpipe
