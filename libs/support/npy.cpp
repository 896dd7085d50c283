// .npy reading and writing. See npy.h for what is supported.
//
// The file layout (numpy's lib/format.py):
//   "\x93NUMPY" major minor     magic and format version (1.0, 2.0 or 3.0)
//   header length               little-endian uint16 (1.0) or uint32 (2.0, 3.0)
//   header                      a Python dict literal, padded with spaces, '\n'
//   data                        the elements, C order, in the header's dtype
//
// The reader parses the header with a small strict parser for exactly the
// literal numpy writes, never a general evaluator, and checks every length
// against the bytes present before it allocates: it is meant to be fuzzed.
#include "support/npy.h"

#include "support/error.h"
#include "support/output_file.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

namespace mlpipe {
namespace {

// The data is copied byte for byte into HostTensor, which holds native
// values; a big-endian host would need byte swapping that nothing here does.
static_assert(std::endian::native == std::endian::little, "the .npy reader and writer assume a little-endian host");

constexpr std::string_view kMagic{"\x93NUMPY", 6};
// Data starts on a multiple of this, as numpy >= 1.14 writes it (lets
// readers mmap the data aligned for any dtype).
constexpr size_t kArrayAlign = 64;
// numpy pads the header so that the first dimension can grow to this many
// digits in place (np.lib.format.GROWTH_AXIS_MAX_DIGITS); we pad the same way
// so that our files are byte-identical to np.save's.
constexpr size_t kGrowthAxisMaxDigits = 21;
// Keeps messages short however long a hostile header's strings or shapes are.
constexpr size_t kMaxQuoted = 40;

// What the header dict says.
struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  Shape shape;
};

// The pieces of the file once the preamble has been checked.
struct NpyLayout {
  int major = 0;
  std::string_view header;
  std::string_view data;
};

// Text from the file, made safe and short for a message: non-printable bytes
// become \xNN and anything past `limit` characters becomes "...".
std::string printable(std::string_view text, size_t limit = kMaxQuoted) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < limit; ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\')
      out += static_cast<char>(byte);
    else
      out += fmt::format("\\x{:02x}", byte);
  }
  if (text.size() > limit)
    out += "...";
  return out;
}

// "4x4", shortened if a hostile header has thousands of dimensions.
std::string shortShape(const Shape &shape) {
  std::string text = formatShape(shape);
  return text.size() > 2 * kMaxQuoted ? text.substr(0, 2 * kMaxQuoted) + "..." : text;
}

