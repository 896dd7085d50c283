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

// scatter(operand, scatter_indices, updates), update_window_dims,
// inserted_window_dims, scatter_dims_to_operand_dims, input_batching_dims,
// scatter_indices_batching_dims, index_vector_dim, to_apply: XLA's
// scatter of one operand. A window not wholly inside the operand is
// skipped; duplicates all combine (assign: the last in the updates'
// row-major order wins). indices_are_sorted and unique_indices are hints.
Tensor Builder::scatter(const Instruction &ins, const std::vector<const Value *> &operands) {
  if (ins.operands.size() > 3 && ins.operands.size() % 2 == 1)
    failOp(ins, fmt::format("a scatter of {} operands at once ({} and more) is not supported: mlpipe reads "
                            "scatters of one operand, its indices and its updates",
                            (ins.operands.size() - 1) / 2, describe(tensorOperand(ins, operands, 0))));
  expectOperands(ins, 3);
  Tensor operand = tensorOperand(ins, operands, 0), indices = tensorOperand(ins, operands, 1);
  Tensor updates = tensorOperand(ins, operands, 2);
  if (operand.dtype() != updates.dtype())
    failOp(ins, fmt::format("the operand is {} but the updates are {}", describe(operand), describe(updates)));
  int fn = scatterCombiner(ins, operand.dtype());
  SliceIndexing dims;
  dims.indexVectorDim = intValue(attribute(ins, "index_vector_dim"));
  dims.windowDims = optionalIntList(ins, "update_window_dims");
  dims.collapsedDims = optionalIntList(ins, "inserted_window_dims");
  dims.startIndexMap = optionalIntList(ins, "scatter_dims_to_operand_dims");
  dims.operandBatchingDims = optionalIntList(ins, "input_batching_dims");
  dims.indicesBatchingDims = optionalIntList(ins, "scatter_indices_batching_dims");
  try {
    return graph_->scatter(operand, indices, updates, dims, fn);
  } catch (const DiagnosticError &) {
    throw;
  } catch (const Error &error) {
    failOp(ins,
           fmt::format("{} at {} by {}: {}", describe(operand), describe(indices), describe(updates), error.what()));
  }
}

} // namespace mlpipe::fe::hlo
