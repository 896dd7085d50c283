#include "reference/evaluator.h"

#include "support/blas.h"
#include "support/error.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace mlpipe::ref {

using fe::Node;
using fe::OpKind;

ArrayPtr fromHost(const HostTensor &tensor) {
  auto array = std::make_shared<Array>();
  array->shape = tensor.shape();
  array->data = tensor.toDoubles();
  return array;
}

HostTensor toHost(const Array &array, DType dtype) { return HostTensor::fromDoubles(dtype, array.shape, array.data); }

namespace {

std::vector<int64_t> rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// Strides that read `in` while walking `out` with NumPy broadcasting:
// right-aligned, and 0 along broadcast dimensions.
std::vector<int64_t> broadcastStrides(const Shape &in, const Shape &out) {
  std::vector<int64_t> inStrides = rowMajorStrides(in), strides(out.size(), 0);
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    strides[offset + i] = in[i] == 1 ? 0 : inStrides[i];
  return strides;
}

// Calls visit(flatOut, offsetA, offsetB) for every output element, walking
// the multi-index incrementally.
template <typename Visit>
void forEachBroadcast(const Shape &out, const std::vector<int64_t> &stridesA, const std::vector<int64_t> &stridesB,
                      Visit visit) {
  int64_t count = numElements(out);
  size_t rank = out.size();
  std::vector<int64_t> index(rank, 0);
  int64_t a = 0, b = 0;
  for (int64_t flat = 0; flat < count; ++flat) {
    visit(flat, a, b);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) {
        a += stridesA[d];
        b += stridesB[d];
        break;
      }
      a -= stridesA[d] * (out[d] - 1);
      b -= stridesB[d] * (out[d] - 1);
      index[d] = 0;
    }
  }
}

// Calls visit(flatOut, offsets) for every element of `out`, where offsets[i]
// is the flat index of operand i read with strides[i].
template <typename Visit>
void forEachElement(const Shape &out, const std::vector<std::vector<int64_t>> &strides, Visit visit) {
  int64_t count = numElements(out);
  size_t rank = out.size();
  std::vector<int64_t> index(rank, 0), offsets(strides.size(), 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    visit(flat, offsets);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < out[d]) {
        for (size_t i = 0; i < strides.size(); ++i)
          offsets[i] += strides[i][d];
        break;
      }
      for (size_t i = 0; i < strides.size(); ++i)
        offsets[i] -= strides[i][d] * (out[d] - 1);
      index[d] = 0;
    }
  }
}

// Unary, Binary, Compare, Select and Convert, broadcasting NumPy's way.
// Scalar Constants are rank-0 arrays here.
Array elementwise(const Node &node, const std::vector<const Array *> &operands, DType operandType) {
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  std::vector<std::vector<int64_t>> strides;
  for (const Array *operand : operands)
    strides.push_back(broadcastStrides(operand->shape, node.shape));
  auto at = [&](size_t i, const std::vector<int64_t> &offsets) { return operands[i]->data[offsets[i]]; };
  forEachElement(node.shape, strides, [&](int64_t flat, const std::vector<int64_t> &offsets) {
    double &out = result.data[flat];
    switch (node.kind) {
    case OpKind::Unary:
      out = fe::applyUnary(static_cast<fe::UnaryFn>(node.fn), at(0, offsets), node.dtype);
      break;
    case OpKind::Binary:
      out = fe::applyBinary(static_cast<fe::BinaryFn>(node.fn), at(0, offsets), at(1, offsets), node.dtype);
      break;
    case OpKind::Compare:
      out = fe::applyCompare(static_cast<fe::CompareFn>(node.fn), at(0, offsets), at(1, offsets)) ? 1.0 : 0.0;
      break;
    case OpKind::Select:
      out = at(0, offsets) != 0 ? at(1, offsets) : at(2, offsets);
      break;
    case OpKind::Convert:
      out = fe::convertValue(at(0, offsets), operandType, node.dtype);
      break;
    default:
      break;
    }
  });
  return result;
}

// Where a reduction starts, and how it takes in one more element.
double reductionIdentity(fe::ReduceFn fn, DType dtype) {
  switch (fn) {
  case fe::ReduceFn::Sum:
  case fe::ReduceFn::Or:
    return 0.0;
  case fe::ReduceFn::Prod:
    return 1.0;
  case fe::ReduceFn::Max: // an integer type's own extremes, as the compiled code starts from
    return isInteger(dtype) ? integerMinimum(dtype) : -INFINITY;
  case fe::ReduceFn::Min:
    return isInteger(dtype) ? integerMaximum(dtype) : INFINITY;
  case fe::ReduceFn::And: // all bits set
    return dtype == DType::i1 ? 1.0 : isUnsigned(dtype) ? integerMaximum(dtype) : -1.0;
  }
  return 0.0;
}

