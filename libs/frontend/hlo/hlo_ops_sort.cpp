// HLO's sort: one or more operands of one shape, permuted together along
// one axis by a comparator computation.
//
// The comparator is recognised by what it computes, not by how it is
// spelled (as argmax's is: hlo_ops_arg_reduce.cpp). It is run, as scalars,
// on probe values of each operand's type (for floats -NaN, -inf, -0, +0,
// inf, NaN and numbers between) and must behave as a lexicographic
// comparison of keys: each key an operand compared by LT or GT, floats
// numerically (NaN after everything, -0 equal to +0, as JAX's comparator
// canonicalises them) or in XLA's TOTALORDER. JAX's comparators (a
// compare with type=TOTALORDER; after XLA's passes the same order written
// with bitcasts to integers; lax.sort's several keys; the iota XLA adds to
// break ties) are read that way, whatever their spelling. A plain LT or GT
// on floats leaves NaN unordered, which no sort can follow; mlpipe sorts
// it numerically, NaN last (or first, descending). Anything else is
// refused, naming the instruction or the values it does not understand.
//
// The sort is recorded as a SortRank node (where each element goes,
// frontend/sort.h) and each operand placed by it.
#include "frontend/hlo/hlo_builder.h"

#include "frontend/sort.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

namespace mlpipe::fe::hlo {

namespace {

// Checks of a comparator against the order it is read as: every pair of
// probe values on each operand alone, then this many pairs of probe tuples
// drawn (deterministically) across all operands, half of each operand's
// values tied so later keys decide often.
constexpr int kComparatorSamples = 4000;

// A scalar in the comparator: floats as doubles (NaN's sign kept),
// integers exactly as their 64 bits (unsigned ones zero-extended).
struct Scalar {
  DType dtype = DType::f32;
  double real = 0;
  int64_t bits = 0;
};

Scalar fromDouble(DType dtype, double v) {
  Scalar s{dtype, v, 0};
  const double top = 9223372036854775808.0; // 2^63
  if (isFloat(dtype))
    return s;
  if (v < top)
    s.bits = static_cast<int64_t>(v);
  else if (dtype != DType::u64)
    s.bits = std::numeric_limits<int64_t>::max();
  else // 2^63 and up, as u64's bits (2^64 itself, the nearest double to its maximum, saturates)
    s.bits = v >= 2 * top ? -1 : static_cast<int64_t>(static_cast<uint64_t>(v));
  return s;
}

// An integer's bits wrapped to its type's width and extended by its
// signedness.
int64_t wrapBits(DType dtype, int64_t bits) {
  int width = dtype == DType::i1 ? 1 : bitWidth(dtype);
  if (width >= 64)
    return bits;
  uint64_t mask = (uint64_t(1) << width) - 1, value = static_cast<uint64_t>(bits) & mask;
  if (!isUnsigned(dtype) && dtype != DType::i1 && (value >> (width - 1)) & 1)
    value |= ~mask;
  return static_cast<int64_t>(value);
}

// The probe values of an operand's type.
std::vector<double> probes(DType dtype) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  if (isFloat(dtype))
    return {-nan, -inf, -2.5, -1, -0.0, 0.0, 1, 2.5, inf, nan};
  if (dtype == DType::i1)
    return {0, 1};
  if (isUnsigned(dtype))
    return {0, 1, 2, integerMaximum(dtype) / 2 + 0.5, integerMaximum(dtype)};
  return {integerMinimum(dtype), -2, -1, 0, 1, 2, integerMaximum(dtype)};
}

std::string describeValue(double v) {
  if (std::isnan(v))
    return std::signbit(v) ? "-nan" : "nan";
  if (v == 0)
    return std::signbit(v) ? "-0" : "0";
  return fmt::format("{}", v);
}

// The orders one operand may be compared by. Plain is a float LT (GT)
// without TOTALORDER: NaN unordered; it is sorted as Numeric.
enum class Candidate { None, Numeric, Total, Plain };

struct OperandOrder {
  Candidate candidate = Candidate::None;
  bool descending = false;
};

// Whether a sorts before b under `order` (ascending or not).
bool lessUnder(const OperandOrder &order, double a, double b) {
  if (order.descending)
    std::swap(a, b);
  switch (order.candidate) {
  case Candidate::None:
    return false;
  case Candidate::Numeric:
    return sortsBefore(SortOrder::Numeric, a, b);
  case Candidate::Total:
    return sortsBefore(SortOrder::Total, a, b);
  case Candidate::Plain:
    return a < b;
  }
  return false;
}

} // namespace

