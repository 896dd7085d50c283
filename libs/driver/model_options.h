// The GPT-2 options generate, verify gpt2 and bench share, declared once.
#pragma once

#include "driver/generate.h"

#include <CLI/CLI.hpp>

#include <string>

namespace mlpipe {

struct ModelFlags {
  std::string target; // gpu, cpu; empty = gpu when there is one
  std::string mode = "sublayer";
  bool managed = false;  // GPU memory managed (the tutorial's path), not device memory
  bool noGraphs = false; // launch every kernel directly instead of replaying CUDA graphs
};

// --weights --config --seed --target --chip --managed --no-graphs (and
// --mode unless `withMode` is false).
void addModelOptions(CLI::App &app, GenerateRequest &request, ModelFlags &flags, bool withMode = true);
// Fills request.run from the flags once they are parsed.
void applyModelFlags(GenerateRequest &request, const ModelFlags &flags);
// "gpu" or "cpu" as a Target; empty picks the GPU when one is usable.
Target resolveTarget(const std::string &target);

} // namespace mlpipe
