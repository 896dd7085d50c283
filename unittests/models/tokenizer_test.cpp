// Gpt2Tokenizer against the published GPT-2 files (ci/fetch-tokenizer.sh) and small made-up ones.
#define BOOST_TEST_MODULE tokenizer
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "models/tokenizer.h"
#include "support/error.h"
#include "support/output_file.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <unistd.h>

using namespace mlpipe;
using mlpipe::testing::messageOf;
namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

namespace {

// The published GPT-2 files, fetched by ci/fetch-tokenizer.sh. Loaded once.
const Gpt2Tokenizer &gpt2() {
  static const std::optional<Gpt2Tokenizer> tokenizer = []() -> std::optional<Gpt2Tokenizer> {
    std::string dir = Gpt2Tokenizer::defaultDirectory();
    if (!fs::exists(fs::path(dir) / "encoder.json") || !fs::exists(fs::path(dir) / "vocab.bpe"))
      return std::nullopt;
    return Gpt2Tokenizer::fromDirectory(dir);
  }();
  if (!tokenizer)
    BOOST_FAIL("the GPT-2 tokenizer files are missing from " + Gpt2Tokenizer::defaultDirectory() +
               ": run ci/fetch-tokenizer.sh");
  return *tokenizer;
}

std::string gpt2File(const char *name) { return (fs::path(Gpt2Tokenizer::defaultDirectory()) / name).string(); }

// A fresh empty directory, removed at the end of the scope.
struct TemporaryDirectory {
  fs::path path;
  TemporaryDirectory() {
    path = fs::temp_directory_path() /
           ("mlpipe-tokenizer-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  std::string file(const std::string &name) const { return (path / name).string(); }
};

void checkRoundTrip(const Gpt2Tokenizer &tokenizer, const std::string &text) {
  BOOST_TEST(tokenizer.decode(tokenizer.encode(text)) == text);
}

// GPT-2's bytes_to_unicode(), written independently of the library: how the
// files spell each byte.
std::string spellByte(unsigned char byte) {
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int cp = printable ? b : next++;
    if (b == byte) {
      std::string utf8;
      if (cp < 0x80) {
        utf8 += static_cast<char>(cp);
      } else {
        utf8 += static_cast<char>(0xC0 | (cp >> 6));
        utf8 += static_cast<char>(0x80 | (cp & 0x3F));
      }
      return utf8;
    }
  }
  return "";
}

std::string spell(const std::string &bytes) {
  std::string out;
  for (char c : bytes)
    out += spellByte(static_cast<unsigned char>(c));
  return out;
}

// JSON string literal for a spelled token (the spellings hold no control
// characters; quotes and backslashes need escaping).
std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

// A vocabulary of the 256 bytes plus `extra` tokens (bytes), ids in that order.
std::string vocabJson(const std::vector<std::string> &extra = {}) {
  std::vector<std::string> spellings;
  for (int byte = 0; byte < 256; ++byte)
    spellings.push_back(spellByte(static_cast<unsigned char>(byte)));
  for (const std::string &token : extra)
    spellings.push_back(spell(token));
  std::string json = "{";
  for (size_t id = 0; id < spellings.size(); ++id)
    json += (id ? ", " : "") + jsonString(spellings[id]) + ": " + std::to_string(id);
  return json + "}";
}

// encoder.py's bpe(), the plain way: merge every occurrence of the
// lowest-ranked adjacent pair, left to right, until no pair has a rank.
std::vector<std::string> referenceBpe(const std::string &word,
                                      const std::map<std::pair<std::string, std::string>, int> &ranks) {
  std::vector<std::string> symbols;
  for (char c : word)
    symbols.push_back(std::string(1, c));
  while (symbols.size() > 1) {
    int best = -1;
    std::pair<std::string, std::string> bestPair;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = ranks.find({symbols[i], symbols[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best))
        best = it->second, bestPair = it->first;
    }
    if (best < 0)
      break;
    std::vector<std::string> merged;
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == bestPair.first && symbols[i + 1] == bestPair.second) {
        merged.push_back(symbols[i] + symbols[i + 1]);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  return symbols;
}

std::string randomBytes(std::mt19937 &rng, size_t maxLength) {
  std::string text(std::uniform_int_distribution<size_t>(0, maxLength)(rng), '\0');
  for (char &c : text)
    c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
  return text;
}

} // namespace

BOOST_AUTO_TEST_CASE(encodes_known_texts) {
  const Gpt2Tokenizer &tokenizer = gpt2();
  BOOST_TEST(tokenizer.vocabSize() == 50257);
  BOOST_TEST(tokenizer.encode("Hello world") == (Ids{15496, 995}), boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode(" Hello") == (Ids{18435}), boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode("Hello, world!") == (Ids{15496, 11, 995, 0}), boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode("The quick brown fox jumps over the lazy dog.") ==
                 (Ids{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}),
             boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode("I'm sure you'll see 2024 results") == (Ids{40, 1101, 1654, 345, 1183, 766, 48609, 2482}),
             boost::test_tools::per_element());
  // Whitespace runs leave their last space to the word that follows.
  BOOST_TEST(tokenizer.encode("   leading") == (Ids{220, 220, 3756}), boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode("trailing   ") == (Ids{9535, 4386, 220, 220, 220}), boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode("line1\nline2\n\nline3") == (Ids{1370, 16, 198, 1370, 17, 198, 198, 1370, 18}),
             boost::test_tools::per_element());
  // Special tokens in the text are plain text.
  BOOST_TEST(tokenizer.encode("<|endoftext|>") == (Ids{27, 91, 437, 1659, 5239, 91, 29}),
             boost::test_tools::per_element());
  BOOST_TEST(tokenizer.encode("").empty());
}

BOOST_AUTO_TEST_CASE(decodes_tokens) {
  const Gpt2Tokenizer &tokenizer = gpt2();
  BOOST_TEST(tokenizer.decode({15496, 11, 995, 0}) == "Hello, world!");
  BOOST_TEST(tokenizer.decodeToken(18435) == " Hello");
  BOOST_TEST(tokenizer.decodeToken(198) == "\n");
  BOOST_TEST(tokenizer.findToken("<|endoftext|>").value_or(-1) == 50256);
  BOOST_TEST(tokenizer.decodeToken(50256) == "<|endoftext|>");
  BOOST_TEST(!tokenizer.findToken("no such token here").has_value());
}

BOOST_AUTO_TEST_CASE(decodes_tokens_that_split_utf8_sequences) {
  const Gpt2Tokenizer &tokenizer = gpt2();
  // "日" is E6 97 A5; GPT-2 has no token for it, so it spans several tokens.
  Ids ids = tokenizer.encode("日");
  BOOST_TEST(ids.size() > 1u);
  std::string streamed;
  for (int32_t id : ids)
    streamed += tokenizer.decodeToken(id);
  BOOST_TEST(streamed == "日");
  // The first token alone is a proper prefix of the character's bytes.
  std::string first = tokenizer.decodeToken(ids.front());
  BOOST_TEST(!first.empty());
  BOOST_TEST(first.size() < 3u);
  BOOST_TEST(std::string("日").starts_with(first));
  // The token of a lone lead byte decodes to that byte.
  Ids lone = tokenizer.encode("\xE6");
  BOOST_TEST(lone.size() == 1u);
  BOOST_TEST(tokenizer.decode(lone) == "\xE6");
}

BOOST_AUTO_TEST_CASE(round_trips_varied_text) {
  const Gpt2Tokenizer &tokenizer = gpt2();
  for (const char *text : {"Hello world",
                           "café naïve résumé é",
                           "日本語のテキスト",
                           "emoji 🎉👍🏽👨‍👩‍👧 done",
                           "  two spaces, \t\ttabs\n\n\nnewlines \r\n crlf   ",
                           "I'm, you're, we've, he'll, she'd, it's, don't",
                           "'S 'T 'RE uppercase contractions",
                           "digits 0123456789 3.14159 1,000,000 ١٢٣ ४२",
                           "Ⅻ ½ ² ³",
                           "Привет мир",
                           "مرحبا بالعالم",
                           "नमस्ते दुनिया",
                           "e\u0301 combining",
                           "\u00a0nbsp\u3000ideographic\u2003em",
                           "<|endoftext|>",
                           "http://example.com/a?b=c&d=%20",
                           "trailing space ",
                           " ",
                           "\n",
                           "a"})
    checkRoundTrip(tokenizer, text);
}

BOOST_AUTO_TEST_CASE(round_trips_random_bytes) {
  const Gpt2Tokenizer &tokenizer = gpt2();
  unsigned seed = std::random_device{}();
  BOOST_TEST_MESSAGE("random seed " << seed);
  std::mt19937 rng(seed);
  for (int i = 0; i < 500; ++i) {
    std::string text = randomBytes(rng, 64);
    BOOST_TEST_CONTEXT("seed " << seed << ", case " << i) { checkRoundTrip(tokenizer, text); }
  }
  // Random text that is mostly valid UTF-8 across scripts.
  const std::vector<std::string> pieces = {"a",  "Z", " ",      "  ",     "\n", "'s",       "'ll",  "7",    "42",  "é",
                                           "日", "🎉", "\u0301", "\u00a0", "!",  "\xF0\x9F", "\xC3", "\x80", "\xFF"};
  for (int i = 0; i < 500; ++i) {
    std::string text;
    for (int n = std::uniform_int_distribution<int>(0, 12)(rng); n > 0; --n)
      text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
    BOOST_TEST_CONTEXT("seed " << seed << ", mixed case " << i) { checkRoundTrip(tokenizer, text); }
  }
}

BOOST_AUTO_TEST_CASE(merges_like_encoder_py_on_random_words) {
  // The real merges on random lower-case words (one pre-token each),
  // compared with the plain quadratic algorithm.
  const Gpt2Tokenizer &tokenizer = gpt2();
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::string merges = readInput(gpt2File("vocab.bpe"));
  // Every merge of plain ASCII letters is spelled as itself.
  int rank = 0;
  size_t pos = merges.find('\n') + 1;
  while (pos < merges.size()) {
    size_t end = std::min(merges.find('\n', pos), merges.size());
    std::string line = merges.substr(pos, end - pos);
    pos = end + 1;
    size_t space = line.find(' ');
    if (space != std::string::npos)
      ranks[{line.substr(0, space), line.substr(space + 1)}] = rank;
    ++rank;
  }
  unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (int i = 0; i < 300; ++i) {
    std::string word(std::uniform_int_distribution<size_t>(1, 40)(rng), 'a');
    for (char &c : word)
      c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 25)(rng));
    Ids expected;
    for (const std::string &symbol : referenceBpe(word, ranks))
      expected.push_back(*tokenizer.findToken(symbol));
    BOOST_TEST_CONTEXT("seed " << seed << ", word " << word) {
      BOOST_TEST(tokenizer.encode(word) == expected, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(merges_like_encoder_py_with_shuffled_ranks) {
  // A small vocabulary whose merge ranks are in random order, so that a merge
  // can create a pair ranked below the one being applied: the case where a
  // careless faster algorithm would differ from encoder.py.
  unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::vector<std::string> tokens = {"a", "b", "c"};
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> extra;
  while (pairs.size() < 40) {
    const std::string &left = tokens[std::uniform_int_distribution<size_t>(0, tokens.size() - 1)(rng)];
    const std::string &right = tokens[std::uniform_int_distribution<size_t>(0, tokens.size() - 1)(rng)];
    std::string joined = left + right;
    if (joined.size() > 8 || std::find(tokens.begin(), tokens.end(), joined) != tokens.end())
      continue;
    pairs.push_back({left, right});
    tokens.push_back(joined);
    extra.push_back(joined);
  }
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::map<std::pair<std::string, std::string>, int> ranks;
  std::string merges = "#version: 0.2\n";
  for (size_t i = 0; i < pairs.size(); ++i) {
    ranks[pairs[i]] = static_cast<int>(i);
    merges += pairs[i].first + " " + pairs[i].second + "\n";
  }
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::fromContents(vocabJson(extra), merges);
  for (int i = 0; i < 300; ++i) {
    std::string word(std::uniform_int_distribution<size_t>(1, 30)(rng), 'a');
    for (char &c : word)
      c = static_cast<char>('a' + std::uniform_int_distribution<int>(0, 2)(rng));
    Ids expected;
    for (const std::string &symbol : referenceBpe(word, ranks))
      expected.push_back(*tokenizer.findToken(symbol));
    BOOST_TEST_CONTEXT("seed " << seed << ", word " << word) {
      BOOST_TEST(tokenizer.encode(word) == expected, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(loads_the_hugging_face_layout) {
  const Gpt2Tokenizer &openai = gpt2();
  TemporaryDirectory dir;
  fs::copy_file(gpt2File("encoder.json"), dir.file("vocab.json"));
  fs::copy_file(gpt2File("vocab.bpe"), dir.file("merges.txt"));
  Gpt2Tokenizer huggingFace = Gpt2Tokenizer::fromDirectory(dir.path.string());
  BOOST_TEST(huggingFace.vocabSize() == 50257);
  const std::string text = "Hello, world! It's 2024 — café 日本語 🎉";
  BOOST_TEST(huggingFace.encode(text) == openai.encode(text), boost::test_tools::per_element());
  Gpt2Tokenizer direct = Gpt2Tokenizer::fromFiles(dir.file("vocab.json"), dir.file("merges.txt"));
  BOOST_TEST(direct.encode("Hello world") == (Ids{15496, 995}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(refuses_ids_outside_the_vocabulary) {
  const Gpt2Tokenizer &tokenizer = gpt2();
  BOOST_CHECK_THROW(tokenizer.decode({15496, 50257}), Error);
  BOOST_CHECK_THROW(tokenizer.decodeToken(-1), Error);
  std::string message = messageOf([&] { tokenizer.decodeToken(60000); });
  BOOST_TEST(message.find("60000") != std::string::npos);
  BOOST_TEST(message.find("encoder.json") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_a_directory_without_tokenizer_files) {
  TemporaryDirectory dir;
  std::string message = messageOf([&] { Gpt2Tokenizer::fromDirectory(dir.path.string()); });
  BOOST_TEST(message.find("encoder.json") != std::string::npos);
  BOOST_TEST(message.find("merges.txt") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_malformed_files) {
  TemporaryDirectory dir;
  BOOST_TEST(messageOf([&] {
               Gpt2Tokenizer::fromFiles(dir.file("vocab.json"), dir.file("merges.txt"));
             }).find("vocab.json") != std::string::npos);

  const std::string merges = "#version: 0.2\na b\n";
  const std::string vocab = vocabJson({"ab"});
  BOOST_CHECK_NO_THROW(Gpt2Tokenizer::fromContents(vocab, merges));
  auto refusal = [](const std::string &vocabText, const std::string &mergesText) {
    return messageOf([&] { Gpt2Tokenizer::fromContents(vocabText, mergesText, "v.json", "m.txt"); });
  };
  auto refusedWith = [&](const std::string &vocabText, const std::string &mergesText, const std::string &needle) {
    std::string message = refusal(vocabText, mergesText);
    BOOST_TEST_CONTEXT("message: " << message) { BOOST_TEST(message.find(needle) != std::string::npos); }
  };
  refusedWith("{\"a\": 0,", merges, "v.json is not valid JSON");
  refusedWith("[1, 2]", merges, "v.json holds an array");
  refusedWith(std::string(100, '[') + std::string(100, ']'), merges, "deeper than");
  refusedWith("{\"a\": \"0\"}", merges, "not a non-negative integer");
  refusedWith("{\"a\": 0, \"b\": 7}", merges, "must be numbered 0 to 1");
  refusedWith("{\"a\": 0, \"b\": 0}", merges, "share id 0");
  refusedWith("{\"a b\": 0}", merges, "outside GPT-2's byte alphabet");
  refusedWith("{\"a\": 0}", merges, "no token for the byte 0x00");
  refusedWith(vocab, "#version: 0.2\na b c\n", "m.txt: line 2 is not two tokens");
  refusedWith(vocab, "#version: 0.2\nab\n", "m.txt: line 2 is not two tokens");
  refusedWith(vocab, "#version: 0.2\na  b\n", "m.txt: line 2 is not two tokens");
  refusedWith(vocab, "#version: 0.2\na b\nb a\n", "line 3 needs the token 'ba', which v.json lacks");
  refusedWith(vocab, "#version: 0.2\na \xFF\n", "line 2 has a character outside");
}

BOOST_AUTO_TEST_CASE(survives_arbitrary_loader_input) {
  // Random and randomly damaged files must be refused cleanly, never crash.
  unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  const std::string vocab = vocabJson({"ab", "abc"});
  const std::string merges = "#version: 0.2\na b\nab c\n";
  for (int i = 0; i < 300; ++i) {
    std::string damagedVocab = vocab, damagedMerges = merges;
    for (std::string *text : {&damagedVocab, &damagedMerges})
      for (int n = std::uniform_int_distribution<int>(0, 3)(rng); n > 0; --n)
        (*text)[std::uniform_int_distribution<size_t>(0, text->size() - 1)(rng)] =
            static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    BOOST_TEST_CONTEXT("seed " << seed << ", case " << i) {
      try {
        Gpt2Tokenizer tokenizer = Gpt2Tokenizer::fromContents(damagedVocab, damagedMerges);
        std::string text = randomBytes(rng, 32);
        BOOST_TEST(tokenizer.decode(tokenizer.encode(text)) == text);
      } catch (const Error &) {
      }
      BOOST_CHECK_THROW(Gpt2Tokenizer::fromContents(randomBytes(rng, 64), merges), Error);
    }
  }
}