double combineReduction(fe::ReduceFn fn, double acc, double v, DType dtype) {
  switch (fn) {
  case fe::ReduceFn::Sum:
    return acc + v;
  case fe::ReduceFn::Prod:
    return acc * v;
  case fe::ReduceFn::Max: // NaN wins, as in XLA's maximum and minimum
    return fe::applyBinary(fe::BinaryFn::Max, acc, v);
  case fe::ReduceFn::Min:
    return fe::applyBinary(fe::BinaryFn::Min, acc, v);
  case fe::ReduceFn::And:
    return fe::applyBinary(fe::BinaryFn::And, acc, v, dtype);
  case fe::ReduceFn::Or:
    return fe::applyBinary(fe::BinaryFn::Or, acc, v, dtype);
  }
  return acc;
}

Array reduce(const Node &node, const Array &x) {
  int64_t axis = node.ints[0];
  int64_t outer = 1, inner = 1, length = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  auto fn = static_cast<fe::ReduceFn>(node.fn);
  Array result{node.shape, std::vector<double>(static_cast<size_t>(outer * inner), reductionIdentity(fn, node.dtype))};
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < length; ++r)
      for (int64_t i = 0; i < inner; ++i) {
        double &acc = result.data[o * inner + i];
        acc = combineReduction(fn, acc, x.data[(o * length + r) * inner + i], node.dtype);
      }
  return result;
}

// Each output element reduces the elements its window covers: window
// element w of output o reads position o * stride + w * windowDilation -
// padLow of the base-dilated input, a real element where that is a
// multiple of the dilation and inside; padding and holes are skipped.
Array reduceWindow(const Node &node, const Array &x) {
  size_t rank = x.shape.size();
  auto at = [&](int block, size_t d) { return node.ints[block * rank + d]; };
  Shape window(rank);
  for (size_t d = 0; d < rank; ++d)
    window[d] = at(0, d);
  auto fn = static_cast<fe::ReduceFn>(node.fn);
  std::vector<int64_t> strides = rowMajorStrides(x.shape), out(rank, 0);
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  for (double &element : result.data) {
    double acc = reductionIdentity(fn, node.dtype);
    forEachElement(window, {}, [&](int64_t flat, const std::vector<int64_t> &) {
      int64_t offset = 0, rest = flat;
      for (size_t d = rank; d-- > 0;) {
        int64_t w = rest % window[d];
        rest /= window[d];
        int64_t position = out[d] * at(1, d) + w * at(4, d) - at(2, d), dilation = at(3, d);
        if (position < 0 || position % dilation != 0 || position / dilation >= x.shape[d])
          return;
        offset += position / dilation * strides[d];
      }
      acc = combineReduction(fn, acc, x.data[offset], node.dtype);
    });
    element = acc;
    for (size_t d = rank; d-- > 0;) {
      if (++out[d] < node.shape[d])
        break;
      out[d] = 0;
    }
  }
  return result;
}

// C = A B for row-major A [M,K] and B [K,N], batched over `batches`.
void gemm(const double *a, const double *b, double *c, int64_t batches, int64_t m, int64_t k, int64_t n,
          bool batchedB) {
  for (int64_t i = 0; i < batches; ++i)
    blas::dgemm()(blas::kRowMajor, blas::kNoTrans, blas::kNoTrans, static_cast<int>(m), static_cast<int>(n),
                  static_cast<int>(k), 1.0, a + i * m * k, static_cast<int>(k), b + (batchedB ? i * k * n : 0),
                  static_cast<int>(n), 0.0, c + i * m * n, static_cast<int>(n));
}

Array matmul(const Node &node, const Array &a, const Array &b) {
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  if (a.shape.size() == 3 && b.shape.size() == 3) {
    gemm(a.data.data(), b.data.data(), result.data.data(), a.shape[0], a.shape[1], a.shape[2], b.shape[2], true);
  } else {
    // [..., M, K] x [K, N]: the leading dimensions fold into M.
    int64_t k = a.shape.back(), m = numElements(a.shape) / k, n = b.shape[1];
    gemm(a.data.data(), b.data.data(), result.data.data(), 1, m, k, n, false);
  }
  return result;
}

Array transpose(const Node &node, const Array &x) {
  Array result{node.shape, std::vector<double>(x.data.size())};
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape), walk(node.shape.size());
  for (size_t i = 0; i < node.shape.size(); ++i)
    walk[i] = inStrides[node.ints[i]];
  forEachBroadcast(node.shape, walk, walk, [&](int64_t flat, int64_t in, int64_t) { result.data[flat] = x.data[in]; });
  return result;
}

