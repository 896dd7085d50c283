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
  // Batched decoding: a file of prompts, one a line ("-" = stdin), decoded
  // together, and how many run at once (0: all of them, at most
  // kDefaultBatch).
  std::string promptsFile;
  int64_t batch = 0;
};

// The sequences generate --prompts decodes at once unless --batch says:
// the largest batch bench measures (GPT-2 124M's f32 KV caches of 64
// sequences take 4.8 GB).
constexpr int64_t kDefaultBatch = 64;

void generate(const GenerateRequest &request, std::ostream &out);

// generate --prompts: every prompt of request.promptsFile continued by
// request.tokens greedy tokens, request.batch (or kDefaultBatch) sequences
// at a time: each prompt prefilled alone into its slot of a batched KV
// cache, then one batched decode step per token for all of them. Each
// sequence's text is printed in the file's order (as generate prints one,
// followed by an empty line), then the time split as generate's.
void generateBatched(const GenerateRequest &request, std::ostream &out);

// The prompts of a --prompts file ("-" = stdin), one a line (a trailing
// '\r' dropped); refuses a file without any and an empty line, naming it.
std::vector<std::string> readPrompts(const std::string &path);

// The prompt's token ids, refusing an empty prompt and one that, with
// `continuation` more tokens, does not fit the context.
std::vector<int32_t> promptTokens(const std::string &prompt, int64_t continuation, const Gpt2Config &config,
                                  const Gpt2Tokenizer &tokenizer);

// argmax of one row of logits (the first maximum on ties).
int32_t greedyToken(const HostTensor &logits, int64_t row);

} // namespace mlpipe
