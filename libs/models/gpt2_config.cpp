// GPT-2 hyper-parameters from config.json or by name; see gpt2_config.h.
#include "models/gpt2_config.h"

#include "models/json_text.h"
#include "support/error.h"
#include "support/output_file.h"

#include <cmath>
#include <limits>

namespace mlpipe {
namespace {

// Checks the sizes; `what` starts each message (the file, or "GPT-2 config").
void checkConfig(const Gpt2Config &config, const std::string &what) {
  auto checkRange = [&](const char *key, int64_t value, int64_t limit) {
    if (value < 1 || value > limit)
      fail("{}: {} is {}, but must be between 1 and {}", what, key, value, limit);
  };
  // Limits well above any published GPT (GPT-3 175B: 96 layers, n_embd
  // 12288; vocabularies up to a few hundred thousand), so that a typo is
  // refused here rather than by the memory check of the weights.
  checkRange("n_layer", config.nLayer, 1000);
  checkRange("n_embd", config.nEmbd, int64_t(1) << 14);
  checkRange("n_head", config.nHead, config.nEmbd);
  checkRange("vocab_size", config.vocabSize, int64_t(1) << 20);
  checkRange("n_positions", config.nCtx, int64_t(1) << 20);
  if (config.nEmbd % config.nHead != 0)
    fail("{}: n_embd {} is not divisible by n_head {}", what, config.nEmbd, config.nHead);
  if (!(config.layerNormEps > 0 && config.layerNormEps < 1))
    fail("{}: layer_norm_epsilon is {}, but must be a positive number below 1", what, config.layerNormEps);
}

// An integer-valued JSON number, or nullopt. Doubles are converted only when
// small enough to be exact, never out of range.
std::optional<int64_t> integerValue(const llvm::json::Value &value) {
  if (std::optional<uint64_t> unsignedValue = jsonUnsigned(value)) {
    if (*unsignedValue > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
    return static_cast<int64_t>(*unsignedValue);
  }
  std::optional<double> number = value.getAsNumber();
  if (!number || !(std::fabs(*number) < 9.0e15) || std::trunc(*number) != *number)
    return std::nullopt;
  return static_cast<int64_t>(*number);
}

// What a value is, for "key 'x' is ..., not an integer": the number itself
// when it is one.
std::string describeValue(const llvm::json::Value &value) {
  if (std::optional<double> number = value.getAsNumber())
    return fmt::format("{}", *number);
  return jsonKindName(value);
}

int64_t integerKey(const llvm::json::Object &object, const char *key, const std::string &source) {
  const llvm::json::Value *value = object.get(key);
  if (!value)
    fail("{} has no key '{}'", source, key);
  std::optional<int64_t> integer = integerValue(*value);
  if (!integer)
    fail("{}: key '{}' is {}, not an integer", source, key, describeValue(*value));
  return *integer;
}

} // namespace

Gpt2Config Gpt2Config::fromJsonText(std::string_view text, const std::string &source) {
  llvm::json::Value root = parseJson(text, source);
  const llvm::json::Object *object = root.getAsObject();
  if (!object)
    fail("{} holds {}, not a JSON object", source, jsonKindName(root));

  Gpt2Config config;
  config.nLayer = integerKey(*object, "n_layer", source);
  config.nHead = integerKey(*object, "n_head", source);
  config.nEmbd = integerKey(*object, "n_embd", source);
  config.vocabSize = integerKey(*object, "vocab_size", source);
  // Hugging Face names the context n_positions; older files only have n_ctx.
  if (!object->get("n_positions") && !object->get("n_ctx"))
    fail("{} has neither 'n_positions' nor 'n_ctx'", source);
  config.nCtx = integerKey(*object, object->get("n_positions") ? "n_positions" : "n_ctx", source);
  if (const llvm::json::Value *eps = object->get("layer_norm_epsilon")) {
    std::optional<double> number = eps->getAsNumber();
    if (!number)
      fail("{}: key 'layer_norm_epsilon' is {}, not a number", source, jsonKindName(*eps));
    config.layerNormEps = *number;
  }
  checkConfig(config, source);
  return config;
}

Gpt2Config Gpt2Config::fromJsonFile(const std::string &path) { return fromJsonText(readInput(path), path); }

Gpt2Config Gpt2Config::tiny() { return Gpt2Config{2, 2, 64, 50257, 1024, 1e-5}; }

Gpt2Config Gpt2Config::gpt2_124M() { return Gpt2Config{12, 12, 768, 50257, 1024, 1e-5}; }

Gpt2Config Gpt2Config::named(std::string_view name) {
  if (name == "tiny")
    return tiny();
  if (name == "124M")
    return gpt2_124M();
  fail("unknown GPT-2 configuration '{}': the named ones are tiny and 124M", name);
}

void Gpt2Config::validate() const { checkConfig(*this, "GPT-2 config"); }

} // namespace mlpipe
