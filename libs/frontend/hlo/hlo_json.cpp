// The JSON reader of hlo_json.h, over the HLO text's Cursor.
#include "frontend/hlo/hlo_json.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <tuple>

namespace mlpipe::fe::hlo {

const Json *Json::find(std::string_view key) const {
  const Json *found = nullptr;
  for (const auto &[name, value] : members)
    if (name == key)
      found = &value;
  return found;
}

std::optional<double> Json::numeric() const {
  if (kind == Kind::Number)
    return number;
  if (kind != Kind::String || text.empty())
    return std::nullopt;
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

namespace {

std::string jsonString(Cursor &in) {
  Location start = in.location();
  in.expect('"', "'\"' opening a JSON string");
  std::string text;
  while (true) {
    if (in.atEnd())
      in.fail(start, "unterminated JSON string");
    char c = in.peek();
    in.advance();
    if (c == '"')
      return text;
    if (c != '\\') {
      text += c;
      continue;
    }
    if (in.atEnd())
      in.fail(start, "unterminated JSON string");
    char escaped = in.peek();
    in.advance();
    switch (escaped) {
    case 'n':
      text += '\n';
      break;
    case 't':
      text += '\t';
      break;
    case 'r':
      text += '\r';
      break;
    case 'b':
      text += '\b';
      break;
    case 'f':
      text += '\f';
      break;
    case 'u': // kept as '?': no value mlpipe reads spells one
      for (int i = 0; i < 4; ++i) {
        if (in.atEnd() || !std::isxdigit(static_cast<unsigned char>(in.peek())))
          in.unexpected("four hex digits after \\u");
        in.advance();
      }
      text += '?';
      break;
    default:
      text += escaped;
    }
  }
}

} // namespace

Json parseJson(Cursor &in, int depth) {
  Json value;
  in.skipTrivia();
  value.loc = in.location();
  if (depth > kMaxNesting)
    in.fail(value.loc, fmt::format("JSON nests deeper than {}", kMaxNesting));
  char c = in.next();
  if (c == '{') {
    value.kind = Json::Kind::Object;
    in.advance();
    if (in.consume('}'))
      return value;
    do {
      in.skipTrivia();
      std::string key = jsonString(in);
      in.expect(':', "':' after a JSON key");
      value.members.push_back({std::move(key), parseJson(in, depth + 1)});
    } while (in.consume(','));
    in.expect('}', "',' or '}' in a JSON object");
    return value;
  }
  if (c == '[') {
    value.kind = Json::Kind::Array;
    in.advance();
    if (in.consume(']'))
      return value;
    do
      value.items.push_back(parseJson(in, depth + 1));
    while (in.consume(','));
    in.expect(']', "',' or ']' in a JSON array");
    return value;
  }
  if (c == '"') {
    value.kind = Json::Kind::String;
    value.text = jsonString(in);
    return value;
  }
  for (auto [word, kind, number] : {std::tuple<std::string_view, Json::Kind, double>{"true", Json::Kind::Bool, 1},
                                    {"false", Json::Kind::Bool, 0},
                                    {"null", Json::Kind::Null, 0}})
    if (in.nextIsWord(word)) {
      in.identifier(word);
      value.kind = kind;
      value.number = number;
      return value;
    }
  if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
    value.kind = Json::Kind::Number;
    value.number = in.number("a JSON number");
    return value;
  }
  in.unexpected("a JSON value");
}

} // namespace mlpipe::fe::hlo
