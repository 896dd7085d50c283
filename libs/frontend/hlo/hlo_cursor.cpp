// The token level of the HLO text: the Cursor's reading of identifiers,
// names, numbers, strings and raw attribute values, and the diagnostics that
// quote the text.
#include "frontend/hlo/hlo_cursor.h"

#include "support/error.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

namespace mlpipe::fe::hlo {

// Text from the file, made safe and short for a one-line message.
std::string printable(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxQuoted; ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\')
      out += static_cast<char>(byte);
    else
      out += fmt::format("\\x{:02x}", byte);
  }
  if (text.size() > kMaxQuoted)
    out += "...";
  return out;
}

[[noreturn]] void failAt(const std::string &source, Location loc, const std::string &message) {
  throw DiagnosticError(fmt::format("{}:{}:{}: error: {}", source, loc.line, loc.column, message));
}

bool isIdentifierStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}
bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void Cursor::advance() {
  if (text_[pos_] == '\n') {
    ++line_;
    column_ = 1;
  } else {
    ++column_;
  }
  ++pos_;
}

void Cursor::skipTrivia() {
  while (!atEnd()) {
    char c = peek();
    if (isSpace(c)) {
      advance();
    } else if (c == '/' && peek(1) == '*') {
      Location start = location();
      advance();
      advance();
      while (!(peek() == '*' && peek(1) == '/')) {
        if (atEnd())
          fail(start, "unterminated /* comment: the file ends inside it");
        advance();
      }
      advance();
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      break;
    }
  }
}

bool Cursor::consume(char c) {
  skipTrivia();
  if (atEnd() || peek() != c)
    return false;
  advance();
  return true;
}

void Cursor::expect(char c, std::string_view what) {
  if (!consume(c))
    unexpected(what);
}

char Cursor::next() {
  skipTrivia();
  return peek();
}

bool Cursor::nextIsWord(std::string_view word) {
  skipTrivia();
  if (text_.substr(pos_, word.size()) != word)
    return false;
  return !isIdentifierChar(peek(word.size()));
}

void Cursor::unexpected(std::string_view expected) {
  skipTrivia();
  std::string found;
  if (atEnd()) {
    found = "the end of the file";
  } else {
    size_t end = pos_ + 1;
    if (isIdentifierChar(peek()) || peek() == '%')
      while (end < text_.size() && end - pos_ < kMaxQuoted && isIdentifierChar(text_[end]))
        ++end;
    found = fmt::format("'{}'", printable(text_.substr(pos_, end - pos_)));
  }
  fail(location(), fmt::format("expected {}, found {}", expected, found));
}

std::string Cursor::identifier(std::string_view what) {
  skipTrivia();
  if (atEnd() || !isIdentifierStart(peek()))
    unexpected(what);
  size_t start = pos_;
  while (!atEnd() && isIdentifierChar(peek()))
    advance();
  return std::string(text_.substr(start, pos_ - start));
}

std::string Cursor::name(std::string_view what) {
  skipTrivia();
  if (peek() == '%') {
    advance();
    if (atEnd() || !isIdentifierStart(peek()))
      unexpected(what);
  }
  return identifier(what);
}

int64_t Cursor::integer(std::string_view what) {
  skipTrivia();
  Location start = location();
  bool negative = peek() == '-';
  if (negative)
    advance();
  if (atEnd() || !std::isdigit(static_cast<unsigned char>(peek())))
    unexpected(what);
  uint64_t magnitude = 0;
  while (!atEnd() && std::isdigit(static_cast<unsigned char>(peek()))) {
    uint64_t digit = static_cast<uint64_t>(peek() - '0');
    if (magnitude > (uint64_t(std::numeric_limits<int64_t>::max()) - digit) / 10)
      fail(start, fmt::format("{} does not fit in 64 bits", what));
    magnitude = magnitude * 10 + digit;
    advance();
  }
  return negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
}

double Cursor::number(std::string_view what) {
  skipTrivia();
  Location start = location();
  for (auto [word, value] : {std::pair<std::string_view, double>{"true", 1.0},
                             {"false", 0.0},
                             {"inf", INFINITY},
                             {"-inf", -INFINITY},
                             {"nan", NAN},
                             {"-nan", -NAN}}) {
    if (text_.substr(pos_, word.size()) == word && !isIdentifierChar(peek(word.size()))) {
      for (size_t i = 0; i < word.size(); ++i)
        advance();
      if (std::isnan(value) && peek() == '(') { // a NaN payload: the value is still NaN
        while (!atEnd() && peek() != ')')
          advance();
        if (atEnd())
          fail(start, "unterminated NaN payload");
        advance();
      }
      return value;
    }
  }
  size_t begin = pos_;
  if (peek() == '-' || peek() == '+')
    advance();
  auto afterExponent = [&] { return pos_ > begin && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E'); };
  while (!atEnd() && (std::isdigit(static_cast<unsigned char>(peek())) || peek() == '.' || peek() == 'e' ||
                      peek() == 'E' || ((peek() == '-' || peek() == '+') && afterExponent())))
    advance();
  std::string_view token = text_.substr(begin, pos_ - begin);
  double value = 0;
  auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (token.empty() || error != std::errc() || end != token.data() + token.size()) {
    restore({begin, start.line, start.column});
    unexpected(what);
  }
  return value;
}

void Cursor::quotedString() {
  Location start = location();
  char quote = peek();
  advance();
  while (!atEnd() && peek() != quote) {
    if (peek() == '\\' && pos_ + 1 < text_.size())
      advance();
    advance();
  }
  if (atEnd())
    fail(start, "unterminated string: the file ends inside it");
  advance();
}

std::string_view Cursor::skipValue() {
  skipTrivia();
  Location start = location();
  size_t begin = pos_;
  int depth = 0;
  while (!atEnd()) {
    char c = peek();
    if (c == '"' || c == '\'') {
      quotedString();
      continue;
    }
    if (c == '{' || c == '[' || c == '(') {
      ++depth;
    } else if (c == '}' || c == ']' || c == ')') {
      if (depth == 0)
        break;
      --depth;
    } else if (depth == 0 && (c == ',' || isSpace(c))) {
      break;
    }
    advance();
  }
  if (depth > 0)
    fail(start, "unterminated attribute value: a bracket it opens is never closed");
  if (pos_ == begin)
    unexpected("an attribute value");
  return text_.substr(begin, pos_ - begin);
}

} // namespace mlpipe::fe::hlo
