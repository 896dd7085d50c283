// The spellings of MLIR text the emitter builds from: literals, maps,
// reassociations and op names (see mlir_text.h).
#include "frontend/emitter/mlir_text.h"

#include "frontend/mlir_emitter.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace mlpipe::fe::emitter {

namespace {

// A float as arith.constant takes it: 9 significant digits for f32 and the
// 16-bit floats, 17 for f64; infinities and NaN as their bit patterns.
std::string floatLiteral(double value, DType dtype) {
  if (std::isinf(value) || std::isnan(value)) {
    if (dtype == DType::f32)
      return fmt::format("0x{:08X}", std::bit_cast<uint32_t>(static_cast<float>(value)));
    if (dtype == DType::f16)
      return std::isnan(value) ? "0x7E00" : value > 0 ? "0x7C00" : "0xFC00";
    if (dtype == DType::bf16)
      return std::isnan(value) ? "0x7FC0" : value > 0 ? "0x7F80" : "0xFF80";
    return fmt::format("0x{:016X}", std::bit_cast<uint64_t>(value));
  }
  if (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16)
    return fmt::format("{:.9e}", static_cast<double>(static_cast<float>(value)));
  return fmt::format("{:.17e}", value);
}

// An integer element as MLIR's signless literal: its bits read as a signed
// number of its width (u8 255 is -1 : i8). i64 saturates, as a double of
// 2^63 is INT64_MAX stored; the others wrap.
int64_t signlessLiteral(double value, DType dtype) {
  if (dtype == DType::i64)
    return saturatingInt64(value);
  uint64_t bits = integerBits(storedValue(dtype, value));
  int width = bitWidth(dtype);
  if (width < 64) {
    uint64_t mask = (uint64_t(1) << width) - 1;
    bits &= mask;
    if ((bits >> (width - 1)) & 1)
      bits |= ~mask;
  }
  return static_cast<int64_t>(bits);
}

} // namespace

bool groupDimensions(const Shape &small, const Shape &big, Reassociation &groups) {
  groups.clear();
  if (small.empty()) // a scalar: every dimension of `big` must be 1
    return std::all_of(big.begin(), big.end(), [](int64_t dim) { return dim == 1; });
  size_t next = 0;
  for (int64_t target : small) {
    std::vector<int64_t> group;
    int64_t product = 1;
    do {
      if (next >= big.size())
        return false;
      product *= big[next];
      group.push_back(static_cast<int64_t>(next++));
    } while (product < target);
    if (product != target)
      return false;
    groups.push_back(group);
  }
  for (; next < big.size(); ++next) {
    if (big[next] != 1)
      return false;
    groups.back().push_back(static_cast<int64_t>(next));
  }
  return true;
}

std::string formatReassociation(const Reassociation &groups) {
  std::vector<std::string> parts;
  for (auto &group : groups)
    parts.push_back(fmt::format("[{}]", fmt::join(group, ", ")));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string scalarLiteral(double value, DType dtype) {
  if (isFloat(dtype))
    return floatLiteral(value, dtype);
  if (dtype == DType::i1)
    return value != 0 ? "true" : "false";
  return fmt::format("{}", signlessLiteral(value, dtype));
}

std::string typedLiteral(double value, DType dtype) {
  if (dtype == DType::i1)
    return scalarLiteral(value, dtype);
  return fmt::format("{} : {}", scalarLiteral(value, dtype), mlirType(dtype));
}

DType computeType(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16 ? DType::f32 : dtype; }

std::string identityMap(size_t rank) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < rank; ++i)
    dims.push_back(fmt::format("d{}", i));
  return fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(dims, ", "));
}

std::string broadcastMap(const Shape &in, const Shape &out, int64_t dropAxis) {
  std::vector<std::string> dims, results;
  for (size_t i = 0; i < out.size(); ++i)
    dims.push_back(fmt::format("d{}", i));
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (static_cast<int64_t>(i) != dropAxis)
      results.push_back(in[i] == 1 && out[offset + i] != 1 ? "0" : dims[offset + i]);
  return fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(results, ", "));
}

std::string parallelIterators(size_t rank) {
  std::vector<std::string> kinds(rank, "\"parallel\"");
  return fmt::format("[{}]", fmt::join(kinds, ", "));
}

const char *unaryFloatOp(UnaryFn fn) {
  switch (fn) {
  case UnaryFn::Exp:
    return "math.exp";
  case UnaryFn::Tanh:
    return "math.tanh";
  case UnaryFn::Sqrt:
    return "math.sqrt";
  case UnaryFn::Rsqrt:
    return "math.rsqrt";
  case UnaryFn::Neg:
    return "arith.negf";
  case UnaryFn::Log:
    return "math.log";
  case UnaryFn::Abs:
    return "math.absf";
  case UnaryFn::Sin:
    return "math.sin";
  case UnaryFn::Cos:
    return "math.cos";
  case UnaryFn::Tan:
    return "math.tan";
  case UnaryFn::Erf:
    return "math.erf";
  case UnaryFn::Expm1:
    return "math.expm1";
  case UnaryFn::Log1p:
    return "math.log1p";
  case UnaryFn::Floor:
    return "math.floor";
  case UnaryFn::Ceil:
    return "math.ceil";
  case UnaryFn::RoundEven:
    return "math.roundeven";
  case UnaryFn::RoundAway:
    return "math.round";
  case UnaryFn::Not:
  case UnaryFn::Sign:    // a sequence: FunctionEmitter::floatSign
  case UnaryFn::SignBit: // a sequence: FunctionEmitter::floatSignBit
  case UnaryFn::Popcnt:
    break;
  }
  fail("internal: no float form of this elementwise function");
}

