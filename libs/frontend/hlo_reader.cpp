// The HLO text reader. Two passes:
//
// 1. Parse (hlo/hlo_parser.h): a character-level recursive-descent parser
//    turns the text into a small syntax tree (hlo/hlo_syntax.h: ModuleText,
//    computations, instructions with their declared shapes, operand names and
//    the raw text of each attribute), following XLA's hlo_parser grammar.
//    Attributes are kept as text and parsed only when an op needs them, so
//    metadata, backend_config, frontend_attributes and anything else unknown
//    are skipped without being understood.
//
// 2. Build: the ENTRY computation is walked in dependency order (so operands
//    may be defined after their use, and a cycle is reported as one) and each
//    instruction is recorded into the front-end graph; call and fusion
//    computations are walked the same way with their operands as
//    parameters, which inlines them. Every result is checked against the
//    shape the instruction declares.
//
// Nothing here trusts the input: recursion is bounded (tuple nesting, call
// depth), instruction chains are walked with an explicit stack, numbers and
// sizes are checked for overflow, and the graph is capped in size, so the
// reader can be fuzzed.
#include "frontend/hlo_reader.h"

#include "frontend/hlo/hlo_parser.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>

namespace mlpipe::fe {

namespace hlo {
namespace {

// ---- Builder ----------------------------------------------------------------------

const char *hloTypeName(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "f32";
  case DType::f64:
    return "f64";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::i32:
    return "s32";
  case DType::i64:
    return "s64";
  case DType::i1:
    return "pred";
  }
  return "?";
}

std::string hloShape(DType dtype, const Shape &dims) {
  return fmt::format("{}[{}]", hloTypeName(dtype), fmt::join(dims, ","));
}

bool hasDefaultLayout(const ShapeText &shape) {
  if (shape.tuple)
    return std::all_of(shape.elements.begin(), shape.elements.end(), hasDefaultLayout);
  if (shape.layoutExtras)
    return false;
  if (!shape.minorToMajor)
    return true;
  std::vector<int64_t> standard(shape.dims.size());
  std::iota(standard.rbegin(), standard.rend(), 0);
  return *shape.minorToMajor == standard;
}

// Two written shapes are the same but for their layouts.
bool sameShape(const ShapeText &a, const ShapeText &b) {
  if (a.tuple != b.tuple)
    return false;
  if (a.tuple)
    return a.elements.size() == b.elements.size() &&
           std::equal(a.elements.begin(), a.elements.end(), b.elements.begin(), sameShape);
  return a.typeName == b.typeName && a.dims == b.dims;
}

// A written shape without its layout: "f32[2,3]", "(f32[2], s32[])".
std::string shapeWithoutLayout(const ShapeText &shape) {
  if (shape.tuple) {
    std::string text = "(";
    for (size_t i = 0; i < shape.elements.size(); ++i)
      text += (i ? ", " : "") + shapeWithoutLayout(shape.elements[i]);
    return text + ")";
  }
  std::string dims;
  for (size_t i = 0; i < shape.dims.size(); ++i) {
    dims += i ? "," : "";
    dims += std::to_string(shape.dims[i]);
  }
  return printable(shape.typeName) + "[" + dims + "]";
}

// A value: one tensor, or a tuple of values.
struct Value {
  std::optional<Tensor> tensor;
  std::vector<Value> elements;
  bool defaultLayout = true; // as its instruction declares it (bitcast reads this)
};

enum class Handling { Unary, Binary, Other };

// Every opcode XLA knows that mlpipe does not read, to tell "not supported"
// from "unknown".
const std::set<std::string_view> &unsupportedOpcodes() {
  static const std::set<std::string_view> opcodes = {
      "acos",
      "acosh",
      "add-dependency",
      "after-all",
      "all-gather",
      "all-gather-done",
      "all-gather-start",
      "all-reduce",
      "all-reduce-done",
      "all-reduce-start",
      "all-to-all",
      "asin",
      "asinh",
      "async-done",
      "async-start",
      "async-update",
      "atan2",
      "atanh",
      "batch-norm-grad",
      "batch-norm-inference",
      "batch-norm-training",
      "bitcast-convert",
      "cbrt",
      "ceil",
      "cholesky",
      "collective-broadcast",
      "collective-permute",
      "collective-permute-done",
      "collective-permute-start",
      "complex",
      "composite",
      "conditional",
      "convolution",
      "copy-done",
      "copy-start",
      "cosh",
      "cosine",
      "custom-call",
      "domain",
      "dynamic-reshape",
      "dynamic-slice",
      "dynamic-update-slice",
      "erf",
      "exponential-minus-one",
      "fft",
      "floor",
      "get-dimension-size",
      "imag",
      "infeed",
      "is-finite",
      "log-plus-one",
      "map",
      "outfeed",
      "partition-id",
      "popcnt",
      "ragged-all-to-all",
      "ragged-dot",
      "real",
      "recv",
      "recv-done",
      "reduce-precision",
      "reduce-scatter",
      "reduce-window",
      "remainder",
      "replica-id",
      "reverse",
      "rng",
      "rng-bit-generator",
      "rng-get-and-update-state",
      "round-nearest-afz",
      "round-nearest-even",
      "scaled-dot",
      "scan",
      "scatter",
      "select-and-scatter",
      "send",
      "send-done",
      "set-dimension-size",
      "shift-left",
      "shift-right-arithmetic",
      "shift-right-logical",
      "sign",
      "sine",
      "sinh",
      "sort",
      "stochastic-convert",
      "tan",
      "topk",
      "triangular-solve",
      "while",
      "xor",
  };
  return opcodes;
}

const std::map<std::string_view, UnaryFn> &unaryOpcodes() {
  static const std::map<std::string_view, UnaryFn> opcodes = {
      {"negate", UnaryFn::Neg},  {"exponential", UnaryFn::Exp}, {"tanh", UnaryFn::Tanh}, {"sqrt", UnaryFn::Sqrt},
      {"rsqrt", UnaryFn::Rsqrt}, {"log", UnaryFn::Log},         {"abs", UnaryFn::Abs},   {"not", UnaryFn::Not},
  };
  return opcodes;
}

const std::map<std::string_view, BinaryFn> &binaryOpcodes() {
  static const std::map<std::string_view, BinaryFn> opcodes = {
      {"add", BinaryFn::Add},    {"subtract", BinaryFn::Sub}, {"multiply", BinaryFn::Mul},
      {"divide", BinaryFn::Div}, {"maximum", BinaryFn::Max},  {"minimum", BinaryFn::Min},
      {"power", BinaryFn::Pow},  {"and", BinaryFn::And},      {"or", BinaryFn::Or},
  };
  return opcodes;
}

// The name of the function: the module's, made a valid MLIR symbol.
std::string functionName(const std::string &moduleName) {
  std::string name;
  for (char c : moduleName)
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])))
    name = "hlo_" + name;
  return name;
}

