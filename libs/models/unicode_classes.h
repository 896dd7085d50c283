// UTF-8 decoding and the character classes GPT-2's pre-tokeniser needs:
// letters (\p{L}), numbers (\p{N}) and whitespace (\s).
//
// ASCII is classified exactly. Beyond ASCII the letter and number tables are
// generated from the Unicode 14 general categories (L* and N*); a run of
// unassigned code points lying between two letters (or two numbers) is folded
// into the range, which keeps the tables compact and only affects characters
// no text should contain yet. Code points assigned after Unicode 14 count as
// neither. Whitespace is the Unicode White_Space property, as in the `regex`
// module GPT-2's encoder used (so U+001C..U+001F are not whitespace).
#pragma once

#include <cstddef>
#include <string_view>

namespace mlpipe::unicode {

enum class CharClass { Letter, Number, Whitespace, Other };

// One unit of text: a well-formed UTF-8 sequence, or a single byte that does
// not start one (an invalid byte is its own unit and classified Other).
struct TextUnit {
  char32_t codePoint; // meaningful only when valid
  size_t length;      // 1..4 bytes
  bool valid;
};

// Decodes the unit starting at text[pos]; pos must be < text.size().
// Refuses overlong forms, surrogates and values above U+10FFFF.
TextUnit decodeUtf8At(std::string_view text, size_t pos);

CharClass classify(char32_t codePoint);
CharClass classify(const TextUnit &unit);

// Appends the UTF-8 encoding of a code point (which must be valid).
void appendUtf8(std::string &out, char32_t codePoint);

} // namespace mlpipe::unicode
