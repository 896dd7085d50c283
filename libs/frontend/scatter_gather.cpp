// XLA's general gather and scatter: the graph's nodes (their checks and
// encoding) and their lowering to ops every path compiles.
//
// Both lowerings first compute, for every element of the "result" (the
// gather's result, the scatter's updates; graph.h, SliceIndexing), where it
// meets the operand: along each operand axis, the start its index vector
// (or batch coordinate) gives plus its offset in the slice or window, as
// i64 tensors of the result's shape built from iotas, slices of the
// indices and broadcasts. From there:
//   gather:  clamp each start to [0, dim - size], add the offset, flatten
//            to one operand position, and read it with the row gather of
//            the operand as an [elements, 1] table;
//   scatter: a window is inside when every start lies in [0, dim - size];
//            the flat target (or -1) of each update is compared with every
//            operand position ([operand, updates] pairs, fused into one
//            row reduction), the matching updates reduced by the combiner
//            and combined with the operand; assign keeps the update with
//            the greatest position among the matches, found by a max
//            reduction of positions and read with a row gather.
#include "frontend/scatter_gather.h"

#include "support/error.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace mlpipe::fe {

namespace {

// The lists of a SliceIndexing, in the order its node's ints hold them
// (after indexVectorDim, each list preceded by its length).
const std::array<std::vector<int64_t> SliceIndexing::*, 6> kLists = {
    &SliceIndexing::windowDims,          &SliceIndexing::collapsedDims,       &SliceIndexing::startIndexMap,
    &SliceIndexing::operandBatchingDims, &SliceIndexing::indicesBatchingDims, &SliceIndexing::sliceSizes};

std::vector<int64_t> encoded(const SliceIndexing &dims) {
  std::vector<int64_t> ints = {dims.indexVectorDim};
  for (auto list : kLists) {
    ints.push_back(static_cast<int64_t>((dims.*list).size()));
    ints.insert(ints.end(), (dims.*list).begin(), (dims.*list).end());
  }
  return ints;
}

// The axes of the result and of the indices that are batch axes, paired
// in order, and the operand axes that have a window axis, in order.
struct Layout {
  std::vector<int64_t> resultBatch, indicesBatch, windowed;
  Shape batchShape; // the indices' sizes on indicesBatch
};

bool contains(const std::vector<int64_t> &list, int64_t value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// Checks `dims` against the operand, the indices and a result of rank
// `resultRank`.
Layout checkedLayout(const Shape &operand, const Shape &indices, DType indexType, const SliceIndexing &dims,
                     int64_t resultRank) {
  auto rank = static_cast<int64_t>(operand.size()), indicesRank = static_cast<int64_t>(indices.size());
  if (!isInteger(indexType) || indexType == DType::u64)
    fail("indices of {} are not read: mlpipe reads signed integers, and unsigned ones of up to 32 bits",
         dtypeName(indexType));
  if (numElements(indices) == 0)
    fail("empty indices are not supported");
  if (dims.indexVectorDim < 0 || dims.indexVectorDim > indicesRank)
    fail("index_vector_dim={} is out of range for indices of rank {}", dims.indexVectorDim, indicesRank);
  auto checkAxes = [&](const std::vector<int64_t> &axes, int64_t bound, const char *what, const char *of) {
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] < 0 || axes[i] >= bound || std::count(axes.begin(), axes.end(), axes[i]) > 1)
        fail("{} names axis {}, out of range for {} of rank {} or named twice", what, axes[i], of, bound);
  };
  checkAxes(dims.startIndexMap, rank, "the start index map", "an operand");
  checkAxes(dims.collapsedDims, rank, "the collapsed (inserted) window axes", "an operand");
  checkAxes(dims.operandBatchingDims, rank, "the operand's batching axes", "an operand");
  checkAxes(dims.indicesBatchingDims, indicesRank, "the indices' batching axes", "indices");
  int64_t vectorLength = dims.indexVectorDim < indicesRank ? indices[dims.indexVectorDim] : 1;
  if (static_cast<int64_t>(dims.startIndexMap.size()) != vectorLength)
    fail("the index vector has {} elements but the start index map names {} axes", vectorLength,
         dims.startIndexMap.size());
  for (int64_t axis : dims.operandBatchingDims)
    if (contains(dims.collapsedDims, axis) || contains(dims.startIndexMap, axis))
      fail("operand axis {} is a batching axis and also collapsed or in the start index map", axis);
  if (dims.operandBatchingDims.size() != dims.indicesBatchingDims.size())
    fail("{} operand batching axes but {} indices batching axes", dims.operandBatchingDims.size(),
         dims.indicesBatchingDims.size());
  for (size_t i = 0; i < dims.indicesBatchingDims.size(); ++i) {
    int64_t axis = dims.indicesBatchingDims[i], paired = dims.operandBatchingDims[i];
    if (axis == dims.indexVectorDim)
      fail("indices axis {} is both a batching axis and the index vector", axis);
    if (indices[axis] != operand[paired])
      fail("batching axis {} of the indices has {} elements but operand axis {} has {}", axis, indices[axis], paired,
           operand[paired]);
  }
  Layout layout;
  for (int64_t d = 0; d < rank; ++d)
    if (!contains(dims.collapsedDims, d) && !contains(dims.operandBatchingDims, d))
      layout.windowed.push_back(d);
  for (int64_t d = 0; d < indicesRank; ++d)
    if (d != dims.indexVectorDim) {
      layout.indicesBatch.push_back(d);
      layout.batchShape.push_back(indices[d]);
    }
  if (dims.windowDims.size() != layout.windowed.size())
    fail("{} window axes are given but the operand has {} axes that are neither collapsed nor batching",
         dims.windowDims.size(), layout.windowed.size());
  if (!std::is_sorted(dims.windowDims.begin(), dims.windowDims.end()))
    fail("the window axes must be in increasing order");
  checkAxes(dims.windowDims, resultRank, "the window axes", "a result");
  for (int64_t d = 0; d < resultRank; ++d)
    if (!contains(dims.windowDims, d))
      layout.resultBatch.push_back(d);
  if (layout.resultBatch.size() != layout.indicesBatch.size())
    fail("the result has {} batch axes but the indices {}", layout.resultBatch.size(), layout.indicesBatch.size());
  return layout;
}

