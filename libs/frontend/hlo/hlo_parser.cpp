// The HLO text parser: shapes, literals, instructions, computations and the
// module, over the Cursor's tokens (the grammar is in hlo_parser.h).
#include "frontend/hlo/hlo_parser.h"

#include "support/error.h"

#include <fmt/format.h>

#include <cctype>
#include <limits>
#include <optional>
#include <set>
#include <utility>

namespace mlpipe::fe::hlo {

// shape ::= type '[' dims ']' layout? | '(' shape (',' shape)* ')'
ShapeText parseShape(Cursor &in, int depth) {
  in.skipTrivia();
  ShapeText shape;
  shape.loc = in.location();
  if (depth > kMaxNesting)
    in.fail(shape.loc, fmt::format("tuple shapes nest deeper than {}", kMaxNesting));
  if (in.consume('(')) {
    shape.tuple = true;
    if (!in.consume(')')) {
      do
        shape.elements.push_back(parseShape(in, depth + 1));
      while (in.consume(','));
      in.expect(')', "',' or ')' in a tuple shape");
    }
    return shape;
  }
  shape.typeName = in.identifier("a shape such as f32[8,16]");
  in.expect('[', fmt::format("'[' after the element type {}", shape.typeName));
  if (!in.consume(']')) {
    do {
      if (in.next() == '?') {
        in.advance();
        shape.dynamic = true;
        shape.dims.push_back(1);
        continue;
      }
      if (in.peek() == '<' && in.peek(1) == '=') {
        in.advance();
        in.advance();
        shape.dynamic = true;
      }
      shape.dims.push_back(in.integer("a dimension size"));
      if (shape.dims.size() > kMaxRank)
        in.fail(shape.loc, fmt::format("shapes of rank above {} are not supported", kMaxRank));
    } while (in.consume(','));
    in.expect(']', "',' or ']' in the dimensions");
  }
  // A layout: '{' minor_to_major (':' tiling and the like)? '}'. A '{' that
  // opens a computation body is not one: a layout holds numbers, ':' or '}'.
  Cursor::State before = in.save();
  if (in.consume('{')) {
    char c = in.next();
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == ':' || c == '}')) {
      in.restore(before);
      return shape;
    }
    shape.minorToMajor.emplace();
    if (c != ':' && c != '}') {
      do
        shape.minorToMajor->push_back(in.integer("a layout dimension"));
      while (in.consume(','));
    }
    if (in.consume(':')) {
      shape.layoutExtras = true;
      int nesting = 0;
      while (!in.atEnd() && !(nesting == 0 && in.peek() == '}')) {
        char d = in.peek();
        nesting += d == '(' || d == '{' ? 1 : d == ')' || d == '}' ? -1 : 0;
        in.advance();
      }
    }
    in.expect('}', "'}' closing the layout");
  }
  return shape;
}

