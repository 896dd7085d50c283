// HLO's reduce, dot and gather recorded into the front-end graph: the ops
// whose attributes say how axes combine.
#include "frontend/hlo/hlo_builder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mlpipe::fe::hlo {

// reduce, reduce-window, dot, convolution, gather and scatter; nullopt for any other opcode.
std::optional<Value> Builder::buildReduceDotGather(const Instruction &ins, const std::vector<const Value *> &operands) {
  const std::string &op = ins.opcode;
  auto operand = [&](size_t i) { return tensorOperand(ins, operands, i); };

  if (op == "reduce" && ins.operands.size() == 4)
    return argReduce(ins, operands);
  if (op == "reduce")
    return tensorValue(reduce(ins, operands));
  if (op == "reduce-window")
    return tensorValue(reduceWindow(ins, operands));
  if (op == "dot") {
    expectOperands(ins, 2);
    return tensorValue(dot(ins, operand(0), operand(1)));
  }
  if (op == "convolution") {
    expectOperands(ins, 2);
    return tensorValue(convolution(ins, operand(0), operand(1)));
  }
  if (op == "gather") {
    expectOperands(ins, 2);
    return tensorValue(gather(ins, operand(0), operand(1)));
  }
  if (op == "scatter")
    return scatter(ins, operands);
  return std::nullopt;
}

// The reduction a to_apply computation performs: an add, maximum, minimum,
// multiply, and or or (the last two on pred and integers: XLA's all and
// any) of its two parameters, each a scalar of the reduced type `dtype`, as
// its result.
ReduceFn Builder::reduction(const Instruction &ins, const Attribute &toApply, DType dtype) const {
  const Computation &region = module_.computations[computationNamed(toApply)];
  for (const Instruction &member : region.instructions) {
    bool typed = member.opcode == "parameter" || &member == &region.instructions[region.root];
    if (!typed || !member.shape)
      continue;
    if (member.shape->tuple || !member.shape->dims.empty() || elementType(*member.shape) != dtype)
      failOp(ins, fmt::format("to_apply=%{} takes or returns {} (%{}), but the reduce's input is {}; the reducer "
                              "must take and return scalars of the input's type",
                              region.name,
                              member.shape->tuple
                                  ? std::string("a tuple")
                                  : printable(member.shape->typeName) + (member.shape->dims.empty() ? "[]" : "[...]"),
                              member.name, hloTypeName(dtype)));
  }
  const Instruction &root = region.instructions[region.root];
  static const std::map<std::string_view, ReduceFn> kinds = {{"add", ReduceFn::Sum},     {"maximum", ReduceFn::Max},
                                                             {"minimum", ReduceFn::Min}, {"multiply", ReduceFn::Prod},
                                                             {"and", ReduceFn::And},     {"or", ReduceFn::Or}};
  auto kind = kinds.find(root.opcode);
  std::set<int64_t> parameters;
  for (const Operand &operand : root.operands) {
    auto found = region.byName.find(operand.name);
    if (found != region.byName.end() && region.instructions[found->second].opcode == "parameter")
      parameters.insert(region.instructions[found->second].parameterNumber);
  }
  if (kind == kinds.end() || root.operands.size() != 2 || parameters != std::set<int64_t>{0, 1} ||
      parameterCount(region) != 2)
    failOp(ins, fmt::format("to_apply=%{} is not an add, maximum, minimum, multiply, and or or of its two "
                            "parameters, the reductions mlpipe reads",
                            region.name));
  if ((kind->second == ReduceFn::And || kind->second == ReduceFn::Or) && isFloat(dtype))
    failOp(ins, fmt::format("to_apply=%{} reduces by {}, which applies to pred and integers, not {}", region.name,
                            root.opcode, hloTypeName(dtype)));
  return kind->second;
}

bool Builder::isIdentity(ReduceFn fn, double value, DType dtype) {
  switch (fn) {
  case ReduceFn::Sum:
    return value == 0;
  case ReduceFn::Prod:
    return value == 1;
  case ReduceFn::Max:
    return value == -INFINITY || (isInteger(dtype) && value == integerMinimum(dtype));
  case ReduceFn::Min:
    return value == INFINITY || (isInteger(dtype) && value == integerMaximum(dtype));
  case ReduceFn::And: // all bits set
    return value == integerValue(dtype, ~uint64_t(0));
  case ReduceFn::Or:
    return value == 0;
  }
  return false;
}

// The elementwise function that combines two partial results of `fn`.
BinaryFn Builder::combiningFunction(ReduceFn fn) {
  static const std::map<ReduceFn, BinaryFn> combine = {{ReduceFn::Sum, BinaryFn::Add}, {ReduceFn::Max, BinaryFn::Max},
                                                       {ReduceFn::Min, BinaryFn::Min}, {ReduceFn::Prod, BinaryFn::Mul},
                                                       {ReduceFn::And, BinaryFn::And}, {ReduceFn::Or, BinaryFn::Or}};
  return combine.at(fn);
}

