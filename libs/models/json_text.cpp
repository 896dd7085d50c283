// JSON parsing with a nesting limit and file-naming errors; see json_text.h.
#include "models/json_text.h"

#include "support/error.h"

#include <llvm/Support/Error.h>

namespace mlpipe {
namespace {

// Depth of the deepest array/object nesting, skipping brackets inside strings.
// Stops counting once past the limit: the answer is only compared with it.
int nestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size() && deepest <= kMaxJsonDepth; ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character cannot end the string
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

} // namespace

llvm::json::Value parseJson(std::string_view text, const std::string &source) {
  if (nestingDepth(text) > kMaxJsonDepth)
    fail("{} nests JSON arrays and objects deeper than {} levels", source, kMaxJsonDepth);
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(llvm::StringRef(text.data(), text.size()));
  if (!value)
    fail("{} is not valid JSON: {}", source, llvm::toString(value.takeError()));
  return std::move(*value);
}

std::vector<std::string> topLevelKeys(std::string_view text) {
  std::vector<std::string> keys;
  auto isSpace = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  size_t i = 0;
  while (i < text.size() && isSpace(text[i]))
    ++i;
  if (i >= text.size() || text[i] != '{')
    return keys;
  int depth = 0;
  bool expectKey = true;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      size_t begin = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
      if (depth == 1 && expectKey) {
        // The key as JSON decodes it (escapes resolved).
        llvm::Expected<llvm::json::Value> key = llvm::json::parse(llvm::StringRef(text.data() + begin, i + 1 - begin));
        if (key && key->getAsString())
          keys.push_back(key->getAsString()->str());
        else
          llvm::consumeError(key.takeError());
        expectKey = false;
      }
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == ',' && depth == 1) {
      expectKey = true;
    }
  }
  return keys;
}

std::optional<uint64_t> jsonUnsigned(const llvm::json::Value &value) { return value.getAsUINT64(); }

const char *jsonKindName(const llvm::json::Value &value) {
  switch (value.kind()) {
  case llvm::json::Value::Null:
    return "null";
  case llvm::json::Value::Boolean:
    return "a boolean";
  case llvm::json::Value::Number:
    return "a number";
  case llvm::json::Value::String:
    return "a string";
  case llvm::json::Value::Array:
    return "an array";
  case llvm::json::Value::Object:
    return "an object";
  }
  return "a value";
}

} // namespace mlpipe
