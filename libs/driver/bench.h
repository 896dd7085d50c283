// bench: GPT-2 forward passes timed on the target, for BENCHMARKS.md.
// Compile time is kept out: each shape is compiled, then warmed up, then
// timed `repeat` times (GPU: CUDA events around each forward; CPU: the host
// clock) and the median reported.
#pragma once

#include "driver/generate.h"

#include <vector>

namespace mlpipe {

struct BenchRequest {
  GenerateRequest model; // weights, config, seed, target, chip (mode ignored)
  std::vector<Gpt2Mode> modes = {Gpt2Mode::Sublayer, Gpt2Mode::Fused};
  std::vector<int64_t> lengths = {16, 64, 256, 1024};
  int warmup = 3;
  int repeat = 20;
};

void benchGpt2(const BenchRequest &request);

} // namespace mlpipe
