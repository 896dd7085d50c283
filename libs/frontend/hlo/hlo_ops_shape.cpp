// HLO ops that move elements without computing them (broadcast, reshape,
// bitcast, transpose, reverse, slice, dynamic-slice, dynamic-update-slice,
// concatenate, pad, iota) recorded into the front-end graph.
#include "frontend/hlo/hlo_builder.h"

#include <numeric>

namespace mlpipe::fe::hlo {

// iota, broadcast, reshape, bitcast, transpose, slice, concatenate, pad,
// dynamic-slice and dynamic-update-slice; nullopt for any other opcode.
std::optional<Value> Builder::buildShapeOp(const Instruction &ins, const std::vector<const Value *> &operands) {
  const std::string &op = ins.opcode;
  Graph &g = *graph_;
  auto operand = [&](size_t i) { return tensorOperand(ins, operands, i); };

  if (op == "iota") {
    expectOperands(ins, 0);
    const ShapeText &shape = arrayShape(ins);
    DType dtype = elementType(shape);
    return tensorValue(g.iota(shape.dims, dtype, intValue(attribute(ins, "iota_dimension"))));
  }
  if (op == "broadcast") {
    expectOperands(ins, 1);
    const ShapeText &shape = arrayShape(ins);
    elementType(shape);
    return tensorValue(g.broadcast(operand(0), shape.dims, intList(attribute(ins, "dimensions"))));
  }
  if (op == "reshape") {
    expectOperands(ins, 1);
    const ShapeText &shape = arrayShape(ins);
    elementType(shape);
    return tensorValue(g.reshape(operand(0), shape.dims));
  }
  if (op == "bitcast") {
    expectOperands(ins, 1);
    const ShapeText &shape = arrayShape(ins);
    DType dtype = elementType(shape);
    if (dtype != operand(0).dtype())
      failOp(ins, "a bitcast between element types is a bitcast-convert, which mlpipe does not support");
    return tensorValue(bitcast(ins, *operands[0], shape));
  }
  if (op == "transpose") {
    expectOperands(ins, 1);
    return tensorValue(g.transpose(operand(0), intList(attribute(ins, "dimensions"))));
  }
  if (op == "reverse") {
    expectOperands(ins, 1);
    return tensorValue(reverse(ins, operand(0)));
  }
  if (op == "slice") {
    expectOperands(ins, 1);
    return tensorValue(slice(ins, operand(0)));
  }
  if (op == "concatenate") {
    if (ins.operands.empty())
      failOp(ins, "it needs at least one operand");
    std::vector<Tensor> parts;
    for (size_t i = 0; i < operands.size(); ++i)
      parts.push_back(operand(i));
    std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
    if (dimensions.size() != 1)
      failOp(ins, "dimensions= must name one axis");
    if (dimensions[0] < 0)
      failOp(ins, fmt::format("axis {} is negative", dimensions[0]));
    return tensorValue(g.concat(parts, dimensions[0]));
  }
  if (op == "pad") {
    expectOperands(ins, 2);
    return tensorValue(pad(ins, operand(0), operand(1)));
  }
  if (op == "dynamic-slice" || op == "dynamic-update-slice")
    return tensorValue(dynamicSlice(ins, operands));
  return std::nullopt;
}

// A bitcast reinterprets memory: its operand's elements in their physical
// order (major to minor, as its layout lays them out) are the result's in
// the result's physical order. So it is read as the operand transposed into
// its physical order, reshaped to the result's physical shape, and
// transposed back to the result's logical order; between row-major layouts
// that is a reshape. A layout with tiling or a memory space (after ':')
// lays elements out in an order this does not model, and is refused.
Tensor Builder::bitcast(const Instruction &ins, const Value &operand, const ShapeText &shape) {
  Tensor x = *operand.tensor;
  std::optional<std::vector<int64_t>> resultLayout = plainLayout(shape);
  bool operandTiled = !operand.defaultLayout && operand.minorToMajor.empty();
  if (!resultLayout || operandTiled)
    failOp(ins, fmt::format("a bitcast of {} to {} with a tiled layout (or a memory space) reinterprets memory in "
                            "an order mlpipe does not model; it reads bitcasts between layouts that permute axes",
                            describe(x), hloShape(x.dtype(), shape.dims)));
  // Major-to-minor axis order of a layout (empty: row-major).
  auto physicalOrder = [](const std::vector<int64_t> &minorToMajor, int64_t rank) {
    std::vector<int64_t> order(static_cast<size_t>(rank));
    if (minorToMajor.empty())
      std::iota(order.begin(), order.end(), 0);
    else
      order.assign(minorToMajor.rbegin(), minorToMajor.rend());
    return order;
  };
  auto isIdentity = [](const std::vector<int64_t> &order) {
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] != static_cast<int64_t>(i))
        return false;
    return true;
  };
  std::vector<int64_t> from = physicalOrder(operand.minorToMajor, x.rank());
  std::vector<int64_t> to = physicalOrder(*resultLayout, static_cast<int64_t>(shape.dims.size()));
  if (numElements(shape.dims) != numElements(x.shape()))
    failOp(ins, fmt::format("it reinterprets {} as {}, which holds a different number of elements", describe(x),
                            hloShape(x.dtype(), shape.dims)));
  Tensor physical = isIdentity(from) ? x : graph_->transpose(x, from);
  Shape physicalShape;
  for (int64_t axis : to)
    physicalShape.push_back(shape.dims[static_cast<size_t>(axis)]);
  Tensor reshaped = graph_->reshape(physical, physicalShape);
  if (isIdentity(to))
    return reshaped;
  // Axis d of the result is axis j of the physical array where to[j] = d.
  std::vector<int64_t> back(to.size());
  for (size_t j = 0; j < to.size(); ++j)
    back[static_cast<size_t>(to[j])] = static_cast<int64_t>(j);
  return graph_->transpose(reshaped, back);
}

