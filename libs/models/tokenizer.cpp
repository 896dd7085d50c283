// GPT-2 byte-level BPE: the byte alphabet, the pre-tokeniser and the merges; see tokenizer.h.
#include "models/tokenizer.h"

#include "models/json_text.h"
#include "models/unicode_classes.h"
#include "support/error.h"
#include "support/output_file.h"

#include <array>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <mutex>
#include <queue>
#include <unordered_map>

#ifndef MLPIPE_SOURCE_DIR
#error "MLPIPE_SOURCE_DIR must name the source tree (set in libs/models/CMakeLists.txt)"
#endif

namespace mlpipe {
namespace {

using unicode::CharClass;

// ---- GPT-2's byte alphabet ------------------------------------------------
//
// bytes_to_unicode() in OpenAI's encoder.py: the printable bytes '!'..'~',
// U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the other 68 bytes
// get U+0100 onwards in byte order. Tokens in the vocabulary and merges files
// are spelled in this alphabet so that they hold no spaces or control bytes.

constexpr char32_t kAlphabetEnd = 0x100 + 68; // one past the highest stand-in

struct ByteAlphabet {
  std::array<char32_t, 256> codePointOfByte{};
  std::array<int, kAlphabetEnd> byteOfCodePoint{}; // -1 where no byte maps
};

const ByteAlphabet &byteAlphabet() {
  static const ByteAlphabet alphabet = [] {
    ByteAlphabet table;
    table.byteOfCodePoint.fill(-1);
    char32_t next = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
      char32_t cp = printable ? static_cast<char32_t>(byte) : next++;
      table.codePointOfByte[byte] = cp;
      table.byteOfCodePoint[cp] = byte;
    }
    return table;
  }();
  return alphabet;
}

// The bytes a token spelled in the alphabet stands for, or nullopt if the
// spelling is not valid UTF-8 or uses a character outside the alphabet.
std::optional<std::string> bytesOfSpelling(std::string_view spelling) {
  const ByteAlphabet &alphabet = byteAlphabet();
  std::string bytes;
  for (size_t pos = 0; pos < spelling.size();) {
    unicode::TextUnit unit = unicode::decodeUtf8At(spelling, pos);
    if (!unit.valid || unit.codePoint >= kAlphabetEnd || alphabet.byteOfCodePoint[unit.codePoint] < 0)
      return std::nullopt;
    bytes += static_cast<char>(alphabet.byteOfCodePoint[unit.codePoint]);
    pos += unit.length;
  }
  return bytes;
}

// The alphabet spelling of some bytes: how the files write the token.
std::string spellingOfBytes(std::string_view bytes) {
  std::string spelling;
  for (char byte : bytes)
    unicode::appendUtf8(spelling, byteAlphabet().codePointOfByte[static_cast<unsigned char>(byte)]);
  return spelling;
}

// ---- Pre-tokenisation -------------------------------------------------------
//
// GPT-2 splits text with the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Alternatives are tried in order and the first that matches wins; the
// functions below do the same over UTF-8 units.

CharClass classAt(std::string_view text, size_t pos) { return unicode::classify(unicode::decodeUtf8At(text, pos)); }

// Length of a contraction ('s 't 're 've 'm 'll 'd, lower case only) at the
// start of `text`, or 0.
size_t contractionLength(std::string_view text) {
  for (std::string_view suffix : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"})
    if (text.starts_with(suffix))
      return suffix.size();
  return 0;
}

// End of the run of units of class `cls` starting at `pos`.
size_t runEnd(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    unicode::TextUnit unit = unicode::decodeUtf8At(text, pos);
    if (unicode::classify(unit) != cls)
      break;
    pos += unit.length;
  }
  return pos;
}

// End of the pre-token that starts at `pos` (< text.size()).
size_t pretokenEnd(std::string_view text, size_t pos) {
  if (size_t length = contractionLength(text.substr(pos)))
    return pos + length;

  // " ?\p{L}+", " ?\p{N}+" and " ?[^\s\p{L}\p{N}]+": one optional space, then
  // a run of letters, of numbers or of other characters.
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    CharClass next = classAt(text, pos + 1);
    if (next != CharClass::Whitespace)
      return runEnd(text, pos + 1, next);
  }
  CharClass first = classAt(text, pos);
  if (first != CharClass::Whitespace)
    return runEnd(text, pos, first);

