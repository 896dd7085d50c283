// HLO's scatter, and gather in its general form, recorded into the
// front-end graph as its GatherSlices and Scatter nodes (graph.h,
// SliceIndexing; frontend/scatter_gather.h lowers them).
#include "frontend/hlo/hlo_builder.h"

#include "support/error.h"

namespace mlpipe::fe::hlo {

// gather(operand, start_indices), offset_dims, collapsed_slice_dims,
// start_index_map, operand_batching_dims, start_indices_batching_dims,
// index_vector_dim, slice_sizes: XLA's gather, each start clamped so its
// slice stays inside the operand. indices_are_sorted is a hint.
Tensor Builder::gatherSlices(const Instruction &ins, Tensor operand, Tensor indices) {
  SliceIndexing dims;
  dims.indexVectorDim = intValue(attribute(ins, "index_vector_dim"));
  dims.windowDims = optionalIntList(ins, "offset_dims");
  dims.collapsedDims = optionalIntList(ins, "collapsed_slice_dims");
  dims.startIndexMap = optionalIntList(ins, "start_index_map");
  dims.operandBatchingDims = optionalIntList(ins, "operand_batching_dims");
  dims.indicesBatchingDims = optionalIntList(ins, "start_indices_batching_dims");
  dims.sliceSizes = intList(attribute(ins, "slice_sizes"));
  try {
    return graph_->gatherSlices(operand, indices, dims);
  } catch (const DiagnosticError &) {
    throw;
  } catch (const Error &error) {
    failOp(ins, fmt::format("{} at {}: {}", describe(operand), describe(indices), error.what()));
  }
}

// What a scatter's to_apply does with the operand's element (parameter 0)
// and the update (parameter 1), scalars of `dtype`: returns the update
// (kScatterAssign), or one of reduce's reducers (a ReduceFn).
int Builder::scatterCombiner(const Instruction &ins, DType dtype) const {
  const Attribute &toApply = attribute(ins, "to_apply");
  const Computation &region = module_.computations[computationNamed(toApply)];
  const Instruction &root = region.instructions[region.root];
  if (root.opcode == "parameter") {
    if (root.parameterNumber != 1 || parameterCount(region) != 2)
      failOp(ins, fmt::format("to_apply=%{} returns its parameter {}: mlpipe reads a combiner that returns the "
                              "update (parameter 1), or an add, maximum, minimum, multiply, and or or of both",
                              region.name, root.parameterNumber));
    for (const Instruction &member : region.instructions)
      if (member.opcode == "parameter" && member.shape &&
          (member.shape->tuple || !member.shape->dims.empty() || elementType(*member.shape) != dtype))
        failOp(ins, fmt::format("to_apply=%{} takes %{} of another shape than the scatter's elements, {}[]",
                                region.name, member.name, hloTypeName(dtype)));
    return kScatterAssign;
  }
  static const std::set<std::string_view> combiners = {"add", "multiply", "maximum", "minimum", "and", "or"};
  if (!combiners.count(root.opcode))
    failOp(ins, fmt::format("to_apply=%{} computes {} of its parameters: mlpipe reads a combiner that is an add, "
                            "multiply, maximum, minimum, and or or of both, or that returns the update (parameter 1)",
                            region.name, printable(root.opcode)));
  return static_cast<int>(reduction(ins, toApply, dtype));
}

// What a scatter of several operands does with each: its to_apply takes
// the operands' elements (parameters 0 .. n-1) and the updates' (n .. 2n-1)
// and returns a tuple, whose element i must be operand i's own combiner:
// parameter n+i (assign), or an add, multiply, maximum, minimum, and or or
// of parameters i and n+i. A combiner that mixes operands (an argmax-like
// scatter) is refused, naming the element.
std::vector<int> Builder::scatterCombiners(const Instruction &ins, const std::vector<DType> &dtypes) const {
  const Attribute &toApply = attribute(ins, "to_apply");
  const Computation &region = module_.computations[computationNamed(toApply)];
  auto n = static_cast<int64_t>(dtypes.size());
  if (parameterCount(region) != dtypes.size() * 2)
    failOp(ins, fmt::format("to_apply=%{} takes {} parameters, but a scatter of {} operands passes {}", region.name,
                            parameterCount(region), n, 2 * n));
  for (const Instruction &member : region.instructions) {
    if (member.opcode != "parameter" || !member.shape)
      continue;
    DType dtype = dtypes.at(static_cast<size_t>(member.parameterNumber % n));
    if (member.shape->tuple || !member.shape->dims.empty() || elementType(*member.shape) != dtype)
      failOp(ins, fmt::format("to_apply=%{} takes %{} of another shape than its operand's elements, {}[]", region.name,
                              member.name, hloTypeName(dtype)));
  }
  const Instruction &root = region.instructions[region.root];
  if (root.opcode != "tuple" || static_cast<int64_t>(root.operands.size()) != n)
    failOp(ins, fmt::format("to_apply=%{} returns {}, not a tuple of {} elements, one per operand", region.name,
                            printable(root.opcode), n));
  // The parameter number of an instruction of the region, or -1.
  auto parameterOf = [&](const std::string &name) -> int64_t {
    auto found = region.byName.find(name);
    if (found == region.byName.end() || region.instructions[found->second].opcode != "parameter")
      return -1;
    return region.instructions[found->second].parameterNumber;
  };
  static const std::map<std::string_view, ReduceFn> kinds = {{"add", ReduceFn::Sum},     {"maximum", ReduceFn::Max},
                                                             {"minimum", ReduceFn::Min}, {"multiply", ReduceFn::Prod},
                                                             {"and", ReduceFn::And},     {"or", ReduceFn::Or}};
  std::vector<int> fns;
  for (int64_t i = 0; i < n; ++i) {
    const std::string &name = root.operands[static_cast<size_t>(i)].name;
    if (parameterOf(name) == n + i) {
      fns.push_back(kScatterAssign);
      continue;
    }
    auto found = region.byName.find(name);
    const Instruction *element = found == region.byName.end() ? nullptr : &region.instructions[found->second];
    auto kind = element ? kinds.find(element->opcode) : kinds.end();
    std::set<int64_t> parameters;
    if (element)
      for (const Operand &operand : element->operands)
        parameters.insert(parameterOf(operand.name));
    if (kind == kinds.end() || element->operands.size() != 2 || parameters != std::set<int64_t>{i, n + i})
      failOp(ins, fmt::format("element {} of to_apply=%{}'s result (%{}) is not operand {}'s own combiner: mlpipe "
                              "reads each element as parameter {} (the update), or an add, multiply, maximum, "
                              "minimum, and or or of parameters {} and {}",
                              i, region.name, name, i, n + i, i, n + i));
    if ((kind->second == ReduceFn::And || kind->second == ReduceFn::Or) && isFloat(dtypes[static_cast<size_t>(i)]))
      failOp(ins, fmt::format("element {} of to_apply=%{}'s result combines by {}, which applies to pred and "
                              "integers, not {}",
                              i, region.name, element->opcode, hloTypeName(dtypes[static_cast<size_t>(i)])));
    fns.push_back(static_cast<int>(kind->second));
  }
  return fns;
}

// scatter(operands..., scatter_indices, updates...), update_window_dims,
// inserted_window_dims, scatter_dims_to_operand_dims, input_batching_dims,
// scatter_indices_batching_dims, index_vector_dim, to_apply: XLA's
// scatter. A window not wholly inside the operand is skipped; duplicates
// all combine (assign: the last in the updates' row-major order wins).
// indices_are_sorted and unique_indices are hints. A scatter of n operands
// whose combiner treats each operand on its own (scatterCombiners) is n
// scatters at the same indices, its result their tuple.
Value Builder::scatter(const Instruction &ins, const std::vector<const Value *> &operands) {
  if (ins.operands.size() < 3 || ins.operands.size() % 2 == 0)
    failOp(ins,
           fmt::format("a scatter takes n operands, its indices and n updates, not {} operands", ins.operands.size()));
  size_t n = (ins.operands.size() - 1) / 2;
  Tensor indices = tensorOperand(ins, operands, n);
  std::vector<Tensor> targets, updates;
  std::vector<DType> dtypes;
  for (size_t i = 0; i < n; ++i) {
    targets.push_back(tensorOperand(ins, operands, i));
    updates.push_back(tensorOperand(ins, operands, n + 1 + i));
    dtypes.push_back(targets.back().dtype());
    if (targets[i].dtype() != updates[i].dtype())
      failOp(ins, fmt::format("the operand is {} but the updates are {}", describe(targets[i]), describe(updates[i])));
    if (targets[i].shape() != targets[0].shape() || updates[i].shape() != updates[0].shape())
      failOp(ins, fmt::format("operand {} ({} by {}) is not of the shapes of operand 0 ({} by {})", i,
                              describe(targets[i]), describe(updates[i]), describe(targets[0]), describe(updates[0])));
  }
  std::vector<int> fns = n == 1 ? std::vector<int>{scatterCombiner(ins, dtypes[0])} : scatterCombiners(ins, dtypes);
  SliceIndexing dims;
  dims.indexVectorDim = intValue(attribute(ins, "index_vector_dim"));
  dims.windowDims = optionalIntList(ins, "update_window_dims");
  dims.collapsedDims = optionalIntList(ins, "inserted_window_dims");
  dims.startIndexMap = optionalIntList(ins, "scatter_dims_to_operand_dims");
  dims.operandBatchingDims = optionalIntList(ins, "input_batching_dims");
  dims.indicesBatchingDims = optionalIntList(ins, "scatter_indices_batching_dims");
  std::vector<Tensor> results;
  for (size_t i = 0; i < n; ++i) {
    try {
      results.push_back(graph_->scatter(targets[i], indices, updates[i], dims, fns[i]));
    } catch (const DiagnosticError &) {
      throw;
    } catch (const Error &error) {
      failOp(ins, fmt::format("{} at {} by {}: {}", describe(targets[i]), describe(indices), describe(updates[i]),
                              error.what()));
    }
  }
  if (n == 1)
    return tensorValue(results[0]);
  Value tuple;
  tuple.tensor.reset();
  for (Tensor x : results)
    tuple.elements.push_back(tensorValue(x));
  return tuple;
}

} // namespace mlpipe::fe::hlo
