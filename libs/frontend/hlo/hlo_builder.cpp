// The HLO builder's walk: computations evaluated in dependency order with
// calls and fusions inlined, the entry's inputs and outputs, and the layouts
// it checks. See hlo_builder.h.
#include "frontend/hlo/hlo_builder.h"

#include "frontend/hlo/hlo_parser.h"

#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <numeric>

namespace mlpipe::fe::hlo {

const std::map<std::string_view, DType> &elementTypes() {
  static const std::map<std::string_view, DType> types = {
      {"pred", DType::i1},   {"s8", DType::i8},   {"s16", DType::i16}, {"s32", DType::i32}, {"s64", DType::i64},
      {"u8", DType::u8},     {"u16", DType::u16}, {"u32", DType::u32}, {"u64", DType::u64}, {"f16", DType::f16},
      {"bf16", DType::bf16}, {"f32", DType::f32}, {"f64", DType::f64},
  };
  return types;
}

std::string elementTypeList() {
  static const char *order[] = {"pred", "s8",  "s16", "s32",  "s64", "u8", "u16",
                                "u32",  "u64", "f16", "bf16", "f32", "f64"};
  std::string list;
  for (size_t i = 0; i < std::size(order); ++i)
    list += std::string(i == 0 ? "" : i + 1 == std::size(order) ? " and " : ", ") + order[i];
  return list;
}

const char *hloTypeName(DType dtype) {
  for (auto &[name, type] : elementTypes())
    if (type == dtype)
      return name.data();
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

std::optional<std::vector<int64_t>> plainLayout(const ShapeText &shape) {
  if (shape.tuple || shape.layoutExtras)
    return std::nullopt;
  std::vector<int64_t> standard(shape.dims.size());
  std::iota(standard.rbegin(), standard.rend(), 0);
  if (!shape.minorToMajor)
    return standard;
  std::vector<int64_t> sorted = *shape.minorToMajor;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> axes(shape.dims.size());
  std::iota(axes.begin(), axes.end(), 0);
  if (sorted != axes)
    return std::nullopt;
  return *shape.minorToMajor;
}

namespace {

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

// A written shape's layout as HLO writes it: "{1,0}", "{1,0:T(8,128)}"
// (what follows ':' elided) or "the default layout" when none is written.
std::string layoutText(const ShapeText &shape) {
  if (!shape.minorToMajor)
    return "no layout (the default)";
  std::string text = "{";
  for (size_t i = 0; i < shape.minorToMajor->size(); ++i)
    text += (i ? "," : "") + std::to_string((*shape.minorToMajor)[i]);
  return text + (shape.layoutExtras ? ":...}" : "}");
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

} // namespace

Program Builder::build() {
  Program program;
  graph_ = &program.addFunction(functionName(module_.name), DType::f32);
  const Computation &entry = module_.computations[module_.entry];
  checkEntryLayout(entry);
  createInputs(entry);
  // The result's layout, in the ROOT's shape or entry_computation_layout,
  // says how XLA would lay it out in memory (JAX writes {0,1,2} for a
  // transpose): its values are the same, and mlpipe returns them row-major,
  // the logical order JAX hands to NumPy.
  Value root = evaluate(module_.entry, {}, 0, entry.loc);
  const Instruction &rootInstruction = entry.instructions[entry.root];
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

void Builder::checkEntryLayout(const Computation &entry) const {
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
  // A parameter's layout says how XLA lays its buffer out in device memory;
  // callers pass logical arrays (JAX and PJRT lay a NumPy array out as the
  // executable asks), so its values are the same whatever the layout. Only
  // a bitcast reads the layout (it reinterprets memory): the instruction's
  // and the entry's must then agree, or which one a bitcast reads by is
  // unclear.
  for (size_t i = 0; i < parameters.elements.size(); ++i) {
    auto found = declared.find(static_cast<int64_t>(i));
    if (found == declared.end() || !found->second->shape)
      continue;
    const ShapeText &written = *found->second->shape;
    if (plainLayout(parameters.elements[i]) != plainLayout(written))
      fail(parameters.elements[i].loc,
           fmt::format("entry_computation_layout gives parameter {} the layout {}, but the ENTRY's %{} declares {}: "
                       "a bitcast of it would read different values by each",
                       i, layoutText(parameters.elements[i]), found->second->name, layoutText(written)));
  }
}

// The entry's parameters become the function's inputs, in parameter order,
// named after their instructions.
void Builder::createInputs(const Computation &entry) {
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
    // A non-default layout is read as its logical array (checkEntryLayout
    // says why); a bitcast of the parameter honours it.
    inputs_.push_back(graph_->input(ins->name, shape.dims, dtype));
  }
}

// Walks computation `index` with `arguments` as its parameters (the entry
// has none: its parameters are the inputs) and returns its root's value.
Value Builder::evaluate(size_t index, const std::vector<Value> &arguments, int depth, Location callLoc) {
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

Value Builder::buildChecked(const Instruction &ins, const std::vector<const Value *> &operands,
                            const std::vector<Value> &arguments, bool isEntry, int depth) {
  Value value;
  try {
    // The op's place in the user's program (metadata's op_name) names
    // the nodes it records; a call or fusion leaves naming to its ops.
    std::optional<Graph::Scope> scope;
    bool inlines = ins.opcode == "call" || ins.opcode == "fusion" || ins.opcode == "while" ||
                   ins.opcode == "conditional" || ins.opcode.ends_with("-start");
    if (std::string name = scopeName(ins); !name.empty() && !inlines)
      scope.emplace(*graph_, name);
    value = buildInstruction(ins, operands, arguments, isEntry, depth);
    if (ins.shape) {
      checkDeclared(ins, *ins.shape, value);
      value.defaultLayout = hasDefaultLayout(*ins.shape);
      value.minorToMajor.clear();
      if (std::optional<std::vector<int64_t>> layout = plainLayout(*ins.shape); layout && !value.defaultLayout)
        value.minorToMajor = *layout;
    }
  } catch (const DiagnosticError &) {
    throw;
  } catch (const Error &error) {
    failOp(ins, error.what());
  }
  if (graph_->nodes().size() > kMaxGraphNodes && unrolling_)
    failOp(*unrolling_->loop, fmt::format("unrolled to its {} trips, the module records more than {} operations once "
                                          "calls, fusions and loops are inlined",
                                          unrolling_->trips, kMaxGraphNodes));
  if (graph_->nodes().size() > kMaxGraphNodes)
    failOp(ins, fmt::format("the module records more than {} operations once calls and fusions are inlined",
                            kMaxGraphNodes));
  return value;
}

// metadata={op_name="jit(f)/jit(main)/attn/dot_general[...]" ...} as a
// front-end scope: "attn.dot_general" (the jit wrappers and bracketed
// parameters dropped, path separators as dots, only identifier
// characters kept). Empty when there is no op_name.
std::string Builder::scopeName(const Instruction &ins) {
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

void Builder::checkDeclared(const Instruction &ins, const ShapeText &declared, const Value &value) const {
  if (value.unread) // a workspace or context: whatever its shape, nothing reads it
    return;
  if (declared.tuple != !value.tensor)
    failOp(ins, fmt::format("the result is {}, but the instruction declares {}", value.tensor ? "an array" : "a tuple",
                            declared.tuple ? "a tuple" : "an array"));
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

// One instruction recorded into the graph from its operands' values
// (`arguments` are the parameters of the computation being walked).
Value Builder::buildInstruction(const Instruction &ins, const std::vector<const Value *> &operands,
                                const std::vector<Value> &arguments, bool isEntry, int depth) {
  const std::string &op = ins.opcode;
  if (std::optional<Value> value = asyncOp(ins, operands, arguments, isEntry, depth))
    return *value;
  if (!findSupportedOp(op)) // the one list of what is read
    refuse(ins);
  if (op == "parameter")
    return buildParameter(ins, arguments, isEntry);
  if (op == "constant")
    return buildConstant(ins);
  if (std::optional<Value> value = buildElementwise(ins, operands))
    return *value;
  if (std::optional<Value> value = buildShapeOp(ins, operands))
    return *value;
  if (std::optional<Value> value = buildReduceDotGather(ins, operands))
    return *value;
  if (op == "tuple")
    return tupleOf(operands);
  if (op == "get-tuple-element")
    return tupleElement(ins, operands);
  if (op == "call" || op == "fusion")
    return inlineCall(ins, operands, depth);
  if (op == "while")
    return whileLoop(ins, operands, depth);
  if (op == "conditional")
    return conditional(ins, operands, depth);
  if (op == "sort")
    return sort(ins, operands);
  if (op == "scan")
    return scan(ins, operands, depth);
  if (op == "custom-call")
    return customCall(ins, operands);
  failOp(ins, "internal: the op is listed as read, but nothing builds it");
}

// An entry parameter is its input; any other computation's is what the
// call passes.
Value Builder::buildParameter(const Instruction &ins, const std::vector<Value> &arguments, bool isEntry) {
  if (isEntry)
    return tensorValue(inputs_.at(static_cast<size_t>(ins.parameterNumber)));
  if (ins.parameterNumber < 0 || ins.parameterNumber >= static_cast<int64_t>(arguments.size()))
    failOp(ins, fmt::format("parameter {} is not passed: the call gives {} operands", ins.parameterNumber,
                            arguments.size()));
  return arguments[static_cast<size_t>(ins.parameterNumber)];
}

Value Builder::tupleOf(const std::vector<const Value *> &operands) {
  Value tuple;
  tuple.tensor.reset();
  for (const Value *element : operands)
    tuple.elements.push_back(*element);
  return tuple;
}

Value Builder::tupleElement(const Instruction &ins, const std::vector<const Value *> &operands) {
  expectOperands(ins, 1);
  int64_t index = intValue(attribute(ins, "index"));
  const Value &tuple = *operands[0];
  if (tuple.tensor)
    failOp(ins, fmt::format("operand %{} is an array, not a tuple", ins.operands[0].name));
  if (index < 0 || index >= static_cast<int64_t>(tuple.elements.size()))
    failOp(ins, fmt::format("index {} is out of range for a tuple of {} elements", index, tuple.elements.size()));
  if (tuple.elements[static_cast<size_t>(index)].unread)
    failOp(ins, fmt::format("element {} of %{} is a library call's workspace or an asynchronous op's context, "
                            "which holds no values mlpipe models",
                            index, ins.operands[0].name));
  return tuple.elements[static_cast<size_t>(index)];
}

// call and fusion: the callee walked with the operands as its parameters.
Value Builder::inlineCall(const Instruction &ins, const std::vector<const Value *> &operands, int depth) {
  const std::string &op = ins.opcode;
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

// Every other opcode: refused, saying whether XLA has it at all.
void Builder::refuse(const Instruction &ins) const {
  const std::string &op = ins.opcode;
  if (unsupportedOpcodes().count(op))
    fail(ins.opcodeLoc, fmt::format("{} %{}{} is not supported: `trace --list-ops` lists the ops mlpipe reads", op,
                                    ins.name, ins.shape ? " of shape " + shapeWithoutLayout(*ins.shape) : ""));
  fail(ins.opcodeLoc, fmt::format("unknown HLO op '{}' in %{}", printable(op), ins.name));
}

size_t Builder::parameterCount(const Computation &computation) {
  size_t count = 0;
  for (const Instruction &ins : computation.instructions)
    if (ins.opcode == "parameter")
      ++count;
  return count;
}

void Builder::flatten(const Value &value, std::vector<Tensor> &out) {
  if (value.tensor) {
    out.push_back(*value.tensor);
    return;
  }
  for (const Value &element : value.elements)
    flatten(element, out);
}

// Every integer input that a gather's ids are computed from draws its
// random test values from the rows of the table it indexes.
void Builder::markIndexInputs() {
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

} // namespace mlpipe::fe::hlo