// Runs the comparator `region` on `parameters` (lhs and rhs of each
// operand in turn, as XLA passes them) and returns its truth value; fails
// naming the first instruction it does not read.
bool Builder::runSortComparator(const Instruction &ins, const std::string &sorting, const Computation &region,
                                const std::vector<double> &parameters, const std::vector<DType> &types) const {
  auto refuse = [&](const Instruction &member, const std::string &why) {
    failOp(ins, fmt::format("sorting {}, to_apply=%{} is not a comparator mlpipe reads ({} at %{}); it reads "
                            "comparisons of keys by LT or GT, numerically or in TOTALORDER, combined "
                            "lexicographically",
                            sorting, region.name, why, member.name));
  };
  std::vector<Scalar> values(region.instructions.size());
  std::vector<bool> done(region.instructions.size(), false);
  std::function<void(size_t, int)> run = [&](size_t index, int depth) {
    if (done[index])
      return;
    const Instruction &member = region.instructions[index];
    if (depth > kMaxNesting)
      refuse(member, "operands nested too deeply");
    std::vector<Scalar> used;
    for (const Operand &operand : member.operands) {
      auto found = region.byName.find(operand.name);
      if (found == region.byName.end())
        refuse(member, fmt::format("operand %{} is not defined", operand.name));
      run(found->second, depth + 1);
      used.push_back(values[found->second]);
    }
    if (!member.shape || member.shape->tuple || !member.shape->dims.empty())
      refuse(member, "a result that is not a scalar");
    DType dtype = elementType(*member.shape);
    const std::string &op = member.opcode;
    auto expect = [&](size_t count) {
      if (used.size() != count)
        refuse(member, fmt::format("{} operands of {}", used.size(), op));
    };
    Scalar result{dtype, 0, 0};
    if (op == "parameter") {
      auto number = static_cast<size_t>(member.parameterNumber);
      if (member.parameterNumber < 0 || number >= parameters.size() || types[number] != dtype)
        refuse(member, fmt::format("parameter {} of {}", member.parameterNumber, printable(member.shape->typeName)));
      result = fromDouble(dtype, parameters[number]);
    } else if (op == "constant") {
      if (member.literal.size() != 1)
        refuse(member, "a constant that is not one scalar");
      result = fromDouble(dtype, member.literal.front());
    } else if (op == "compare") {
      expect(2);
      const Attribute *direction = findAttribute(member, "direction");
      const Attribute *type = findAttribute(member, "type");
      std::string dir = direction ? std::string(direction->text) : "";
      std::string kind = type ? std::string(type->text) : "";
      if (dir != "EQ" && dir != "NE" && dir != "LT" && dir != "LE" && dir != "GT" && dir != "GE")
        refuse(member, "a compare without a direction EQ, NE, LT, LE, GT or GE");
      const Scalar &a = used[0], &b = used[1];
      bool less = false, greater = false, equal = false;
      if (isFloat(a.dtype) && kind == "TOTALORDER") {
        less = sortsBefore(SortOrder::Total, a.real, b.real);
        greater = sortsBefore(SortOrder::Total, b.real, a.real);
        equal = !less && !greater;
      } else if (isFloat(a.dtype)) {
        less = a.real<b.real, greater = a.real> b.real, equal = a.real == b.real;
      } else if (isUnsigned(a.dtype) || a.dtype == DType::i1 || kind == "UNSIGNED") {
        auto x = static_cast<uint64_t>(a.bits), y = static_cast<uint64_t>(b.bits);
        less = x<y, greater = x> y, equal = x == y;
      } else {
        less = a.bits<b.bits, greater = a.bits> b.bits, equal = a.bits == b.bits;
      }
      bool truth = dir == "EQ"   ? equal
                   : dir == "NE" ? !equal
                   : dir == "LT" ? less
                   : dir == "LE" ? less || equal
                   : dir == "GT" ? greater
                                 : greater || equal;
      result = fromDouble(DType::i1, truth ? 1 : 0);
    } else if (op == "select") {
      expect(3);
      result = used[0].bits != 0 ? used[1] : used[2];
      result.dtype = dtype;
    } else if (op == "and" || op == "or" || op == "xor") {
      expect(2);
      if (isFloat(dtype))
        refuse(member, fmt::format("an {} of floats", op));
      int64_t x = used[0].bits, y = used[1].bits;
      result.bits = wrapBits(dtype, op == "and" ? x & y : op == "or" ? x | y : x ^ y);
      result.real = static_cast<double>(result.bits);
    } else if (op == "not") {
      expect(1);
      if (isFloat(dtype))
        refuse(member, "a not of a float");
      result.bits = wrapBits(dtype, ~used[0].bits);
      result.real = static_cast<double>(result.bits);
    } else if (op == "negate") {
      expect(1);
      if (isFloat(dtype))
        result.real = -used[0].real;
      else
        result.bits = wrapBits(dtype, static_cast<int64_t>(0 - static_cast<uint64_t>(used[0].bits)));
    } else if (op == "bitcast" || op == "bitcast-convert") {
      // A float's bits as an integer of its width, as XLA's passes write
      // TOTALORDER.
      expect(1);
      const Scalar &x = used[0];
      if (!isFloat(x.dtype) || isFloat(dtype) || bitWidth(x.dtype) != bitWidth(dtype) || x.dtype == DType::f16)
        refuse(member, fmt::format("a bitcast from {} to {}", hloTypeName(x.dtype), hloTypeName(dtype)));
      uint64_t bits = 0;
      if (x.dtype == DType::f64) {
        bits = std::bit_cast<uint64_t>(x.real);
      } else {
        uint32_t single = std::bit_cast<uint32_t>(static_cast<float>(x.real));
        bits = x.dtype == DType::bf16 ? single >> 16 : single;
      }
      result.bits = wrapBits(dtype, static_cast<int64_t>(bits));
    } else {
      refuse(member, fmt::format("{}{}", op, index == region.root ? " as the result" : ""));
    }
    values[index] = result;
    done[index] = true;
  };
  const Instruction &root = region.instructions[region.root];
  if (!root.shape || root.shape->tuple || !root.shape->dims.empty() || elementType(*root.shape) != DType::i1)
    refuse(root, "a result that is not a pred scalar");
  run(region.root, 0);
  return values[region.root].bits != 0;
}

