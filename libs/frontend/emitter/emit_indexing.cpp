// Nodes whose generic bodies or offsets compute indices: Gather, Iota, Pad,
// Insert at a run-time position, DynamicSlice and DynamicUpdateSlice,
// PositionMask and Triu.
#include "frontend/emitter/function_emitter.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace mlpipe::fe::emitter {

// out[..., c] = table[clamp(ids[...]), c]. Ids outside the table are
// clamped into it, so a bad id can never read outside the table's memory
// (the reference clamps the same way).
void FunctionEmitter::emitGather(int id) {
  const Node &node = graph_.node(id);
  int table = node.operands[0], ids = node.operands[1];
  const Shape &tableShape = graph_.node(table).shape;
  size_t rank = node.shape.size();
  std::string zero = indexConstant(0), last = indexConstant(tableShape[0] - 1);
  std::string init = emptyTensor(node.shape, node.dtype);
  std::vector<std::string> dims, idsDims;
  for (size_t i = 0; i < rank; ++i)
    dims.push_back(fmt::format("d{}", i));
  idsDims.assign(dims.begin(), dims.end() - 1);
  std::string idsMap = fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(idsDims, ", "));
  std::string name = fresh(), idArg = fresh(), outArg = fresh();
  std::string idType = elementType(ids), et = elementType(id);
  line("{} = linalg.generic {{indexing_maps = [{}, {}], iterator_types = {}}} ins({} : {}) outs({} : {}) {{", name,
       idsMap, identityMap(rank), parallelIterators(rank), value(ids), type(ids), init, type(id));
  line("^bb0({}: {}, {}: {}):", idArg, idType, outArg, et);
  std::string row = fresh(), low = fresh(), clamped = fresh(), column = fresh(), element = fresh();
  line("  {} = arith.index_cast {} : {} to index", row, idArg, idType);
  line("  {} = arith.maxsi {}, {} : index", low, row, zero);
  line("  {} = arith.minsi {}, {} : index", clamped, low, last);
  line("  {} = linalg.index {} : index", column, rank - 1);
  line("  {} = tensor.extract {}[{}, {}] : {}", element, value(table), clamped, column, type(table));
  line("  linalg.yield {} : {}", element, et);
  line("}} -> {}", type(id));
  names_[id] = name;
}

// The index along axis ints[0], converted to the element type.
void FunctionEmitter::emitIota(int id) {
  const Node &node = graph_.node(id);
  names_[id] = emitGeneric(node.shape, node.dtype, {}, [&](const std::vector<std::string> &) {
    std::string index = bodyOp("linalg.index {} : index", node.ints[0]);
    std::string wide = bodyOp("arith.index_cast {} : index to i64", index);
    return convertScalar(wide, DType::i64, node.dtype);
  });
}

// out[i] = x[(i - low) / (interior + 1)] where that is a whole index into
// x, else the padding value: one generic over the result that reads x with
// tensor.extract at a clamped index and selects.
void FunctionEmitter::emitPad(int id) {
  const Node &node = graph_.node(id);
  int source = node.operands[0], padding = node.operands[1];
  const Shape &in = graph_.node(source).shape;
  size_t rank = node.shape.size();
  std::vector<GenericInput> inputs;
  std::string paddingScalar;
  if (isConstant(padding))
    paddingScalar = scalarConstant(padding, node.dtype);
  else
    inputs.push_back({value(padding), type(padding), broadcastMap({}, node.shape), node.dtype});
  std::string sourceValue = value(source), sourceType = type(source);
  names_[id] = emitGeneric(node.shape, node.dtype, inputs, [&](const std::vector<std::string> &args) {
    std::string padValue = inputs.empty() ? paddingScalar : args[0];
    std::string inside = bodyOp("arith.constant true");
    std::string zero = bodyOp("arith.constant 0 : index");
    std::vector<std::string> indices;
    for (size_t d = 0; d < rank; ++d) {
      int64_t low = node.ints[d], interior = node.ints[2 * rank + d];
      std::string index = bodyOp("linalg.index {} : index", d);
      std::string shifted = bodyOp("arith.subi {}, {} : index", index, bodyOp("arith.constant {} : index", low));
      std::string position = shifted;
      std::string valid = bodyOp("arith.cmpi sge, {}, {} : index", shifted, zero);
      if (interior > 0) {
        std::string step = bodyOp("arith.constant {} : index", interior + 1);
        position = bodyOp("arith.divsi {}, {} : index", shifted, step);
        std::string remainder = bodyOp("arith.remsi {}, {} : index", shifted, step);
        valid = bodyOp("arith.andi {}, {} : i1", valid, bodyOp("arith.cmpi eq, {}, {} : index", remainder, zero));
      }
      std::string last = bodyOp("arith.constant {} : index", in[d] - 1);
      valid = bodyOp("arith.andi {}, {} : i1", valid, bodyOp("arith.cmpi sle, {}, {} : index", position, last));
      inside = bodyOp("arith.andi {}, {} : i1", inside, valid);
      indices.push_back(
          bodyOp("arith.minsi {}, {} : index", bodyOp("arith.maxsi {}, {} : index", position, zero), last));
    }
    std::string element = bodyOp("tensor.extract {}[{}] : {}", sourceValue, fmt::join(indices, ", "), sourceType);
    return bodyOp("arith.select {}, {}, {} : {}", inside, element, padValue, mlirType(node.dtype));
  });
}