uint32_t readLittleEndian(std::string_view bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

// Checks magic, version and header length, and splits the file into header
// text and data. Every offset is compared with bytes.size() first.
NpyLayout splitFile(std::string_view bytes, const std::string &source) {
  // A prefix of the magic is a cut-off .npy file; anything else is not one.
  if (bytes.empty())
    fail("{} is empty; expected a .npy file", source);
  size_t magicSeen = std::min(bytes.size(), kMagic.size());
  if (bytes.substr(0, magicSeen) != kMagic.substr(0, magicSeen))
    fail("{} is not a .npy file: it does not start with the magic bytes \\x93NUMPY", source);
  if (bytes.size() < kMagic.size() + 2)
    fail("{} is truncated: it ends after {} bytes, inside the .npy preamble", source, bytes.size());

  NpyLayout layout;
  layout.major = static_cast<unsigned char>(bytes[6]);
  int minor = static_cast<unsigned char>(bytes[7]);
  if (layout.major < 1 || layout.major > 3 || minor != 0)
    fail("{} has .npy format version {}.{}; mlpipe reads versions 1.0, 2.0 and 3.0", source, layout.major, minor);

  // 1.0 stores the header length in 2 bytes; 2.0 and 3.0 in 4.
  size_t lengthWidth = layout.major == 1 ? 2 : 4;
  size_t preamble = kMagic.size() + 2 + lengthWidth;
  if (bytes.size() < preamble)
    fail("{} is truncated: it ends after {} bytes, inside the .npy preamble of {} bytes", source, bytes.size(),
         preamble);
  size_t headerLength = readLittleEndian(bytes, kMagic.size() + 2, lengthWidth);
  size_t available = bytes.size() - preamble;
  if (headerLength > available)
    fail("{} is truncated: its preamble announces a {}-byte header but only {} bytes follow", source, headerLength,
         available);
  layout.header = bytes.substr(preamble, headerLength);
  layout.data = bytes.substr(preamble + headerLength);
  return layout;
}

// A strict recursive-descent parser for the one literal numpy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Keys may come in any order; whitespace and the trailing comma are optional,
// as in Python. It never reads past the header and holds no recursion deeper
// than one tuple, so no input can exhaust the stack.
class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string &source) : text_(text), source_(source) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seenDescr = false, seenFortran = false, seenShape = false;
    skipSpace();
    expect('{', "'{' opening the header dict");
    skipSpace();
    while (!atEnd() && peek() != '}') {
      std::string key = parseString("a quoted key");
      skipSpace();
      expect(':', "':' after the key");
      skipSpace();
      if (key == "descr") {
        noteKey(seenDescr, key);
        header.descr = parseDescr();
      } else if (key == "fortran_order") {
        noteKey(seenFortran, key);
        header.fortranOrder = parseBool();
      } else if (key == "shape") {
        noteKey(seenShape, key);
        header.shape = parseShape();
      } else {
        fail("{}: header has an unexpected key '{}'; a .npy header holds only 'descr', 'fortran_order' and 'shape'",
             source_, printable(key));
      }
      skipSpace();
      if (atEnd() || peek() != ',')
        break;
      ++pos_;
      skipSpace();
    }
    expect('}', "',' or '}' in the header dict");
    // numpy pads the header with spaces and ends it with '\n'.
    skipSpace();
    if (!atEnd())
      malformed("only spaces after the closing '}'");

    for (auto [seen, key] : {std::pair{seenDescr, "descr"}, {seenFortran, "fortran_order"}, {seenShape, "shape"}})
      if (!seen)
        fail("{}: header has no '{}' key; a .npy header holds 'descr', 'fortran_order' and 'shape'", source_, key);
    return header;
  }

