// HLO constants and elementwise ops recorded into the front-end graph.
#include "frontend/hlo/hlo_builder.h"

#include "frontend/sort.h"

#include <cmath>
#include <limits>

namespace mlpipe::fe::hlo {

// constant: a scalar is captured by the ops that use it, an array is a
// literal.
Value Builder::buildConstant(const Instruction &ins) {
  Graph &g = *graph_;
  const ShapeText &shape = arrayShape(ins);
  DType dtype = elementType(shape);
  for (double v : ins.literal)
    checkLiteralValue(ins, v, dtype);
  if (shape.dims.empty())
    return tensorValue(g.constant(ins.literal.front(), dtype));
  return tensorValue(g.literal(shape.dims, dtype, ins.literal));
}

// Elementwise arithmetic and math, compare, select and convert (and the
// ops that pass values through unchanged); nullopt for any other opcode.
std::optional<Value> Builder::buildElementwise(const Instruction &ins, const std::vector<const Value *> &operands) {
  const std::string &op = ins.opcode;
  Graph &g = *graph_;
  auto operand = [&](size_t i) { return tensorOperand(ins, operands, i); };

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
  if (op == "is-finite") { // |x| < inf: false for infinities and NaN
    expectOperands(ins, 1);
    Tensor x = operand(0);
    if (!isFloat(x.dtype()))
      failOp(ins, fmt::format("is-finite needs a float operand, not {}", describe(x)));
    return tensorValue(g.compare(CompareFn::Lt, g.unary(UnaryFn::Abs, x), g.constant(INFINITY, x.dtype())));
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
    const Attribute *type = findAttribute(ins, "type");
    if (type && word(*type) == "TOTALORDER" && isFloat(operand(0).dtype())) {
      // XLA's total order: -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN.
      Tensor less = sortsBefore(g, SortOrder::Total, operand(0), operand(1));
      Tensor greater = sortsBefore(g, SortOrder::Total, operand(1), operand(0));
      auto negated = [&](Tensor t) { return g.unary(UnaryFn::Not, t); };
      Tensor unequal = g.binary(BinaryFn::Or, less, greater);
      switch (found->second) {
      case CompareFn::Lt:
        return tensorValue(less);
      case CompareFn::Gt:
        return tensorValue(greater);
      case CompareFn::Le:
        return tensorValue(negated(greater));
      case CompareFn::Ge:
        return tensorValue(negated(less));
      case CompareFn::Eq:
        return tensorValue(negated(unequal));
      case CompareFn::Ne:
        return tensorValue(unequal);
      }
    }
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
  return std::nullopt;
}

// A constant's element must be a value of its type, as XLA's parser
// demands ("out of range for literal's primitive type"): nothing wraps,
// saturates or overflows to infinity.
void Builder::checkLiteralValue(const Instruction &ins, double v, DType dtype) const {
  if (isFloat(dtype)) {
    if (std::isfinite(v) && !std::isfinite(storedValue(dtype, v)))
      failOp(ins, fmt::format("{} is out of range for {}: its largest finite value is {:.9g}", v, hloTypeName(dtype),
                              largestFinite(dtype)));
    return;
  }
  if (v != std::trunc(v) || !std::isfinite(v) || (dtype == DType::i1 && v != 0 && v != 1))
    failOp(ins, fmt::format("{} is not a value of {}", v, hloTypeName(dtype)));
  // The first value past the top, 2^(n-1) or 2^n, is an exact double:
  // the bounds compare exactly.
  double pastTop = std::ldexp(1.0, isUnsigned(dtype) ? bitWidth(dtype) : bitWidth(dtype) - 1);
  if (dtype != DType::i1 && (v < integerMinimum(dtype) || v >= pastTop))
    failOp(ins, fmt::format("{:.0f} is out of range for {}", v, hloTypeName(dtype)));
}

double Builder::largestFinite(DType dtype) {
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

} // namespace mlpipe::fe::hlo