// slice={[start:limit(:stride)?], ...}: one contiguous axis maps onto the
// graph's slice, anything else onto its strided slice.
Tensor Builder::slice(const Instruction &ins, Tensor x) {
  const Attribute &ranges = attribute(ins, "slice");
  std::vector<int64_t> starts, limits, strides;
  parseAttribute(ranges, [&](Cursor &in) {
    in.expect('{', "'{' opening the slice ranges");
    if (!in.consume('}')) {
      do {
        in.expect('[', "'[' opening a range");
        starts.push_back(in.integer("a start"));
        in.expect(':', "':' after the start");
        limits.push_back(in.integer("a limit"));
        strides.push_back(in.consume(':') ? in.integer("a stride") : 1);
        in.expect(']', "']' closing the range");
      } while (in.consume(','));
      in.expect('}', "',' or '}' in the slice ranges");
    }
    return 0;
  });
  if (static_cast<int64_t>(starts.size()) != x.rank())
    failOp(ins, fmt::format("it gives {} ranges for an operand of rank {}", starts.size(), x.rank()));
  std::vector<size_t> cut;
  for (size_t i = 0; i < starts.size(); ++i)
    if (starts[i] != 0 || limits[i] != x.shape()[i] || strides[i] != 1)
      cut.push_back(i);
  if (cut.empty())
    return x;
  if (cut.size() == 1 && strides[cut[0]] == 1 && limits[cut[0]] > starts[cut[0]])
    return graph_->slice(x, static_cast<int64_t>(cut[0]), starts[cut[0]], limits[cut[0]] - starts[cut[0]]);
  return graph_->stridedSlice(x, starts, limits, strides);
}

// padding=low_high(_interior)?x... per axis.
// reverse(x), dimensions={...} (jnp.flip; a transposed convolution's
// kernel): each listed axis in reverse order. Recorded with ops every target
// already compiles: the axis moved first and the rest flattened, a row
// gather at ids n - 1 - i, and the shape and order put back.
Tensor Builder::reverse(const Instruction &ins, Tensor x) {
  std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
  std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
  for (int64_t axis : dimensions) {
    if (axis < 0 || axis >= x.rank())
      failOp(ins, fmt::format("dimensions= names axis {}, but the operand {} has {}", axis, describe(x), x.rank()));
    if (seen[static_cast<size_t>(axis)])
      failOp(ins, fmt::format("dimensions= names axis {} twice", axis));
    seen[static_cast<size_t>(axis)] = true;
  }
  return reversed(x, dimensions);
}