Array slice(const Node &node, const Array &x) {
  int64_t axis = node.ints[0], start = node.ints[1];
  bool dropsAxis = node.ints.size() > 2 && node.ints[2] != 0; // a select: one index, the axis gone
  int64_t outer = 1, inner = 1, length = dropsAxis ? 1 : node.shape[axis], full = x.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  Array result{node.shape, {}};
  result.data.reserve(static_cast<size_t>(outer * length * inner));
  for (int64_t o = 0; o < outer; ++o) {
    auto begin = x.data.begin() + (o * full + start) * inner;
    result.data.insert(result.data.end(), begin, begin + length * inner);
  }
  return result;
}

// Ids outside the table are clamped into it, as the compiled gather does.
Array gather(const Node &node, const Array &table, const Array &ids) {
  int64_t rows = table.shape[0], width = table.shape[1];
  Array result{node.shape, {}};
  result.data.reserve(static_cast<size_t>(numElements(node.shape)));
  for (double id : ids.data) {
    int64_t row = std::clamp(static_cast<int64_t>(id), int64_t(0), rows - 1);
    auto begin = table.data.begin() + row * width;
    result.data.insert(result.data.end(), begin, begin + width);
  }
  return result;
}

// HLO's broadcast: result axis ints[i] walks operand axis i.
Array broadcast(const Node &node, const Array &x) {
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape), walk(node.shape.size(), 0);
  for (size_t i = 0; i < x.shape.size(); ++i)
    walk[node.ints[i]] = x.shape[i] == 1 ? 0 : inStrides[i];
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  forEachElement(node.shape, {walk},
                 [&](int64_t flat, const std::vector<int64_t> &offsets) { result.data[flat] = x.data[offsets[0]]; });
  return result;
}

Array iota(const Node &node) {
  std::vector<int64_t> step(node.shape.size(), 0);
  step[node.ints[0]] = 1;
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  forEachElement(node.shape, {step}, [&](int64_t flat, const std::vector<int64_t> &offsets) {
    result.data[flat] = fe::convertValue(static_cast<double>(offsets[0]), DType::i64, node.dtype);
  });
  return result;
}

Array pad(const Node &node, const Array &x, double value) {
  size_t rank = node.shape.size();
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape), index(rank, 0);
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)), value)};
  for (int64_t flat = 0; flat < static_cast<int64_t>(result.data.size()); ++flat) {
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < rank && inside; ++d) {
      int64_t shifted = index[d] - node.ints[d], step = node.ints[2 * rank + d] + 1;
      inside = shifted >= 0 && shifted % step == 0 && shifted / step < x.shape[d];
      offset += inside ? shifted / step * inStrides[d] : 0;
    }
    if (inside)
      result.data[flat] = x.data[offset];
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < node.shape[d])
        break;
      index[d] = 0;
    }
  }
  return result;
}

Array concat(const Node &node, const std::vector<const Array *> &parts) {
  int64_t axis = node.ints[0], outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= node.shape[d];
  Array result{node.shape, {}};
  result.data.reserve(static_cast<size_t>(numElements(node.shape)));
  for (int64_t o = 0; o < outer; ++o)
    for (const Array *part : parts) {
      int64_t block = numElements(part->shape) / outer;
      auto begin = part->data.begin() + o * block;
      result.data.insert(result.data.end(), begin, begin + block);
    }
  return result;
}

Array stridedSlice(const Node &node, const Array &x) {
  size_t rank = node.shape.size();
  std::vector<int64_t> inStrides = rowMajorStrides(x.shape), walk(rank);
  int64_t start = 0;
  for (size_t d = 0; d < rank; ++d) {
    start += node.ints[d] * inStrides[d];
    walk[d] = node.ints[rank + d] * inStrides[d];
  }
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  forEachElement(node.shape, {walk}, [&](int64_t flat, const std::vector<int64_t> &offsets) {
    result.data[flat] = x.data[start + offsets[0]];
  });
  return result;
}

