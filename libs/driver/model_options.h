// The GPT-2 options generate, verify gpt2 and bench share, declared once.
#pragma once

#include "driver/generate.h"

#include <CLI/CLI.hpp>

#include <string>

namespace mlpipe {

struct ModelFlags {
  std::string target; // gpu, cpu; empty = gpu when there is one
  std::string mode = "sublayer";
  bool managed = false;      // GPU memory managed (the tutorial's path), not device memory
  bool noGraphs = false;     // launch every kernel directly instead of replaying CUDA graphs
  std::string matmul;        // cublas, generated; empty = cublas where it loads
  std::string dtype = "f32"; // storage of weights, activations and cache: f32, bf16, f16
};

// --weights --config --seed --target --chip --managed --no-graphs --matmul
// --precision --dtype (and --mode unless `withMode` is false).
void addModelOptions(CLI::App &app, GenerateRequest &request, ModelFlags &flags, bool withMode = true);
// Fills request.run from the flags once they are parsed (on the GPU, the
// matmul path is resolved now, so that it can be reported).
void applyModelFlags(GenerateRequest &request, const ModelFlags &flags);
// The storage type gpt2 runs in: f32, bf16 or f16 (f64 and the rest refused
// in one line); --precision tf32 only with f32.
DType gpt2StorageType(const std::string &dtype, const std::string &precision);
// "gpu" or "cpu" as a Target; empty picks the GPU when one is usable.
Target resolveTarget(const std::string &target);

} // namespace mlpipe