const char *binaryFloatOp(BinaryFn fn) {
  switch (fn) {
  case BinaryFn::Add:
    return "arith.addf";
  case BinaryFn::Sub:
    return "arith.subf";
  case BinaryFn::Mul:
    return "arith.mulf";
  case BinaryFn::Div:
    return "arith.divf";
  case BinaryFn::Max:
    return "arith.maximumf";
  case BinaryFn::Min:
    return "arith.minimumf";
  case BinaryFn::Pow:
    return "math.powf";
  case BinaryFn::Atan2:
    return "math.atan2";
  case BinaryFn::Rem: // fmod: the dividend's sign
    return "arith.remf";
  case BinaryFn::And:
  case BinaryFn::Or:
  case BinaryFn::Xor:
  case BinaryFn::ShiftLeft:
  case BinaryFn::ShiftRightLogical:
  case BinaryFn::ShiftRightArithmetic:
    break;
  }
  fail("internal: no float form of this elementwise arithmetic");
}

const char *binaryIntegerOp(BinaryFn fn, DType dtype) {
  bool truth = dtype == DType::i1; // on i1, max is or and min is and
  bool isUnsignedType = isUnsigned(dtype);
  switch (fn) {
  case BinaryFn::Add:
    return "arith.addi";
  case BinaryFn::Sub:
    return "arith.subi";
  case BinaryFn::Mul:
    return "arith.muli";
  case BinaryFn::Max:
    return truth ? "arith.ori" : isUnsignedType ? "arith.maxui" : "arith.maxsi";
  case BinaryFn::Min:
    return truth ? "arith.andi" : isUnsignedType ? "arith.minui" : "arith.minsi";
  case BinaryFn::And:
    return "arith.andi";
  case BinaryFn::Or:
    return "arith.ori";
  case BinaryFn::Xor:
    return "arith.xori";
  case BinaryFn::Div:
  case BinaryFn::Rem:
  case BinaryFn::ShiftLeft:
  case BinaryFn::ShiftRightLogical:
  case BinaryFn::ShiftRightArithmetic:
  case BinaryFn::Pow:
  case BinaryFn::Atan2:
    break;
  }
  fail("internal: no integer form of this elementwise arithmetic");
}

std::string comparePredicate(CompareFn fn, DType dtype) {
  static const char *floats[] = {"oeq", "une", "olt", "ole", "ogt", "oge"};
  static const char *signedInts[] = {"eq", "ne", "slt", "sle", "sgt", "sge"};
  static const char *unsignedInts[] = {"eq", "ne", "ult", "ule", "ugt", "uge"};
  auto index = static_cast<size_t>(fn);
  return isFloat(dtype)                            ? floats[index]
         : dtype == DType::i1 || isUnsigned(dtype) ? unsignedInts[index]
                                                   : signedInts[index];
}

double reductionIdentity(ReduceFn fn, DType dtype) {
  bool integer = isInteger(dtype);
  switch (fn) {
  case ReduceFn::Sum:
    return 0.0;
  case ReduceFn::Prod:
    return 1.0;
  case ReduceFn::Max:
    return integer ? integerMinimum(dtype) : -INFINITY;
  case ReduceFn::Min:
    return integer ? integerMaximum(dtype) : INFINITY;
  case ReduceFn::And: // every bit set: true for i1, -1 (or the largest unsigned) for integers
    return dtype == DType::i1 ? 1.0 : isUnsigned(dtype) ? integerMaximum(dtype) : -1.0;
  case ReduceFn::Or:
    return 0.0;
  }
  return 0.0;
}

const char *reductionOp(ReduceFn fn, DType dtype) {
  bool integer = isInteger(dtype);
  switch (fn) {
  case ReduceFn::Sum:
    return integer ? "arith.addi" : "arith.addf";
  case ReduceFn::Prod:
    return integer ? "arith.muli" : "arith.mulf";
  case ReduceFn::Max:
    return !integer ? "arith.maximumf" : isUnsigned(dtype) ? "arith.maxui" : "arith.maxsi";
  case ReduceFn::Min:
    return !integer ? "arith.minimumf" : isUnsigned(dtype) ? "arith.minui" : "arith.minsi";
  case ReduceFn::And:
    return "arith.andi";
  case ReduceFn::Or:
    return "arith.ori";
  }
  return "";
}

} // namespace mlpipe::fe::emitter