// The block written into a copy of base; a run-time offset is clamped as
// the compiled insert clamps it.
Array insert(const Node &node, const Array &base, const Array &update, const Array *position) {
  Array result = base;
  size_t rank = base.shape.size();
  std::vector<int64_t> offsets(node.ints.begin() + 1, node.ints.end());
  int64_t positionAxis = node.ints[0];
  if (positionAxis >= 0)
    offsets[positionAxis] = std::clamp(static_cast<int64_t>(position->data[0]), int64_t(0),
                                       base.shape[positionAxis] - update.shape[positionAxis]);
  std::vector<int64_t> baseStrides = rowMajorStrides(base.shape);
  std::vector<int64_t> index(rank, 0);
  for (size_t flat = 0; flat < update.data.size(); ++flat) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d)
      at += (offsets[d] + index[d]) * baseStrides[d];
    result.data[at] = update.data[flat];
    for (size_t d = rank; d-- > 0;)
      if (++index[d] < update.shape[d])
        break;
      else
        index[d] = 0;
  }
  return result;
}

// The corner of a dynamic slice's box: each start clamped to [0, dim - size].
std::vector<int64_t> clampedStarts(const Shape &whole, const Shape &box, const std::vector<const Array *> &starts) {
  std::vector<int64_t> corner(whole.size());
  for (size_t d = 0; d < whole.size(); ++d) {
    double limit = static_cast<double>(whole[d] - box[d]);
    corner[d] = static_cast<int64_t>(std::clamp(starts[d]->data[0], 0.0, limit));
  }
  return corner;
}

// Calls visit(flatInBox, flatInWhole) for every element of a box of shape
// `box` placed at `corner` in a row-major array of shape `whole`.
template <typename Visit>
void forEachInBox(const Shape &whole, const Shape &box, const std::vector<int64_t> &corner, Visit visit) {
  std::vector<int64_t> strides = rowMajorStrides(whole);
  int64_t start = 0;
  for (size_t d = 0; d < whole.size(); ++d)
    start += corner[d] * strides[d];
  forEachElement(box, {strides},
                 [&](int64_t flat, const std::vector<int64_t> &offsets) { visit(flat, start + offsets[0]); });
}

Array dynamicSlice(const Node &node, const Array &x, const std::vector<const Array *> &starts) {
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  forEachInBox(x.shape, node.shape, clampedStarts(x.shape, node.shape, starts),
               [&](int64_t inBox, int64_t inWhole) { result.data[inBox] = x.data[inWhole]; });
  return result;
}

Array dynamicUpdateSlice(const Array &base, const Array &update, const std::vector<const Array *> &starts) {
  Array result = base;
  forEachInBox(base.shape, update.shape, clampedStarts(base.shape, update.shape, starts),
               [&](int64_t inBox, int64_t inWhole) { result.data[inWhole] = update.data[inBox]; });
  return result;
}

Array positionMask(const Node &node, const Array &position) {
  if (node.shape.size() == 3) { // per row: [rows, 1, length], row r at position[r / rowsPerPosition]
    int64_t rows = node.shape[0], length = node.shape[2], rowsPerPosition = node.ints[0];
    Array result{node.shape, std::vector<double>(static_cast<size_t>(rows * length))};
    for (int64_t r = 0; r < rows; ++r) {
      auto at = static_cast<int64_t>(position.data[static_cast<size_t>(r / rowsPerPosition)]);
      for (int64_t j = 0; j < length; ++j)
        result.data[static_cast<size_t>(r * length + j)] = j > at ? node.value : 0.0;
    }
    return result;
  }
  int64_t length = node.shape[0], at = static_cast<int64_t>(position.data[0]);
  Array result{node.shape, std::vector<double>(static_cast<size_t>(length))};
  for (int64_t j = 0; j < length; ++j)
    result.data[j] = j > at ? node.value : 0.0;
  return result;
}

Array triu(const Node &node) {
  int64_t rows = node.shape[0], cols = node.shape[1], k = node.ints[0];
  Array result{node.shape, std::vector<double>(static_cast<size_t>(rows * cols))};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      result.data[i * cols + j] = j - i >= k ? 1.0 : 0.0;
  return result;
}