// The keys a sort's comparator compares, most significant first: each
// operand's order found on probe values with every other operand tied,
// the keys ranked by which one decides when two disagree, and the whole
// then checked on tuples that differ anywhere.
std::vector<SortKey> Builder::sortComparatorKeys(const Instruction &ins, const std::string &sorting,
                                                 const Computation &region, const std::vector<DType> &types) const {
  size_t count = types.size();
  std::vector<DType> parameterTypes;
  std::vector<std::vector<double>> values;
  std::vector<double> base; // each operand's tied value
  for (DType dtype : types) {
    parameterTypes.insert(parameterTypes.end(), {dtype, dtype});
    values.push_back(probes(dtype));
    base.push_back(1);
  }
  auto compareTuples = [&](const std::vector<double> &a, const std::vector<double> &b) {
    std::vector<double> parameters;
    for (size_t m = 0; m < count; ++m)
      parameters.insert(parameters.end(), {a[m], b[m]});
    return runSortComparator(ins, sorting, region, parameters, parameterTypes);
  };
  // Each operand alone.
  std::vector<OperandOrder> orders(count);
  for (size_t m = 0; m < count; ++m) {
    std::vector<OperandOrder> candidates = {{Candidate::None, false}};
    for (bool descending : {false, true}) {
      candidates.push_back({Candidate::Numeric, descending});
      if (isFloat(types[m]))
        candidates.insert(candidates.end(), {{Candidate::Total, descending}, {Candidate::Plain, descending}});
    }
    std::vector<std::vector<bool>> seen(values[m].size(), std::vector<bool>(values[m].size()));
    for (size_t i = 0; i < values[m].size(); ++i)
      for (size_t j = 0; j < values[m].size(); ++j) {
        std::vector<double> a = base, b = base;
        a[m] = values[m][i], b[m] = values[m][j];
        seen[i][j] = compareTuples(a, b);
      }
    auto mismatch = [&](const OperandOrder &order) -> std::optional<std::pair<size_t, size_t>> {
      for (size_t i = 0; i < values[m].size(); ++i)
        for (size_t j = 0; j < values[m].size(); ++j)
          if (seen[i][j] != lessUnder(order, values[m][i], values[m][j]))
            return std::make_pair(i, j);
      return std::nullopt;
    };
    auto mismatches = [&](const OperandOrder &order) {
      size_t count = 0;
      for (size_t i = 0; i < values[m].size(); ++i)
        for (size_t j = 0; j < values[m].size(); ++j)
          count += seen[i][j] != lessUnder(order, values[m][i], values[m][j]) ? 1 : 0;
      return count;
    };
    auto found = std::min_element(candidates.begin(), candidates.end(),
                                  [&](const auto &a, const auto &b) { return mismatches(a) < mismatches(b); });
    if (auto wrong = mismatch(*found)) { // the nearest order's first disagreement
      auto [i, j] = *wrong;
      failOp(ins, fmt::format("sorting {}, to_apply=%{} does not compare operand {} ({}) as LT or GT do, "
                              "numerically or in TOTALORDER: with every other operand equal it says {} < {} is {}",
                              sorting, region.name, m, hloTypeName(types[m]), describeValue(values[m][i]),
                              describeValue(values[m][j]), seen[i][j] ? "true" : "false"));
    }
    orders[m] = *found;
  }
  // Which key decides first: a tuple that key m puts first and key n last.
  std::vector<size_t> keys;
  for (size_t m = 0; m < count; ++m)
    if (orders[m].candidate != Candidate::None)
      keys.push_back(m);
  auto firstPair = [&](size_t m) {
    for (double x : values[m])
      for (double y : values[m])
        if (lessUnder(orders[m], x, y))
          return std::make_pair(x, y);
    return std::make_pair(0.0, 0.0);
  };
  auto decidesBefore = [&](size_t m, size_t n) {
    std::vector<double> a = base, b = base;
    std::tie(a[m], b[m]) = firstPair(m);
    std::tie(b[n], a[n]) = firstPair(n);
    return compareTuples(a, b);
  };
  // The keys in that order: each time, the one that decides before every
  // other left.
  for (size_t first = 0; first < keys.size(); ++first) {
    auto leading = std::find_if(keys.begin() + static_cast<std::ptrdiff_t>(first), keys.end(), [&](size_t m) {
      for (size_t k = first; k < keys.size(); ++k)
        if (keys[k] != m && !decidesBefore(m, keys[k]))
          return false;
      return true;
    });
    if (leading == keys.end())
      failOp(ins, fmt::format("sorting {}, to_apply=%{} is not a lexicographic comparison of keys: no one of "
                              "operands {} decides before the others",
                              sorting, region.name,
                              fmt::join(keys.begin() + static_cast<std::ptrdiff_t>(first), keys.end(), ", ")));
    std::iter_swap(keys.begin() + static_cast<std::ptrdiff_t>(first), leading);
  }
  // The whole comparator against the lexicographic order of those keys.
  auto modelled = [&](const std::vector<double> &a, const std::vector<double> &b) {
    for (size_t m : keys) {
      if (lessUnder(orders[m], a[m], b[m]))
        return true;
      if (lessUnder(orders[m], b[m], a[m]))
        return false;
    }
    return false;
  };
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&](size_t bound) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>((state >> 33) % bound);
  };
  // A plain LT or GT leaves NaN unordered, which no lexicographic order
  // follows: those keys are checked on numbers only.
  std::vector<std::vector<double>> sampled = values;
  for (size_t m = 0; m < count; ++m)
    if (orders[m].candidate == Candidate::Plain)
      std::erase_if(sampled[m], [](double v) { return std::isnan(v); });
  for (int sample = 0; sample < kComparatorSamples; ++sample) {
    std::vector<double> a(count), b(count);
    for (size_t m = 0; m < count; ++m) {
      a[m] = sampled[m][next(sampled[m].size())];
      b[m] = next(2) == 0 ? a[m] : sampled[m][next(sampled[m].size())];
    }
    if (compareTuples(a, b) != modelled(a, b)) {
      std::string left, right;
      for (size_t m = 0; m < count; ++m) {
        left += (m ? ", " : "") + describeValue(a[m]);
        right += (m ? ", " : "") + describeValue(b[m]);
      }
      failOp(ins, fmt::format("sorting {}, to_apply=%{} is not a lexicographic comparison of keys: it says ({}) "
                              "{} before ({})",
                              sorting, region.name, left, compareTuples(a, b) ? "sorts" : "does not sort", right));
    }
  }
  std::vector<SortKey> result;
  for (size_t m : keys)
    result.push_back({static_cast<int64_t>(m), orders[m].descending,
                      orders[m].candidate == Candidate::Total ? SortOrder::Total : SortOrder::Numeric});
  return result;
}

