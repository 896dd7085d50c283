// HLO's variadic reduce of two inputs, as JAX writes argmax and argmin:
// values and their indices (an s32 iota) reduced together by a comparator
// computation that keeps the greater (lesser) value, NaN counting as the
// extreme, and on a tie the smaller index.
//
// The comparator is recognised by what it computes, not by how it is
// spelled: it may only compare its parameters (values with values, indices
// with indices), combine the outcomes with and, or, xor and not, and select
// between its parameters by them. Each of its results is then a function of
// how the two values compare (less, equal, greater, either or both NaN) and
// how the two indices compare, so running it once for every such case
// decides exactly whether it is an argmax or an argmin.
//
// The reduction itself is recorded with the graph's one-input reductions:
// the extreme value m (NaN-propagating), then the least index among the
// positions holding m (or holding NaN when m is NaN), which the GPU's row
// and column reduction emitters compute as a softmax computes its max and
// sum.
#include "frontend/hlo/hlo_builder.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

namespace mlpipe::fe::hlo {

namespace {

// The comparator's parameters: (value a, index a, value b, index b).
constexpr size_t kComparatorParameters = 4;

// What each instruction of the comparator yields: one of its values, one
// of its indices, or a truth value.
enum class Domain { Value, Index, Pred };

} // namespace

// Runs the comparator `region` on its parameters (value a, index a, value
// b, index b) and returns its (value, index) results; fails naming the
// first instruction outside the recognised forms.
std::pair<double, double> Builder::runComparator(const Instruction &ins, const Computation &region,
                                                 const std::array<double, 4> &parameters) const {
  auto refuse = [&](const Instruction &member, const std::string &why) {
    failOp(ins, fmt::format("to_apply=%{} is not an argmax or argmin comparator ({} at %{}); mlpipe reads a "
                            "reduce of two inputs only as argmax or argmin: the greater (lesser) value, NaN "
                            "counting as the extreme, and on a tie the smaller index",
                            region.name, why, member.name));
  };
  std::vector<double> values(region.instructions.size());
  std::vector<Domain> domains(region.instructions.size());
  std::vector<bool> done(region.instructions.size(), false);
  // The comparator's instructions in dependency order: a small explicit
  // walk, since the region is a handful of scalars.
  std::function<void(size_t, int)> run = [&](size_t index, int depth) {
    if (done[index])
      return;
    const Instruction &member = region.instructions[index];
    if (depth > kMaxNesting)
      refuse(member, "operands nested too deeply");
    std::vector<size_t> used;
    for (const Operand &operand : member.operands) {
      auto found = region.byName.find(operand.name);
      if (found == region.byName.end())
        refuse(member, fmt::format("operand %{} is not defined", operand.name));
      run(found->second, depth + 1);
      used.push_back(found->second);
    }
    auto operandDomain = [&](size_t i) { return domains[used[i]]; };
    auto operandValue = [&](size_t i) { return values[used[i]]; };
    const std::string &op = member.opcode;
    if (op == "parameter") {
      if (member.parameterNumber < 0 || member.parameterNumber >= static_cast<int64_t>(kComparatorParameters))
        refuse(member, fmt::format("parameter {} of a comparator of 4", member.parameterNumber));
      values[index] = parameters[static_cast<size_t>(member.parameterNumber)];
      domains[index] = member.parameterNumber % 2 == 0 ? Domain::Value : Domain::Index;
    } else if (op == "compare") {
      if (used.size() != 2 || operandDomain(0) != operandDomain(1) || operandDomain(0) == Domain::Pred)
        refuse(member, "a compare of anything but two values or two indices");
      static const std::map<std::string, CompareFn> directions = {{"EQ", CompareFn::Eq}, {"NE", CompareFn::Ne},
                                                                  {"LT", CompareFn::Lt}, {"LE", CompareFn::Le},
                                                                  {"GT", CompareFn::Gt}, {"GE", CompareFn::Ge}};
      const Attribute *direction = nullptr;
      for (const Attribute &attribute : member.attributes)
        if (attribute.name == "direction")
          direction = &attribute;
      auto found = direction ? directions.find(std::string(direction->text)) : directions.end();
      if (found == directions.end())
        refuse(member, "a compare without a direction EQ, NE, LT, LE, GT or GE");
      values[index] = applyCompare(found->second, operandValue(0), operandValue(1)) ? 1.0 : 0.0;
      domains[index] = Domain::Pred;
    } else if (op == "and" || op == "or" || op == "xor") {
      if (used.size() != 2 || operandDomain(0) != Domain::Pred || operandDomain(1) != Domain::Pred)
        refuse(member, fmt::format("an {} of anything but two truth values", op));
      bool x = operandValue(0) != 0, y = operandValue(1) != 0;
      values[index] = (op == "and" ? x && y : op == "or" ? x || y : x != y) ? 1.0 : 0.0;
      domains[index] = Domain::Pred;
    } else if (op == "not") {
      if (used.size() != 1 || operandDomain(0) != Domain::Pred)
        refuse(member, "a not of anything but a truth value");
      values[index] = operandValue(0) != 0 ? 0.0 : 1.0;
      domains[index] = Domain::Pred;
    } else if (op == "select") {
      if (used.size() != 3 || operandDomain(0) != Domain::Pred || operandDomain(1) != operandDomain(2) ||
          operandDomain(1) == Domain::Pred)
        refuse(member, "a select of anything but two values or two indices by a truth value");
      values[index] = operandValue(0) != 0 ? operandValue(1) : operandValue(2);
      domains[index] = operandDomain(1);
    } else if (op == "tuple" && index == region.root) {
      if (used.size() != 2 || operandDomain(0) != Domain::Value || operandDomain(1) != Domain::Index)
        refuse(member, "a result other than (a value, an index)");
    } else {
      refuse(member, fmt::format("{}{}", op, index == region.root ? " as the result" : ""));
    }
    done[index] = true;
  };
  const Instruction &root = region.instructions[region.root];
  if (root.opcode != "tuple")
    refuse(root, "a result other than a tuple (a value, an index)");
  run(region.root, 0);
  auto rootOperand = [&](size_t i) { return values[region.byName.at(root.operands[i].name)]; };
  return {rootOperand(0), rootOperand(1)};
}

// Whether the comparator of a reduce of values of `valueType` keeps the
// greatest value (Max) or the least (Min), NaN counting as the extreme and
// a tie going to the smaller index. Every way two values and two indices
// can compare is one case; among two NaNs either index may be kept (JAX's
// comparator keeps the first operand's), which mlpipe resolves as the
// smaller.
ReduceFn Builder::argReduction(const Instruction &ins, const Attribute &toApply, DType valueType,
                               DType indexType) const {
  const Computation &region = module_.computations[computationNamed(toApply)];
  if (parameterCount(region) != kComparatorParameters)
    failOp(ins, fmt::format("to_apply=%{} has {} parameters, but a reduce of two inputs passes 4", region.name,
                            parameterCount(region)));
  for (const Instruction &member : region.instructions) {
    if (member.opcode != "parameter" || !member.shape)
      continue;
    DType expected = member.parameterNumber % 2 == 0 ? valueType : indexType;
    if (member.shape->tuple || !member.shape->dims.empty() || elementType(*member.shape) != expected)
      failOp(ins, fmt::format("to_apply=%{} takes %{} as {}, but the reduce passes {}[]", region.name, member.name,
                              member.shape->tuple ? std::string("a tuple") : printable(member.shape->typeName),
                              hloTypeName(expected)));
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<double, double>> valuePairs = {{1, 2}, {2, 2}, {2, 1}};
  if (isFloat(valueType))
    valuePairs.insert(valuePairs.end(), {{nan, 1}, {1, nan}, {nan, nan}});
  const std::pair<double, double> indexPairs[] = {{0, 1}, {1, 1}, {1, 0}};
  auto keeps = [&](ReduceFn fn) {
    for (auto [a, b] : valuePairs)
      for (auto [indexA, indexB] : indexPairs) {
        auto [value, index] = runComparator(ins, region, {a, indexA, b, indexB});
        bool aBetter = (fn == ReduceFn::Max ? a > b : a < b) || (std::isnan(a) && !std::isnan(b));
        bool bBetter = (fn == ReduceFn::Max ? b > a : b < a) || (std::isnan(b) && !std::isnan(a));
        double expectedValue = bBetter ? b : a; // a tie keeps an equal value
        if (std::isnan(expectedValue) ? !std::isnan(value) : value != expectedValue)
          return false;
        bool bothNaN = std::isnan(a) && std::isnan(b);
        double expectedIndex = aBetter ? indexA : bBetter ? indexB : std::min(indexA, indexB);
        if (index != expectedIndex && !(bothNaN && (index == indexA || index == indexB)))
          return false;
      }
    return true;
  };
  if (keeps(ReduceFn::Max))
    return ReduceFn::Max;
  if (keeps(ReduceFn::Min))
    return ReduceFn::Min;
  failOp(ins, fmt::format("to_apply=%{} is not an argmax or argmin comparator: it does not keep the greater (or "
                          "lesser) value with, on a tie, the smaller index; mlpipe reads a reduce of two inputs "
                          "only as argmax or argmin",
                          region.name));
}

// reduce(values, indices, value init, index init), dimensions={...},
// to_apply=an argmax or argmin comparator: the tuple (extreme value, least
// index holding it).
Value Builder::argReduce(const Instruction &ins, const std::vector<const Value *> &operands) {
  Graph &g = *graph_;
  Tensor values = tensorOperand(ins, operands, 0), indices = tensorOperand(ins, operands, 1);
  Tensor valueInit = tensorOperand(ins, operands, 2), indexInit = tensorOperand(ins, operands, 3);
  if (values.shape() != indices.shape())
    failOp(ins, fmt::format("its two inputs have different shapes, {} and {}", describe(values), describe(indices)));
  if (!isInteger(indices.dtype()))
    failOp(ins, fmt::format("its second input is {}: mlpipe reads a reduce of two inputs as argmax or argmin, whose "
                            "second input holds integer indices",
                            describe(indices)));
  if (valueInit.rank() != 0 || indexInit.rank() != 0 || valueInit.dtype() != values.dtype() ||
      indexInit.dtype() != indices.dtype())
    failOp(ins, fmt::format("the initial values are {} and {}, but the inputs are {} and {}: each must be a scalar of "
                            "its input's type",
                            describe(valueInit), describe(indexInit), hloTypeName(values.dtype()),
                            hloTypeName(indices.dtype())));
  ReduceFn fn = argReduction(ins, attribute(ins, "to_apply"), values.dtype(), indices.dtype());
  std::vector<int64_t> dimensions = reducedAxes(ins, values.rank());
  Shape reducedShape;
  for (int64_t axis = 0; axis < values.rank(); ++axis)
    if (!std::binary_search(dimensions.begin(), dimensions.end(), axis))
      reducedShape.push_back(values.shape()[axis]);

  // The extreme kept with its reduced axes as size 1, which the values
  // then compare with by broadcasting: the graph softmax is made of, whose
  // reductions the GPU fuses into one kernel.
  Tensor best = values;
  for (auto axis = dimensions.rbegin(); axis != dimensions.rend(); ++axis)
    best = g.reduce(fn, best, *axis, true);
  // The positions holding it: equal to it, or NaN (then it is NaN too).
  bool floats = isFloat(values.dtype());
  Tensor holders = g.compare(CompareFn::Eq, values, best);
  if (floats)
    holders = g.binary(BinaryFn::Or, holders, g.compare(CompareFn::Ne, values, values));
  Tensor largestIndex = g.constant(integerMaximum(indices.dtype()), indices.dtype());
  Tensor index = g.select(holders, indices, largestIndex);
  for (auto axis = dimensions.rbegin(); axis != dimensions.rend(); ++axis)
    index = g.reduce(ReduceFn::Min, index, *axis, false);
  best = g.reshape(best, reducedShape);

  // The initial pair counts once, as another candidate. JAX's (the
  // reduction's identity, 0) with an iota along a reduced axis changes
  // nothing: it ties only where every value is the identity, and then the
  // least index is 0 already.
  const Node &valueInitNode = g.node(valueInit.id()), &indexInitNode = g.node(indexInit.id());
  const Node &indicesNode = g.node(indices.id());
  bool neutral = valueInitNode.kind == OpKind::Constant && isIdentity(fn, valueInitNode.value, values.dtype()) &&
                 indexInitNode.kind == OpKind::Constant && indexInitNode.value == 0 &&
                 indicesNode.kind == OpKind::Iota &&
                 std::binary_search(dimensions.begin(), dimensions.end(), indicesNode.ints[0]);
  if (!neutral) {
    // x and y hold the same value, NaN matching NaN.
    auto same = [&](Tensor x, Tensor y) {
      Tensor equal = g.compare(CompareFn::Eq, x, y);
      if (!floats)
        return equal;
      return g.binary(BinaryFn::Or, equal,
                      g.binary(BinaryFn::And, g.compare(CompareFn::Ne, x, x), g.compare(CompareFn::Ne, y, y)));
    };
    Tensor combined = g.binary(fn == ReduceFn::Max ? BinaryFn::Max : BinaryFn::Min, best, valueInit);
    index = g.binary(BinaryFn::Min, g.select(same(best, combined), index, largestIndex),
                     g.select(same(valueInit, combined), indexInit, largestIndex));
    best = combined;
  }
  Value tuple;
  tuple.tensor.reset();
  tuple.elements = {tensorValue(best), tensorValue(index)};
  return tuple;
}

} // namespace mlpipe::fe::hlo