class Builder {
public:
  Builder(const ModuleText &module, const std::string &source) : module_(module), source_(source) {}

  Program build() {
    Program program;
    graph_ = &program.addFunction(functionName(module_.name), DType::f32);
    const Computation &entry = module_.computations[module_.entry];
    checkEntryLayout(entry);
    createInputs(entry);
    Value root = evaluate(module_.entry, {}, 0, entry.loc);
    const Instruction &rootInstruction = entry.instructions[entry.root];
    if (rootInstruction.shape && !hasDefaultLayout(*rootInstruction.shape))
      failAt(source_, rootInstruction.shape->loc,
             fmt::format("the ROOT %{} of the entry computation has a non-default layout: its values would be "
                         "returned in another order than row-major; mlpipe needs the default layout there",
                         rootInstruction.name));
    std::vector<Tensor> outputs;
    flatten(root, outputs);
    if (outputs.empty())
      failAt(source_, rootInstruction.loc, "the entry computation returns an empty tuple: it has no outputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor output = outputs[i];
      const Node &node = graph_->node(output.id());
      bool varies = node.kind == OpKind::Literal &&
                    std::any_of(node.values.begin(), node.values.end(), [&](double v) { return v != node.values[0]; });
      if (varies)
        failAt(source_, rootInstruction.loc,
               fmt::format("output {} of the entry computation is a constant of different values; mlpipe returns "
                           "computed tensors, and constants that are one value everywhere",
                           i));
      if (node.kind == OpKind::Constant) // outputs are tensors, not captured scalars (node dies here)
        output = graph_->literal({}, node.dtype, {node.value});
      graph_->output(root.tensor ? "y" : fmt::format("y{}", i), output);
    }
    markIndexInputs();
    return program;
  }

private:
  [[noreturn]] void fail(Location loc, const std::string &message) const { failAt(source_, loc, message); }

  [[noreturn]] void failOp(const Instruction &ins, const std::string &message) const {
    fail(ins.opcodeLoc, fmt::format("{} %{}: {}", ins.opcode, ins.name, message));
  }

  // The element type a shape names. Throws mlpipe::Error (which the
  // instruction being built turns into a diagnostic naming it) for a type,
  // or a shape, that mlpipe does not read.
  static DType elementType(const ShapeText &shape) {
    static const std::map<std::string_view, DType> types = {
        {"pred", DType::i1},   {"s32", DType::i32}, {"s64", DType::i64}, {"f16", DType::f16},
        {"bf16", DType::bf16}, {"f32", DType::f32}, {"f64", DType::f64},
    };
    auto found = types.find(shape.typeName);
    if (found == types.end())
      mlpipe::fail("element type {} is not supported: mlpipe reads pred, s32, s64, f16, bf16, f32 and f64",
                   printable(shape.typeName));
    if (shape.dynamic)
      mlpipe::fail("dynamic dimensions ('?', '<=N') are not supported: mlpipe needs static shapes");
    for (int64_t dim : shape.dims)
      if (dim <= 0)
        mlpipe::fail("a dimension of size {} is not supported: mlpipe needs non-empty arrays", dim);
    numElements(shape.dims);
    return found->second;
  }

  const ShapeText &arrayShape(const Instruction &ins) const {
    if (!ins.shape)
      failOp(ins, "its result shape must be written out (e.g. 'f32[8,16]' before the opcode)");
    if (ins.shape->tuple)
      failOp(ins, "its result must be an array, not a tuple");
    return *ins.shape;
  }

  void checkEntryLayout(const Computation &entry) const {
    if (!module_.entryLayout)
      return;
    const Attribute &attribute = *module_.entryLayout;
    Cursor in(attribute.text, source_, attribute.valueLoc);
    in.expect('{', "'{' opening entry_computation_layout");
    ShapeText parameters = parseShape(in);
    if (!parameters.tuple)
      in.unexpected("'(' opening the parameter shapes");
    in.expect('-', "'->' in entry_computation_layout");
    in.expect('>', "'->' in entry_computation_layout");
    ShapeText result = parseShape(in);
    in.expect('}', "'}' closing entry_computation_layout");
    // The layout restates the entry's signature: it must agree with it.
    std::map<int64_t, const Instruction *> declared;
    for (const Instruction &ins : entry.instructions)
      if (ins.opcode == "parameter")
        declared[ins.parameterNumber] = &ins;
    if (parameters.elements.size() != declared.size())
      fail(parameters.loc, fmt::format("entry_computation_layout lists {} parameters, but the ENTRY computation has {}",
                                       parameters.elements.size(), declared.size()));
    for (size_t i = 0; i < parameters.elements.size(); ++i) {
      auto found = declared.find(static_cast<int64_t>(i));
      if (found != declared.end() && found->second->shape && !sameShape(parameters.elements[i], *found->second->shape))
        fail(parameters.elements[i].loc,
             fmt::format("entry_computation_layout gives parameter {} the shape {}, but the ENTRY's %{} is {}", i,
                         shapeWithoutLayout(parameters.elements[i]), found->second->name,
                         shapeWithoutLayout(*found->second->shape)));
    }
    const Instruction &root = entry.instructions[entry.root];
    if (root.shape && !sameShape(result, *root.shape))
      fail(result.loc, fmt::format("entry_computation_layout gives the result the shape {}, but the ENTRY's ROOT %{} "
                                   "is {}",
                                   shapeWithoutLayout(result), root.name, shapeWithoutLayout(*root.shape)));
    for (size_t i = 0; i < parameters.elements.size(); ++i)
      if (!hasDefaultLayout(parameters.elements[i]))
        fail(parameters.elements[i].loc,
             fmt::format("entry_computation_layout gives parameter {} a non-default layout; mlpipe passes every "
                         "argument in row-major order",
                         i));
    if (!hasDefaultLayout(result))
      fail(result.loc, "entry_computation_layout gives the result a non-default layout; mlpipe returns every result "
                       "in row-major order");
  }