namespace {

// Whether the next token starts a shape: a type name directly followed by
// '[', or '(' (a tuple shape).
bool nextIsShape(Cursor &in) {
  char c = in.next();
  if (c == '(')
    return true;
  if (!isIdentifierStart(c))
    return false;
  Cursor::State before = in.save();
  in.identifier("a type");
  bool shape = in.peek() == '[';
  in.restore(before);
  return shape;
}

// A constant's literal: a scalar, or nested braces matching the shape.
std::vector<double> parseLiteral(Cursor &in, const std::optional<ShapeText> &shape, Location opLoc) {
  if (!shape || shape->tuple)
    in.fail(opLoc, "a constant needs an array shape written before 'constant'");
  const Shape &dims = shape->dims;
  std::vector<double> values;
  if (dims.empty()) {
    values.push_back(in.number("a number for the scalar constant"));
    return values;
  }
  int64_t expected = 1;
  for (int64_t dim : dims)
    if (dim < 0 || (dim > 0 && expected > std::numeric_limits<int64_t>::max() / dim))
      in.fail(shape->loc, "the constant's shape is too large");
    else
      expected *= dim;
  in.expect('{', "'{' opening the constant's elements");
  // seen[d]: elements (or sub-arrays) seen so far at nesting level d.
  std::vector<int64_t> seen(dims.size(), 0);
  size_t depth = 1;
  while (depth > 0) {
    char c = in.next();
    Location here = in.location();
    if (c == '{') {
      if (depth == dims.size())
        in.fail(here, fmt::format("the constant nests deeper than its rank {}", dims.size()));
      if (++seen[depth - 1] > dims[depth - 1])
        in.fail(here, fmt::format("the constant has more than {} elements along axis {}", dims[depth - 1], depth - 1));
      seen[depth] = 0;
      ++depth;
      in.advance();
    } else if (c == '}') {
      if (seen[depth - 1] != dims[depth - 1])
        in.fail(here, fmt::format("the constant has {} elements along axis {}, but its shape says {}", seen[depth - 1],
                                  depth - 1, dims[depth - 1]));
      --depth;
      in.advance();
    } else if (c == ',') {
      in.advance();
    } else if (c == '.') {
      in.fail(here, "the constant's elements are elided ('...'): mlpipe needs every value (dump with "
                    "--xla_dump_large_constants or print_large_constants)");
    } else {
      if (depth != dims.size())
        in.unexpected(fmt::format("'{{' (the constant has rank {})", dims.size()));
      if (++seen[depth - 1] > dims[depth - 1])
        in.fail(here, fmt::format("the constant has more than {} elements along axis {}", dims[depth - 1], depth - 1));
      values.push_back(in.number("a number in the constant"));
    }
  }
  if (static_cast<int64_t>(values.size()) != expected)
    in.fail(shape->loc, fmt::format("the constant has {} elements, but its shape holds {}", values.size(), expected));
  return values;
}

// instruction ::= 'ROOT'? name '=' shape? opcode '(' operands ')' (',' attribute)*
Instruction parseInstruction(Cursor &in) {
  Instruction instruction;
  if (in.nextIsWord("ROOT")) {
    instruction.root = true;
    in.identifier("ROOT");
  }
  in.skipTrivia();
  instruction.loc = in.location();
  instruction.name = in.name("an instruction name (or '}' closing the computation)");
  in.expect('=', fmt::format("'=' after the instruction name {}", instruction.name));
  if (nextIsShape(in))
    instruction.shape = parseShape(in);
  in.setContext(fmt::format("%{}: ", instruction.name));
  in.skipTrivia();
  instruction.opcodeLoc = in.location();
  instruction.opcode = in.identifier("an opcode");
  in.setContext(fmt::format("{} %{}: ", instruction.opcode, instruction.name));
  in.expect('(', "'(' opening the operands");
  if (instruction.opcode == "parameter") {
    instruction.parameterNumber = in.integer("a parameter number");
    in.expect(')', "')' after the parameter number");
  } else if (instruction.opcode == "constant") {
    instruction.literal = parseLiteral(in, instruction.shape, instruction.opcodeLoc);
    in.expect(')', "')' after the constant");
  } else if (!in.consume(')')) {
    do {
      if (nextIsShape(in))
        parseShape(in); // an operand's shape, as verbose dumps write it
      in.skipTrivia();
      Operand operand;
      operand.loc = in.location();
      operand.name = in.name("an operand name");
      if (in.next() == '(')
        in.fail(in.location(),
                fmt::format("nested instructions are not supported: give %{} a name of its own", operand.name));
      instruction.operands.push_back(std::move(operand));
    } while (in.consume(','));
    in.expect(')', "',' or ')' in the operands");
  }
  while (in.consume(',')) {
    Attribute attribute;
    in.skipTrivia();
    attribute.loc = in.location();
    attribute.name = in.identifier("an attribute name");
    in.expect('=', fmt::format("'=' after the attribute name {}", attribute.name));
    in.skipTrivia();
    attribute.valueLoc = in.location();
    attribute.text = in.skipValue();
    instruction.attributes.push_back(std::move(attribute));
  }
  in.setContext("");
  return instruction;
}

// computation ::= 'ENTRY'? name ('(' params ')' '->' shape)? '{' instruction+ '}' (',' attribute)*
Computation parseComputation(Cursor &in) {
  Computation computation;
  if (in.nextIsWord("ENTRY")) {
    computation.entry = true;
    in.identifier("ENTRY");
  }
  in.skipTrivia();
  computation.loc = in.location();
  computation.name = in.name("a computation name");
  if (in.consume('(')) {
    if (!in.consume(')')) {
      do {
        in.name("a parameter name");
        in.expect(':', "':' after the parameter name");
        parseShape(in);
      } while (in.consume(','));
      in.expect(')', "',' or ')' in the parameter list");
    }
    in.expect('-', "'->' before the computation's result shape");
    if (in.atEnd() || in.peek() != '>')
      in.unexpected("'->' before the computation's result shape");
    in.advance();
    parseShape(in);
  }
  in.expect('{', fmt::format("'{{' opening the body of computation {}", computation.name));
  std::optional<size_t> root;
  while (!in.consume('}')) {
    if (in.atEnd())
      in.fail(computation.loc,
              fmt::format("computation %{} is not closed: the file ends before its '}}'", computation.name));
    Instruction instruction = parseInstruction(in);
    size_t index = computation.instructions.size();
    auto [existing, added] = computation.byName.emplace(instruction.name, index);
    if (!added)
      in.fail(instruction.loc,
              fmt::format("duplicate instruction name %{} in computation %{} (first defined at line {})",
                          instruction.name, computation.name, computation.instructions[existing->second].loc.line));
    if (instruction.root) {
      if (root)
        in.fail(instruction.loc, fmt::format("computation %{} has a second ROOT", computation.name));
      root = index;
    }
    computation.instructions.push_back(std::move(instruction));
  }
  if (computation.instructions.empty())
    in.fail(computation.loc, fmt::format("computation %{} has no instructions", computation.name));
  computation.root = root.value_or(computation.instructions.size() - 1);
  // execution_thread="..." and the like.
  while (in.consume(',')) {
    in.identifier("a computation attribute");
    in.expect('=', "'=' after the attribute name");
    in.skipValue();
  }
  return computation;
}

// The FileNames, FunctionNames, FileLocations and StackFrames tables of
// recent dumps: numbered strings and {...} records, skipped.
void skipStackFrameTables(Cursor &in) {
  static const std::set<std::string_view> headings = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
  while (true) {
    bool heading = false;
    for (std::string_view word : headings)
      if (in.nextIsWord(word)) {
        in.identifier(word);
        heading = true;
      }
    if (heading)
      continue;
    if (!std::isdigit(static_cast<unsigned char>(in.next())))
      return;
    in.integer("a table index");
    char c = in.next();
    if (c == '"' || c == '\'')
      in.quotedString();
    else if (c == '{')
      in.skipValue();
    else
      in.unexpected("a string or a {...} record in the stack frame tables");
  }
}

// 'HloModule' name (',' attribute)*: the entry's layout is kept.
void parseHeader(Cursor &in, ModuleText &module) {
  in.identifier("HloModule");
  in.skipTrivia();
  module.loc = in.location();
  module.name = in.name("the module's name");
  while (in.consume(',')) {
    Attribute attribute;
    in.skipTrivia();
    attribute.loc = in.location();
    attribute.name = in.identifier("a module attribute");
    in.expect('=', fmt::format("'=' after the attribute name {}", attribute.name));
    in.skipTrivia();
    attribute.valueLoc = in.location();
    attribute.text = in.skipValue();
    if (attribute.name == "entry_computation_layout")
      module.entryLayout = attribute;
  }
}

// Whether the text at `in` starts a computation: 'ENTRY'? name, then its
// signature '(' or its body '{' with a first instruction 'ROOT'? name '='.
// Looks ahead without moving `in`.
bool startsComputation(const Cursor &in) {
  Cursor probe = in;
  try {
    if (probe.nextIsWord("ENTRY"))
      probe.identifier("ENTRY");
    probe.name("a computation name");
    if (probe.consume('('))
      return true;
    if (!probe.consume('{'))
      return false;
    if (probe.nextIsWord("ROOT"))
      probe.identifier("ROOT");
    probe.name("an instruction name");
    return probe.next() == '=';
  } catch (const DiagnosticError &) {
    return false;
  }
}

} // namespace

