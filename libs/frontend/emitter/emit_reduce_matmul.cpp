// Reduce and MatMul nodes: linalg.reduce (or a generic for an inner axis)
// and linalg.matmul / linalg.batch_matmul, computed in f32 for 16-bit
// floats. A matmul reads 16-bit operands as they are stored (linalg
// extends each element to its f32 accumulator), so no pass widens them.
#include "frontend/emitter/function_emitter.h"

#include <fmt/ranges.h>

namespace mlpipe::fe::emitter {

void FunctionEmitter::emitReduce(int id) {
  const Node &node = graph_.node(id);
  int source = node.operands[0];
  int64_t axis = node.ints[0];
  bool keepdims = node.ints[1] != 0;
  Shape sourceShape = graph_.node(source).shape;
  Shape reduced = sourceShape;
  reduced.erase(reduced.begin() + axis);
  auto fn = static_cast<ReduceFn>(node.fn);
  DType compute = computeType(node.dtype);
  std::string input = valueAs(source, compute);
  // A reduction to a scalar keeps a unit axis while it runs, so that it
  // is a loop over one row like every other reduction, not a bare
  // scalar loop nest that has no parallel dimension to map to the GPU.
  bool toScalar = reduced.empty();
  if (toScalar) {
    Shape row{1, sourceShape[0]};
    input = reshapeValue(input, sourceShape, row, compute);
    sourceShape = row;
    reduced = {1};
    axis = 1;
  }
  std::string init = filledTensor(reduced, compute, reductionIdentity(fn, compute));
  std::string name = fresh(), in = fresh(), acc = fresh(), combined = fresh();
  std::string et = mlirType(compute);
  if (axis + 1 == static_cast<int64_t>(sourceShape.size())) {
    line("{} = linalg.reduce ins({} : {}) outs({} : {}) dimensions = [{}]", name, input,
         tensorType(sourceShape, compute), init, tensorType(reduced, compute), axis);
    line("  ({}: {}, {}: {}) {{", in, et, acc, et);
    line("    {} = {} {}, {} : {}", combined, reductionOp(fn, compute), in, acc, et);
    line("    linalg.yield {} : {}", combined, et);
    line("  }}");
  } else {
    // Another axis than the last: a generic that iterates the kept axes
    // first and the reduced one last, so the loops over the result stay
    // outermost and parallel, as they are for a last-axis reduction.
    size_t rank = sourceShape.size();
    std::vector<std::string> dims, sourceIndex, resultIndex;
    for (size_t i = 0; i < rank; ++i)
      dims.push_back(fmt::format("d{}", i));
    for (size_t i = 0; i < rank; ++i)
      sourceIndex.push_back(static_cast<int64_t>(i) == axis  ? dims[rank - 1]
                            : static_cast<int64_t>(i) < axis ? dims[i]
                                                             : dims[i - 1]);
    resultIndex.assign(dims.begin(), dims.end() - 1);
    std::vector<std::string> iterators(rank - 1, "\"parallel\"");
    iterators.push_back("\"reduction\"");
    line("{} = linalg.generic {{indexing_maps = [affine_map<({}) -> ({})>, affine_map<({}) -> ({})>], "
         "iterator_types = [{}]}} ins({} : {}) outs({} : {}) {{",
         name, fmt::join(dims, ", "), fmt::join(sourceIndex, ", "), fmt::join(dims, ", "), fmt::join(resultIndex, ", "),
         fmt::join(iterators, ", "), input, tensorType(sourceShape, compute), init, tensorType(reduced, compute));
    line("^bb0({}: {}, {}: {}):", in, et, acc, et);
    line("  {} = {} {}, {} : {}", combined, reductionOp(fn, compute), in, acc, et);
    line("  linalg.yield {} : {}", combined, et);
    line("}} -> {}", tensorType(reduced, compute));
  }
  name = convertedResult(name, reduced, compute, node.dtype);
  if (toScalar) {
    name = reshapeValue(name, reduced, {}, node.dtype);
    reduced = {};
  }
  if (keepdims) {
    keptReductions_[id] = {name, tensorType(reduced, node.dtype)};
    names_[id] = reshapeValue(name, reduced, node.shape, node.dtype);
  } else {
    names_[id] = name;
  }
}

void FunctionEmitter::emitMatMul(int id) {
  const Node &node = graph_.node(id);
  int a = node.operands[0], b = node.operands[1];
  const Shape &sa = graph_.node(a).shape, &sb = graph_.node(b).shape;
  DType compute = computeType(node.dtype);
  // A float operand whose elements the accumulator's type holds exactly (a
  // 16-bit one under f32) is read as stored; another (f64 under f32, an
  // integer) is converted to the accumulator's type first.
  auto operand = [&](int input, DType &type) {
    DType stored = graph_.node(input).dtype;
    type = isFloat(stored) && computeType(stored) == compute ? stored : compute;
    return valueAs(input, type);
  };
  DType lhsElement, rhsElement;
  std::string lhsValue = operand(a, lhsElement), rhsValue = operand(b, rhsElement);
  std::string lhsType = tensorType(sa, lhsElement), rhsType = tensorType(sb, rhsElement);
  if (sa.size() == 3 && sb.size() == 3) {
    std::string init = filledTensor(node.shape, compute, 0.0);
    std::string name = fresh();
    std::string resultType = tensorType(node.shape, compute);
    line("{} = linalg.batch_matmul ins({}, {} : {}, {}) outs({} : {}) -> {}", name, lhsValue, rhsValue, lhsType,
         rhsType, init, resultType, resultType);
    names_[id] = convertedResult(name, node.shape, compute, node.dtype);
    return;
  }
  // [..., M, K] x [K, N]: fold the leading dimensions into M.
  Shape flatA{numElements(sa) / sa.back(), sa.back()};
  Shape flatOut{flatA[0], sb[1]};
  std::string lhs = reshapeValue(lhsValue, sa, flatA, lhsElement);
  std::string init = filledTensor(flatOut, compute, 0.0);
  std::string name = fresh();
  line("{} = linalg.matmul ins({}, {} : {}, {}) outs({} : {}) -> {}", name, lhs, rhsValue,
       tensorType(flatA, lhsElement), rhsType, init, tensorType(flatOut, compute), tensorType(flatOut, compute));
  std::string result = reshapeValue(name, flatOut, node.shape, compute);
  names_[id] = convertedResult(result, node.shape, compute, node.dtype);
}

} // namespace mlpipe::fe::emitter
