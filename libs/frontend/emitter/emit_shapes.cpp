// Nodes that move elements without computing them: reshapes (and a
// transpose under a reshape as one generic), Transpose, Slice, StridedSlice,
// Broadcast, Concat, and Literal constants.
#include "frontend/emitter/function_emitter.h"

#include "support/host_tensor.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace mlpipe::fe::emitter {

// For reshape(transpose(x)) whose reshape only merges or splits
// neighbouring dimensions: the id of x. Such a pair is emitted as one
// linalg.generic that reads x through div/mod indexing, never as a
// transpose plus tensor.collapse_shape: elementwise fusion would fold that
// collapse into a consuming matmul and turn the matmul into a generic
// contraction.
std::optional<int> FunctionEmitter::transposeUnderReshape(int id) const {
  const Node &node = graph_.node(id);
  if (node.kind != OpKind::Reshape || graph_.node(node.operands[0]).kind != OpKind::Transpose)
    return std::nullopt;
  const Node &transpose = graph_.node(node.operands[0]);
  Reassociation groups;
  bool regroups = transpose.shape.size() > node.shape.size() ? groupDimensions(node.shape, transpose.shape, groups)
                                                             : groupDimensions(transpose.shape, node.shape, groups);
  if (!regroups || transpose.shape.size() == node.shape.size())
    return std::nullopt;
  return transpose.operands[0];
}

// out = reshape(transpose(x, perm), shape) as one generic over out's
// dimensions: each transposed index is a div/mod of out's indices (or a
// sum of them), and x's index is that index permuted back.
void FunctionEmitter::emitTransposingReshape(int id) {
  const Node &node = graph_.node(id);
  const Node &transpose = graph_.node(node.operands[0]);
  int source = transpose.operands[0];
  const Shape &mid = transpose.shape, &out = node.shape;
  std::vector<std::string> midIndex(mid.size());
  Reassociation groups;
  if (mid.size() > out.size()) { // merging: out dim g covers mid dims groups[g]
    groupDimensions(out, mid, groups);
    for (size_t g = 0; g < groups.size(); ++g) {
      int64_t after = 1;
      for (size_t i = groups[g].size(); i-- > 0;) {
        int64_t dim = groups[g][i];
        std::string expr = after == 1 ? fmt::format("d{}", g) : fmt::format("(d{} floordiv {})", g, after);
        midIndex[dim] = i == 0 ? expr : fmt::format("{} mod {}", expr, mid[dim]);
        after *= mid[dim];
      }
    }
  } else { // splitting: mid dim g is covered by out dims groups[g]
    groupDimensions(mid, out, groups);
    for (size_t g = 0; g < groups.size(); ++g) {
      int64_t after = 1;
      std::vector<std::string> terms;
      for (size_t i = groups[g].size(); i-- > 0;) {
        int64_t dim = groups[g][i];
        terms.push_back(after == 1 ? fmt::format("d{}", dim) : fmt::format("d{} * {}", dim, after));
        after *= out[dim];
      }
      midIndex[g] = fmt::format("{}", fmt::join(terms, " + "));
    }
  }
  // mid dim i is source dim perm[i].
  std::vector<std::string> sourceIndex(mid.size());
  for (size_t i = 0; i < mid.size(); ++i)
    sourceIndex[transpose.ints[i]] = midIndex[i];
  std::vector<std::string> dims;
  for (size_t i = 0; i < out.size(); ++i)
    dims.push_back(fmt::format("d{}", i));
  std::string sourceMap = fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(sourceIndex, ", "));
  std::string init = emptyTensor(out, node.dtype);
  std::string name = fresh(), in = fresh(), outArg = fresh();
  std::string et = elementType(id);
  line("{} = linalg.generic {{indexing_maps = [{}, {}], iterator_types = {}}} ins({} : {}) outs({} : {}) {{", name,
       sourceMap, identityMap(out.size()), parallelIterators(out.size()), value(source), type(source), init, type(id));
  line("^bb0({}: {}, {}: {}):", in, et, outArg, et);
  line("  linalg.yield {} : {}", in, et);
  line("}} -> {}", type(id));
  names_[id] = name;
}

void FunctionEmitter::emitTranspose(int id) {
  const Node &node = graph_.node(id);
  int source = node.operands[0];
  std::string init = emptyTensor(node.shape, node.dtype);
  std::string name = fresh();
  line("{} = linalg.transpose ins({} : {}) outs({} : {}) permutation = [{}]", name, value(source), type(source), init,
       type(id), fmt::join(node.ints, ", "));
  names_[id] = name;
}