// A reduce's dimensions={...}, in increasing order, each once and in range.
std::vector<int64_t> Builder::reducedAxes(const Instruction &ins, int64_t rank) const {
  std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
  std::sort(dimensions.begin(), dimensions.end());
  if (std::adjacent_find(dimensions.begin(), dimensions.end()) != dimensions.end())
    failOp(ins, "dimensions= names an axis twice");
  for (int64_t axis : dimensions)
    if (axis < 0 || axis >= rank)
      failOp(ins, fmt::format("axis {} is out of range for an input of rank {}", axis, rank));
  return dimensions;
}

// reduce(x, init), dimensions={...}: one graph reduction per axis, from
// the last; an init that is not the reduction's identity is combined in.
Tensor Builder::reduce(const Instruction &ins, const std::vector<const Value *> &operands) {
  if (ins.operands.size() != 2)
    failOp(ins, fmt::format("a reduce of {} inputs at once is not supported: mlpipe reads reduces of one input, and "
                            "of two as argmax or argmin",
                            ins.operands.size() / 2));
  Tensor x = tensorOperand(ins, operands, 0), init = tensorOperand(ins, operands, 1);
  if (init.rank() != 0)
    failOp(ins, fmt::format("the initial value must be a scalar, not {}", describe(init)));
  if (init.dtype() != x.dtype())
    failOp(ins, fmt::format("the initial value is {} but the input is {}", hloTypeName(init.dtype()),
                            hloTypeName(x.dtype())));
  ReduceFn fn = reduction(ins, attribute(ins, "to_apply"), x.dtype());
  std::vector<int64_t> dimensions = reducedAxes(ins, x.rank());
  Tensor result = x;
  for (auto axis = dimensions.rbegin(); axis != dimensions.rend(); ++axis)
    result = graph_->reduce(fn, result, *axis, false);
  const Node &initNode = graph_->node(init.id());
  if (initNode.kind == OpKind::Constant && isIdentity(fn, initNode.value, init.dtype()))
    return result;
  return graph_->binary(combiningFunction(fn), result, init);
}

// dot with general dimension numbers: both operands transposed to
// [batch, free, contracting] order and reshaped to one batch, M, K (and K,
// N) axis, multiplied by the graph's (batch) matmul, and the result
// reshaped to [batch..., lhs free..., rhs free...].
Tensor Builder::dot(const Instruction &ins, Tensor lhs, Tensor rhs) {
  if (findAttribute(ins, "sparsity"))
    failOp(ins, "sparse dots are not supported");
  DotDimensions dims{optionalIntList(ins, "lhs_batch_dims"), optionalIntList(ins, "rhs_batch_dims"),
                     optionalIntList(ins, "lhs_contracting_dims"), optionalIntList(ins, "rhs_contracting_dims")};
  std::optional<DType> result;
  if (ins.shape && !ins.shape->tuple)
    result = elementType(*ins.shape);
  return dotGeneral(ins, lhs, rhs, dims, result);
}