// The run-time position held by a rank-0 i32 tensor, as an index clamped
// to [0, last].
std::string FunctionEmitter::clampedPosition(int position, int64_t last) {
  std::string scalar = fresh(), asIndex = fresh(), low = fresh(), clamped = fresh();
  std::string zero = indexConstant(0), top = indexConstant(last);
  line("{} = tensor.extract {}[] : {}", scalar, value(position), type(position));
  line("{} = arith.index_cast {} : i32 to index", asIndex, scalar);
  line("{} = arith.maxsi {}, {} : index", low, asIndex, zero);
  line("{} = arith.minsi {}, {} : index", clamped, low, top);
  return clamped;
}

// base with update written at the offsets: tensor.insert_slice, in place
// when base is an in-out input.
void FunctionEmitter::emitInsert(int id) {
  const Node &node = graph_.node(id);
  int base = node.operands[0], update = node.operands[1];
  int64_t positionAxis = node.ints[0];
  const Shape &updateShape = graph_.node(update).shape;
  std::vector<std::string> offsets;
  for (size_t axis = 0; axis < node.shape.size(); ++axis)
    offsets.push_back(static_cast<int64_t>(axis) == positionAxis
                          ? clampedPosition(node.operands[2], node.shape[axis] - updateShape[axis])
                          : std::to_string(node.ints[axis + 1]));
  std::vector<int64_t> strides(node.shape.size(), 1);
  std::string name = fresh();
  line("{} = tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", name, value(update), value(base),
       fmt::join(offsets, ", "), fmt::join(updateShape, ", "), fmt::join(strides, ", "), type(update), type(id));
  names_[id] = name;
}

// The offset a dynamic slice's start gives along an axis, clamped to [0,
// limit] as XLA clamps it: a number for a constant start, else the index
// value computed from the rank-0 tensor. The start is widened to i64 by
// its signedness first, so that a narrow type's clamp cannot overflow and
// an unsigned one is never read as negative.
std::string FunctionEmitter::clampedStart(int start, int64_t limit) {
  const Node &node = graph_.node(start);
  if (node.kind == OpKind::Literal)
    return std::to_string(static_cast<int64_t>(std::clamp(node.values[0], 0.0, static_cast<double>(limit))));
  DType dtype = node.dtype;
  std::string scalar = fresh();
  line("{} = tensor.extract {}[] : {}", scalar, value(start), type(start));
  std::string wide = scalar;
  if (bitWidth(dtype) < 64) {
    wide = fresh();
    line("{} = arith.{} {} : {} to i64", wide, isUnsigned(dtype) ? "extui" : "extsi", scalar, mlirType(dtype));
  }
  std::string top = constant(static_cast<double>(limit), DType::i64), low = wide;
  if (!isUnsigned(dtype)) {
    low = fresh();
    line("{} = arith.maxsi {}, {} : i64", low, wide, constant(0.0, DType::i64));
  }
  std::string clamped = fresh(), asIndex = fresh();
  line("{} = arith.{} {}, {} : i64", clamped, isUnsigned(dtype) ? "minui" : "minsi", low, top);
  line("{} = arith.index_cast {} : i64 to index", asIndex, clamped);
  return asIndex;
}

