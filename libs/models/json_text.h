// Parsing JSON from untrusted files (tokenizer vocabularies, safetensors
// headers, config.json) into llvm::json values, with errors that name the
// file. Internal to libs/models.
#pragma once

#include <llvm/Support/JSON.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlpipe {

// Deepest nesting of arrays and objects accepted. The files read here nest two
// or three levels; the limit keeps a hostile input from exhausting the stack
// in the recursive parser and destructor.
constexpr int kMaxJsonDepth = 64;

// Parses `text`; throws mlpipe::Error naming `source` if it is not JSON.
llvm::json::Value parseJson(std::string_view text, const std::string &source);

// The value as a non-negative integer, or nullopt for anything else
// (negative, fractional or not a number). Unlike Value::getAsInteger this
// never converts an out-of-range double, which would be undefined behaviour.
std::optional<uint64_t> jsonUnsigned(const llvm::json::Value &value);

// The keys of a JSON object's top level in the order written, duplicates
// included (llvm::json keeps one of each). `text` must be valid JSON, as
// parseJson accepted it; anything but an object gives no keys.
std::vector<std::string> topLevelKeys(std::string_view text);

// "a string", "an array", ...: what a value is, for messages.
const char *jsonKindName(const llvm::json::Value &value);

} // namespace mlpipe
