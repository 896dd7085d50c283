// Elementwise nodes (Unary, Binary, Compare, Select, Convert) as one
// linalg.generic each, and the scalar sequences their bodies need: XLA's
// conversions, integer division, remainder and shifts, and sign.
#include "frontend/emitter/function_emitter.h"

#include "support/error.h"

#include <cmath>

namespace mlpipe::fe::emitter {

// One element converted as XLA's convert does (graph.h: convertValue).
std::string FunctionEmitter::convertScalar(const std::string &v, DType from, DType to, Rounding rounding) {
  if (from == to)
    return v;
  std::string fromName = mlirType(from), toName = mlirType(to);
  if (to == DType::i1) {
    if (isFloat(from))
      return bodyOp("arith.cmpf une, {}, {} : {}", toCompute(v, from), bodyConstant(0, computeType(from)),
                    mlirType(computeType(from)));
    return bodyOp("arith.cmpi ne, {}, {} : {}", v, bodyConstant(0, from), fromName);
  }
  if (isFloat(from) && isFloat(to)) {
    std::string wide = toCompute(v, from);
    DType wideType = computeType(from), target = computeType(to);
    if (wideType != target)
      wide = bodyOp("arith.{} {} : {} to {}", dtypeSize(wideType) < dtypeSize(target) ? "extf" : "truncf", wide,
                    mlirType(wideType), mlirType(target));
    return fromCompute(wide, to, rounding);
  }
  if (isFloat(to)) { // from an integer or i1
    std::string converted =
        bodyOp("arith.{} {} : {} to {}", from == DType::i1 || isUnsigned(from) ? "uitofp" : "sitofp", v, fromName,
               mlirType(computeType(to)));
    return fromCompute(converted, to, rounding);
  }
  if (isFloat(from)) { // to an integer: truncate toward zero, saturating, NaN -> 0
    DType wideType = computeType(from);
    std::string wideName = mlirType(wideType), wide = toCompute(v, from);
    // The first value past each end: -2^(n-1) and 2^(n-1), or 0 and 2^n
    // unsigned, all exact in floats.
    double low = integerMinimum(to), limit = std::ldexp(1.0, isUnsigned(to) ? bitWidth(to) : bitWidth(to) - 1);
    std::string high = bodyConstant(limit, wideType), lowest = bodyConstant(low, wideType);
    std::string tooHigh = bodyOp("arith.cmpf oge, {}, {} : {}", wide, high, wideName);
    std::string tooLow = bodyOp("arith.cmpf olt, {}, {} : {}", wide, lowest, wideName);
    std::string inRange = bodyOp("arith.cmpf olt, {}, {} : {}", wide, high, wideName);
    inRange = bodyOp("arith.andi {}, {} : i1", inRange, bodyOp("arith.cmpf oge, {}, {} : {}", wide, lowest, wideName));
    // fptosi/fptoui only ever see a value they can convert (NaN and the
    // out-of-range values become 0 first).
    std::string safe = bodyOp("arith.select {}, {}, {} : {}", inRange, wide, bodyConstant(0, wideType), wideName);
    std::string integer =
        bodyOp("arith.{} {} : {} to {}", isUnsigned(to) ? "fptoui" : "fptosi", safe, wideName, toName);
    std::string maximum = bodyConstant(integerMaximum(to), to);
    std::string minimum = bodyConstant(low, to);
    std::string saturated = bodyOp("arith.select {}, {}, {} : {}", tooLow, minimum, integer, toName);
    return bodyOp("arith.select {}, {}, {} : {}", tooHigh, maximum, saturated, toName);
  }
  // integer or i1 to integer: the source's bits sign- or zero-extended, or
  // truncated to the target's width (s32 and u32 are the same bits)
  if (from == DType::i1)
    return bodyOp("arith.extui {} : i1 to {}", v, toName);
  if (bitWidth(from) == bitWidth(to))
    return v;
  if (bitWidth(from) > bitWidth(to))
    return bodyOp("arith.trunci {} : {} to {}", v, fromName, toName);
  return bodyOp("arith.{} {} : {} to {}", isUnsigned(from) ? "extui" : "extsi", v, fromName, toName);
}

// XLA's integer division: truncating, x / 0 = -1 (all ones), and for the
// signed types INT_MIN / -1 = INT_MIN.
std::string FunctionEmitter::integerDivide(const std::string &a, const std::string &b, DType dtype) {
  std::string t = mlirType(dtype);
  std::string zero = bodyConstant(0, dtype), allOnes = bodyConstant(-1, dtype), one = bodyConstant(1, dtype);
  std::string byZero = bodyOp("arith.cmpi eq, {}, {} : {}", b, zero, t);
  if (isUnsigned(dtype)) {
    std::string divisor = bodyOp("arith.select {}, {}, {} : {}", byZero, one, b, t);
    std::string quotient = bodyOp("arith.divui {}, {} : {}", a, divisor, t);
    return bodyOp("arith.select {}, {}, {} : {}", byZero, allOnes, quotient, t);
  }
  std::string overflow = signedOverflow(a, b, dtype);
  std::string unsafe = bodyOp("arith.ori {}, {} : i1", byZero, overflow);
  std::string divisor = bodyOp("arith.select {}, {}, {} : {}", unsafe, one, b, t);
  std::string quotient = bodyOp("arith.divsi {}, {} : {}", a, divisor, t);
  std::string wrapped = bodyOp("arith.select {}, {}, {} : {}", overflow, a, quotient, t);
  return bodyOp("arith.select {}, {}, {} : {}", byZero, allOnes, wrapped, t);
}

// XLA's integer remainder: the dividend's sign, x % 0 = x, and for the
// signed types INT_MIN % -1 = 0 (dividing by 1 instead gives it).
std::string FunctionEmitter::integerRemainder(const std::string &a, const std::string &b, DType dtype) {
  std::string t = mlirType(dtype);
  std::string zero = bodyConstant(0, dtype), one = bodyConstant(1, dtype);
  std::string byZero = bodyOp("arith.cmpi eq, {}, {} : {}", b, zero, t);
  std::string unsafe =
      isUnsigned(dtype) ? byZero : bodyOp("arith.ori {}, {} : i1", byZero, signedOverflow(a, b, dtype));
  std::string divisor = bodyOp("arith.select {}, {}, {} : {}", unsafe, one, b, t);
  std::string remainder = bodyOp("arith.{} {}, {} : {}", isUnsigned(dtype) ? "remui" : "remsi", a, divisor, t);
  return bodyOp("arith.select {}, {}, {} : {}", byZero, a, remainder, t);
}

// a == INT_MIN && b == -1: the one signed quotient that overflows.
std::string FunctionEmitter::signedOverflow(const std::string &a, const std::string &b, DType dtype) {
  std::string t = mlirType(dtype);
  return bodyOp("arith.andi {}, {} : i1",
                bodyOp("arith.cmpi eq, {}, {} : {}", a, bodyConstant(integerMinimum(dtype), dtype), t),
                bodyOp("arith.cmpi eq, {}, {} : {}", b, bodyConstant(-1, dtype), t));
}

// XLA's shifts: the amount read as unsigned; from the bit width up, left
// and logical right shifts give 0 and the arithmetic one the top bit in
// every bit. The shift itself only ever sees an amount below the width
// (MLIR's shifts are poison beyond it).
std::string FunctionEmitter::integerShift(BinaryFn fn, const std::string &a, const std::string &b, DType dtype) {
  std::string t = mlirType(dtype);
  int width = bitWidth(dtype);
  std::string tooFar = bodyOp("arith.cmpi uge, {}, {} : {}", b, bodyConstant(width, dtype), t);
  if (fn == BinaryFn::ShiftRightArithmetic) {
    std::string amount = bodyOp("arith.select {}, {}, {} : {}", tooFar, bodyConstant(width - 1, dtype), b, t);
    return bodyOp("arith.shrsi {}, {} : {}", a, amount, t);
  }
  std::string zero = bodyConstant(0, dtype);
  std::string amount = bodyOp("arith.select {}, {}, {} : {}", tooFar, zero, b, t);
  std::string shifted = bodyOp("arith.{} {}, {} : {}", fn == BinaryFn::ShiftLeft ? "shli" : "shrui", a, amount, t);
  return bodyOp("arith.select {}, {}, {} : {}", tooFar, zero, shifted, t);
}

// sign(x) on floats: 1 above 0, -1 below, and +-0 and NaN themselves
// (ordered comparisons are false for NaN).
std::string FunctionEmitter::floatSign(const std::string &x, DType compute) {
  std::string t = mlirType(compute), zero = bodyConstant(0, compute);
  std::string positive = bodyOp("arith.cmpf ogt, {}, {} : {}", x, zero, t);
  std::string negative = bodyOp("arith.cmpf olt, {}, {} : {}", x, zero, t);
  std::string otherwise = bodyOp("arith.select {}, {}, {} : {}", negative, bodyConstant(-1, compute), x, t);
  return bodyOp("arith.select {}, {}, {} : {}", positive, bodyConstant(1, compute), otherwise, t);
}

// signbit(x) on floats as 1 or 0: the top bit of x's bits, which says the
// sign of -0 and of a NaN too, where comparisons cannot.
std::string FunctionEmitter::floatSignBit(const std::string &x, DType compute) {
  std::string t = mlirType(compute), bits = compute == DType::f64 ? "i64" : "i32";
  std::string asBits = bodyOp("arith.bitcast {} : {} to {}", x, t, bits);
  std::string negative = bodyOp("arith.cmpi slt, {}, {} : {}", asBits, bodyOp("arith.constant 0 : {}", bits), bits);
  return bodyOp("arith.select {}, {}, {} : {}", negative, bodyConstant(1, compute), bodyConstant(0, compute), t);
}

// The set bits of x, counted in parallel within 2, 4 and 8 bits, then the
// bytes summed by one multiplication (LLVM sees the idiom: a popcnt
// instruction where there is one). Written in arith rather than as
// math.ctpop, which the CPU's libm lowering refuses.
std::string FunctionEmitter::integerPopcount(const std::string &x, DType dtype) {
  std::string t = mlirType(dtype);
  int width = bitWidth(dtype);
  auto pattern = [&](uint64_t bytes) { // a byte pattern repeated over the width, as a signless literal
    uint64_t bits = width == 64 ? bytes : bytes & ((uint64_t(1) << width) - 1);
    if (width < 64 && (bits >> (width - 1)) & 1)
      bits |= ~((uint64_t(1) << width) - 1);
    return bodyOp("arith.constant {} : {}", static_cast<int64_t>(bits), t);
  };
  auto shifted = [&](const std::string &v, int by) {
    return bodyOp("arith.shrui {}, {} : {}", v, bodyConstant(by, dtype), t);
  };
  std::string pairs = bodyOp("arith.subi {}, {} : {}", x,
                             bodyOp("arith.andi {}, {} : {}", shifted(x, 1), pattern(0x5555555555555555ull), t), t);
  std::string fours = pattern(0x3333333333333333ull);
  std::string quads = bodyOp("arith.addi {}, {} : {}", bodyOp("arith.andi {}, {} : {}", pairs, fours, t),
                             bodyOp("arith.andi {}, {} : {}", shifted(pairs, 2), fours, t), t);
  std::string bytes = bodyOp("arith.andi {}, {} : {}", bodyOp("arith.addi {}, {} : {}", quads, shifted(quads, 4), t),
                             pattern(0x0F0F0F0F0F0F0F0Full), t);
  if (width == 8)
    return bytes;
  return shifted(bodyOp("arith.muli {}, {} : {}", bytes, pattern(0x0101010101010101ull), t), width - 8);
}

// sign(x) on integers: -1, 0 or 1 (0 or 1 unsigned).
std::string FunctionEmitter::integerSign(const std::string &x, DType dtype) {
  std::string t = mlirType(dtype), zero = bodyConstant(0, dtype);
  std::string nonZero = bodyOp("arith.extui {} : i1 to {}", bodyOp("arith.cmpi ne, {}, {} : {}", x, zero, t), t);
  if (isUnsigned(dtype))
    return nonZero;
  std::string negative = bodyOp("arith.cmpi slt, {}, {} : {}", x, zero, t);
  return bodyOp("arith.select {}, {}, {} : {}", negative, bodyConstant(-1, dtype), nonZero, t);
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
    std::string t = mlirType(compute);
    switch (node.kind) {
    case OpKind::Unary: {
      auto fn = static_cast<UnaryFn>(node.fn);
      std::string x = computed(0);
      if (isFloat(operandType))
        return fromCompute(fn == UnaryFn::Sign      ? floatSign(x, compute)
                           : fn == UnaryFn::SignBit ? floatSignBit(x, compute)
                                                    : bodyOp("{} {} : {}", unaryFloatOp(fn), x, t),
                           node.dtype);
      switch (fn) {
      case UnaryFn::Abs: // |INT_MIN| wraps to INT_MIN
        return isUnsigned(operandType) ? x
                                       : bodyOp("arith.select {}, {}, {} : {}",
                                                bodyOp("arith.cmpi slt, {}, {} : {}", x, bodyConstant(0, compute), t),
                                                bodyOp("arith.subi {}, {} : {}", bodyConstant(0, compute), x, t), x, t);
      case UnaryFn::Not:
        return bodyOp("arith.xori {}, {} : {}", x, bodyConstant(operandType == DType::i1 ? 1 : -1, compute), t);
      case UnaryFn::Sign:
        return integerSign(x, compute);
      case UnaryFn::Popcnt:
        return integerPopcount(x, compute);
      default: // Neg
        return bodyOp("arith.subi {}, {} : {}", bodyConstant(0, compute), x, t);
      }
    }
    case OpKind::Binary: {
      auto fn = static_cast<BinaryFn>(node.fn);
      std::string a = computed(0), b = computed(1);
      if (isFloat(operandType))
        return fromCompute(bodyOp("{} {}, {} : {}", binaryFloatOp(fn), a, b, t), node.dtype);
      switch (fn) {
      case BinaryFn::Div:
        return integerDivide(a, b, compute);
      case BinaryFn::Rem:
        return integerRemainder(a, b, compute);
      case BinaryFn::ShiftLeft:
      case BinaryFn::ShiftRightLogical:
      case BinaryFn::ShiftRightArithmetic:
        return integerShift(fn, a, b, compute);
      default:
        return bodyOp("{} {}, {} : {}", binaryIntegerOp(fn, compute), a, b, t);
      }
    }
    case OpKind::Compare:
      return bodyOp("arith.{} {}, {}, {} : {}", isFloat(operandType) ? "cmpf" : "cmpi",
                    comparePredicate(static_cast<CompareFn>(node.fn), operandType), computed(0), computed(1), t);
    case OpKind::Select:
      return bodyOp("arith.select {}, {}, {} : {}", operands[0], operands[1], operands[2], mlirType(node.dtype));
    case OpKind::Convert:
      return convertScalar(operands[0], operandType, node.dtype, Rounding::Convert);
    default:
      fail("internal: not an elementwise node");
    }
  });
}

} // namespace mlpipe::fe::emitter