  // "\s+(?!\S)" then "\s+": a run of whitespace. When it is followed by
  // something else, its last character is left to start the next pre-token
  // (so " world" keeps its space), unless that would leave the run empty.
  size_t lastStart = pos, end = pos;
  while (end < text.size()) {
    unicode::TextUnit unit = unicode::decodeUtf8At(text, end);
    if (unicode::classify(unit) != CharClass::Whitespace)
      break;
    lastStart = end;
    end += unit.length;
  }
  if (end == text.size() || lastStart == pos)
    return end;
  return lastStart;
}

// ---- BPE --------------------------------------------------------------------

struct Merge {
  int32_t rank;   // position in the merges file: lower merges first
  int32_t result; // id of the merged token
};

uint64_t pairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Words at most this long are cached, and the cache is emptied when it holds
// this many words, so that memory stays bounded on any input.
constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kMaxCachedWords = size_t(1) << 16;

} // namespace

struct Gpt2Tokenizer::Tables {
  std::string vocabName;
  std::vector<std::string> tokenBytes; // id -> bytes
  std::unordered_map<std::string, int32_t> idOfBytes;
  std::array<int32_t, 256> byteIds{}; // the single-byte tokens
  std::unordered_map<uint64_t, Merge> merges;

  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  void loadVocabulary(std::string_view text, const std::string &name);
  void loadMerges(std::string_view text, const std::string &name);
  void bpe(std::string_view word, std::vector<int32_t> &out) const;
  void encodeWord(std::string_view word, std::vector<int32_t> &out) const;
};

void Gpt2Tokenizer::Tables::loadVocabulary(std::string_view text, const std::string &name) {
  vocabName = name;
  llvm::json::Value root = parseJson(text, name);
  const llvm::json::Object *object = root.getAsObject();
  if (!object)
    fail("{} holds {}, not a JSON object mapping tokens to ids", name, jsonKindName(root));
  size_t count = object->size();
  if (count > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("{} holds {} tokens, more than 32-bit ids can number", name, count);

  tokenBytes.assign(count, std::string());
  std::vector<bool> taken(count, false);
  for (const auto &[key, value] : *object) {
    std::string spelling = key.str();
    std::optional<std::string> bytes = bytesOfSpelling(spelling);
    if (!bytes)
      fail("{}: token '{}' has a character outside GPT-2's byte alphabet", name, spelling);
    std::optional<uint64_t> id = jsonUnsigned(value);
    if (!id)
      fail("{}: the id of token '{}' is {}, not a non-negative integer", name, spelling, jsonKindName(value));
    // Ids must number the tokens densely, so that decode can index by id.
    if (*id >= count)
      fail("{}: token '{}' has id {}, but the {} tokens must be numbered 0 to {}", name, spelling, *id, count,
           count - 1);
    if (taken[*id])
      fail("{}: tokens '{}' and '{}' share id {}", name, spellingOfBytes(tokenBytes[*id]), spelling, *id);
    taken[*id] = true;
    tokenBytes[*id] = *bytes;
    idOfBytes.emplace(std::move(*bytes), static_cast<int32_t>(*id));
  }

  // Every byte must have a token of its own, so that any text encodes.
  for (int byte = 0; byte < 256; ++byte) {
    auto it = idOfBytes.find(std::string(1, static_cast<char>(byte)));
    if (it == idOfBytes.end())
      fail("{} has no token for the byte 0x{:02x}", name, byte);
    byteIds[byte] = it->second;
  }
}

void Gpt2Tokenizer::Tables::loadMerges(std::string_view text, const std::string &name) {
  int32_t rank = 0;
  size_t lineNumber = 0;
  for (size_t pos = 0; pos < text.size();) {
    ++lineNumber;
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.ends_with('\r'))
      line.remove_suffix(1);
    if ((lineNumber == 1 && line.starts_with("#version")) || line.empty())
      continue;

    size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      fail("{}: line {} is not two tokens separated by one space", name, lineNumber);
    std::string_view leftSpelling = line.substr(0, space), rightSpelling = line.substr(space + 1);
    std::optional<std::string> left = bytesOfSpelling(leftSpelling);
    std::optional<std::string> right = bytesOfSpelling(rightSpelling);
    if (!left || !right)
      fail("{}: line {} has a character outside GPT-2's byte alphabet", name, lineNumber);

    // The two parts and their concatenation must all be tokens: encode relies
    // on every symbol it builds having an id.
    auto idOf = [&](const std::string &bytes) {
      auto it = idOfBytes.find(bytes);
      if (it == idOfBytes.end())
        fail("{}: line {} needs the token '{}', which {} lacks", name, lineNumber, spellingOfBytes(bytes), vocabName);
      return it->second;
    };
    int32_t leftId = idOf(*left), rightId = idOf(*right), resultId = idOf(*left + *right);
    if (rank == std::numeric_limits<int32_t>::max())
      fail("{} holds more merges than 32-bit ranks can number", name);
    // A repeated pair takes its later rank, as in encoder.py's dict.
    merges[pairKey(leftId, rightId)] = Merge{rank++, resultId};
  }
}