private:
  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  // Python allows any whitespace between tokens of a literal.
  void skipSpace() {
    while (!atEnd() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r'))
      ++pos_;
  }

  void expect(char c, std::string_view what) {
    if (atEnd() || peek() != c)
      malformed(what);
    ++pos_;
  }

  [[noreturn]] void malformed(std::string_view expected) const {
    std::string found = atEnd() ? "the end of the header" : fmt::format("\"{}\"", printable(text_.substr(pos_)));
    fail("{}: header is not a valid .npy header dict: expected {} at byte {} of the header but found {}", source_,
         expected, pos_, found);
  }

  void noteKey(bool &seen, const std::string &key) const {
    if (seen)
      fail("{}: header has the key '{}' twice", source_, key);
    seen = true;
  }

  // A Python string literal in single or double quotes. numpy's keys and
  // dtype strings never need escapes, so a backslash is refused rather than
  // interpreted; a newline cannot occur inside a one-line literal.
  std::string parseString(std::string_view what) {
    if (atEnd() || (peek() != '\'' && peek() != '"'))
      malformed(what);
    char quote = peek();
    size_t start = ++pos_;
    while (!atEnd() && peek() != quote) {
      if (peek() == '\\' || peek() == '\n')
        malformed("a closing quote (escapes and line breaks are not allowed in header strings)");
      ++pos_;
    }
    if (atEnd())
      malformed("a closing quote");
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;
    return value;
  }

  // 'descr' is a dtype string, or a list of fields for a structured array,
  // which gets its own message rather than a parse error.
  std::string parseDescr() {
    if (!atEnd() && peek() == '[')
      fail("{} holds a structured array (its 'descr' is a list of fields); mlpipe reads plain f32, f64, i32, i64, "
           "f16 and bool arrays only",
           source_);
    return parseString("a quoted dtype string like '<f4' for 'descr'");
  }

  bool parseBool() {
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    malformed("True or False for 'fortran_order'");
  }

  // "()", "(3,)" or "(3, 4)" with an optional trailing comma. Python reads
  // "(3)" as the number 3, not a tuple, so one dimension needs its comma.
  Shape parseShape() {
    expect('(', "a tuple of dimensions like (3, 4) for 'shape'");
    Shape shape;
    bool trailingComma = false;
    skipSpace();
    while (!atEnd() && peek() != ')') {
      shape.push_back(parseDimension());
      skipSpace();
      trailingComma = !atEnd() && peek() == ',';
      if (!trailingComma)
        break;
      ++pos_;
      skipSpace();
    }
    if (shape.size() == 1 && !trailingComma)
      malformed("',' after the only dimension (a 1-element tuple is written (n,))");
    expect(')', "',' or ')' in the shape tuple");
    return shape;
  }

  // A non-negative decimal integer as Python writes it: no leading zeros, no
  // underscores. The "L" suffix of Python 2 longs is accepted, as numpy does,
  // for files written by old numpy.
  int64_t parseDimension() {
    bool negative = !atEnd() && peek() == '-';
    if (negative)
      ++pos_;
    if (atEnd() || peek() < '0' || peek() > '9')
      malformed("a dimension (a non-negative integer)");
    if (peek() == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
      malformed("a dimension without leading zeros");
    int64_t value = 0;
    while (!atEnd() && peek() >= '0' && peek() <= '9') {
      int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        fail("{}: header's shape has a dimension that does not fit in 64 bits", source_);
      value = value * 10 + digit;
      ++pos_;
    }
    if (!atEnd() && peek() == 'L')
      ++pos_;
    if (negative && value != 0)
      fail("{}: header's shape has a negative dimension, -{}", source_, value);
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  const std::string &source_;
};

// The numpy dtype strings we read and write. '<' is little-endian; '=' is
// native order, which on the little-endian hosts we support means the same;
// '|' (byte order not applicable) is what numpy writes for one-byte bools.
constexpr std::array<std::pair<std::string_view, DType>, 12> kDescrs{{
    {"f4", DType::f32},
    {"f8", DType::f64},
    {"i4", DType::i32},
    {"i8", DType::i64},
    {"f2", DType::f16},
    {"b1", DType::i1},
    {"i1", DType::i8},
    {"i2", DType::i16},
    {"u1", DType::u8},
    {"u2", DType::u16},
    {"u4", DType::u32},
    {"u8", DType::u64},
}};

DType dtypeFromDescr(const std::string &descr, const std::string &source) {
  if (descr.size() == 3)
    for (auto [code, dtype] : kDescrs)
      if (std::string_view(descr).substr(1) == code) {
        if (descr[0] == '<' || descr[0] == '=' || (descr[0] == '|' && dtypeSize(dtype) == 1))
          return dtype;
        if (descr[0] == '>')
          fail("{} is big-endian ('{}'); mlpipe reads little-endian floats and integers", source, descr);
      }
  fail("{} has dtype '{}', which mlpipe does not read; it reads '<f4' (f32), '<f8' (f64), '<f2' (f16), '|i1' "
       "'<i2' '<i4' '<i8' (signed integers), '|u1' '<u2' '<u4' '<u8' (unsigned integers) and '|b1' (bool)",
       source, printable(descr));
}

std::string_view descrOf(DType dtype) {
  switch (dtype) {
  case DType::f32:
  case DType::bf16: // written as f32: numpy has no bf16
    return "<f4";
  case DType::f64:
    return "<f8";
  case DType::i32:
    return "<i4";
  case DType::i64:
    return "<i8";
  case DType::f16:
    return "<f2";
  case DType::i1:
    return "|b1";
  case DType::i8:
    return "|i1";
  case DType::i16:
    return "<i2";
  case DType::u8:
    return "|u1";
  case DType::u16:
    return "<u2";
  case DType::u32:
    return "<u4";
  case DType::u64:
    return "<u8";
  }
  return "?";
}

// The data must be exactly as long as the header's shape and dtype say.
// Computed here rather than with byteSize() so that an overflowing shape gets
// one sentence naming the file; nothing is allocated before this. The
// product runs in order like numpy's (and numElements'): once a dimension is
// zero the rest cannot overflow it, but an overflow before the zero is an
// overflow, which keeps HostTensor's own check from ever failing after us.
void checkDataSize(const Shape &shape, DType dtype, size_t present, const std::string &source) {
  std::string what = shape.empty() ? fmt::format("scalar {}", dtypeName(dtype))
                                   : fmt::format("shape {} of {}", shortShape(shape), dtypeName(dtype));
  constexpr uint64_t kLimit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t needed = dtypeSize(dtype);
  for (int64_t dim : shape) {
    if (dim != 0 && needed > kLimit / static_cast<uint64_t>(dim))
      fail("{}: header's {} needs more than 2^63 bytes of data but the file holds {}", source, what, present);
    needed *= static_cast<uint64_t>(dim);
  }
  if (needed != present)
    fail("{}: header's {} needs {} bytes of data but the file holds {}", source, what, needed, present);
}

// numpy's repr of a shape tuple: "()", "(3,)", "(3, 4)".
std::string shapeTuple(const Shape &shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// The header numpy's np.save writes for this tensor: dict, growth padding,
// then spaces and '\n' so that the data starts on a 64-byte boundary.
// Version 1.0 unless the header needs more than its 16-bit length.
std::string npyPreambleAndHeader(const HostTensor &tensor) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descrOf(tensor.dtype()),
                                 shapeTuple(tensor.shape()));
  if (!tensor.shape().empty()) {
    size_t digits = std::to_string(tensor.shape()[0]).size();
    dict.append(kGrowthAxisMaxDigits > digits ? kGrowthAxisMaxDigits - digits : 0, ' ');
  }
  for (int major : {1, 2}) {
    size_t preamble = kMagic.size() + 2 + (major == 1 ? 2 : 4);
    size_t unpadded = preamble + dict.size() + 1; // + the final '\n'
    // Like numpy, always at least one space before the '\n'.
    size_t padding = kArrayAlign - unpadded % kArrayAlign;
    size_t headerLength = dict.size() + padding + 1;
    if (major == 1 && headerLength > 0xffff)
      continue;
    std::string out(kMagic);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < preamble - kMagic.size() - 2; ++i)
      out += static_cast<char>((headerLength >> (8 * i)) & 0xff);
    out += dict;
    out.append(padding, ' ');
    out += '\n';
    return out;
  }
  fail("the .npy header for {} does not fit in 4 GiB", tensor.describe());
}

} // namespace