// A convolution from its definition (graph.h, ConvolutionDims): every
// output element sums input x kernel over the kernel's input features and
// window positions, skipping positions in the padding or in a hole of the
// dilated input. It shares nothing with the lowering the compiler uses.
Array convolution(const Node &node, const Array &input, const Array &kernel) {
  fe::ConvolutionDims dims = fe::convolutionDims(node);
  size_t spatial = dims.window.size();
  std::vector<int64_t> inStrides = rowMajorStrides(input.shape), kStrides = rowMajorStrides(kernel.shape);
  int64_t outputs = kernel.shape[dims.kernelOutput], kernelInputs = kernel.shape[dims.kernelInput];
  int64_t featureGroupOutputs = outputs / dims.featureGroups, batchGroupOutputs = outputs / dims.batchGroups;
  int64_t batchGroupSize = input.shape[dims.inputBatch] / dims.batchGroups;
  Shape windowShape;
  for (size_t d = 0; d < spatial; ++d)
    windowShape.push_back(kernel.shape[dims.kernelSpatial[d]]);
  int64_t positions = numElements(windowShape);

  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  std::vector<int64_t> out(node.shape.size(), 0), k(spatial, 0);
  for (double &element : result.data) {
    int64_t o = out[dims.outputFeature];
    int64_t batch = o / batchGroupOutputs * batchGroupSize + out[dims.outputBatch];
    int64_t firstFeature = o / featureGroupOutputs * kernelInputs;
    double sum = 0;
    std::fill(k.begin(), k.end(), 0);
    for (int64_t p = 0; p < positions; ++p) {
      // Where window position k of this output falls in the input, if on an element.
      int64_t inputAt = batch * inStrides[dims.inputBatch], kernelAt = o * kStrides[dims.kernelOutput];
      bool inside = true;
      for (size_t d = 0; d < spatial && inside; ++d) {
        const fe::WindowAxis &axis = dims.window[d];
        int64_t dilated = out[dims.outputSpatial[d]] * axis.stride + k[d] * axis.windowDilation - axis.padLow;
        int64_t x = dilated / axis.baseDilation;
        inside = dilated >= 0 && dilated % axis.baseDilation == 0 && x < input.shape[dims.inputSpatial[d]];
        inputAt += x * inStrides[dims.inputSpatial[d]];
        kernelAt += k[d] * kStrides[dims.kernelSpatial[d]];
      }
      if (inside)
        for (int64_t i = 0; i < kernelInputs; ++i)
          sum += input.data[inputAt + (firstFeature + i) * inStrides[dims.inputFeature]] *
                 kernel.data[kernelAt + i * kStrides[dims.kernelInput]];
      for (size_t d = spatial; d-- > 0;)
        if (++k[d] < windowShape[d])
          break;
        else
          k[d] = 0;
    }
    element = sum;
    for (size_t d = out.size(); d-- > 0;)
      if (++out[d] < node.shape[d])
        break;
      else
        out[d] = 0;
  }
  return result;
}

// A sort's ranks from its definition: each row along the axis sorted by a
// stable sort under the keys (graph.h, SortKey), and each element's
// position in the result recorded. It shares nothing with the compiled
// lowering (frontend/sort.h), which counts comparisons instead.
Array sortRank(const Node &node, const std::vector<const Array *> &operands) {
  int64_t axis = fe::sortAxis(node);
  std::vector<fe::SortKey> keys = fe::sortKeys(node);
  const Shape &shape = node.shape;
  std::vector<int64_t> strides = rowMajorStrides(shape);
  int64_t length = shape[axis], stride = strides[axis];
  Array result{shape, std::vector<double>(static_cast<size_t>(numElements(shape)))};
  std::vector<int64_t> order(static_cast<size_t>(length));
  for (int64_t start = 0; start < numElements(shape); ++start) {
    if ((start / stride) % length != 0) // one row per position with index 0 along the axis
      continue;
    auto at = [&](const fe::SortKey &key, int64_t i) {
      return operands[static_cast<size_t>(key.operand)]->data[static_cast<size_t>(start + i * stride)];
    };
    for (int64_t i = 0; i < length; ++i)
      order[static_cast<size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
      for (const fe::SortKey &key : keys) {
        double a = at(key, i), b = at(key, j);
        if (key.descending)
          std::swap(a, b);
        if (fe::sortsBefore(key.order, a, b))
          return true;
        if (fe::sortsBefore(key.order, b, a))
          return false;
      }
      return false;
    });
    for (int64_t p = 0; p < length; ++p)
      result.data[static_cast<size_t>(start + order[static_cast<size_t>(p)] * stride)] = static_cast<double>(p);
  }
  return result;
}

// XLA's gather and scatter from their definitions (graph.h, SliceIndexing),
// one element of the result (or of the updates) at a time, in row-major
// order; they share nothing with the lowering the compiler uses
// (frontend/scatter_gather.h).
struct SliceWalk {
  fe::SliceIndexing dims;
  std::vector<int64_t> resultBatch, indicesBatch, windowed;

  SliceWalk(const Node &node, size_t resultRank, size_t operandRank, size_t indicesRank)
      : dims(fe::sliceIndexing(node)) {
    auto has = [](const std::vector<int64_t> &list, int64_t v) {
      return std::find(list.begin(), list.end(), v) != list.end();
    };
    for (int64_t d = 0; d < static_cast<int64_t>(resultRank); ++d)
      if (!has(dims.windowDims, d))
        resultBatch.push_back(d);
    for (int64_t d = 0; d < static_cast<int64_t>(indicesRank); ++d)
      if (d != dims.indexVectorDim)
        indicesBatch.push_back(d);
    for (int64_t d = 0; d < static_cast<int64_t>(operandRank); ++d)
      if (!has(dims.collapsedDims, d) && !has(dims.operandBatchingDims, d))
        windowed.push_back(d);
  }

