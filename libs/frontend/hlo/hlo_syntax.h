// The HLO text's syntax tree, as the parser (hlo_parser.h) leaves it and the
// builder (hlo_builder.h) reads it: a module of computations, each a list of
// instructions with their declared shapes, operand names and the raw text of
// each attribute, every piece with its place in the file. Also the limits
// that keep hostile input from exhausting the stack or memory.
#pragma once

#include "frontend/graph.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlpipe::fe::hlo {

// Limits that keep hostile input from exhausting the stack or memory.
constexpr int kMaxNesting = 64; // tuple shapes, calls within calls
constexpr size_t kMaxRank = 32; // dimensions of one shape
// Recorded ops, after inlining every call and fusion: trace, verify and the
// stages after them take seconds at this size (a real transformer's module
// records a few thousand), while calls that double at each level could
// otherwise expand a few kilobytes of text into millions of ops.
constexpr size_t kMaxGraphNodes = size_t(1) << 16;
constexpr size_t kMaxQuoted = 40; // characters of the input echoed in a message

struct Location {
  int line = 1;
  int column = 1;
};

// A shape as written: an array (element type, dimensions, optional layout)
// or a tuple of shapes.
struct ShapeText {
  Location loc;
  bool tuple = false;
  std::vector<ShapeText> elements;
  std::string typeName; // "f32", "pred", "token", ... as written
  Shape dims;
  bool dynamic = false;                             // a '?' or '<=N' dimension
  std::optional<std::vector<int64_t>> minorToMajor; // absent: the default layout
  bool layoutExtras = false;                        // tiling, memory space, ... after ':'
};

struct Attribute {
  std::string name;
  Location loc;      // of the name
  Location valueLoc; // of the value's first character
  std::string_view text;
};

struct Operand {
  std::string name;
  Location loc;
};

struct Instruction {
  std::string name;
  Location loc;
  bool root = false;
  std::optional<ShapeText> shape;
  std::string opcode;
  Location opcodeLoc;
  std::vector<Operand> operands;
  int64_t parameterNumber = -1; // parameter
  std::vector<double> literal;  // constant, C order
  std::vector<Attribute> attributes;
};

struct Computation {
  std::string name;
  Location loc;
  bool entry = false;
  std::vector<Instruction> instructions;
  std::map<std::string, size_t> byName;
  size_t root = 0;
};

struct ModuleText {
  std::string name;
  Location loc;
  std::optional<Attribute> entryLayout;
  std::vector<Computation> computations;
  std::map<std::string, size_t> byName;
  size_t entry = 0;
};

} // namespace mlpipe::fe::hlo