std::vector<int64_t> rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Where each element of a result of `shape` meets operand axis d: the
// start along it (with `indexed` when it comes from the indices, to be
// clamped or checked) and the offset in the slice; either may be absent.
struct AxisCoordinate {
  std::optional<Tensor> start, offset;
  bool indexed = false;
};

std::vector<AxisCoordinate> coordinates(Graph &graph, Tensor indices, const Shape &operand, const Shape &shape,
                                        const SliceIndexing &dims, const Layout &layout) {
  std::vector<AxisCoordinate> axes(operand.size());
  Tensor wide = indices.dtype() == DType::i64 ? indices : graph.convert(indices, DType::i64);
  int64_t indicesRank = wide.rank();
  for (size_t k = 0; k < dims.startIndexMap.size(); ++k) {
    Tensor start = wide;
    if (dims.indexVectorDim < indicesRank)
      start = reshaped(graph, graph.slice(wide, dims.indexVectorDim, static_cast<int64_t>(k), 1), layout.batchShape);
    if (start.shape() != shape)
      start = graph.broadcast(start, shape, layout.resultBatch);
    AxisCoordinate &axis = axes[dims.startIndexMap[k]];
    axis.start = start;
    axis.indexed = true;
  }
  for (size_t i = 0; i < dims.operandBatchingDims.size(); ++i) {
    auto at = std::find(layout.indicesBatch.begin(), layout.indicesBatch.end(), dims.indicesBatchingDims[i]);
    axes[dims.operandBatchingDims[i]].start =
        graph.iota(shape, DType::i64, layout.resultBatch[at - layout.indicesBatch.begin()]);
  }
  for (size_t j = 0; j < layout.windowed.size(); ++j)
    axes[layout.windowed[j]].offset = graph.iota(shape, DType::i64, dims.windowDims[j]);
  return axes;
}