  // For result element `r`: the start of its slice along every operand
  // axis (as the indices give it, unclamped) and its offset in the slice.
  void locate(const Array &indices, const std::vector<int64_t> &r, std::vector<int64_t> &start,
              std::vector<int64_t> &offset) const {
    std::fill(start.begin(), start.end(), 0);
    std::fill(offset.begin(), offset.end(), 0);
    std::vector<int64_t> at(indices.shape.size(), 0);
    for (size_t i = 0; i < indicesBatch.size(); ++i)
      at[indicesBatch[i]] = r[resultBatch[i]];
    std::vector<int64_t> strides = rowMajorStrides(indices.shape);
    for (size_t k = 0; k < dims.startIndexMap.size(); ++k) {
      if (dims.indexVectorDim < static_cast<int64_t>(at.size()))
        at[dims.indexVectorDim] = static_cast<int64_t>(k);
      int64_t flat = 0;
      for (size_t d = 0; d < at.size(); ++d)
        flat += at[d] * strides[d];
      // Indices far outside any operand stay far outside: bounded so the
      // conversion from double is defined.
      start[dims.startIndexMap[k]] = static_cast<int64_t>(std::clamp(indices.data[flat], -0x1p62, 0x1p62));
    }
    for (size_t i = 0; i < dims.operandBatchingDims.size(); ++i) {
      auto p = std::find(indicesBatch.begin(), indicesBatch.end(), dims.indicesBatchingDims[i]) - indicesBatch.begin();
      start[dims.operandBatchingDims[i]] = r[resultBatch[p]];
    }
    for (size_t j = 0; j < windowed.size(); ++j)
      offset[windowed[j]] = r[dims.windowDims[j]];
  }
};

// Steps `r` through `shape` in row-major order.
void nextIndex(std::vector<int64_t> &r, const Shape &shape) {
  for (size_t d = r.size(); d-- > 0;)
    if (++r[d] < shape[d])
      return;
    else
      r[d] = 0;
}

// Each slice's start clamped to [0, dim - size], so it lies inside.
Array gatherSlices(const Node &node, const Array &operand, const Array &indices) {
  SliceWalk walk(node, node.shape.size(), operand.shape.size(), indices.shape.size());
  std::vector<int64_t> strides = rowMajorStrides(operand.shape);
  size_t rank = operand.shape.size();
  std::vector<int64_t> r(node.shape.size(), 0), start(rank), offset(rank);
  Array result{node.shape, std::vector<double>(static_cast<size_t>(numElements(node.shape)))};
  for (double &element : result.data) {
    walk.locate(indices, r, start, offset);
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d)
      flat += (std::clamp<int64_t>(start[d], 0, operand.shape[d] - walk.dims.sliceSizes[d]) + offset[d]) * strides[d];
    element = operand.data[flat];
    nextIndex(r, node.shape);
  }
  return result;
}

// The updates combined in one at a time, in their row-major order, each
// window skipped whole unless it lies inside the operand; assign keeps
// the last update aimed at an element.
Array scatter(const Node &node, const Array &operand, const Array &indices, const Array &updates) {
  SliceWalk walk(node, updates.shape.size(), operand.shape.size(), indices.shape.size());
  std::vector<int64_t> strides = rowMajorStrides(operand.shape);
  size_t rank = operand.shape.size();
  std::vector<int64_t> window(rank, 1);
  for (size_t j = 0; j < walk.windowed.size(); ++j)
    window[walk.windowed[j]] = updates.shape[walk.dims.windowDims[j]];
  static const std::map<fe::ReduceFn, fe::BinaryFn> combine = {
      {fe::ReduceFn::Sum, fe::BinaryFn::Add}, {fe::ReduceFn::Prod, fe::BinaryFn::Mul},
      {fe::ReduceFn::Max, fe::BinaryFn::Max}, {fe::ReduceFn::Min, fe::BinaryFn::Min},
      {fe::ReduceFn::And, fe::BinaryFn::And}, {fe::ReduceFn::Or, fe::BinaryFn::Or}};
  std::vector<int64_t> r(updates.shape.size(), 0), start(rank), offset(rank);
  Array result = operand;
  for (double update : updates.data) {
    walk.locate(indices, r, start, offset);
    nextIndex(r, updates.shape);
    bool inside = true;
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) {
      inside = inside && start[d] >= 0 && start[d] <= operand.shape[d] - window[d];
      flat += (start[d] + offset[d]) * strides[d];
    }
    if (!inside)
      continue;
    double &element = result.data[flat];
    element = node.fn == fe::kScatterAssign
                  ? update
                  : fe::applyBinary(combine.at(static_cast<fe::ReduceFn>(node.fn)), element, update, node.dtype);
  }
  return result;
}