ModuleText parseModule(std::string_view text, const std::string &source) {
  Cursor in(text, source);
  ModuleText module;
  in.skipTrivia();
  if (in.atEnd())
    in.fail(in.location(), "the file is empty: expected an HLO module ('HloModule NAME' and its computations)");
  if (in.nextIsWord("HloModule"))
    parseHeader(in, module);
  else if (!startsComputation(in))
    in.unexpected("'HloModule' or a computation ('NAME {' and its instructions) at the start of an HLO module");
  std::optional<size_t> entry;
  while (true) {
    skipStackFrameTables(in); // before the computations in dumps, or after them
    in.skipTrivia();
    if (in.atEnd())
      break;
    Computation computation = parseComputation(in);
    size_t index = module.computations.size();
    if (!module.byName.emplace(computation.name, index).second)
      in.fail(computation.loc, fmt::format("duplicate computation name %{}", computation.name));
    if (computation.entry) {
      if (entry)
        in.fail(computation.loc, "the module has a second ENTRY computation");
      entry = index;
    }
    module.computations.push_back(std::move(computation));
  }
  if (module.computations.empty())
    in.fail(module.loc, "the module has no computations");
  module.entry = entry.value_or(module.computations.size() - 1);
  if (module.name.empty()) { // a fragment: named after its entry
    module.name = module.computations[module.entry].name;
    module.loc = module.computations[module.entry].loc;
  }
  return module;
}

} // namespace mlpipe::fe::hlo