// The dot of `dims`, its operands converted to `result` first when given.
Tensor Builder::dotGeneral(const Instruction &ins, Tensor lhs, Tensor rhs, const DotDimensions &dims,
                           std::optional<DType> result) {
  const std::vector<int64_t> &lhsBatch = dims.lhsBatch, &rhsBatch = dims.rhsBatch;
  const std::vector<int64_t> &lhsContracting = dims.lhsContracting, &rhsContracting = dims.rhsContracting;
  if (lhsBatch.size() != rhsBatch.size())
    failOp(ins, fmt::format("lhs has {} batch dimensions and rhs {}", lhsBatch.size(), rhsBatch.size()));
  if (lhsContracting.size() != rhsContracting.size())
    failOp(ins,
           fmt::format("lhs has {} contracting dimensions and rhs {}", lhsContracting.size(), rhsContracting.size()));
  auto freeAxes = [&](Tensor t, const std::vector<int64_t> &batch, const std::vector<int64_t> &contracting,
                      const char *side) {
    std::vector<bool> used(static_cast<size_t>(t.rank()), false);
    for (const std::vector<int64_t> *axes : {&batch, &contracting})
      for (int64_t axis : *axes) {
        if (axis < 0 || axis >= t.rank() || used[axis])
          failOp(ins, fmt::format("{} dimension {} is out of range or named twice for {}", side, axis, describe(t)));
        used[axis] = true;
      }
    std::vector<int64_t> free;
    for (int64_t axis = 0; axis < t.rank(); ++axis)
      if (!used[axis])
        free.push_back(axis);
    return free;
  };
  std::vector<int64_t> lhsFree = freeAxes(lhs, lhsBatch, lhsContracting, "lhs");
  std::vector<int64_t> rhsFree = freeAxes(rhs, rhsBatch, rhsContracting, "rhs");
  for (size_t i = 0; i < lhsBatch.size(); ++i)
    if (lhs.shape()[lhsBatch[i]] != rhs.shape()[rhsBatch[i]])
      failOp(ins, fmt::format("batch dimensions differ: lhs dimension {} has {} elements, rhs dimension {} has {}",
                              lhsBatch[i], lhs.shape()[lhsBatch[i]], rhsBatch[i], rhs.shape()[rhsBatch[i]]));
  for (size_t i = 0; i < lhsContracting.size(); ++i)
    if (lhs.shape()[lhsContracting[i]] != rhs.shape()[rhsContracting[i]])
      failOp(ins, fmt::format("contracting dimensions differ: lhs dimension {} has {} elements, rhs dimension {} "
                              "has {}",
                              lhsContracting[i], lhs.shape()[lhsContracting[i]], rhsContracting[i],
                              rhs.shape()[rhsContracting[i]]));
  // Mixed types (bf16 x bf16 -> f32, say) multiply in the result's type.
  if (result) {
    lhs = graph_->convert(lhs, *result);
    rhs = graph_->convert(rhs, *result);
  }
  auto sizes = [](Tensor t, const std::vector<int64_t> &axes) {
    Shape out;
    for (int64_t axis : axes)
      out.push_back(t.shape()[axis]);
    return out;
  };
  auto product = [](const Shape &shape) { return numElements(shape); };
  Shape batch = sizes(lhs, lhsBatch), m = sizes(lhs, lhsFree), n = sizes(rhs, rhsFree);
  int64_t k = product(sizes(lhs, lhsContracting));
  auto arranged = [&](Tensor t, std::vector<int64_t> order, Shape shape) {
    std::vector<int64_t> identity(order.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (order != identity)
      t = graph_->transpose(t, order);
    return graph_->reshape(t, shape);
  };
  std::vector<int64_t> lhsOrder = lhsBatch, rhsOrder = rhsBatch;
  lhsOrder.insert(lhsOrder.end(), lhsFree.begin(), lhsFree.end());
  lhsOrder.insert(lhsOrder.end(), lhsContracting.begin(), lhsContracting.end());
  rhsOrder.insert(rhsOrder.end(), rhsContracting.begin(), rhsContracting.end());
  rhsOrder.insert(rhsOrder.end(), rhsFree.begin(), rhsFree.end());
  Shape lhsShape{product(m), k}, rhsShape{k, product(n)};
  if (!batch.empty()) {
    lhsShape.insert(lhsShape.begin(), product(batch));
    rhsShape.insert(rhsShape.begin(), product(batch));
  }
  Tensor matrix = graph_->matmul(arranged(lhs, lhsOrder, lhsShape), arranged(rhs, rhsOrder, rhsShape));
  Shape out = batch;
  out.insert(out.end(), m.begin(), m.end());
  out.insert(out.end(), n.begin(), n.end());
  return graph_->reshape(matrix, out);
}

// gather: the embedding lookup (whole rows of the operand's first axis
// picked by s32 or s64 ids, the row's axes last in the result) as the
// graph's row gather, its fast path on every target; any other form as
// XLA's general gather (hlo_ops_scatter_gather.cpp).
Tensor Builder::gather(const Instruction &ins, Tensor table, Tensor indices) {
  std::vector<int64_t> offsetDims = optionalIntList(ins, "offset_dims");
  std::vector<int64_t> collapsed = optionalIntList(ins, "collapsed_slice_dims");
  std::vector<int64_t> startIndexMap = optionalIntList(ins, "start_index_map");
  std::vector<int64_t> sliceSizes = optionalIntList(ins, "slice_sizes");
  int64_t indexVectorDim = intValue(attribute(ins, "index_vector_dim"));
  auto general = [&] { return gatherSlices(ins, table, indices); };
  if (!optionalIntList(ins, "operand_batching_dims").empty() ||
      !optionalIntList(ins, "start_indices_batching_dims").empty() ||
      (indices.dtype() != DType::i32 && indices.dtype() != DType::i64) || table.rank() < 1)
    return general();
  Shape expectedSizes = table.shape();
  expectedSizes[0] = 1;
  if (collapsed != std::vector<int64_t>{0} || startIndexMap != std::vector<int64_t>{0} || sliceSizes != expectedSizes)
    return general();
  if (indexVectorDim < 0 || indexVectorDim > indices.rank())
    return general();
  Shape batch = indices.shape();
  if (indexVectorDim < indices.rank()) {
    if (batch[indexVectorDim] != 1)
      return general();
    batch.erase(batch.begin() + indexVectorDim);
  }
  std::vector<int64_t> trailing(static_cast<size_t>(table.rank() - 1));
  std::iota(trailing.begin(), trailing.end(), static_cast<int64_t>(batch.size()));
  if (offsetDims != trailing)
    return general();
  Shape row(table.shape().begin() + 1, table.shape().end());
  int64_t width = numElements(row);
  Tensor rows = graph_->reshape(table, {table.shape()[0], width});
  Tensor gathered = graph_->gather(rows, graph_->reshape(indices, batch));
  Shape out = batch;
  out.insert(out.end(), row.begin(), row.end());
  return graph_->reshape(gathered, out);
}

} // namespace mlpipe::fe::hlo