// The value of one node, from the values of its operands (an input's from
// `inputs`).
ArrayPtr evaluateNode(const fe::Graph &graph, const Node &node, const std::vector<ArrayPtr> &values,
                      const Values &inputs) {
  const auto &nodes = graph.nodes();
  auto operand = [&](size_t i) -> const Array & { return *values[node.operands[i]]; };
  switch (node.kind) {
  case OpKind::Input: {
    auto found = inputs.find(node.name);
    if (found == inputs.end())
      fail("reference: no value for input '{}' of '{}'", node.name, graph.name());
    if (found->second->shape != node.shape)
      fail("reference: input '{}' is {}, but '{}' wants {}", node.name, formatShape(found->second->shape), graph.name(),
           formatShape(node.shape));
    return found->second;
  }
  case OpKind::Constant:
    return std::make_shared<Array>(Array{{}, {node.value}});
  case OpKind::Triu:
    return std::make_shared<Array>(triu(node));
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Compare:
  case OpKind::Select:
  case OpKind::Convert: {
    std::vector<const Array *> arrays;
    for (int input : node.operands)
      arrays.push_back(values[input].get());
    // Compare and Convert read their operands in the operands' own type.
    DType operandType = nodes[node.operands.back()].dtype;
    for (int input : node.operands)
      if (nodes[input].kind != OpKind::Constant)
        operandType = nodes[input].dtype;
    return std::make_shared<Array>(elementwise(node, arrays, operandType));
  }
  case OpKind::Insert:
    return std::make_shared<Array>(
        insert(node, operand(0), operand(1), node.operands.size() > 2 ? &operand(2) : nullptr));
  case OpKind::PositionMask:
    return std::make_shared<Array>(positionMask(node, operand(0)));
  case OpKind::DynamicSlice:
  case OpKind::DynamicUpdateSlice: {
    size_t first = node.kind == OpKind::DynamicSlice ? 1 : 2;
    std::vector<const Array *> starts;
    for (size_t i = first; i < node.operands.size(); ++i)
      starts.push_back(&operand(i));
    if (node.kind == OpKind::DynamicSlice)
      return std::make_shared<Array>(dynamicSlice(node, operand(0), starts));
    return std::make_shared<Array>(dynamicUpdateSlice(operand(0), operand(1), starts));
  }
  case OpKind::Reduce:
    return std::make_shared<Array>(reduce(node, operand(0)));
  case OpKind::ReduceWindow:
    return std::make_shared<Array>(reduceWindow(node, operand(0)));
  case OpKind::MatMul:
    return std::make_shared<Array>(matmul(node, operand(0), operand(1)));
  case OpKind::Reshape:
    return std::make_shared<Array>(Array{node.shape, operand(0).data});
  case OpKind::Transpose:
    return std::make_shared<Array>(transpose(node, operand(0)));
  case OpKind::Slice:
    return std::make_shared<Array>(slice(node, operand(0)));
  case OpKind::Gather:
    return std::make_shared<Array>(gather(node, operand(0), operand(1)));
  case OpKind::Broadcast:
    return std::make_shared<Array>(broadcast(node, operand(0)));
  case OpKind::Iota:
    return std::make_shared<Array>(iota(node));
  case OpKind::Pad:
    return std::make_shared<Array>(pad(node, operand(0), operand(1).data[0]));
  case OpKind::Concat: {
    std::vector<const Array *> parts;
    for (size_t i = 0; i < node.operands.size(); ++i)
      parts.push_back(&operand(i));
    return std::make_shared<Array>(concat(node, parts));
  }
  case OpKind::Literal:
    return std::make_shared<Array>(Array{node.shape, node.values});
  case OpKind::StridedSlice:
    return std::make_shared<Array>(stridedSlice(node, operand(0)));
  case OpKind::Convolution:
    return std::make_shared<Array>(convolution(node, operand(0), operand(1)));
  case OpKind::SortRank: {
    std::vector<const Array *> arrays;
    for (size_t i = 0; i < node.operands.size(); ++i)
      arrays.push_back(&operand(i));
    return std::make_shared<Array>(sortRank(node, arrays));
  }
  case OpKind::GatherSlices:
    return std::make_shared<Array>(gatherSlices(node, operand(0), operand(1)));
  case OpKind::Scatter:
    return std::make_shared<Array>(scatter(node, operand(0), operand(1), operand(2)));
  case OpKind::While: // evaluate() runs loops itself
  case OpKind::LoopResult:
    fail("reference: internal: a loop node reached evaluateNode");
  }
  return nullptr;
}

