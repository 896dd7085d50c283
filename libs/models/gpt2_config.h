// Gpt2Config: the hyper-parameters that fix a GPT-2's shapes, from a Hugging
// Face config.json or by name ("tiny" for tests, "124M" for the smallest
// published model).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlpipe {

struct Gpt2Config {
  int64_t nLayer = 0;    // transformer blocks
  int64_t nHead = 0;     // attention heads per block
  int64_t nEmbd = 0;     // model width
  int64_t vocabSize = 0; // rows of the token embedding
  int64_t nCtx = 0;      // longest sequence (rows of the position embedding)
  double layerNormEps = 1e-5;

  // Reads n_layer, n_head, n_embd, vocab_size, n_positions (or else n_ctx)
  // and the optional layer_norm_epsilon; other keys are ignored. The result
  // is validated. Throws mlpipe::Error naming the file and the key.
  static Gpt2Config fromJsonFile(const std::string &path);
  static Gpt2Config fromJsonText(std::string_view text, const std::string &source);

  // 2 layers, 2 heads, width 64, but GPT-2's real vocabulary and context, so
  // that the real tokenizer works with it.
  static Gpt2Config tiny();
  // GPT-2 small: 12 layers, 12 heads, width 768.
  static Gpt2Config gpt2_124M();
  // "tiny" or "124M".
  static Gpt2Config named(std::string_view name);

  // Throws mlpipe::Error unless every size is positive, n_embd is a multiple
  // of n_head, and the sizes are below bounds that keep a hostile config from
  // asking for absurd allocations (n_layer <= 1000, n_embd <= 65536,
  // vocab_size <= 4194304, n_ctx <= 1048576, n_head <= n_embd).
  void validate() const;

  int64_t headDim() const { return nEmbd / nHead; }
};

} // namespace mlpipe