// The sum of `terms`, or zeros of `shape` when there are none.
Tensor total(Graph &graph, const std::vector<Tensor> &terms, const Shape &shape) {
  if (terms.empty())
    return graph.broadcast(graph.literal({}, DType::i64, {0.0}), shape, {});
  Tensor sum = terms[0];
  for (size_t i = 1; i < terms.size(); ++i)
    sum = graph.binary(BinaryFn::Add, sum, terms[i]);
  return sum;
}

// The value no element changes when combined with it by `fn`.
double identity(ReduceFn fn, DType dtype) {
  switch (fn) {
  case ReduceFn::Sum:
  case ReduceFn::Or:
    return 0;
  case ReduceFn::Prod:
    return 1;
  case ReduceFn::Max:
    return isFloat(dtype) ? -INFINITY : integerMinimum(dtype);
  case ReduceFn::Min:
    return isFloat(dtype) ? INFINITY : integerMaximum(dtype);
  case ReduceFn::And:
    return dtype == DType::i1 ? 1 : integerValue(dtype, ~uint64_t(0));
  }
  return 0;
}

BinaryFn combining(ReduceFn fn) {
  switch (fn) {
  case ReduceFn::Sum:
    return BinaryFn::Add;
  case ReduceFn::Prod:
    return BinaryFn::Mul;
  case ReduceFn::Max:
    return BinaryFn::Max;
  case ReduceFn::Min:
    return BinaryFn::Min;
  case ReduceFn::And:
    return BinaryFn::And;
  case ReduceFn::Or:
    return BinaryFn::Or;
  }
  return BinaryFn::Add;
}

} // namespace

SliceIndexing sliceIndexing(const Node &node) {
  SliceIndexing dims;
  const std::vector<int64_t> &ints = node.ints;
  dims.indexVectorDim = ints.at(0);
  size_t at = 1;
  for (auto list : kLists) {
    auto length = static_cast<size_t>(ints.at(at++));
    (dims.*list)
        .assign(ints.begin() + static_cast<std::ptrdiff_t>(at),
                ints.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  }
  return dims;
}

Tensor Graph::gatherSlices(Tensor operand, Tensor indices, const SliceIndexing &dims) {
  const char *op = "gather";
  checkOwned(operand, op);
  checkOwned(indices, op);
  operand = materialized(operand);
  indices = materialized(indices);
  const Shape in = operand.shape();
  auto rank = static_cast<int64_t>(in.size());
  int64_t batchRank = indices.rank() - (dims.indexVectorDim < indices.rank() ? 1 : 0);
  int64_t windows = rank - static_cast<int64_t>(dims.collapsedDims.size() + dims.operandBatchingDims.size());
  Layout layout = checkedLayout(in, indices.shape(), indices.dtype(), dims, batchRank + std::max<int64_t>(windows, 0));
  if (static_cast<int64_t>(dims.sliceSizes.size()) != rank)
    fail("{} slice sizes for an operand of rank {}", dims.sliceSizes.size(), rank);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = dims.sliceSizes[d];
    if (size < 0 || size > in[d])
      fail("the slice size {} along axis {} is not within the operand's {}", size, d, in[d]);
    if (size != 1 && (contains(dims.collapsedDims, d) || contains(dims.operandBatchingDims, d)))
      fail("axis {} is collapsed or batching, so its slice size must be 1, not {}", d, size);
  }
  Shape shape(static_cast<size_t>(batchRank + windows));
  for (size_t i = 0; i < layout.resultBatch.size(); ++i)
    shape[layout.resultBatch[i]] = layout.batchShape[i];
  for (size_t j = 0; j < layout.windowed.size(); ++j)
    shape[dims.windowDims[j]] = dims.sliceSizes[layout.windowed[j]];
  if (numElements(shape) == 0 || numElements(in) == 0)
    fail("an empty operand or result ({} from {}) is not supported", formatShape(shape), formatShape(in));
  Node node{OpKind::GatherSlices, 0, {operand.id(), indices.id()}, shape, operand.dtype()};
  node.ints = encoded(dims);
  return add(std::move(node));
}

