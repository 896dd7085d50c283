// bench: GPT-2 forward passes timed on the target, for BENCHMARKS.md, and
// `bench kernels`: each unit kernel timed on the GPU beside its copy floor.
//
// GPT-2: each shape is compiled (compile time reported by stage), warmed
// up, then timed `repeat` times (GPU: CUDA events around each forward, a
// CUDA graph replayed unless graphs are off; CPU: the host clock); the
// median is reported with the launches per forward, the sum of the kernels'
// own times, the arena's bytes and the peak device memory. Then, per mode,
// KV-cache decoding: the prefill of a 10-token prompt, one decode step, and
// 10 tokens after the prompt end to end; then batched decoding: one
// decode step of each batch size in `batches`, every sequence after its
// own prompt, in tokens per second. With `profile`,
// one row per kernel: calls, time, bytes moved and the ratio to the copy
// floor measured in the same run (and `csv` writes the rows for the
// roofline chart).
#pragma once

#include "driver/generate.h"
#include "models/unit_kernels.h"

#include <string>
#include <vector>

namespace mlpipe {

struct BenchRequest {
  GenerateRequest model; // weights, config, seed, target, chip, graphs, memory (mode ignored)
  std::vector<Gpt2Mode> modes = {Gpt2Mode::Sublayer, Gpt2Mode::Fused};
  std::vector<int64_t> lengths = {16, 64, 256, 1024};
  int warmup = 3;
  int repeat = 20;
  bool profile = false;      // one row per kernel, against the copy floor
  std::string csv;           // with profile: the rows as CSV (for make roofline)
  int64_t decodePrompt = 10; // tokens prefilled before the decode steps are timed
  // Sequences per batched decode step timed (empty: no batched table).
  std::vector<int64_t> batches = {1, 8, 32, 64};
};

void benchGpt2(const BenchRequest &request);

struct KernelBenchRequest {
  std::vector<std::string> kernels; // empty: gelu softmax layernorm transpose colsum matmul (those that exist)
  KernelOptions options;            // shapes (empty: each kernel's reference shape), dtype, batch, heads
  std::string chip = "sm_90";
  int warmup = 10;
  int repeat = 200; // launches per timing, back to back
  bool graphs = true;
  uint64_t seed = 1;
  // --pass-option entries, "PASS:OPTIONS", for every kernel's compile.
  std::vector<std::string> passOptions;
};

// The reference shape of each kernel `bench kernels` times by default.
std::vector<Shape> referenceShapes(const std::string &kernel);

void benchKernels(const KernelBenchRequest &request);

} // namespace mlpipe