// Byte-pair encoding of one pre-token. encoder.py repeatedly takes the pair of
// adjacent symbols with the lowest merge rank and merges every occurrence of
// it, left to right. Here the candidate pairs wait in a heap ordered by (rank,
// position); all candidates of the lowest rank are taken out together and
// merged left to right, skipping those a previous merge has made stale. A
// merge only creates pairs that contain the new token, and none of them can
// have the rank being processed, so the result is the same as encoder.py's,
// in O(n log n) rather than O(n^2) for long words.
void Gpt2Tokenizer::Tables::bpe(std::string_view word, std::vector<int32_t> &out) const {
  struct Symbol {
    int32_t id;
    int64_t prev, next; // neighbours in the word, -1 at the ends
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int64_t left, right;     // symbol positions
    int32_t leftId, rightId; // what the pair held when it was found
    int32_t result;
    bool operator>(const Candidate &other) const { return rank != other.rank ? rank > other.rank : left > other.left; }
  };

  const int64_t n = static_cast<int64_t>(word.size());
  std::vector<Symbol> symbols(word.size());
  for (int64_t i = 0; i < n; ++i)
    symbols[i] = Symbol{byteIds[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](int64_t left) {
    int64_t right = symbols[left].next;
    if (right < 0)
      return;
    auto it = merges.find(pairKey(symbols[left].id, symbols[right].id));
    if (it != merges.end())
      heap.push(Candidate{it->second.rank, left, right, symbols[left].id, symbols[right].id, it->second.result});
  };
  for (int64_t i = 0; i + 1 < n; ++i)
    consider(i);

  std::vector<Candidate> batch;
  while (!heap.empty()) {
    // The heap's order makes the batch sorted by position.
    int32_t rank = heap.top().rank;
    batch.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      batch.push_back(heap.top());
      heap.pop();
    }
    for (const Candidate &pair : batch) {
      Symbol &left = symbols[pair.left];
      Symbol &right = symbols[pair.right];
      if (!left.alive || !right.alive || left.next != pair.right || left.id != pair.leftId || right.id != pair.rightId)
        continue; // an earlier merge took one of its symbols
      left.id = pair.result;
      left.next = right.next;
      right.alive = false;
      if (right.next >= 0)
        symbols[right.next].prev = pair.left;
      if (left.prev >= 0)
        consider(left.prev);
      consider(pair.left);
    }
  }
  for (int64_t i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next)
    out.push_back(symbols[i].id);
}

