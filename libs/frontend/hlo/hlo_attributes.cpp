// The HLO builder's reading of one instruction: its attributes (parsed from
// their text when an op needs them), its operands and its declared shape,
// each refused in one line naming the instruction.
#include "frontend/hlo/hlo_builder.h"
#include "frontend/hlo/hlo_json.h"

#include "support/error.h"

namespace mlpipe::fe::hlo {

// The element type a shape names. Throws mlpipe::Error (which the
// instruction being built turns into a diagnostic naming it) for a type,
// or a shape, that mlpipe does not read.
DType Builder::elementType(const ShapeText &shape) {
  auto found = elementTypes().find(shape.typeName);
  if (found == elementTypes().end())
    mlpipe::fail("element type {} is not supported: mlpipe reads {}", printable(shape.typeName), elementTypeList());
  if (shape.dynamic)
    mlpipe::fail("dynamic dimensions ('?', '<=N') are not supported: mlpipe needs static shapes");
  for (int64_t dim : shape.dims)
    if (dim <= 0)
      mlpipe::fail("a dimension of size {} is not supported: mlpipe needs non-empty arrays", dim);
  numElements(shape.dims);
  return found->second;
}

const ShapeText &Builder::arrayShape(const Instruction &ins) const {
  if (!ins.shape)
    failOp(ins, "its result shape must be written out (e.g. 'f32[8,16]' before the opcode)");
  if (ins.shape->tuple)
    failOp(ins, "its result must be an array, not a tuple");
  return *ins.shape;
}

const Attribute *Builder::findAttribute(const Instruction &ins, std::string_view name) const {
  for (const Attribute &attribute : ins.attributes)
    if (attribute.name == name)
      return &attribute;
  return nullptr;
}

const Attribute &Builder::attribute(const Instruction &ins, std::string_view name) const {
  if (const Attribute *found = findAttribute(ins, name))
    return *found;
  failOp(ins, fmt::format("it needs a {}= attribute", name));
}

// backend_config={...}: XLA's per-instruction proto, as JSON; nullopt when
// the instruction has none. The older form, a quoted string, is not read.
std::optional<Json> Builder::backendConfig(const Instruction &ins) const {
  const Attribute *config = findAttribute(ins, "backend_config");
  if (!config || config->text.empty() || config->text.front() != '{')
    return std::nullopt;
  return parseAttribute(*config, [](Cursor &in) { return parseJson(in); });
}

// {1,0}
std::vector<int64_t> Builder::intList(const Attribute &attribute) const {
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

std::vector<int64_t> Builder::optionalIntList(const Instruction &ins, std::string_view name) const {
  const Attribute *found = findAttribute(ins, name);
  return found ? intList(*found) : std::vector<int64_t>{};
}

int64_t Builder::intValue(const Attribute &attribute) const {
  return parseAttribute(attribute, [](Cursor &in) { return in.integer("an integer"); });
}

std::string Builder::word(const Attribute &attribute) const {
  return parseAttribute(attribute, [](Cursor &in) { return in.identifier("a word"); });
}

size_t Builder::computationNamed(const Attribute &attribute) const {
  std::string name = parseAttribute(attribute, [](Cursor &in) { return in.name("a computation name"); });
  auto found = module_.byName.find(name);
  if (found == module_.byName.end())
    fail(attribute.valueLoc, fmt::format("there is no computation named %{}", name));
  return found->second;
}

Tensor Builder::tensorOperand(const Instruction &ins, const std::vector<const Value *> &operands, size_t i) const {
  if (operands[i]->unread)
    failOp(ins, fmt::format("operand {} (%{}) is a library call's workspace or an asynchronous op's context, which "
                            "holds no values mlpipe models",
                            i, ins.operands[i].name));
  if (!operands[i]->tensor)
    failOp(ins, fmt::format("operand {} (%{}) is a tuple, where an array is needed", i, ins.operands[i].name));
  return *operands[i]->tensor;
}

void Builder::expectOperands(const Instruction &ins, size_t count) const {
  if (ins.operands.size() != count)
    failOp(ins, fmt::format("it takes {} operand{}, not {}", count, count == 1 ? "" : "s", ins.operands.size()));
}

// Elementwise operands are arrays of one shape (a scalar may stand for
// one where HLO allows it: select's predicate, clamp's bounds).
void Builder::expectSameShape(const Instruction &ins, const std::vector<Tensor> &tensors, bool scalarsAllowed) const {
  std::optional<Tensor> first;
  for (Tensor t : tensors) {
    if (scalarsAllowed && t.rank() == 0)
      continue;
    if (first && first->shape() != t.shape())
      failOp(ins, fmt::format("its operands have mismatched shapes {} and {}", describe(*first), describe(t)));
    first = t;
  }
}

} // namespace mlpipe::fe::hlo