  // The entry's parameters become the function's inputs, in parameter order,
  // named after their instructions.
  void createInputs(const Computation &entry) {
    std::map<int64_t, const Instruction *> parameters;
    for (const Instruction &ins : entry.instructions) {
      if (ins.opcode != "parameter")
        continue;
      if (!parameters.emplace(ins.parameterNumber, &ins).second || ins.parameterNumber < 0)
        failOp(ins, fmt::format("parameter number {} is negative or used twice", ins.parameterNumber));
    }
    int64_t expected = 0;
    for (auto &[number, ins] : parameters) {
      if (number != expected++)
        failOp(*ins, fmt::format("parameter {} is missing: the entry's parameters must be numbered 0, 1, 2, ...",
                                 expected - 1));
      const ShapeText &shape = arrayShape(*ins);
      DType dtype = DType::f32;
      try {
        dtype = elementType(shape);
      } catch (const DiagnosticError &) {
        throw;
      } catch (const Error &error) {
        failOp(*ins, error.what());
      }
      if (!hasDefaultLayout(shape))
        fail(shape.loc, fmt::format("entry parameter %{} has a non-default layout; mlpipe passes every argument in "
                                    "row-major order",
                                    ins->name));
      inputs_.push_back(graph_->input(ins->name, shape.dims, dtype));
    }
  }

  // Walks computation `index` with `arguments` as its parameters (the entry
  // has none: its parameters are the inputs) and returns its root's value.
  Value evaluate(size_t index, const std::vector<Value> &arguments, int depth, Location callLoc) {
    const Computation &computation = module_.computations[index];
    if (depth > kMaxNesting)
      fail(callLoc, fmt::format("calls nest deeper than {}", kMaxNesting));
    if (std::find(active_.begin(), active_.end(), index) != active_.end())
      fail(callLoc, fmt::format("computation %{} calls itself", computation.name));
    active_.push_back(index);
    size_t count = computation.instructions.size();
    std::vector<std::optional<Value>> values(count);
    enum State : char { Unvisited, Visiting, Done };
    std::vector<State> state(count, Unvisited);
    // Depth-first over operands with an explicit stack, so that a long chain
    // of instructions cannot overflow the call stack.
    for (size_t start = 0; start < count; ++start) {
      if (state[start] != Unvisited)
        continue;
      std::vector<std::pair<size_t, size_t>> stack = {{start, 0}};
      state[start] = Visiting;
      while (!stack.empty()) {
        auto [current, next] = stack.back();
        const Instruction &ins = computation.instructions[current];
        if (next < ins.operands.size()) {
          ++stack.back().second;
          const Operand &operand = ins.operands[next];
          auto found = computation.byName.find(operand.name);
          if (found == computation.byName.end())
            fail(operand.loc, fmt::format("{} %{}: operand %{} is not defined in computation %{}", ins.opcode, ins.name,
                                          operand.name, computation.name));
          size_t used = found->second;
          if (state[used] == Visiting)
            fail(operand.loc, fmt::format("{} %{}: operand %{} depends on %{} itself: the instructions form a cycle",
                                          ins.opcode, ins.name, operand.name, ins.name));
          if (state[used] == Unvisited) {
            state[used] = Visiting;
            stack.emplace_back(used, 0);
          }
          continue;
        }
        std::vector<const Value *> operands;
        for (const Operand &operand : ins.operands)
          operands.push_back(&*values[computation.byName.at(operand.name)]);
        values[current] = buildChecked(ins, operands, arguments, index == module_.entry, depth);
        state[current] = Done;
        stack.pop_back();
      }
    }
    active_.pop_back();
    return *values[computation.root];
  }

  Value buildChecked(const Instruction &ins, const std::vector<const Value *> &operands,
                     const std::vector<Value> &arguments, bool isEntry, int depth) {
    Value value;
    try {
      // The op's place in the user's program (metadata's op_name) names
      // the nodes it records; a call or fusion leaves naming to its ops.
      std::optional<Graph::Scope> scope;
      if (std::string name = scopeName(ins); !name.empty() && ins.opcode != "call" && ins.opcode != "fusion")
        scope.emplace(*graph_, name);
      value = build(ins, operands, arguments, isEntry, depth);
      if (ins.shape) {
        checkDeclared(ins, *ins.shape, value);
        value.defaultLayout = hasDefaultLayout(*ins.shape);
      }
    } catch (const DiagnosticError &) {
      throw;
    } catch (const Error &error) {
      failOp(ins, error.what());
    }
    if (graph_->nodes().size() > kMaxGraphNodes)
      failOp(ins, fmt::format("the module records more than {} operations once calls and fusions are inlined",
                              kMaxGraphNodes));
    return value;
  }

