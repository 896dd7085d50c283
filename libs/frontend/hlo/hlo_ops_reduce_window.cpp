// HLO's reduce-window recorded into the front-end graph: pooling (max,
// average as a sum), running sums and maxima (JAX's cumsum and cummax write
// a window as long as the axis, padded before), with any window, stride,
// padding and base or window dilation.
#include "frontend/hlo/hlo_builder.h"

namespace mlpipe::fe::hlo {

// window={size=2x2 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=1x1}:
// one entry per axis of each field, 'x' between them; a field left out
// is 1 (0 for the padding).
// `rank` axes: the operand's (reduce-window) or the spatial ones
// (convolution), as `axesWhat` says.
std::vector<WindowAxis> Builder::window(const Instruction &ins, int64_t rank, std::string_view axesWhat) const {
  const Attribute &text = attribute(ins, "window");
  std::vector<WindowAxis> axes(static_cast<size_t>(rank));
  parseAttribute(text, [&](Cursor &in) {
    in.expect('{', "'{' opening the window");
    while (!in.consume('}')) {
      Location loc = in.location();
      std::string field = in.identifier("a window field (size, stride, pad, lhs_dilate, rhs_dilate)");
      in.expect('=', "'=' after the window field");
      bool pad = field == "pad";
      if (!pad && field != "size" && field != "stride" && field != "lhs_dilate" && field != "rhs_dilate")
        in.fail(loc, fmt::format("{}: window field '{}' is not read: mlpipe reads size, stride, pad, "
                                 "lhs_dilate and rhs_dilate",
                                 ins.opcode, printable(field)));
      // The field each entry sets (the padding sets two).
      int64_t WindowAxis::*member = field == "size"         ? &WindowAxis::size
                                    : field == "stride"     ? &WindowAxis::stride
                                    : field == "lhs_dilate" ? &WindowAxis::baseDilation
                                                            : &WindowAxis::windowDilation;
      int64_t axis = 0;
      do {
        if (axis == rank)
          in.fail(loc, fmt::format("{}: window field {} gives more than {} axes, the {}", ins.opcode, field, rank,
                                   axesWhat));
        WindowAxis &entry = axes[static_cast<size_t>(axis++)];
        if (pad) {
          entry.padLow = in.integer("the low padding");
          in.expect('_', "'_' between low and high padding");
          entry.padHigh = in.integer("the high padding");
        } else {
          entry.*member = in.integer("a window size, stride or dilation");
        }
      } while (in.peek() == 'x' && (in.advance(), true));
      if (axis != rank)
        in.fail(loc, fmt::format("{}: window field {} gives {} axes, not {}, the {}", ins.opcode, field, axis, rank,
                                 axesWhat));
    }
    return 0;
  });
  for (size_t d = 0; d < axes.size(); ++d) {
    const WindowAxis &axis = axes[d];
    if (axis.size < 1 || axis.stride < 1 || axis.baseDilation < 1 || axis.windowDilation < 1)
      failOp(ins, fmt::format("window axis {} has a size, stride or dilation below 1", d));
  }
  return axes;
}

// reduce-window(x, init), window={...}, to_apply=%reducer: the graph's
// windowed reduction, with an init that is not the reduction's identity
// combined in once, as for reduce (XLA skips padding and holes rather
// than reading the init there).
Tensor Builder::reduceWindow(const Instruction &ins, const std::vector<const Value *> &operands) {
  if (ins.operands.size() != 2)
    failOp(ins, fmt::format("a reduce-window of {} inputs at once is not supported: mlpipe reads reduce-windows of "
                            "one input",
                            ins.operands.size() / 2));
  Tensor x = tensorOperand(ins, operands, 0), init = tensorOperand(ins, operands, 1);
  if (init.rank() != 0)
    failOp(ins, fmt::format("the initial value must be a scalar, not {}", describe(init)));
  if (init.dtype() != x.dtype())
    failOp(ins, fmt::format("the initial value is {} but the input is {}", hloTypeName(init.dtype()),
                            hloTypeName(x.dtype())));
  ReduceFn fn = reduction(ins, attribute(ins, "to_apply"), x.dtype());
  std::vector<WindowAxis> axes = window(ins, x.rank(), "operand's rank");
  for (size_t d = 0; d < axes.size(); ++d) {
    const WindowAxis &axis = axes[d];
    int64_t padded = (x.shape()[d] - 1) * axis.baseDilation + 1 + axis.padLow + axis.padHigh;
    int64_t span = (axis.size - 1) * axis.windowDilation + 1;
    if (padded < span)
      failOp(ins, fmt::format("along axis {} the window spans {} positions but the padded input has {}: the result "
                              "would be empty",
                              d, span, padded));
  }
  Tensor result = graph_->reduceWindow(fn, x, axes);
  const Node &initNode = graph_->node(init.id());
  if (initNode.kind == OpKind::Constant && isIdentity(fn, initNode.value, init.dtype()))
    return result;
  return graph_->binary(combiningFunction(fn), result, init);
}

} // namespace mlpipe::fe::hlo