Tensor Graph::scatter(Tensor operand, Tensor indices, Tensor updates, const SliceIndexing &dims, int fn) {
  const char *op = "scatter";
  checkOwned(operand, op);
  checkOwned(indices, op);
  checkOwned(updates, op);
  operand = materialized(operand);
  indices = materialized(indices);
  updates = materialized(updates);
  if (operand.dtype() != updates.dtype())
    fail("the operand is {} but the updates are {}", dtypeName(operand.dtype()), dtypeName(updates.dtype()));
  if (fn != kScatterAssign) {
    auto reduce = static_cast<ReduceFn>(fn);
    bool bitwise = reduce == ReduceFn::And || reduce == ReduceFn::Or;
    if (bitwise ? isFloat(operand.dtype()) : !isFloat(operand.dtype()) && !isInteger(operand.dtype()))
      fail("this combiner does not apply to {}", dtypeName(operand.dtype()));
  }
  const Shape in = operand.shape(), up = updates.shape();
  Layout layout = checkedLayout(in, indices.shape(), indices.dtype(), dims, updates.rank());
  for (size_t i = 0; i < layout.resultBatch.size(); ++i)
    if (up[layout.resultBatch[i]] != layout.batchShape[i])
      fail("update axis {} has {} elements but the indices' batch axis {} has {}", layout.resultBatch[i],
           up[layout.resultBatch[i]], layout.indicesBatch[i], layout.batchShape[i]);
  for (size_t j = 0; j < layout.windowed.size(); ++j)
    if (up[dims.windowDims[j]] > in[layout.windowed[j]])
      fail("the window is {} elements along update axis {} but operand axis {} has only {}", up[dims.windowDims[j]],
           dims.windowDims[j], layout.windowed[j], in[layout.windowed[j]]);
  if (numElements(in) == 0)
    fail("an empty operand ({}) is not supported", formatShape(in));
  if (numElements(up) == 0)
    return operand;
  if (numElements(in) > kMaxScatterPairs / numElements(up))
    fail("{} operand elements x {} update elements is more than the {} pairs mlpipe's dense scatter computes "
         "(kMaxScatterPairs)",
         numElements(in), numElements(up), kMaxScatterPairs);
  Node node{OpKind::Scatter, fn, {operand.id(), indices.id(), updates.id()}, in, operand.dtype()};
  node.ints = encoded(dims);
  return add(std::move(node));
}

Tensor lowerGatherSlices(Graph &graph, Tensor operand, Tensor indices, const SliceIndexing &dims, const Shape &shape) {
  const Shape in = operand.shape();
  Layout layout = checkedLayout(in, indices.shape(), indices.dtype(), dims, static_cast<int64_t>(shape.size()));
  std::vector<AxisCoordinate> axes = coordinates(graph, indices, in, shape, dims, layout);
  std::vector<int64_t> strides = rowMajorStrides(in);
  std::vector<Tensor> terms;
  for (size_t d = 0; d < in.size(); ++d) {
    AxisCoordinate &axis = axes[d];
    std::optional<Tensor> at = axis.start;
    if (at && axis.indexed)
      at = graph.binary(BinaryFn::Min, graph.binary(BinaryFn::Max, *at, graph.constant(0.0, DType::i64)),
                        graph.constant(static_cast<double>(in[d] - dims.sliceSizes[d]), DType::i64));
    if (axis.offset)
      at = at ? graph.binary(BinaryFn::Add, *at, *axis.offset) : *axis.offset;
    if (at)
      terms.push_back(strides[d] == 1 ? *at : graph.binary(BinaryFn::Mul, *at, graph.constant(strides[d], DType::i64)));
  }
  Tensor flat = total(graph, terms, shape);
  Tensor table = graph.reshape(operand, {numElements(in), 1});
  return graph.reshape(graph.gather(table, flat), shape);
}