  // metadata={op_name="jit(f)/jit(main)/attn/dot_general[...]" ...} as a
  // front-end scope: "attn.dot_general" (the jit wrappers and bracketed
  // parameters dropped, path separators as dots, only identifier
  // characters kept). Empty when there is no op_name.
  static std::string scopeName(const Instruction &ins) {
    std::string_view text;
    for (const Attribute &attribute : ins.attributes)
      if (attribute.name == "metadata")
        text = attribute.text;
    size_t start = text.find("op_name=\"");
    if (start == std::string_view::npos)
      return "";
    start += 9;
    size_t end = start;
    while (end < text.size() && text[end] != '"')
      end += text[end] == '\\' ? 2 : 1;
    std::string_view opName = text.substr(start, std::min(end, text.size()) - start);
    std::string scope;
    size_t part = 0;
    while (part <= opName.size()) {
      size_t slash = std::min(opName.find('/', part), opName.size());
      std::string_view component = opName.substr(part, slash - part);
      part = slash + 1;
      if (component.starts_with("jit(") || component.starts_with("pjit("))
        continue;
      std::string cleaned;
      int nesting = 0;
      for (char c : component) {
        nesting += c == '[' || c == '(' ? 1 : c == ']' || c == ')' ? -1 : 0;
        if (nesting == 0 && (std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
          cleaned += c;
      }
      if (!cleaned.empty())
        scope += (scope.empty() ? "" : ".") + cleaned;
    }
    return scope;
  }

  void checkDeclared(const Instruction &ins, const ShapeText &declared, const Value &value) const {
    if (declared.tuple != !value.tensor)
      failOp(ins, fmt::format("the result is {}, but the instruction declares {}",
                              value.tensor ? "an array" : "a tuple", declared.tuple ? "a tuple" : "an array"));
    if (declared.tuple) {
      if (declared.elements.size() != value.elements.size())
        failOp(ins, fmt::format("the result is a tuple of {} elements, but the instruction declares {}",
                                value.elements.size(), declared.elements.size()));
      for (size_t i = 0; i < declared.elements.size(); ++i)
        checkDeclared(ins, declared.elements[i], value.elements[i]);
      return;
    }
    DType dtype = elementType(declared);
    const Tensor &tensor = *value.tensor;
    if (tensor.dtype() != dtype || tensor.shape() != declared.dims)
      failOp(ins, fmt::format("the result is {}, but the instruction declares {}",
                              hloShape(tensor.dtype(), tensor.shape()), hloShape(dtype, declared.dims)));
  }

  // ---- Attributes ----

  const Attribute *findAttribute(const Instruction &ins, std::string_view name) const {
    for (const Attribute &attribute : ins.attributes)
      if (attribute.name == name)
        return &attribute;
    return nullptr;
  }

  const Attribute &attribute(const Instruction &ins, std::string_view name) const {
    if (const Attribute *found = findAttribute(ins, name))
      return *found;
    failOp(ins, fmt::format("it needs a {}= attribute", name));
  }

  template <typename Parse> auto parseAttribute(const Attribute &attribute, Parse parse) const {
    Cursor in(attribute.text, source_, attribute.valueLoc);
    auto result = parse(in);
    if (in.next() != '\0' || !in.atEnd())
      in.unexpected(fmt::format("the end of the {} attribute", attribute.name));
    return result;
  }

  // {1,0}
  std::vector<int64_t> intList(const Attribute &attribute) const {
    return parseAttribute(attribute, [&](Cursor &in) {
      std::vector<int64_t> values;
      in.expect('{', fmt::format("'{{' opening the list of {}", attribute.name));
      if (!in.consume('}')) {
        do
          values.push_back(in.integer("an integer"));
        while (in.consume(','));
        in.expect('}', "',' or '}' in the list");
      }
      return values;
    });
  }

  std::vector<int64_t> optionalIntList(const Instruction &ins, std::string_view name) const {
    const Attribute *found = findAttribute(ins, name);
    return found ? intList(*found) : std::vector<int64_t>{};
  }

  int64_t intValue(const Attribute &attribute) const {
    return parseAttribute(attribute, [](Cursor &in) { return in.integer("an integer"); });
  }

  std::string word(const Attribute &attribute) const {
    return parseAttribute(attribute, [](Cursor &in) { return in.identifier("a word"); });
  }

  size_t computationNamed(const Attribute &attribute) const {
    std::string name = parseAttribute(attribute, [](Cursor &in) { return in.name("a computation name"); });
    auto found = module_.byName.find(name);
    if (found == module_.byName.end())
      fail(attribute.valueLoc, fmt::format("there is no computation named %{}", name));
    return found->second;
  }

  // ---- Operands ----

  Tensor tensorOperand(const Instruction &ins, const std::vector<const Value *> &operands, size_t i) const {
    if (!operands[i]->tensor)
      failOp(ins, fmt::format("operand {} (%{}) is a tuple, where an array is needed", i, ins.operands[i].name));
    return *operands[i]->tensor;
  }

  void expectOperands(const Instruction &ins, size_t count) const {
    if (ins.operands.size() != count)
      failOp(ins, fmt::format("it takes {} operand{}, not {}", count, count == 1 ? "" : "s", ins.operands.size()));
  }

  std::string describe(Tensor t) const { return hloShape(t.dtype(), t.shape()); }

  // Elementwise operands are arrays of one shape (a scalar may stand for
  // one where HLO allows it: select's predicate, clamp's bounds).
  void expectSameShape(const Instruction &ins, const std::vector<Tensor> &tensors, bool scalarsAllowed) const {
    std::optional<Tensor> first;
    for (Tensor t : tensors) {
      if (scalarsAllowed && t.rank() == 0)
        continue;
      if (first && first->shape() != t.shape())
        failOp(ins, fmt::format("its operands have mismatched shapes {} and {}", describe(*first), describe(t)));
      first = t;
    }
  }

  // ---- The ops ----

  Value tensorValue(Tensor t) const { return Value{t, {}, true}; }

  Value build(const Instruction &ins, const std::vector<const Value *> &operands, const std::vector<Value> &arguments,
              bool isEntry, int depth) {
    const std::string &op = ins.opcode;
    Graph &g = *graph_;
    auto operand = [&](size_t i) { return tensorOperand(ins, operands, i); };

    if (op == "parameter") {
      if (isEntry)
        return tensorValue(inputs_.at(static_cast<size_t>(ins.parameterNumber)));
      if (ins.parameterNumber < 0 || ins.parameterNumber >= static_cast<int64_t>(arguments.size()))
        failOp(ins, fmt::format("parameter {} is not passed: the call gives {} operands", ins.parameterNumber,
                                arguments.size()));
      return arguments[static_cast<size_t>(ins.parameterNumber)];
    }
    if (op == "constant") {
      const ShapeText &shape = arrayShape(ins);
      DType dtype = elementType(shape);
      for (double v : ins.literal)
        checkLiteralValue(ins, v, dtype);
      if (shape.dims.empty())
        return tensorValue(g.constant(ins.literal.front(), dtype));
      return tensorValue(g.literal(shape.dims, dtype, ins.literal));
    }
    if (auto unary = unaryOpcodes().find(op); unary != unaryOpcodes().end()) {
      expectOperands(ins, 1);
      return tensorValue(g.unary(unary->second, operand(0)));
    }
    if (auto binary = binaryOpcodes().find(op); binary != binaryOpcodes().end()) {
      expectOperands(ins, 2);
      expectSameShape(ins, {operand(0), operand(1)}, false);
      return tensorValue(g.binary(binary->second, operand(0), operand(1)));
    }
    if (op == "copy" || op == "opt-barrier" || op == "optimization-barrier") { // values unchanged
      expectOperands(ins, 1);
      return *operands[0];
    }
    if (op == "logistic") { // 1 / (1 + exp(-x))
      expectOperands(ins, 1);
      Tensor x = operand(0);
      Tensor one = g.constant(1.0, x.dtype());
      return tensorValue(
          g.binary(BinaryFn::Div, one, g.binary(BinaryFn::Add, one, g.unary(UnaryFn::Exp, g.unary(UnaryFn::Neg, x)))));
    }
    if (op == "clamp") { // clamp(min, x, max)
      expectOperands(ins, 3);
      expectSameShape(ins, {operand(0), operand(1), operand(2)}, true);
      Tensor x = operand(1);
      return tensorValue(g.binary(BinaryFn::Min, g.binary(BinaryFn::Max, x, operand(0)), operand(2)));
    }
    if (op == "compare") {
      expectOperands(ins, 2);
      expectSameShape(ins, {operand(0), operand(1)}, false);
      static const std::map<std::string, CompareFn> directions = {{"EQ", CompareFn::Eq}, {"NE", CompareFn::Ne},
                                                                  {"LT", CompareFn::Lt}, {"LE", CompareFn::Le},
                                                                  {"GT", CompareFn::Gt}, {"GE", CompareFn::Ge}};
      const Attribute &direction = attribute(ins, "direction");
      auto found = directions.find(word(direction));
      if (found == directions.end())
        fail(direction.valueLoc, "compare's direction must be EQ, NE, LT, LE, GT or GE");
      return tensorValue(g.compare(found->second, operand(0), operand(1)));
    }
    if (op == "select") {
      expectOperands(ins, 3);
      expectSameShape(ins, {operand(1), operand(2)}, false);
      expectSameShape(ins, {operand(0), operand(1)}, true);
      return tensorValue(g.select(operand(0), operand(1), operand(2)));
    }
    if (op == "convert") {
      expectOperands(ins, 1);
      return tensorValue(g.convert(operand(0), elementType(arrayShape(ins))));
    }
    if (op == "iota") {
      expectOperands(ins, 0);
      const ShapeText &shape = arrayShape(ins);
      DType dtype = elementType(shape);
      return tensorValue(g.iota(shape.dims, dtype, intValue(attribute(ins, "iota_dimension"))));
    }
    if (op == "broadcast") {
      expectOperands(ins, 1);
      const ShapeText &shape = arrayShape(ins);
      elementType(shape);
      return tensorValue(g.broadcast(operand(0), shape.dims, intList(attribute(ins, "dimensions"))));
    }
    if (op == "reshape") {
      expectOperands(ins, 1);
      const ShapeText &shape = arrayShape(ins);
      elementType(shape);
      return tensorValue(g.reshape(operand(0), shape.dims));
    }
    if (op == "bitcast") {
      expectOperands(ins, 1);
      const ShapeText &shape = arrayShape(ins);
      DType dtype = elementType(shape);
      if (dtype != operand(0).dtype())
        failOp(ins, "a bitcast between element types is a bitcast-convert, which mlpipe does not support");
      if (!operands[0]->defaultLayout || !hasDefaultLayout(shape))
        failOp(ins, fmt::format("a bitcast to or from a non-default layout reinterprets memory: read row-major it "
                                "would change the values, so mlpipe reads bitcasts between default layouts only"));
      return tensorValue(g.reshape(operand(0), shape.dims));
    }
    if (op == "transpose") {
      expectOperands(ins, 1);
      return tensorValue(g.transpose(operand(0), intList(attribute(ins, "dimensions"))));
    }
    if (op == "slice") {
      expectOperands(ins, 1);
      return tensorValue(slice(ins, operand(0)));
    }
    if (op == "concatenate") {
      if (ins.operands.empty())
        failOp(ins, "it needs at least one operand");
      std::vector<Tensor> parts;
      for (size_t i = 0; i < operands.size(); ++i)
        parts.push_back(operand(i));
      std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
      if (dimensions.size() != 1)
        failOp(ins, "dimensions= must name one axis");
      if (dimensions[0] < 0)
        failOp(ins, fmt::format("axis {} is negative", dimensions[0]));
      return tensorValue(g.concat(parts, dimensions[0]));
    }
    if (op == "pad") {
      expectOperands(ins, 2);
      return tensorValue(pad(ins, operand(0), operand(1)));
    }
    if (op == "reduce")
      return tensorValue(reduce(ins, operands));
    if (op == "dot") {
      expectOperands(ins, 2);
      return tensorValue(dot(ins, operand(0), operand(1)));
    }
    if (op == "gather") {
      expectOperands(ins, 2);
      return tensorValue(gather(ins, operand(0), operand(1)));
    }
    if (op == "tuple") {
      Value tuple;
      tuple.tensor.reset();
      for (const Value *element : operands)
        tuple.elements.push_back(*element);
      return tuple;
    }
    if (op == "get-tuple-element") {
      expectOperands(ins, 1);
      int64_t index = intValue(attribute(ins, "index"));
      const Value &tuple = *operands[0];
      if (tuple.tensor)
        failOp(ins, fmt::format("operand %{} is an array, not a tuple", ins.operands[0].name));
      if (index < 0 || index >= static_cast<int64_t>(tuple.elements.size()))
        failOp(ins, fmt::format("index {} is out of range for a tuple of {} elements", index, tuple.elements.size()));
      return tuple.elements[static_cast<size_t>(index)];
    }
    if (op == "call" || op == "fusion") {
      const Attribute &callee = attribute(ins, op == "call" ? "to_apply" : "calls");
      size_t index = computationNamed(callee);
      std::vector<Value> passed;
      for (const Value *value : operands)
        passed.push_back(*value);
      size_t parameters = parameterCount(module_.computations[index]);
      if (parameters != passed.size())
        failOp(ins, fmt::format("it passes {} operands to %{}, which has {} parameters", passed.size(),
                                module_.computations[index].name, parameters));
      return evaluate(index, passed, depth + 1, ins.opcodeLoc);
    }
    if (unsupportedOpcodes().count(op))
      fail(ins.opcodeLoc, fmt::format("{} %{} is not supported: mlpipe reads elementwise arithmetic and math, "
                                      "compare, select, convert, broadcast, reshape, bitcast, transpose, slice, "
                                      "concatenate, pad, iota, reduce, dot, gather, tuples, call and fusion",
                                      op, ins.name));
    fail(ins.opcodeLoc, fmt::format("unknown HLO op '{}' in %{}", printable(op), ins.name));
  }

  static size_t parameterCount(const Computation &computation) {
    size_t count = 0;
    for (const Instruction &ins : computation.instructions)
      if (ins.opcode == "parameter")
        ++count;
    return count;
  }

  // slice={[start:limit(:stride)?], ...}: one contiguous axis maps onto the
  // graph's slice, anything else onto its strided slice.
  Tensor slice(const Instruction &ins, Tensor x) {
    const Attribute &ranges = attribute(ins, "slice");
    std::vector<int64_t> starts, limits, strides;
    parseAttribute(ranges, [&](Cursor &in) {
      in.expect('{', "'{' opening the slice ranges");
      if (!in.consume('}')) {
        do {
          in.expect('[', "'[' opening a range");
          starts.push_back(in.integer("a start"));
          in.expect(':', "':' after the start");
          limits.push_back(in.integer("a limit"));
          strides.push_back(in.consume(':') ? in.integer("a stride") : 1);
          in.expect(']', "']' closing the range");
        } while (in.consume(','));
        in.expect('}', "',' or '}' in the slice ranges");
      }
      return 0;
    });
    if (static_cast<int64_t>(starts.size()) != x.rank())
      failOp(ins, fmt::format("it gives {} ranges for an operand of rank {}", starts.size(), x.rank()));
    std::vector<size_t> cut;
    for (size_t i = 0; i < starts.size(); ++i)
      if (starts[i] != 0 || limits[i] != x.shape()[i] || strides[i] != 1)
        cut.push_back(i);
    if (cut.empty())
      return x;
    if (cut.size() == 1 && strides[cut[0]] == 1 && limits[cut[0]] > starts[cut[0]])
      return graph_->slice(x, static_cast<int64_t>(cut[0]), starts[cut[0]], limits[cut[0]] - starts[cut[0]]);
    return graph_->stridedSlice(x, starts, limits, strides);
  }

  // padding=low_high(_interior)?x... per axis.
  Tensor pad(const Instruction &ins, Tensor x, Tensor value) {
    const Attribute &padding = attribute(ins, "padding");
    std::vector<int64_t> low, high, interior;
    parseAttribute(padding, [&](Cursor &in) {
      do {
        low.push_back(in.integer("the low padding"));
        in.expect('_', "'_' between low and high padding");
        high.push_back(in.integer("the high padding"));
        interior.push_back(in.peek() == '_' ? (in.advance(), in.integer("the interior padding")) : 0);
      } while (!in.atEnd() && in.peek() == 'x' && (in.advance(), true));
      return 0;
    });
    if (static_cast<int64_t>(low.size()) != x.rank())
      failOp(ins, fmt::format("padding= gives {} axes for an operand of rank {}", low.size(), x.rank()));
    return graph_->pad(x, value, low, high, interior);
  }

  // A constant's element must be a value of its type, as XLA's parser
  // demands ("out of range for literal's primitive type"): nothing wraps,
  // saturates or overflows to infinity.
  void checkLiteralValue(const Instruction &ins, double v, DType dtype) const {
    if (isFloat(dtype)) {
      if (std::isfinite(v) && !std::isfinite(storedValue(dtype, v)))
        failOp(ins, fmt::format("{} is out of range for {}: its largest finite value is {:.9g}", v, hloTypeName(dtype),
                                largestFinite(dtype)));
      return;
    }
    if (v != std::trunc(v) || !std::isfinite(v) || (dtype == DType::i1 && v != 0 && v != 1))
      failOp(ins, fmt::format("{} is not a value of {}", v, hloTypeName(dtype)));
    // 2^31 and 2^63 are exact doubles: the bounds compare exactly.
    double limit = dtype == DType::i32 ? 2147483648.0 : 9223372036854775808.0;
    if (dtype != DType::i1 && (v < -limit || v >= limit))
      failOp(ins, fmt::format("{:.0f} is out of range for {}", v, hloTypeName(dtype)));
  }

  static double largestFinite(DType dtype) {
    switch (dtype) {
    case DType::f16:
      return 65504.0;
    case DType::bf16:
      return 3.3895313892515355e38;
    case DType::f32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
    }
  }

  // The reduction a to_apply computation performs: an add, maximum, minimum
  // or multiply of its two parameters, each a scalar of the reduced type
  // `dtype`, as its result.
  ReduceFn reduction(const Instruction &ins, const Attribute &toApply, DType dtype) const {
    const Computation &region = module_.computations[computationNamed(toApply)];
    for (const Instruction &member : region.instructions) {
      bool typed = member.opcode == "parameter" || &member == &region.instructions[region.root];
      if (!typed || !member.shape)
        continue;
      if (member.shape->tuple || !member.shape->dims.empty() || elementType(*member.shape) != dtype)
        failOp(ins, fmt::format("to_apply=%{} takes or returns {} (%{}), but the reduce's input is {}; the reducer "
                                "must take and return scalars of the input's type",
                                region.name,
                                member.shape->tuple
                                    ? std::string("a tuple")
                                    : printable(member.shape->typeName) + (member.shape->dims.empty() ? "[]" : "[...]"),
                                member.name, hloTypeName(dtype)));
    }
    const Instruction &root = region.instructions[region.root];
    static const std::map<std::string_view, ReduceFn> kinds = {
        {"add", ReduceFn::Sum}, {"maximum", ReduceFn::Max}, {"minimum", ReduceFn::Min}, {"multiply", ReduceFn::Prod}};
    auto kind = kinds.find(root.opcode);
    std::set<int64_t> parameters;
    for (const Operand &operand : root.operands) {
      auto found = region.byName.find(operand.name);
      if (found != region.byName.end() && region.instructions[found->second].opcode == "parameter")
        parameters.insert(region.instructions[found->second].parameterNumber);
    }
    if (kind == kinds.end() || root.operands.size() != 2 || parameters != std::set<int64_t>{0, 1} ||
        parameterCount(region) != 2)
      failOp(ins, fmt::format("to_apply=%{} is not an add, maximum, minimum or multiply of its two parameters, the "
                              "reductions mlpipe reads",
                              region.name));
    return kind->second;
  }

  static bool isIdentity(ReduceFn fn, double value, DType dtype) {
    switch (fn) {
    case ReduceFn::Sum:
      return value == 0;
    case ReduceFn::Prod:
      return value == 1;
    case ReduceFn::Max:
      return value == -INFINITY || (dtype == DType::i32 && value == std::numeric_limits<int32_t>::min()) ||
             (dtype == DType::i64 && value == static_cast<double>(std::numeric_limits<int64_t>::min()));
    case ReduceFn::Min:
      return value == INFINITY || (dtype == DType::i32 && value == std::numeric_limits<int32_t>::max()) ||
             (dtype == DType::i64 && value == static_cast<double>(std::numeric_limits<int64_t>::max()));
    }
    return false;
  }

  // reduce(x, init), dimensions={...}: one graph reduction per axis, from
  // the last; an init that is not the reduction's identity is combined in.
  Tensor reduce(const Instruction &ins, const std::vector<const Value *> &operands) {
    if (ins.operands.size() != 2)
      failOp(ins, fmt::format("a reduce of {} inputs at once (a variadic reduce) is not supported",
                              ins.operands.size() / 2));
    Tensor x = tensorOperand(ins, operands, 0), init = tensorOperand(ins, operands, 1);
    if (init.rank() != 0)
      failOp(ins, fmt::format("the initial value must be a scalar, not {}", describe(init)));
    if (init.dtype() != x.dtype())
      failOp(ins, fmt::format("the initial value is {} but the input is {}", hloTypeName(init.dtype()),
                              hloTypeName(x.dtype())));
    ReduceFn fn = reduction(ins, attribute(ins, "to_apply"), x.dtype());
    std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
    std::sort(dimensions.begin(), dimensions.end());
    if (std::adjacent_find(dimensions.begin(), dimensions.end()) != dimensions.end())
      failOp(ins, "dimensions= names an axis twice");
    for (int64_t axis : dimensions)
      if (axis < 0 || axis >= x.rank())
        failOp(ins, fmt::format("axis {} is out of range for an input of rank {}", axis, x.rank()));
    Tensor result = x;
    for (auto axis = dimensions.rbegin(); axis != dimensions.rend(); ++axis)
      result = graph_->reduce(fn, result, *axis, false);
    const Node &initNode = graph_->node(init.id());
    if (initNode.kind == OpKind::Constant && isIdentity(fn, initNode.value, init.dtype()))
      return result;
    static const std::map<ReduceFn, BinaryFn> combine = {{ReduceFn::Sum, BinaryFn::Add},
                                                         {ReduceFn::Max, BinaryFn::Max},
                                                         {ReduceFn::Min, BinaryFn::Min},
                                                         {ReduceFn::Prod, BinaryFn::Mul}};
    return graph_->binary(combine.at(fn), result, init);
  }

  // dot with general dimension numbers: both operands transposed to
  // [batch, free, contracting] order and reshaped to one batch, M, K (and K,
  // N) axis, multiplied by the graph's (batch) matmul, and the result
  // reshaped to [batch..., lhs free..., rhs free...].
  Tensor dot(const Instruction &ins, Tensor lhs, Tensor rhs) {
    if (findAttribute(ins, "sparsity"))
      failOp(ins, "sparse dots are not supported");
    std::vector<int64_t> lhsBatch = optionalIntList(ins, "lhs_batch_dims");
    std::vector<int64_t> rhsBatch = optionalIntList(ins, "rhs_batch_dims");
    std::vector<int64_t> lhsContracting = optionalIntList(ins, "lhs_contracting_dims");
    std::vector<int64_t> rhsContracting = optionalIntList(ins, "rhs_contracting_dims");
    if (lhsBatch.size() != rhsBatch.size())
      failOp(ins, fmt::format("lhs has {} batch dimensions and rhs {}", lhsBatch.size(), rhsBatch.size()));
    if (lhsContracting.size() != rhsContracting.size())
      failOp(ins,
             fmt::format("lhs has {} contracting dimensions and rhs {}", lhsContracting.size(), rhsContracting.size()));
    auto freeAxes = [&](Tensor t, const std::vector<int64_t> &batch, const std::vector<int64_t> &contracting,
                        const char *side) {
      std::vector<bool> used(static_cast<size_t>(t.rank()), false);
      for (const std::vector<int64_t> *axes : {&batch, &contracting})
        for (int64_t axis : *axes) {
          if (axis < 0 || axis >= t.rank() || used[axis])
            failOp(ins, fmt::format("{} dimension {} is out of range or named twice for {}", side, axis, describe(t)));
          used[axis] = true;
        }
      std::vector<int64_t> free;
      for (int64_t axis = 0; axis < t.rank(); ++axis)
        if (!used[axis])
          free.push_back(axis);
      return free;
    };
    std::vector<int64_t> lhsFree = freeAxes(lhs, lhsBatch, lhsContracting, "lhs");
    std::vector<int64_t> rhsFree = freeAxes(rhs, rhsBatch, rhsContracting, "rhs");
    for (size_t i = 0; i < lhsBatch.size(); ++i)
      if (lhs.shape()[lhsBatch[i]] != rhs.shape()[rhsBatch[i]])
        failOp(ins, fmt::format("batch dimensions differ: lhs dimension {} has {} elements, rhs dimension {} has {}",
                                lhsBatch[i], lhs.shape()[lhsBatch[i]], rhsBatch[i], rhs.shape()[rhsBatch[i]]));
    for (size_t i = 0; i < lhsContracting.size(); ++i)
      if (lhs.shape()[lhsContracting[i]] != rhs.shape()[rhsContracting[i]])
        failOp(ins, fmt::format("contracting dimensions differ: lhs dimension {} has {} elements, rhs dimension {} "
                                "has {}",
                                lhsContracting[i], lhs.shape()[lhsContracting[i]], rhsContracting[i],
                                rhs.shape()[rhsContracting[i]]));
    // Mixed types (bf16 x bf16 -> f32, say) multiply in the result's type.
    if (ins.shape && !ins.shape->tuple) {
      DType result = elementType(*ins.shape);
      lhs = graph_->convert(lhs, result);
      rhs = graph_->convert(rhs, result);
    }
    auto sizes = [](Tensor t, const std::vector<int64_t> &axes) {
      Shape out;
      for (int64_t axis : axes)
        out.push_back(t.shape()[axis]);
      return out;
    };
    auto product = [](const Shape &shape) { return numElements(shape); };
    Shape batch = sizes(lhs, lhsBatch), m = sizes(lhs, lhsFree), n = sizes(rhs, rhsFree);
    int64_t k = product(sizes(lhs, lhsContracting));
    auto arranged = [&](Tensor t, std::vector<int64_t> order, Shape shape) {
      std::vector<int64_t> identity(order.size());
      std::iota(identity.begin(), identity.end(), 0);
      if (order != identity)
        t = graph_->transpose(t, order);
      return graph_->reshape(t, shape);
    };
    std::vector<int64_t> lhsOrder = lhsBatch, rhsOrder = rhsBatch;
    lhsOrder.insert(lhsOrder.end(), lhsFree.begin(), lhsFree.end());
    lhsOrder.insert(lhsOrder.end(), lhsContracting.begin(), lhsContracting.end());
    rhsOrder.insert(rhsOrder.end(), rhsContracting.begin(), rhsContracting.end());
    rhsOrder.insert(rhsOrder.end(), rhsFree.begin(), rhsFree.end());
    Shape lhsShape{product(m), k}, rhsShape{k, product(n)};
    if (!batch.empty()) {
      lhsShape.insert(lhsShape.begin(), product(batch));
      rhsShape.insert(rhsShape.begin(), product(batch));
    }
    Tensor result = graph_->matmul(arranged(lhs, lhsOrder, lhsShape), arranged(rhs, rhsOrder, rhsShape));
    Shape out = batch;
    out.insert(out.end(), m.begin(), m.end());
    out.insert(out.end(), n.begin(), n.end());
    return graph_->reshape(result, out);
  }

  // gather in the forms an embedding lookup takes: whole rows of the
  // operand's first axis picked by integer ids, the slice's axes last in the
  // result.
  Tensor gather(const Instruction &ins, Tensor table, Tensor indices) {
    std::vector<int64_t> offsetDims = optionalIntList(ins, "offset_dims");
    std::vector<int64_t> collapsed = optionalIntList(ins, "collapsed_slice_dims");
    std::vector<int64_t> startIndexMap = optionalIntList(ins, "start_index_map");
    std::vector<int64_t> sliceSizes = optionalIntList(ins, "slice_sizes");
    int64_t indexVectorDim = intValue(attribute(ins, "index_vector_dim"));
    if (!optionalIntList(ins, "operand_batching_dims").empty() ||
        !optionalIntList(ins, "start_indices_batching_dims").empty())
      failOp(ins, "batched gathers (operand_batching_dims) are not supported");
    if (!isInteger(indices.dtype()))
      failOp(ins, fmt::format("the indices must be s32 or s64, not {}", hloTypeName(indices.dtype())));
    const char *form = "only embedding lookups are supported: collapsed_slice_dims={0}, start_index_map={0} and "
                       "slice_sizes taking whole rows, with the row's axes last in the result";
    Shape expectedSizes = table.shape();
    expectedSizes[0] = 1;
    if (collapsed != std::vector<int64_t>{0} || startIndexMap != std::vector<int64_t>{0} || sliceSizes != expectedSizes)
      failOp(ins, form);
    if (indexVectorDim < 0 || indexVectorDim > indices.rank())
      failOp(ins,
             fmt::format("index_vector_dim={} is out of range for indices of rank {}", indexVectorDim, indices.rank()));
    Shape batch = indices.shape();
    if (indexVectorDim < indices.rank()) {
      if (batch[indexVectorDim] != 1)
        failOp(ins, form);
      batch.erase(batch.begin() + indexVectorDim);
    }
    std::vector<int64_t> trailing(static_cast<size_t>(table.rank() - 1));
    std::iota(trailing.begin(), trailing.end(), static_cast<int64_t>(batch.size()));
    if (offsetDims != trailing)
      failOp(ins, form);
    Shape row(table.shape().begin() + 1, table.shape().end());
    int64_t width = numElements(row);
    Tensor rows = graph_->reshape(table, {table.shape()[0], width});
    Tensor gathered = graph_->gather(rows, graph_->reshape(indices, batch));
    Shape out = batch;
    out.insert(out.end(), row.begin(), row.end());
    return graph_->reshape(gathered, out);
  }

  static void flatten(const Value &value, std::vector<Tensor> &out) {
    if (value.tensor) {
      out.push_back(*value.tensor);
      return;
    }
    for (const Value &element : value.elements)
      flatten(element, out);
  }

  // Every integer input that a gather's ids are computed from draws its
  // random test values from the rows of the table it indexes.
  void markIndexInputs() {
    const auto &nodes = graph_->nodes();
    for (size_t id = 0; id < nodes.size(); ++id) {
      if (nodes[id].kind != OpKind::Gather)
        continue;
      int64_t rows = nodes[nodes[id].operands[0]].shape[0];
      std::vector<int> work = {nodes[id].operands[1]};
      std::set<int> seen;
      while (!work.empty()) {
        int current = work.back();
        work.pop_back();
        if (!seen.insert(current).second)
          continue;
        const Node &node = nodes[current];
        if (node.kind == OpKind::Input && isInteger(node.dtype))
          graph_->markIndexInput(Tensor(graph_, current), rows);
        work.insert(work.end(), node.operands.begin(), node.operands.end());
      }
    }
  }

  const ModuleText &module_;
  const std::string &source_;
  Graph *graph_ = nullptr;
  std::vector<Tensor> inputs_;
  std::vector<size_t> active_; // computations being walked, for recursion
};

} // namespace
} // namespace hlo

Program readHlo(std::string_view text, const std::string &source) {
  hlo::ModuleText module = hlo::parseModule(text, source);
  return hlo::Builder(module, source).build();
}

} // namespace mlpipe::fe
