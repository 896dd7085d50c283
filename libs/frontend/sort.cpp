#include "frontend/sort.h"

#include "support/error.h"

#include <limits>

namespace mlpipe::fe {

namespace {

// The pairs of a sort along `axis` of a tensor of `shape`: its shape with
// the axis' length again at the end. Element (..., i, ..., j) pairs
// element i along the axis with element j.
Shape pairShape(const Shape &shape, int64_t axis) {
  Shape pairs = shape;
  pairs.push_back(shape[static_cast<size_t>(axis)]);
  return pairs;
}

// x's element i at every pair (..., i, ..., j).
Tensor asSelf(Graph &g, Tensor x, const Shape &pairs) {
  std::vector<int64_t> dims(x.shape().size());
  for (size_t d = 0; d < dims.size(); ++d)
    dims[d] = static_cast<int64_t>(d);
  return g.broadcast(x, pairs, dims);
}

// x's element j at every pair (..., i, ..., j): x with the axis moved
// last, then broadcast along the axis' own place (an ordered broadcast,
// which every emitter reads as a plain one).
Tensor asOther(Graph &g, Tensor x, int64_t axis, const Shape &pairs) {
  auto rank = static_cast<int64_t>(x.shape().size());
  std::vector<int64_t> order, dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) {
      order.push_back(d);
      dims.push_back(d);
    }
  order.push_back(axis);
  dims.push_back(rank);
  Tensor moved = axis == rank - 1 ? x : g.transpose(x, order);
  return g.broadcast(moved, pairs, dims);
}

} // namespace

Tensor sortsBefore(Graph &g, SortOrder order, Tensor a, Tensor b) {
  if (!isFloat(a.dtype()))
    return g.compare(CompareFn::Lt, a, b);
  Tensor less = g.compare(CompareFn::Lt, a, b);
  Tensor nanA = g.compare(CompareFn::Ne, a, a), nanB = g.compare(CompareFn::Ne, b, b);
  if (order == SortOrder::Numeric) // NaN after everything
    return g.binary(BinaryFn::Or, less, g.binary(BinaryFn::And, nanB, g.unary(UnaryFn::Not, nanA)));
  // Total: a class (0 for -NaN, 1 for numbers, 2 for +NaN), then the
  // numbers in order with -0 before +0.
  Tensor signA = g.unary(UnaryFn::SignBit, a), signB = g.unary(UnaryFn::SignBit, b);
  auto rankOf = [&](Tensor nan, Tensor sign) {
    Tensor negative = g.compare(CompareFn::Gt, sign, g.constant(0.5, sign.dtype()));
    Tensor nanRank = g.select(negative, g.constant(0, DType::i32), g.constant(2, DType::i32));
    return g.select(nan, nanRank, g.constant(1, DType::i32));
  };
  Tensor rankA = rankOf(nanA, signA), rankB = rankOf(nanB, signB);
  Tensor numbers =
      g.binary(BinaryFn::Or, less,
               g.binary(BinaryFn::And, g.compare(CompareFn::Eq, a, b), g.compare(CompareFn::Gt, signA, signB)));
  Tensor bothNumbers = g.binary(BinaryFn::And, g.compare(CompareFn::Eq, rankA, rankB),
                                g.compare(CompareFn::Eq, rankA, g.constant(1, DType::i32)));
  return g.binary(BinaryFn::Or, g.compare(CompareFn::Lt, rankA, rankB), g.binary(BinaryFn::And, bothNumbers, numbers));
}

Tensor lowerSortRank(Graph &g, const std::vector<Tensor> &operands, int64_t axis, const std::vector<SortKey> &keys) {
  const Shape &shape = operands.at(0).shape();
  Shape pairs = pairShape(shape, axis);
  auto last = static_cast<int64_t>(shape.size());
  // Per key, most significant first: whether self (element i) sorts
  // before other (element j), and the other way round.
  std::vector<Tensor> selfFirst, otherFirst;
  for (const SortKey &key : keys) {
    Tensor x = operands.at(static_cast<size_t>(key.operand));
    if (x.dtype() == DType::i1)
      x = g.convert(x, DType::i32);
    Tensor self = asSelf(g, x, pairs), other = asOther(g, x, axis, pairs);
    Tensor selfBefore = sortsBefore(g, key.order, self, other), otherBefore = sortsBefore(g, key.order, other, self);
    selfFirst.push_back(key.descending ? otherBefore : selfBefore);
    otherFirst.push_back(key.descending ? selfBefore : otherBefore);
  }
  // Lexicographically: the first key on which the two differ decides.
  auto lexicographic = [&](const std::vector<Tensor> &first, const std::vector<Tensor> &second) {
    Tensor decided = first.back();
    for (size_t k = first.size() - 1; k-- > 0;) {
      Tensor tied = g.unary(UnaryFn::Not, g.binary(BinaryFn::Or, first[k], second[k]));
      decided = g.binary(BinaryFn::Or, first[k], g.binary(BinaryFn::And, tied, decided));
    }
    return decided;
  };
  Tensor otherSortsFirst = lexicographic(otherFirst, selfFirst);
  Tensor selfSortsFirst = lexicographic(selfFirst, otherFirst);
  // Element j goes before element i when it sorts first, or is equal and
  // comes first.
  Tensor earlier = g.compare(CompareFn::Lt, g.iota(pairs, DType::i32, last), g.iota(pairs, DType::i32, axis));
  Tensor goesBefore =
      g.binary(BinaryFn::Or, otherSortsFirst, g.binary(BinaryFn::And, g.unary(UnaryFn::Not, selfSortsFirst), earlier));
  return g.reduce(ReduceFn::Sum, g.convert(goesBefore, DType::i32), last, false);
}

Tensor placeByRank(Graph &g, Tensor x, Tensor rank, int64_t axis) {
  Shape pairs = pairShape(x.shape(), axis);
  auto last = static_cast<int64_t>(x.shape().size());
  // Pair (..., p, ..., i): whether element i goes to position p.
  Tensor here = g.compare(CompareFn::Eq, asOther(g, rank, axis, pairs), g.iota(pairs, DType::i32, axis));
  DType dtype = x.dtype();
  if (dtype == DType::i1)
    return g.reduce(ReduceFn::Or, g.binary(BinaryFn::And, here, asOther(g, x, axis, pairs)), last, false);
  double identity = isFloat(dtype) ? -std::numeric_limits<double>::infinity() : integerMinimum(dtype);
  Tensor candidates = g.select(here, asOther(g, x, axis, pairs), g.constant(identity, dtype));
  return g.reduce(ReduceFn::Max, candidates, last, false);
}

std::unique_ptr<Graph> withSortsLowered(const Graph &graph) {
  bool any = false;
  for (const Node &node : graph.nodes())
    any = any || node.kind == OpKind::SortRank;
  if (!any)
    return nullptr;
  return graph.expanded(OpKind::SortRank, [](Graph &copy, const Node &node, const std::vector<Tensor> &operands) {
    return lowerSortRank(copy, operands, sortAxis(node), sortKeys(node));
  });
}

} // namespace mlpipe::fe