Tensor lowerScatter(Graph &graph, Tensor operand, Tensor indices, Tensor updates, const SliceIndexing &dims, int fn) {
  const Shape in = operand.shape(), shape = updates.shape();
  Layout layout = checkedLayout(in, indices.shape(), indices.dtype(), dims, updates.rank());
  std::vector<AxisCoordinate> axes = coordinates(graph, indices, in, shape, dims, layout);
  std::vector<int64_t> strides = rowMajorStrides(in);
  // The window's size along each operand axis.
  Shape window(in.size(), 1);
  for (size_t j = 0; j < layout.windowed.size(); ++j)
    window[layout.windowed[j]] = shape[dims.windowDims[j]];
  std::vector<Tensor> terms;
  std::optional<Tensor> inside;
  for (size_t d = 0; d < in.size(); ++d) {
    AxisCoordinate &axis = axes[d];
    if (axis.start && axis.indexed) {
      Tensor fits =
          graph.binary(BinaryFn::And, graph.compare(CompareFn::Ge, *axis.start, graph.constant(0.0, DType::i64)),
                       graph.compare(CompareFn::Le, *axis.start,
                                     graph.constant(static_cast<double>(in[d] - window[d]), DType::i64)));
      inside = inside ? graph.binary(BinaryFn::And, *inside, fits) : fits;
    }
    std::optional<Tensor> at = axis.start;
    if (axis.offset)
      at = at ? graph.binary(BinaryFn::Add, *at, *axis.offset) : *axis.offset;
    if (at)
      terms.push_back(strides[d] == 1 ? *at : graph.binary(BinaryFn::Mul, *at, graph.constant(strides[d], DType::i64)));
  }
  Tensor target = total(graph, terms, shape);
  if (inside)
    target = graph.select(*inside, target, graph.constant(-1.0, DType::i64));
  int64_t count = numElements(shape), elements = numElements(in);
  target = reshaped(graph, target, {count});
  Tensor values = reshaped(graph, updates, {count});
  Tensor flatOperand = reshaped(graph, operand, {elements});
  // [elements, count]: whether update u is aimed at operand element e.
  Tensor aimed = graph.compare(CompareFn::Eq, graph.iota({elements, 1}, DType::i64, 0), target);
  Tensor result;
  if (fn == kScatterAssign) {
    Tensor positions = graph.iota({count}, DType::i64, 0);
    Tensor last =
        graph.reduce(ReduceFn::Max, graph.select(aimed, positions, graph.constant(-1.0, DType::i64)), 1, false);
    Tensor chosen = graph.reshape(graph.gather(graph.reshape(values, {count, 1}), last), {elements});
    result = graph.select(graph.compare(CompareFn::Ge, last, graph.constant(0.0, DType::i64)), chosen, flatOperand);
  } else {
    auto reduce = static_cast<ReduceFn>(fn);
    DType dtype = operand.dtype();
    Tensor combined =
        graph.reduce(reduce, graph.select(aimed, values, graph.constant(identity(reduce, dtype), dtype)), 1, false);
    result = graph.binary(combining(reduce), flatOperand, combined);
  }
  return reshaped(graph, result, in);
}

std::unique_ptr<Graph> withScatterGatherLowered(const Graph &graph) {
  bool gathers = false, scatters = false;
  for (const Node &node : graph.nodes()) {
    gathers = gathers || node.kind == OpKind::GatherSlices;
    scatters = scatters || node.kind == OpKind::Scatter;
  }
  if (!gathers && !scatters)
    return nullptr;
  std::unique_ptr<Graph> lowered;
  if (gathers)
    lowered =
        graph.expanded(OpKind::GatherSlices, [](Graph &copy, const Node &node, const std::vector<Tensor> &operands) {
          return lowerGatherSlices(copy, operands[0], operands[1], sliceIndexing(node), node.shape);
        });
  if (scatters)
    lowered = (lowered ? *lowered : graph)
                  .expanded(OpKind::Scatter, [](Graph &copy, const Node &node, const std::vector<Tensor> &operands) {
                    return lowerScatter(copy, operands[0], operands[1], operands[2], sliceIndexing(node), node.fn);
                  });
  return lowered;
}

} // namespace mlpipe::fe
