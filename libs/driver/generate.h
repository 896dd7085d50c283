// generate's body: greedy decoding from a prompt, printing the text as it
// goes, then a timing summary that splits compiling from running.
#pragma once

#include "driver/gpt2_runner.h"
#include "models/tokenizer.h"

#include <cstdint>
#include <ostream>
#include <string>

namespace mlpipe {

struct GenerateRequest {
  std::string prompt;
  int64_t tokens = 10;
  Gpt2RunOptions run;
  std::string weights = "synthetic"; // or a model.safetensors path
  std::string config;                // tiny, 124M, a config.json; default: 124M or beside the weights
  uint64_t seed = 1;                 // synthetic weights
  // Decode with the KV cache (prefill the prompt, then one decode step per
  // token), or run every step as a forward over the whole sequence.
  bool kvCache = true;
};

void generate(const GenerateRequest &request, std::ostream &out);

// The prompt's token ids, refusing an empty prompt and one that, with
// `continuation` more tokens, does not fit the context.
std::vector<int32_t> promptTokens(const std::string &prompt, int64_t continuation, const Gpt2Config &config,
                                  const Gpt2Tokenizer &tokenizer);

// argmax of one row of logits (the first maximum on ties).
int32_t greedyToken(const HostTensor &logits, int64_t row);

} // namespace mlpipe