// sort(operands...), dimensions={d}, is_stable=..., to_apply=comparator:
// the operands permuted together along d (an array for one operand, a
// tuple for several).
Value Builder::sort(const Instruction &ins, const std::vector<const Value *> &operands) {
  Graph &g = *graph_;
  if (operands.empty())
    failOp(ins, "a sort of no operands");
  std::vector<Tensor> tensors;
  std::vector<DType> types;
  for (size_t i = 0; i < operands.size(); ++i) {
    tensors.push_back(tensorOperand(ins, operands, i));
    types.push_back(tensors.back().dtype());
    if (tensors.back().shape() != tensors[0].shape())
      failOp(ins, fmt::format("its operands have different shapes, {} and {}", describe(tensors[0]),
                              describe(tensors.back())));
  }
  const Shape &shape = tensors[0].shape();
  std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
  if (dimensions.size() != 1 || dimensions[0] < 0 || dimensions[0] >= static_cast<int64_t>(shape.size()))
    failOp(ins, fmt::format("dimensions must name one axis of {}", describe(tensors[0])));
  int64_t axis = dimensions[0], length = shape[static_cast<size_t>(axis)];
  int64_t elements = 1;
  for (int64_t dim : shape)
    elements *= dim;
  if (elements == 0)
    failOp(ins, fmt::format("{} is empty: mlpipe sorts tensors with at least one element", describe(tensors[0])));
  if (length > kMaxSortLength)
    failOp(ins, fmt::format("{} along axis {} sorts {} elements; mlpipe sorts at most {} (it compares every pair "
                            "of the axis)",
                            describe(tensors[0]), axis, length, kMaxSortLength));
  if (elements > kMaxSortPairs / length)
    failOp(ins, fmt::format("{} along axis {} compares {} pairs; mlpipe compares at most {} in one sort",
                            describe(tensors[0]), axis, elements * length, kMaxSortPairs));
  const Attribute &toApply = attribute(ins, "to_apply");
  const Computation &region = module_.computations[computationNamed(toApply)];
  if (parameterCount(region) != 2 * tensors.size())
    failOp(ins, fmt::format("sorting {} along axis {}, to_apply=%{} has {} parameters, but a sort of {} operands "
                            "passes {}",
                            describe(tensors[0]), axis, region.name, parameterCount(region), tensors.size(),
                            2 * tensors.size()));
  std::string sorting = fmt::format("{} along axis {}", describe(tensors[0]), axis);
  std::vector<SortKey> keys = sortComparatorKeys(ins, sorting, region, types);

  std::vector<Tensor> sorted = tensors;
  if (!keys.empty() && length > 1) { // else every element ties: the order stays
    Tensor rank = g.sortRank(tensors, axis, keys);
    for (Tensor &x : sorted)
      x = placeByRank(g, x, rank, axis);
  }
  if (sorted.size() == 1)
    return tensorValue(sorted[0]);
  Value tuple;
  tuple.tensor.reset();
  for (Tensor x : sorted)
    tuple.elements.push_back(tensorValue(x));
  return tuple;
}

} // namespace mlpipe::fe::hlo