void Gpt2Tokenizer::Tables::encodeWord(std::string_view word, std::vector<int32_t> &out) const {
  if (word.size() > kMaxCachedWordBytes) {
    bpe(word, out);
    return;
  }
  std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  bpe(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cacheMutex);
  if (cache.size() >= kMaxCachedWords)
    cache.clear();
  cache.emplace(std::move(key), std::move(ids));
}

// ---- Gpt2Tokenizer ----------------------------------------------------------

Gpt2Tokenizer::Gpt2Tokenizer(std::unique_ptr<Tables> tables) : tables_(std::move(tables)) {}
Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Tokenizer &&) noexcept = default;
Gpt2Tokenizer &Gpt2Tokenizer::operator=(Gpt2Tokenizer &&) noexcept = default;
Gpt2Tokenizer::~Gpt2Tokenizer() = default;

Gpt2Tokenizer Gpt2Tokenizer::fromContents(std::string_view vocabJsonText, std::string_view mergesText,
                                          const std::string &vocabName, const std::string &mergesName) {
  auto tables = std::make_unique<Tables>();
  tables->loadVocabulary(vocabJsonText, vocabName);
  tables->loadMerges(mergesText, mergesName);
  return Gpt2Tokenizer(std::move(tables));
}

Gpt2Tokenizer Gpt2Tokenizer::fromFiles(const std::string &vocabJson, const std::string &mergesText) {
  // Read in order, so that a missing vocabulary is reported before the merges.
  std::string vocabulary = readInput(vocabJson);
  std::string merges = readInput(mergesText);
  return fromContents(vocabulary, merges, vocabJson, mergesText);
}

Gpt2Tokenizer Gpt2Tokenizer::fromDirectory(const std::string &dir) {
  namespace fs = std::filesystem;
  auto bothExist = [&](const char *vocab, const char *merges) {
    std::error_code ignored;
    return fs::is_regular_file(fs::path(dir) / vocab, ignored) && fs::is_regular_file(fs::path(dir) / merges, ignored);
  };
  for (auto [vocab, merges] : {std::pair{"encoder.json", "vocab.bpe"}, std::pair{"vocab.json", "merges.txt"}})
    if (bothExist(vocab, merges))
      return fromFiles((fs::path(dir) / vocab).string(), (fs::path(dir) / merges).string());
  fail("{} holds no GPT-2 tokenizer: expected encoder.json with vocab.bpe, or vocab.json with merges.txt "
       "(ci/fetch-tokenizer.sh fetches them)",
       dir);
}

std::string Gpt2Tokenizer::defaultDirectory() {
  const char *fromEnvironment = std::getenv("MLPIPE_TOKENIZER_DIR");
  if (fromEnvironment && *fromEnvironment)
    return fromEnvironment;
  return std::string(MLPIPE_SOURCE_DIR) + "/.cache/gpt2-tokenizer";
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = pretokenEnd(text, pos);
    tables_->encodeWord(text.substr(pos, end - pos), ids);
    pos = end;
  }
  return ids;
}

std::string Gpt2Tokenizer::decodeToken(int32_t id) const {
  if (id < 0 || id >= vocabSize())
    fail("token id {} is outside the vocabulary of {} (ids 0 to {})", id, tables_->vocabName, vocabSize() - 1);
  return tables_->tokenBytes[static_cast<size_t>(id)];
}

std::string Gpt2Tokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (int32_t id : ids)
    text += decodeToken(id);
  return text;
}

std::optional<int32_t> Gpt2Tokenizer::findToken(std::string_view bytes) const {
  auto it = tables_->idOfBytes.find(std::string(bytes));
  if (it == tables_->idOfBytes.end())
    return std::nullopt;
  return it->second;
}

int32_t Gpt2Tokenizer::vocabSize() const { return static_cast<int32_t>(tables_->tokenBytes.size()); }

} // namespace mlpipe