// What the compiled code stores: f16, bf16 and integer results of
// arithmetic are rounded or wrapped to their type after every op (f32
// results are kept in float64, the reference's own precision, but under
// F32Arithmetic; ops that only move elements cannot leave the type). Under
// ConvertsOnly and F32Arithmetic a 16-bit float is rounded only where the
// program converts to it.
ArrayPtr asStored(const Node &node, ArrayPtr value, Rounding rounding) {
  bool computes = node.kind == OpKind::Unary || node.kind == OpKind::Binary || node.kind == OpKind::Convert ||
                  node.kind == OpKind::Reduce || node.kind == OpKind::ReduceWindow || node.kind == OpKind::MatMul ||
                  node.kind == OpKind::Convolution || node.kind == OpKind::Iota || node.kind == OpKind::Scatter;
  bool roundsF32 = rounding == Rounding::F32Arithmetic && node.dtype == DType::f32;
  if (rounding != Rounding::EveryOp && isFloat(node.dtype) && node.kind != OpKind::Convert && !roundsF32)
    computes = false;
  if (computes && node.dtype != DType::f64 && (node.dtype != DType::f32 || roundsF32)) {
    auto rounded = std::make_shared<Array>(*value);
    for (double &v : rounded->data)
      v = storedValue(node.dtype, v);
    return rounded;
  }
  return value;
}

// A While node run to its end: its condition and body evaluated (each as
// a graph of its own, inputs named as the graph names them) until the
// condition fails; the carried values then.
std::vector<ArrayPtr> whileLoop(const Node &node, std::vector<ArrayPtr> carried, Rounding rounding) {
  auto bind = [&](const fe::Graph &graph) {
    Values bound;
    for (size_t i = 0; i < carried.size(); ++i)
      bound[graph.node(graph.inputs()[i]).name] = carried[i];
    return bound;
  };
  const std::string &holds = node.condition->outputs()[0].first;
  while (evaluate(*node.condition, bind(*node.condition), rounding).at(holds)->data.at(0) != 0) {
    Values next = evaluate(*node.body, bind(*node.body), rounding);
    for (size_t i = 0; i < carried.size(); ++i)
      carried[i] = next.at(node.body->outputs()[i].first);
  }
  return carried;
}

// The last node reading each value, so it can be freed after that.
std::vector<int> lastUses(const fe::Graph &graph) {
  const auto &nodes = graph.nodes();
  std::vector<int> lastUse(nodes.size(), -1);
  for (size_t id = 0; id < nodes.size(); ++id)
    for (int operand : nodes[id].operands)
      lastUse[operand] = static_cast<int>(id);
  return lastUse;
}

} // namespace

Values evaluate(const fe::Graph &graph, const Values &inputs, Rounding rounding) {
  const auto &nodes = graph.nodes();
  std::vector<int> lastUse = lastUses(graph);
  std::vector<bool> kept(nodes.size(), false);
  for (auto &[name, id] : graph.outputs())
    kept[id] = true;
  for (auto &[name, id] : graph.probes())
    kept[id] = true;

  std::vector<ArrayPtr> values(nodes.size());
  std::map<size_t, std::vector<ArrayPtr>> loopResults; // While node -> its results
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node &node = nodes[id];
    if (node.kind == OpKind::While) {
      std::vector<ArrayPtr> carried;
      for (int operand : node.operands)
        carried.push_back(values[operand]);
      loopResults[id] = whileLoop(node, std::move(carried), rounding);
      values[id] = std::make_shared<Array>();
    } else if (node.kind == OpKind::LoopResult) {
      values[id] = loopResults.at(static_cast<size_t>(node.operands[0])).at(static_cast<size_t>(node.ints[0]));
    } else {
      values[id] = asStored(node, evaluateNode(graph, node, values, inputs), rounding);
    }
    for (int input : node.operands)
      if (lastUse[input] == static_cast<int>(id) && !kept[input])
        values[input].reset();
  }
  Values results;
  for (auto &[name, id] : graph.outputs())
    results[name] = values[id];
  for (auto &[name, id] : graph.probes())
    results[name] = values[id];
  return results;
}

} // namespace mlpipe::ref
