// Gpt2Tokenizer: GPT-2's byte-level BPE, as OpenAI's encoder.py does it.
//
// Text is split into pre-tokens by GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (a hand-written scanner, see unicode_classes.h for how letters and numbers
// are recognised), each pre-token's bytes become one symbol per byte, and
// merges are applied lowest rank first until none applies. Every byte sequence
// encodes, so decode(encode(s)) == s for any s, valid UTF-8 or not; a byte
// that is not part of well-formed UTF-8 is scanned as a punctuation character.
// Special tokens such as <|endoftext|> in the text are encoded as plain text.
//
// The vocabulary comes from either published layout: encoder.json + vocab.bpe
// (OpenAI) or vocab.json + merges.txt (Hugging Face); the formats are the same.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlpipe {

class Gpt2Tokenizer {
public:
  // Loads a vocabulary (JSON object token -> id) and a merges file
  // ("#version: ..." then one "a b" pair per line, in rank order).
  // Throws mlpipe::Error naming the file on anything malformed.
  static Gpt2Tokenizer fromFiles(const std::string &vocabJson, const std::string &mergesText);
  // The same from contents in memory; the names are used in messages.
  static Gpt2Tokenizer fromContents(std::string_view vocabJsonText, std::string_view mergesText,
                                    const std::string &vocabName = "vocab.json",
                                    const std::string &mergesName = "merges.txt");
  // Loads encoder.json + vocab.bpe, or else vocab.json + merges.txt, from `dir`.
  static Gpt2Tokenizer fromDirectory(const std::string &dir);
  // $MLPIPE_TOKENIZER_DIR if set, else <source tree>/.cache/gpt2-tokenizer
  // (filled by ci/fetch-tokenizer.sh).
  static std::string defaultDirectory();

  Gpt2Tokenizer(Gpt2Tokenizer &&) noexcept;
  Gpt2Tokenizer &operator=(Gpt2Tokenizer &&) noexcept;
  ~Gpt2Tokenizer();

  // Safe to call from several threads at once.
  std::vector<int32_t> encode(std::string_view text) const;
  // Concatenated bytes of the tokens; throws mlpipe::Error on an unknown id.
  std::string decode(const std::vector<int32_t> &ids) const;
  // The bytes of one token, for printing a stream of ids as they come. A
  // token may hold part of a UTF-8 sequence: the bytes are returned as they are.
  std::string decodeToken(int32_t id) const;
  // The id of the token whose bytes are exactly `bytes` (e.g. "<|endoftext|>").
  std::optional<int32_t> findToken(std::string_view bytes) const;
  int32_t vocabSize() const;

private:
  struct Tables;
  explicit Gpt2Tokenizer(std::unique_ptr<Tables> tables);
  std::unique_ptr<Tables> tables_;
};

} // namespace mlpipe
