// Reduce, ReduceWindow and MatMul nodes: linalg.reduce (or a generic for
// an inner axis), a generic over the windows' results, and linalg.matmul /
// linalg.batch_matmul, computed in f32 for 16-bit floats. A matmul reads 16-bit operands as they are stored (linalg
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

// out[o] = fn over the window at o: a generic over the result whose body
// walks the window with one scf.for per axis of more than one element,
// reading the input with tensor.extract at a clamped position and taking
// the reduction's identity where the position is padding or a hole. Each
// output element is one thread's loop on the GPU (a pooling window, or a
// running sum's prefix).
void FunctionEmitter::emitReduceWindow(int id) {
  const Node &node = graph_.node(id);
  int source = node.operands[0];
  const Shape &in = graph_.node(source).shape;
  size_t rank = in.size();
  auto at = [&](int block, size_t d) { return node.ints[block * rank + d]; };
  auto fn = static_cast<ReduceFn>(node.fn);
  DType compute = computeType(node.dtype);
  std::string et = mlirType(compute), sourceValue = value(source), sourceType = type(source);
  names_[id] = emitGeneric(node.shape, node.dtype, {}, [&](const std::vector<std::string> &) {
    auto index = [&](int64_t v) { return bodyOp("arith.constant {} : index", v); };
    std::string identity = bodyConstant(reductionIdentity(fn, compute), compute);
    std::vector<std::string> outIndex(rank), windowIndex(rank);
    for (size_t d = 0; d < rank; ++d)
      outIndex[d] = bodyOp("linalg.index {} : index", d);
    // Open a loop for every axis the window has more than one element on.
    std::string accumulator = identity;
    std::vector<std::string> loopResults, loopAccumulators;
    for (size_t d = 0; d < rank; ++d) {
      if (at(0, d) == 1) {
        windowIndex[d] = index(0);
        continue;
      }
      std::string result = fresh(), w = fresh(), carried = fresh();
      bodyLine("{} = scf.for {} = {} to {} step {} iter_args({} = {}) -> ({}) {{", result, w, index(0), index(at(0, d)),
               index(1), carried, accumulator, et);
      windowIndex[d] = w;
      accumulator = carried;
      loopResults.push_back(result);
    }
    // The input position of this window element, and whether it is one.
    std::string inside;
    std::vector<std::string> position(rank);
    for (size_t d = 0; d < rank; ++d) {
      int64_t stride = at(1, d), low = at(2, d), baseDilation = at(3, d), windowDilation = at(4, d);
      std::string p = bodyOp("arith.muli {}, {} : index", outIndex[d], index(stride));
      if (at(0, d) > 1)
        p = bodyOp("arith.addi {}, {} : index", p,
                   bodyOp("arith.muli {}, {} : index", windowIndex[d], index(windowDilation)));
      if (low != 0)
        p = bodyOp("arith.subi {}, {} : index", p, index(low));
      // Whether some window element of this axis falls in padding or a hole.
      int64_t last = (node.shape[d] - 1) * stride + (at(0, d) - 1) * windowDilation - low;
      bool mayMiss = baseDilation != 1 || low > 0 || last > in[d] - 1;
      std::string element = p;
      std::string valid;
      if (baseDilation != 1) {
        element = bodyOp("arith.divsi {}, {} : index", p, index(baseDilation));
        valid = bodyOp("arith.cmpi eq, {}, {} : index", bodyOp("arith.remsi {}, {} : index", p, index(baseDilation)),
                       index(0));
      }
      if (mayMiss) {
        std::string above = bodyOp("arith.cmpi sge, {}, {} : index", p, index(0));
        std::string below = bodyOp("arith.cmpi slt, {}, {} : index", element, index(in[d]));
        std::string here = bodyOp("arith.andi {}, {} : i1", above, below);
        valid = valid.empty() ? here : bodyOp("arith.andi {}, {} : i1", valid, here);
        element = bodyOp("arith.minsi {}, {} : index", bodyOp("arith.maxsi {}, {} : index", element, index(0)),
                         index(in[d] - 1));
        inside = inside.empty() ? valid : bodyOp("arith.andi {}, {} : i1", inside, valid);
      }
      position[d] = element;
    }
    std::string read =
        toCompute(bodyOp("tensor.extract {}[{}] : {}", sourceValue, fmt::join(position, ", "), sourceType), node.dtype);
    if (!inside.empty())
      read = bodyOp("arith.select {}, {}, {} : {}", inside, read, identity, et);
    std::string combined = bodyOp("{} {}, {} : {}", reductionOp(fn, compute), accumulator, read, et);
    // Close the loops, innermost first.
    for (size_t i = loopResults.size(); i-- > 0;) {
      bodyLine("scf.yield {} : {}", combined, et);
      bodyLine("}}");
      combined = loopResults[i];
    }
    return fromCompute(combined, node.dtype);
  });
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
