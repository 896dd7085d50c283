#include "models/gpt2_weights.h"

#include "models/gpt2.h"
#include "models/safetensors.h"
#include "support/error.h"
#include "support/memory.h"
#include "support/statistics.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <random>

namespace mlpipe {

namespace {

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

HostTensor syntheticTensor(const ParameterSpec &spec, const Gpt2Config &config, uint64_t seed) {
  std::mt19937_64 generator(seed ^ stableHash(spec.name));
  bool layerNormWeight =
      endsWith(spec.name, "ln_1.weight") || endsWith(spec.name, "ln_2.weight") || spec.name == "ln_f.weight";
  double mean = layerNormWeight ? 1.0 : 0.0;
  double scale = 0.02;
  if (layerNormWeight)
    scale = 0.1;
  else if (spec.name == "wpe.weight")
    scale = 0.01;
  else if (endsWith(spec.name, "c_proj.weight"))
    scale = 0.02 / std::sqrt(2.0 * static_cast<double>(config.nLayer));
  std::normal_distribution<float> normal(static_cast<float>(mean), static_cast<float>(scale));
  HostTensor tensor(DType::f32, spec.shape);
  float *values = tensor.as<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i)
    values[i] = normal(generator);
  return tensor;
}

// Refuses, before anything is allocated, weights that do not fit in the
// host memory available now, naming the largest tensor.
void checkWeightsFit(const Gpt2Config &config) {
  int64_t total = 0, parameters = 0;
  ParameterSpec largest;
  int64_t largestBytes = -1;
  for (ParameterSpec &spec : gpt2Parameters(config)) {
    int64_t bytes = byteSize(spec.shape, DType::f32);
    total += bytes;
    parameters += numElements(spec.shape);
    if (bytes > largestBytes) {
      largestBytes = bytes;
      largest = std::move(spec);
    }
  }
  checkHostMemory(fmt::format("the GPT-2 weights ({} parameters in f32; the largest, {} of shape {}, takes {})",
                              parameters, largest.name, formatShape(largest.shape), humanBytes(double(largestBytes))),
                  total);
}

} // namespace

Gpt2Weights Gpt2Weights::synthetic(const Gpt2Config &config, uint64_t seed) {
  config.validate();
  checkWeightsFit(config);
  Gpt2Weights weights;
  weights.config_ = config;
  for (const ParameterSpec &spec : gpt2Parameters(config))
    weights.tensors_.emplace(spec.name, syntheticTensor(spec, config, seed));
  weights.description_ = "synthetic weights (seed " + std::to_string(seed) + ")";
  return weights;
}

Gpt2Weights Gpt2Weights::fromSafetensors(const std::string &path, const Gpt2Config &config) {
  config.validate();
  checkWeightsFit(config);
  SafetensorsFile file = SafetensorsFile::open(path);
  Gpt2Weights weights;
  weights.config_ = config;
  for (const ParameterSpec &spec : gpt2Parameters(config)) {
    // Some exports keep the "transformer." prefix of GPT2LMHeadModel.
    std::string name =
        file.contains(spec.name) || !file.contains("transformer." + spec.name) ? spec.name : "transformer." + spec.name;
    HostTensor tensor = file.readExpecting(name, spec.shape);
    if (tensor.dtype() != DType::f32)
      fail("{}: tensor '{}' is {}, but mlpipe runs GPT-2 in f32", path, name, dtypeName(tensor.dtype()));
    weights.tensors_.emplace(spec.name, std::move(tensor));
  }
  weights.description_ = path;
  return weights;
}

const HostTensor &Gpt2Weights::tensor(const std::string &name) const {
  auto found = tensors_.find(name);
  if (found == tensors_.end())
    fail("the GPT-2 weights have no tensor '{}'", name);
  return found->second;
}

std::pair<std::string, int64_t> Gpt2Weights::nonFiniteValues() const {
  for (const auto &[name, tensor] : tensors_) {
    const float *values = tensor.as<float>();
    int64_t count = 0;
    for (int64_t i = 0; i < tensor.numel(); ++i)
      count += std::isfinite(values[i]) ? 0 : 1;
    if (count > 0)
      return {name, count};
  }
  return {"", 0};
}

void Gpt2Weights::save(const std::string &path) const { writeSafetensors(path, tensors_); }

Gpt2Config resolveGpt2Config(const std::string &spec) {
  if (spec == "tiny" || spec == "124M")
    return Gpt2Config::named(spec);
  if (!std::filesystem::exists(spec))
    fail("--config '{}' is neither tiny, 124M nor an existing config.json", spec);
  return Gpt2Config::fromJsonFile(spec);
}

Gpt2Weights loadGpt2Weights(const std::string &weights, const std::string &config, uint64_t seed) {
  if (weights == "synthetic")
    return Gpt2Weights::synthetic(resolveGpt2Config(config.empty() ? "124M" : config), seed);
  if (!std::filesystem::exists(weights))
    fail("--weights '{}' is neither 'synthetic' nor an existing model.safetensors", weights);
  std::string configPath = config;
  if (configPath.empty()) {
    configPath = (std::filesystem::path(weights).parent_path() / "config.json").string();
    if (!std::filesystem::exists(configPath))
      fail("no config.json beside {}: pass --config tiny, 124M or a config.json", weights);
  }
  return Gpt2Weights::fromSafetensors(weights, resolveGpt2Config(configPath));
}

} // namespace mlpipe
