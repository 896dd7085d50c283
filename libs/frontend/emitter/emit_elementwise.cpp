// Elementwise nodes (Unary, Binary, Compare, Select, Convert) as one
// linalg.generic each, and the scalar sequences their bodies need: XLA's
// conversions and integer division.
#include "frontend/emitter/function_emitter.h"

#include "support/error.h"

namespace mlpipe::fe::emitter {

// One element converted as XLA's convert does (graph.h: convertValue).
std::string FunctionEmitter::convertScalar(const std::string &v, DType from, DType to, Rounding rounding) {
  if (from == to)
    return v;
  std::string fromName = dtypeName(from), toName = dtypeName(to);
  if (to == DType::i1) {
    if (isFloat(from))
      return bodyOp("arith.cmpf une, {}, {} : {}", toCompute(v, from), bodyConstant(0, computeType(from)),
                    dtypeName(computeType(from)));
    return bodyOp("arith.cmpi ne, {}, {} : {}", v, bodyConstant(0, from), fromName);
  }
  if (isFloat(from) && isFloat(to)) {
    std::string wide = toCompute(v, from);
    DType wideType = computeType(from), target = computeType(to);
    if (wideType != target)
      wide = bodyOp("arith.{} {} : {} to {}", dtypeSize(wideType) < dtypeSize(target) ? "extf" : "truncf", wide,
                    dtypeName(wideType), dtypeName(target));
    return fromCompute(wide, to, rounding);
  }
  if (isFloat(to)) { // from an integer or i1
    std::string converted = bodyOp("arith.{} {} : {} to {}", from == DType::i1 ? "uitofp" : "sitofp", v, fromName,
                                   dtypeName(computeType(to)));
    return fromCompute(converted, to, rounding);
  }
  if (isFloat(from)) { // to an integer: truncate toward zero, saturating, NaN -> 0
    DType wideType = computeType(from);
    std::string wideName = dtypeName(wideType), wide = toCompute(v, from);
    double limit = to == DType::i32 ? 2147483648.0 : 9223372036854775808.0; // 2^31, 2^63: exact in floats
    std::string high = bodyConstant(limit, wideType), low = bodyConstant(-limit, wideType);
    std::string tooHigh = bodyOp("arith.cmpf oge, {}, {} : {}", wide, high, wideName);
    std::string tooLow = bodyOp("arith.cmpf olt, {}, {} : {}", wide, low, wideName);
    std::string inRange = bodyOp("arith.cmpf olt, {}, {} : {}", wide, high, wideName);
    inRange = bodyOp("arith.andi {}, {} : i1", inRange, bodyOp("arith.cmpf oge, {}, {} : {}", wide, low, wideName));
    // fptosi only ever sees a value it can convert (NaN and the
    // out-of-range values become 0 first).
    std::string safe = bodyOp("arith.select {}, {}, {} : {}", inRange, wide, bodyConstant(0, wideType), wideName);
    std::string integer = bodyOp("arith.fptosi {} : {} to {}", safe, wideName, toName);
    std::string maximum = bodyConstant(reductionIdentity(ReduceFn::Min, to), to);
    std::string minimum = bodyConstant(reductionIdentity(ReduceFn::Max, to), to);
    std::string saturated = bodyOp("arith.select {}, {}, {} : {}", tooLow, minimum, integer, toName);
    return bodyOp("arith.select {}, {}, {} : {}", tooHigh, maximum, saturated, toName);
  }
  // integer or i1 to integer
  if (from == DType::i1)
    return bodyOp("arith.extui {} : i1 to {}", v, toName);
  return bodyOp("arith.{} {} : {} to {}", dtypeSize(from) < dtypeSize(to) ? "extsi" : "trunci", v, fromName, toName);
}

// XLA's integer division: truncating, x / 0 = -1, INT_MIN / -1 = INT_MIN.
std::string FunctionEmitter::integerDivide(const std::string &a, const std::string &b, DType dtype) {
  std::string t = dtypeName(dtype);
  double minimum = reductionIdentity(ReduceFn::Max, dtype);
  std::string zero = bodyConstant(0, dtype), minusOne = bodyConstant(-1, dtype), one = bodyConstant(1, dtype);
  std::string byZero = bodyOp("arith.cmpi eq, {}, {} : {}", b, zero, t);
  std::string overflow =
      bodyOp("arith.andi {}, {} : i1", bodyOp("arith.cmpi eq, {}, {} : {}", a, bodyConstant(minimum, dtype), t),
             bodyOp("arith.cmpi eq, {}, {} : {}", b, minusOne, t));
  std::string unsafe = bodyOp("arith.ori {}, {} : i1", byZero, overflow);
  std::string divisor = bodyOp("arith.select {}, {}, {} : {}", unsafe, one, b, t);
  std::string quotient = bodyOp("arith.divsi {}, {} : {}", a, divisor, t);
  std::string wrapped = bodyOp("arith.select {}, {}, {} : {}", overflow, a, quotient, t);
  return bodyOp("arith.select {}, {}, {} : {}", byZero, minusOne, wrapped, t);
}

// Unary, Binary, Compare, Select and Convert: one linalg.generic over the
// result, reading each tensor operand through a broadcasting map and
// capturing Constant operands as scalars.
void FunctionEmitter::emitElementwise(int id) {
  const Node &node = graph_.node(id);
  // The type the (value) operands are read in: the result's, except for
  // Compare and Convert, whose operands have their own. A Constant
  // adopts the type of the tensors it combines with.
  DType operandType = node.dtype;
  if (node.kind == OpKind::Compare || node.kind == OpKind::Convert) {
    operandType = graph_.node(node.operands[0]).dtype;
    for (int operand : node.operands)
      if (!constantSource(operand))
        operandType = graph_.node(operand).dtype;
  }
  std::vector<GenericInput> inputs;
  std::vector<std::optional<std::string>> captured; // a Constant operand's scalar
  for (size_t i = 0; i < node.operands.size(); ++i) {
    int operand = node.operands[i];
    DType readType = node.kind == OpKind::Select && i == 0 ? DType::i1 : operandType;
    if (auto constant = constantSource(operand)) {
      bool computed = node.kind != OpKind::Select;
      captured.push_back(scalarConstant(*constant, computed ? computeType(readType) : readType));
      continue;
    }
    captured.push_back(std::nullopt);
    const Node &source = graph_.node(operand);
    if (auto reduced = keptReductions_.find(operand); reduced != keptReductions_.end()) {
      // A keepdims reduction is read before its size-1 axis was added
      // back: no reshape between the two ops, so fusion sees through.
      inputs.push_back({reduced->second.first, reduced->second.second,
                        broadcastMap(source.shape, node.shape, source.ints[0]), source.dtype});
    } else {
      inputs.push_back({value(operand), type(operand), broadcastMap(source.shape, node.shape), source.dtype});
    }
  }
  names_[id] = emitGeneric(node.shape, node.dtype, inputs, [&](const std::vector<std::string> &args) {
    // Each operand's value in the body: its block argument or its scalar.
    std::vector<std::string> operands;
    std::vector<bool> isScalar;
    size_t next = 0;
    for (auto &scalar : captured) {
      operands.push_back(scalar ? *scalar : args[next++]);
      isScalar.push_back(scalar.has_value());
    }
    auto computed = [&](size_t i) { return isScalar[i] ? operands[i] : toCompute(operands[i], operandType); };
    DType compute = computeType(operandType);
    std::string t = dtypeName(compute);
    switch (node.kind) {
    case OpKind::Unary: {
      auto fn = static_cast<UnaryFn>(node.fn);
      std::string x = computed(0);
      if (isFloat(operandType))
        return fromCompute(bodyOp("{} {} : {}", unaryFloatOp(fn), x, t), node.dtype);
      if (fn == UnaryFn::Abs)
        return bodyOp("math.absi {} : {}", x, t);
      if (fn == UnaryFn::Not)
        return bodyOp("arith.xori {}, {} : {}", x, bodyConstant(operandType == DType::i1 ? 1 : -1, compute), t);
      return bodyOp("arith.subi {}, {} : {}", bodyConstant(0, compute), x, t); // Neg
    }
    case OpKind::Binary: {
      auto fn = static_cast<BinaryFn>(node.fn);
      std::string a = computed(0), b = computed(1);
      if (isFloat(operandType))
        return fromCompute(bodyOp("{} {}, {} : {}", binaryFloatOp(fn), a, b, t), node.dtype);
      if (fn == BinaryFn::Div)
        return integerDivide(a, b, compute);
      return bodyOp("{} {}, {} : {}", binaryIntegerOp(fn, compute), a, b, t);
    }
    case OpKind::Compare:
      return bodyOp("arith.{} {}, {}, {} : {}", isFloat(operandType) ? "cmpf" : "cmpi",
                    comparePredicate(static_cast<CompareFn>(node.fn), operandType), computed(0), computed(1), t);
    case OpKind::Select:
      return bodyOp("arith.select {}, {}, {} : {}", operands[0], operands[1], operands[2], dtypeName(node.dtype));
    case OpKind::Convert:
      return convertScalar(operands[0], operandType, node.dtype, Rounding::Convert);
    default:
      fail("internal: not an elementwise node");
    }
  });
}

} // namespace mlpipe::fe::emitter