Tensor Builder::reversed(Tensor x, const std::vector<int64_t> &axes) {
  Graph &g = *graph_;
  for (int64_t axis : axes) {
    int64_t length = x.shape()[static_cast<size_t>(axis)];
    if (length <= 1 || numElements(x.shape()) == 0)
      continue;
    std::vector<int64_t> order{axis};
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != axis)
        order.push_back(d);
    Tensor moved = axis == 0 ? x : g.transpose(x, order);
    Shape movedShape = moved.shape();
    Tensor rows = g.reshape(moved, {length, numElements(movedShape) / length});
    Tensor ids = g.binary(BinaryFn::Sub, g.constant(static_cast<double>(length - 1), DType::i32),
                          g.iota({length}, DType::i32, 0));
    Tensor flipped = g.reshape(g.gather(rows, ids), movedShape);
    if (axis != 0) {
      std::vector<int64_t> back(order.size());
      for (size_t i = 0; i < order.size(); ++i)
        back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
      flipped = g.transpose(flipped, back);
    }
    x = flipped;
  }
  return x;
}

Tensor Builder::pad(const Instruction &ins, Tensor x, Tensor value) {
  const Attribute &padding = attribute(ins, "padding");
  std::vector<int64_t> low, high, interior;
  parseAttribute(padding, [&](Cursor &in) {
    do {
      low.push_back(in.integer("the low padding"));
      in.expect('_', "'_' between low and high padding");
      high.push_back(in.integer("the high padding"));
      interior.push_back(in.peek() == '_' ? (in.advance(), in.integer("the interior padding")) : 0);
    } while (!in.atEnd() && in.peek() == 'x' && (in.advance(), true));
    return 0;
  });
  if (static_cast<int64_t>(low.size()) != x.rank())
    failOp(ins, fmt::format("padding= gives {} axes for an operand of rank {}", low.size(), x.rank()));
  return graph_->pad(x, value, low, high, interior);
}

// dynamic-slice(x, start...), dynamic_slice_sizes={...} and
// dynamic-update-slice(base, update, start...): one scalar integer start
// per axis, read at run time and clamped so the box stays inside, as XLA
// clamps it.
Tensor Builder::dynamicSlice(const Instruction &ins, const std::vector<const Value *> &operands) {
  bool update = ins.opcode == "dynamic-update-slice";
  size_t firstStart = update ? 2 : 1;
  if (operands.size() < firstStart)
    failOp(ins, fmt::format("it needs {} and the start indices", update ? "the operand, the update" : "the operand"));
  Tensor x = tensorOperand(ins, operands, 0);
  std::vector<Tensor> starts;
  for (size_t i = firstStart; i < operands.size(); ++i) {
    Tensor start = tensorOperand(ins, operands, i);
    if (start.rank() != 0)
      failOp(ins, fmt::format("start index %{} is {}: mlpipe reads one scalar start per axis (the form XLA "
                              "writes today), not a vector of starts",
                              ins.operands[i].name, describe(start)));
    if (!isInteger(start.dtype()))
      failOp(ins, fmt::format("start index %{} is {}, not an integer", ins.operands[i].name, describe(start)));
    starts.push_back(start);
  }
  if (static_cast<int64_t>(starts.size()) != x.rank())
    failOp(ins, fmt::format("it gives {} start indices for an operand of rank {}", starts.size(), x.rank()));
  if (update) {
    Tensor block = tensorOperand(ins, operands, 1);
    if (block.rank() != x.rank() || block.dtype() != x.dtype())
      failOp(ins, fmt::format("the update {} does not match the operand {}", describe(block), describe(x)));
    for (int64_t axis = 0; axis < x.rank(); ++axis)
      if (block.shape()[axis] > x.shape()[axis])
        failOp(ins, fmt::format("the update {} is larger than the operand {} along axis {}", describe(block),
                                describe(x), axis));
    return graph_->dynamicUpdateSlice(x, block, starts);
  }
  std::vector<int64_t> sizes = intList(attribute(ins, "dynamic_slice_sizes"));
  if (static_cast<int64_t>(sizes.size()) != x.rank())
    failOp(ins, fmt::format("dynamic_slice_sizes= gives {} sizes for an operand of rank {}", sizes.size(), x.rank()));
  for (int64_t axis = 0; axis < x.rank(); ++axis)
    if (sizes[axis] <= 0 || sizes[axis] > x.shape()[axis])
      failOp(ins, fmt::format("slice size {} along axis {} is outside [1, {}] for {}", sizes[axis], axis,
                              x.shape()[axis], describe(x)));
  return graph_->dynamicSlice(x, starts, sizes);
}

} // namespace mlpipe::fe::hlo