void FunctionEmitter::emitSlice(int id) {
  const Node &node = graph_.node(id);
  int source = node.operands[0];
  const Shape &sourceShape = graph_.node(source).shape;
  std::vector<int64_t> offsets(sourceShape.size(), 0), strides(sourceShape.size(), 1);
  offsets[node.ints[0]] = node.ints[1];
  // A select drops its axis: a rank-reducing slice.
  Shape sizes = node.shape;
  if (node.ints.size() > 2 && node.ints[2] != 0)
    sizes.insert(sizes.begin() + node.ints[0], 1);
  std::string name = fresh();
  line("{} = tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", name, value(source), fmt::join(offsets, ", "),
       fmt::join(sizes, ", "), fmt::join(strides, ", "), type(source), type(id));
  names_[id] = name;
}

void FunctionEmitter::emitStridedSlice(int id) {
  const Node &node = graph_.node(id);
  size_t rank = node.shape.size();
  std::vector<int64_t> starts(node.ints.begin(), node.ints.begin() + rank),
      strides(node.ints.begin() + rank, node.ints.end());
  std::string name = fresh();
  line("{} = tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", name, value(node.operands[0]), fmt::join(starts, ", "),
       fmt::join(node.shape, ", "), fmt::join(strides, ", "), type(node.operands[0]), type(id));
  names_[id] = name;
}

// HLO's broadcast: operand axis i read at result axis ints[i] (or at 0 if
// it has size 1); a Constant operand fills the result.
void FunctionEmitter::emitBroadcast(int id) {
  const Node &node = graph_.node(id);
  int source = node.operands[0];
  if (isConstant(source)) {
    std::string scalar = scalarConstant(source, node.dtype);
    names_[id] = emitGeneric(node.shape, node.dtype, {}, [&](const std::vector<std::string> &) { return scalar; });
    return;
  }
  const Shape &in = graph_.node(source).shape;
  std::vector<std::string> dims, results;
  for (size_t i = 0; i < node.shape.size(); ++i)
    dims.push_back(fmt::format("d{}", i));
  for (size_t i = 0; i < in.size(); ++i)
    results.push_back(in[i] == 1 && node.shape[node.ints[i]] != 1 ? "0" : dims[node.ints[i]]);
  std::string map = fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(results, ", "));
  names_[id] = emitGeneric(node.shape, node.dtype, {{value(source), type(source), map, node.dtype}},
                           [](const std::vector<std::string> &args) { return args[0]; });
}

// Each part inserted at its offset along the axis of an empty tensor.
void FunctionEmitter::emitConcat(int id) {
  const Node &node = graph_.node(id);
  int64_t axis = node.ints[0];
  std::string result = emptyTensor(node.shape, node.dtype);
  int64_t offset = 0;
  for (int part : node.operands) {
    const Shape &shape = graph_.node(part).shape;
    std::vector<int64_t> offsets(shape.size(), 0), strides(shape.size(), 1);
    offsets[axis] = offset;
    std::string name = fresh();
    line("{} = tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", name, value(part), result,
         fmt::join(offsets, ", "), fmt::join(shape, ", "), fmt::join(strides, ", "), type(part), type(id));
    result = name;
    offset += shape[axis];
  }
  names_[id] = result;
}

// arith.constant dense<...>: a splat when every element is the same, the
// raw little-endian bytes in hex when one is not finite, else nested lists.
void FunctionEmitter::emitLiteral(int id) {
  const Node &node = graph_.node(id);
  const std::vector<double> &values = node.values;
  std::string body;
  bool splat = std::all_of(values.begin(), values.end(), [&](double v) {
    return std::bit_cast<uint64_t>(v) == std::bit_cast<uint64_t>(values.front());
  });
  bool finite = std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  if (splat) {
    body = scalarLiteral(values.front(), node.dtype);
  } else if (!finite) {
    HostTensor bytes = HostTensor::fromDoubles(node.dtype, node.shape, values);
    body = "\"0x";
    for (size_t i = 0; i < bytes.byteSize(); ++i)
      body += fmt::format("{:02X}", static_cast<const unsigned char *>(bytes.data())[i]);
    body += "\"";
  } else {
    body = nestedLiteral(values, node.shape, node.dtype);
  }
  std::string name = fresh();
  line("{} = arith.constant dense<{}> : {}", name, body, type(id));
  names_[id] = name;
}

std::string FunctionEmitter::nestedLiteral(const std::vector<double> &values, const Shape &shape, DType dtype) {
  std::string text;
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t flat = 0; flat < values.size(); ++flat) {
    // Open a bracket for every axis whose index just returned to 0.
    size_t opened = shape.size();
    while (opened > 0 && index[opened - 1] == 0)
      --opened;
    if (flat > 0)
      text += ", ";
    text += std::string(shape.size() - opened, '[');
    text += scalarLiteral(values[flat], dtype);
    size_t axis = shape.size();
    while (axis > 0) {
      --axis;
      if (++index[axis] < shape[axis])
        break;
      index[axis] = 0;
      text += ']';
    }
  }
  return text;
}

} // namespace mlpipe::fe::emitter