HostTensor parseNpy(std::string_view bytes, const std::string &source) {
  NpyLayout layout = splitFile(bytes, source);
  NpyHeader header = HeaderParser(layout.header, source).parse();
  DType dtype = dtypeFromDescr(header.descr, source);
  if (header.fortranOrder)
    fail("{} is in Fortran order; mlpipe reads C-order arrays only: save it with np.ascontiguousarray", source);
  checkDataSize(header.shape, dtype, layout.data.size(), source);
  HostTensor tensor(dtype, std::move(header.shape));
  if (!layout.data.empty())
    std::memcpy(tensor.data(), layout.data.data(), layout.data.size());
  return tensor;
}

HostTensor readNpy(const std::string &path) { return parseNpy(readInput(path), path == "-" ? "stdin" : path); }

std::string serializeNpy(const HostTensor &tensor) {
  if (tensor.dtype() == DType::bf16)
    return serializeNpy(tensor.convertedTo(DType::f32));
  std::string out = npyPreambleAndHeader(tensor);
  if (tensor.byteSize() > 0)
    out.append(static_cast<const char *>(tensor.data()), tensor.byteSize());
  return out;
}

void writeNpy(const std::string &path, const HostTensor &tensor) { writeOutput(path, serializeNpy(tensor)); }

} // namespace mlpipe
