// Gpt2Config: the published 124M config.json, the named configs, and refused keys and sizes.
#define BOOST_TEST_MODULE gpt2_config
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "models/gpt2_config.h"
#include "support/error.h"

#include <functional>

using namespace mlpipe;
using mlpipe::testing::messageOf;

namespace {

const char *kSmallConfig = R"({"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 100, "n_positions": 32})";

// kSmallConfig with one key's value replaced (or the key removed when value is empty).
std::string withKey(const std::string &key, const std::string &value) {
  std::string text = kSmallConfig;
  size_t start = text.find("\"" + key + "\"");
  size_t end = text.find_first_of(",}", start);
  std::string replacement = value.empty() ? "\"unused\": 0" : "\"" + key + "\": " + value;
  return text.replace(start, end - start, replacement);
}

void refusedWith(const std::string &text, const std::string &needle) {
  std::string message = messageOf([&] { Gpt2Config::fromJsonText(text, "config.json"); });
  BOOST_TEST_CONTEXT("message: " << message) { BOOST_TEST(message.find(needle) != std::string::npos); }
}

} // namespace

BOOST_AUTO_TEST_CASE(reads_the_published_124M_config) {
  Gpt2Config config = Gpt2Config::fromJsonFile(std::string(MLPIPE_TESTDATA) + "/gpt2/config.json");
  BOOST_TEST(config.nLayer == 12);
  BOOST_TEST(config.nHead == 12);
  BOOST_TEST(config.nEmbd == 768);
  BOOST_TEST(config.vocabSize == 50257);
  BOOST_TEST(config.nCtx == 1024);
  BOOST_TEST(config.layerNormEps == 1e-5);
  BOOST_TEST(config.headDim() == 64);
  Gpt2Config named = Gpt2Config::named("124M");
  BOOST_TEST(named.nLayer == config.nLayer);
  BOOST_TEST(named.nEmbd == config.nEmbd);
  BOOST_TEST(named.vocabSize == config.vocabSize);
}

BOOST_AUTO_TEST_CASE(reads_optional_and_fallback_keys) {
  Gpt2Config config = Gpt2Config::fromJsonText(kSmallConfig, "config.json");
  BOOST_TEST(config.nCtx == 32);
  BOOST_TEST(config.layerNormEps == 1e-5);
  std::string oldStyle = R"({"n_layer": 2, "n_head": 4, "n_embd": 64, "vocab_size": 100, "n_ctx": 16,
                             "layer_norm_epsilon": 1e-6})";
  Gpt2Config old = Gpt2Config::fromJsonText(oldStyle, "config.json");
  BOOST_TEST(old.nCtx == 16);
  BOOST_TEST(old.layerNormEps == 1e-6);
}

BOOST_AUTO_TEST_CASE(names_the_built_in_configs) {
  Gpt2Config tiny = Gpt2Config::named("tiny");
  BOOST_TEST(tiny.nLayer == 2);
  BOOST_TEST(tiny.nHead == 2);
  BOOST_TEST(tiny.nEmbd == 64);
  BOOST_TEST(tiny.vocabSize == 50257);
  BOOST_TEST(tiny.nCtx == 1024);
  BOOST_CHECK_NO_THROW(tiny.validate());
  BOOST_CHECK_NO_THROW(Gpt2Config::gpt2_124M().validate());
  std::string message = messageOf([] { Gpt2Config::named("1.5B"); });
  BOOST_TEST(message.find("'1.5B'") != std::string::npos);
  BOOST_TEST(message.find("tiny and 124M") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_missing_and_ill_typed_keys) {
  refusedWith(withKey("n_head", ""), "config.json has no key 'n_head'");
  refusedWith(withKey("n_positions", ""), "config.json has neither 'n_positions' nor 'n_ctx'");
  refusedWith(withKey("n_head", "\"4\""), "config.json: key 'n_head' is a string, not an integer");
  refusedWith(withKey("n_layer", "2.5"), "config.json: key 'n_layer' is 2.5, not an integer");
  refusedWith(withKey("n_layer", "1e300"), "key 'n_layer' is 1e+300, not an integer");
  refusedWith(withKey("vocab_size", "null"), "key 'vocab_size' is null, not an integer");
  refusedWith(withKey("n_embd", "[64]"), "key 'n_embd' is an array, not an integer");
  refusedWith(std::string(kSmallConfig).replace(1, 0, "\"layer_norm_epsilon\": \"small\", "),
              "key 'layer_norm_epsilon' is a string, not a number");
  refusedWith("[1, 2]", "config.json holds an array, not a JSON object");
  refusedWith("{\"n_layer\": ", "config.json is not valid JSON");
  BOOST_TEST(messageOf([] { Gpt2Config::fromJsonFile("/nonexistent/config.json"); }).find("/nonexistent/config.json") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_impossible_sizes) {
  refusedWith(withKey("n_embd", "770"), "config.json: n_embd 770 is not divisible by n_head 4");
  refusedWith(withKey("n_layer", "0"), "config.json: n_layer is 0, but must be between 1 and 1000");
  refusedWith(withKey("n_head", "-4"), "n_head is -4, but must be between 1 and 64");
  refusedWith(withKey("n_layer", "1001"), "n_layer is 1001, but must be between 1 and 1000");
  refusedWith(withKey("n_embd", "131072"), "n_embd is 131072, but must be between 1 and 16384");
  refusedWith(withKey("n_embd", "65536"), "n_embd is 65536, but must be between 1 and 16384");
  refusedWith(withKey("vocab_size", "2000000"), "vocab_size is 2000000, but must be between 1 and 1048576");
  refusedWith(withKey("vocab_size", "9223372036854775807"), "vocab_size is 9223372036854775807");
  refusedWith(withKey("n_positions", "2000000"), "n_positions is 2000000, but must be between 1 and 1048576");
  refusedWith(std::string(kSmallConfig).replace(1, 0, "\"layer_norm_epsilon\": 0, "),
              "layer_norm_epsilon is 0, but must be a positive number below 1");
  Gpt2Config config = Gpt2Config::tiny();
  config.nHead = 3;
  BOOST_TEST(messageOf([&] { config.validate(); }) == "GPT-2 config: n_embd 64 is not divisible by n_head 3");
}
