// The token level of the HLO text: a Cursor walks the text with its line and
// column and reads identifiers, names, numbers, strings and raw attribute
// values; printable() and failAt() quote the text and report a position in
// the "FILE:LINE:COL: error: ..." form.
#pragma once

#include "frontend/hlo/hlo_syntax.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mlpipe::fe::hlo {

// Text from the file, made safe and short for a one-line message.
std::string printable(std::string_view text);

[[noreturn]] void failAt(const std::string &source, Location loc, const std::string &message);

bool isIdentifierStart(char c);
bool isIdentifierChar(char c);
bool isSpace(char c);

// A position in the text with its line and column, and the token-level
// operations the grammar needs. A Cursor over one attribute's value parses
// it on demand, reporting positions in the whole file.
class Cursor {
public:
  Cursor(std::string_view text, const std::string &source, Location start = {})
      : text_(text), source_(source), line_(start.line), column_(start.column) {}

  struct State {
    size_t pos;
    int line, column;
  };
  State save() const { return {pos_, line_, column_}; }
  void restore(State state) {
    pos_ = state.pos;
    line_ = state.line;
    column_ = state.column;
  }

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  Location location() const { return {line_, column_}; }
  const std::string &source() const { return source_; }

  void advance();

  // Whitespace and comments: /* ... */ (XLA writes /*index=5*/ in long
  // tuples) and // to the end of the line.
  void skipTrivia();

  bool consume(char c);
  void expect(char c, std::string_view what);

  // The next character after trivia, without consuming it ('\0' at the end).
  char next();

  bool nextIsWord(std::string_view word);

  [[noreturn]] void fail(Location loc, const std::string &message) const { failAt(source_, loc, context_ + message); }

  // Names what is being parsed ("tanh %tanh.2: ") in front of every message.
  void setContext(std::string context) { context_ = std::move(context); }

  [[noreturn]] void unexpected(std::string_view expected);

  // [A-Za-z_][A-Za-z0-9_.-]*
  std::string identifier(std::string_view what);

  // An instruction or computation name, with or without its '%'.
  std::string name(std::string_view what);

  // [-]?[0-9]+ that fits in int64.
  int64_t integer(std::string_view what);

  // A literal element: a decimal or float number, inf, -inf, nan, -nan
  // (with an optional (0x...) payload), true or false.
  double number(std::string_view what);

  // A "..." or '...' string with backslash escapes, returned raw.
  void quotedString();

  // One attribute value, returned as raw text: a balanced {...}, [...] or
  // (...) group (strings inside may hold anything), a string, or a run of
  // characters up to a space, ',' or a closing bracket.
  std::string_view skipValue();

private:
  std::string_view text_;
  const std::string &source_;
  std::string context_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

} // namespace mlpipe::fe::hlo