// x[clamped starts ...][sizes] as tensor.extract_slice, and base with the
// update written there as tensor.insert_slice; after bufferization both
// are views at a run-time offset.
void FunctionEmitter::emitDynamicSlice(int id) {
  const Node &node = graph_.node(id);
  bool update = node.kind == OpKind::DynamicUpdateSlice;
  int whole = node.operands[0];
  const Shape &wholeShape = graph_.node(whole).shape;
  const Shape &box = update ? graph_.node(node.operands[1]).shape : node.shape;
  size_t firstStart = update ? 2 : 1;
  std::vector<std::string> offsets;
  for (size_t axis = 0; axis < wholeShape.size(); ++axis)
    offsets.push_back(clampedStart(node.operands[firstStart + axis], wholeShape[axis] - box[axis]));
  std::vector<int64_t> strides(wholeShape.size(), 1);
  std::string name = fresh();
  if (update)
    line("{} = tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", name, value(node.operands[1]), value(whole),
         fmt::join(offsets, ", "), fmt::join(box, ", "), fmt::join(strides, ", "), type(node.operands[1]), type(id));
  else
    line("{} = tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", name, value(whole), fmt::join(offsets, ", "),
         fmt::join(box, ", "), fmt::join(strides, ", "), type(whole), type(id));
  names_[id] = name;
}

// mask[j] = j > position ? masked : 0; per row, mask[r, 0, j] = j >
// positions[r floordiv rowsPerPosition] ? masked : 0, the positions an input
// read through that map.
void FunctionEmitter::emitPositionMask(int id) {
  const Node &node = graph_.node(id);
  int position = node.operands[0];
  if (node.shape.size() == 3) {
    std::string masked = constant(node.value, node.dtype), zero = constant(0.0, node.dtype);
    std::string init = emptyTensor(node.shape, node.dtype);
    std::string name = fresh(), inArg = fresh(), outArg = fresh(), et = elementType(id);
    std::string positionsMap = fmt::format("affine_map<(d0, d1, d2) -> (d0 floordiv {})>", node.ints[0]);
    line("{} = linalg.generic {{indexing_maps = [{}, {}], iterator_types = {}}} ins({} : {}) outs({} : {}) {{", name,
         positionsMap, identityMap(3), parallelIterators(3), value(position), type(position), init, type(id));
    line("^bb0({}: i32, {}: {}):", inArg, outArg, et);
    std::string j = fresh(), asI32 = fresh(), after = fresh(), result = fresh();
    line("  {} = linalg.index 2 : index", j);
    line("  {} = arith.index_cast {} : index to i32", asI32, j);
    line("  {} = arith.cmpi sgt, {}, {} : i32", after, asI32, inArg);
    line("  {} = arith.select {}, {}, {} : {}", result, after, masked, zero, et);
    line("  linalg.yield {} : {}", result, et);
    line("}} -> {}", type(id));
    names_[id] = name;
    return;
  }
  std::string masked = constant(node.value, node.dtype), zero = constant(0.0, node.dtype);
  std::string init = emptyTensor(node.shape, node.dtype);
  std::string name = fresh(), outArg = fresh(), et = elementType(id);
  line("{} = linalg.generic {{indexing_maps = [{}], iterator_types = {}}} outs({} : {}) {{", name, identityMap(1),
       parallelIterators(1), init, type(id));
  line("^bb0({}: {}):", outArg, et);
  std::string j = fresh(), scalar = fresh(), asIndex = fresh(), after = fresh(), result = fresh();
  line("  {} = linalg.index 0 : index", j);
  line("  {} = tensor.extract {}[] : {}", scalar, value(position), type(position));
  line("  {} = arith.index_cast {} : i32 to index", asIndex, scalar);
  line("  {} = arith.cmpi sgt, {}, {} : index", after, j, asIndex);
  line("  {} = arith.select {}, {}, {} : {}", result, after, masked, zero, et);
  line("  linalg.yield {} : {}", result, et);
  line("}} -> {}", type(id));
  names_[id] = name;
}

void FunctionEmitter::emitTriu(int id) {
  const Node &node = graph_.node(id);
  std::string k = indexConstant(node.ints[0]);
  std::string one = constant(1.0, node.dtype), zero = constant(0.0, node.dtype);
  std::string init = emptyTensor(node.shape, node.dtype);
  std::string name = fresh(), outArg = fresh();
  std::string et = elementType(id);
  line("{} = linalg.generic {{indexing_maps = [{}], iterator_types = {}}} outs({} : {}) {{", name, identityMap(2),
       parallelIterators(2), init, type(id));
  line("^bb0({}: {}):", outArg, et);
  std::string row = fresh(), column = fresh(), distance = fresh(), above = fresh(), result = fresh();
  line("  {} = linalg.index 0 : index", row);
  line("  {} = linalg.index 1 : index", column);
  line("  {} = arith.subi {}, {} : index", distance, column, row);
  line("  {} = arith.cmpi sge, {}, {} : index", above, distance, k);
  line("  {} = arith.select {}, {}, {} : {}", result, above, one, zero, et);
  line("  linalg.yield {} : {}", result, et);
  line("}} -> {}", type(id));
  names_[id] = name;
}

} // namespace mlpipe::fe::emitter
