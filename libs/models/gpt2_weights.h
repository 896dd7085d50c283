// Gpt2Weights: a GPT-2's parameters by Hugging Face name, from a
// model.safetensors or made up deterministically for tests and demos.
#pragma once

#include "models/gpt2_config.h"
#include "support/host_tensor.h"

#include <cstdint>
#include <map>
#include <string>

namespace mlpipe {

class Gpt2Weights {
public:
  // Deterministic in (config, seed): each tensor is drawn from a generator
  // seeded by the seed and the tensor's name, with GPT-2's initial scales
  // (0.02, projections 0.02/sqrt(2L), layer-norm weights near 1).
  static Gpt2Weights synthetic(const Gpt2Config &config, uint64_t seed);
  // Reads every parameter from a Hugging Face GPT-2 model.safetensors
  // (names with or without a "transformer." prefix; Conv1D [in, out]; the
  // lm head tied to wte). Throws mlpipe::Error on a missing tensor or a
  // shape that disagrees with the config.
  static Gpt2Weights fromSafetensors(const std::string &path, const Gpt2Config &config);

  const Gpt2Config &config() const { return config_; }
  const HostTensor &tensor(const std::string &name) const;
  const std::map<std::string, HostTensor> &tensors() const { return tensors_; }
  // "synthetic 124M weights (seed 1)" or the file's path, for reports.
  const std::string &description() const { return description_; }

  void save(const std::string &path) const;

  // The first tensor holding a NaN or an infinity and how many it holds
  // ("" and 0 when every value is finite): such weights make every token
  // meaningless.
  std::pair<std::string, int64_t> nonFiniteValues() const;

private:
  Gpt2Config config_;
  std::map<std::string, HostTensor> tensors_;
  std::string description_;
};

// A --config value: "tiny", "124M" or the path of a config.json.
Gpt2Config resolveGpt2Config(const std::string &spec);

// --weights and --config as the tools take them: weights "synthetic" (with
// seed and config, default 124M) or a model.safetensors path, whose config
// is --config or else the config.json beside it.
Gpt2Weights loadGpt2Weights(const std::string &weights, const std::string &config, uint64_t seed);

} // namespace mlpipe
