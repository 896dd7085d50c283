// HLO's scan, as current JAX writes jnp.cumsum and friends:
//
//   scan(inputs..., inits...), dimensions={d}, num_carries=C,
//        is_reverse=..., is_associative=..., to_apply=region
//
// with XLA's meaning (its ScanExpander): the last C operands are the
// initial carries; at each step t along axis d (from the end when
// is_reverse=true) the region is called with each input's slice at t
// (axis d dropped) and then the carries, and returns (outputs...,
// carries...); each output's slice is written at t of its array, and the
// result is (output arrays..., the final carries). is_associative is a
// hint about the region, which changes no value.
//
// A region that is a running reduction, one input and one carry with
// (x, c) -> (f(x, c), f(x, c)) for an add, multiply, maximum, minimum, and
// or or (jnp.cumsum, cumprod, cummax), is read as a reduce-window over the
// prefix (the suffix when reversed) combined with the initial carry: the
// form XLA's own passes give cumsum. Any other region is unrolled, one
// call per step.
#include "frontend/hlo/hlo_builder.h"

namespace mlpipe::fe::hlo {

namespace {

// The most steps a scan that is not a running reduction is unrolled to:
// each step is a copy of its region plus a slice per input, and each
// output is a concatenation of one part per step.
constexpr int64_t kMaxScanSteps = 4096;

} // namespace

// The reduction `region` runs, when it is a running one over one input and
// one carry of `dtype`.
std::optional<ReduceFn> Builder::scanReduction(const Computation &region, DType dtype) const {
  if (parameterCount(region) != 2)
    return std::nullopt;
  const Instruction &root = region.instructions[region.root];
  if (root.opcode != "tuple" || root.operands.size() != 2 || root.operands[0].name != root.operands[1].name)
    return std::nullopt;
  auto found = region.byName.find(root.operands[0].name);
  if (found == region.byName.end())
    return std::nullopt;
  const Instruction &combine = region.instructions[found->second];
  static const std::map<std::string, ReduceFn> reductions = {{"add", ReduceFn::Sum},     {"multiply", ReduceFn::Prod},
                                                             {"maximum", ReduceFn::Max}, {"minimum", ReduceFn::Min},
                                                             {"and", ReduceFn::And},     {"or", ReduceFn::Or}};
  auto fn = reductions.find(combine.opcode);
  if (fn == reductions.end() || combine.operands.size() != 2)
    return std::nullopt;
  if ((fn->second == ReduceFn::And || fn->second == ReduceFn::Or) && isFloat(dtype))
    return std::nullopt;
  std::set<int64_t> parameters;
  for (const Operand &operand : combine.operands) {
    auto used = region.byName.find(operand.name);
    if (used == region.byName.end() || region.instructions[used->second].opcode != "parameter")
      return std::nullopt;
    parameters.insert(region.instructions[used->second].parameterNumber);
  }
  if (parameters != std::set<int64_t>{0, 1})
    return std::nullopt;
  return fn->second;
}

Value Builder::scan(const Instruction &ins, const std::vector<const Value *> &operands, int depth) {
  Graph &g = *graph_;
  const Attribute *carriesText = findAttribute(ins, "num_carries");
  if (!carriesText)
    failOp(ins, fmt::format("it scans {} with no num_carries; mlpipe reads scans that say how many of their "
                            "operands are carries",
                            operands.empty() ? std::string("nothing") : describe(tensorOperand(ins, operands, 0))));
  int64_t carries = intValue(*carriesText);
  auto inputCount = static_cast<int64_t>(operands.size()) - carries;
  if (carries < 0 || inputCount < 1)
    failOp(ins, fmt::format("num_carries={} leaves no input among its {} operands", carries, operands.size()));
  std::vector<Tensor> inputs;
  for (int64_t i = 0; i < inputCount; ++i)
    inputs.push_back(tensorOperand(ins, operands, static_cast<size_t>(i)));
  std::vector<Value> carried;
  for (auto i = static_cast<size_t>(inputCount); i < operands.size(); ++i)
    carried.push_back(Value{tensorOperand(ins, operands, i), {}, true});
  std::vector<int64_t> dimensions = intList(attribute(ins, "dimensions"));
  if (dimensions.size() != 1 || dimensions[0] < 0 || dimensions[0] >= inputs[0].rank())
    failOp(ins, fmt::format("dimensions must name one axis of {}", describe(inputs[0])));
  int64_t axis = dimensions[0], length = inputs[0].shape()[static_cast<size_t>(axis)];
  for (Tensor input : inputs)
    if (input.rank() != inputs[0].rank() || input.shape()[static_cast<size_t>(axis)] != length)
      failOp(ins, fmt::format("its inputs {} and {} differ in rank or along axis {}", describe(inputs[0]),
                              describe(input), axis));
  if (length == 0)
    failOp(ins, fmt::format("{} is empty along axis {}: mlpipe scans at least one step", describe(inputs[0]), axis));
  bool reverse = false;
  if (const Attribute *text = findAttribute(ins, "is_reverse")) {
    std::string value = word(*text);
    if (value != "true" && value != "false")
      fail(text->valueLoc, "is_reverse must be true or false");
    reverse = value == "true";
  }
  size_t regionIndex = computationNamed(attribute(ins, "to_apply"));
  const Computation &region = module_.computations[regionIndex];
  if (parameterCount(region) != operands.size())
    failOp(ins, fmt::format("to_apply=%{} has {} parameters, but a scan of {} inputs and {} carries passes {}",
                            region.name, parameterCount(region), inputCount, carries, operands.size()));
  Shape sliceShape = inputs[0].shape();
  sliceShape.erase(sliceShape.begin() + axis);
  std::vector<int64_t> kept; // x's axes but the scanned one
  for (int64_t d = 0; d < inputs[0].rank(); ++d)
    if (d != axis)
      kept.push_back(d);

  // A running reduction: the prefix (suffix) of every position by a
  // reduce-window, then combined with the initial carry, as step t
  // computes f(x[t], carry).
  if (inputCount == 1 && carries == 1) {
    Tensor x = inputs[0], init = *carried[0].tensor;
    std::optional<ReduceFn> fn = scanReduction(region, x.dtype());
    bool fits = init.dtype() == x.dtype() && init.shape() == sliceShape;
    for (const Instruction &member : region.instructions)
      if (member.opcode == "parameter")
        fits = fits && member.shape && !member.shape->tuple && member.shape->dims == sliceShape &&
               elementType(*member.shape) == x.dtype();
    if (fn && fits) {
      std::vector<WindowAxis> window(static_cast<size_t>(x.rank()));
      window[static_cast<size_t>(axis)].size = length;
      (reverse ? window[static_cast<size_t>(axis)].padHigh : window[static_cast<size_t>(axis)].padLow) = length - 1;
      Tensor running =
          g.binary(combiningFunction(*fn), g.reduceWindow(*fn, x, window), g.broadcast(init, x.shape(), kept));
      Value tuple;
      tuple.tensor.reset();
      tuple.elements = {tensorValue(running), tensorValue(g.selectIndex(running, axis, reverse ? 0 : length - 1))};
      return tuple;
    }
  }

  // Any other region: one call per step.
  if (length > kMaxScanSteps)
    failOp(ins, fmt::format("it scans {} along axis {}, {} steps of %{}, which is not a running add, multiply, "
                            "maximum or minimum; mlpipe unrolls such a scan, to at most {} steps",
                            describe(inputs[0]), axis, length, region.name, kMaxScanSteps));
  std::optional<Unrolling> outer = unrolling_;
  if (!unrolling_)
    unrolling_ = Unrolling{&ins, length};
  std::vector<std::vector<Tensor>> outputs; // [output][step position]
  for (int64_t step = 0; step < length; ++step) {
    int64_t t = reverse ? length - 1 - step : step;
    std::vector<Value> arguments;
    for (Tensor input : inputs)
      arguments.push_back(tensorValue(g.selectIndex(input, axis, t)));
    arguments.insert(arguments.end(), carried.begin(), carried.end());
    Value result = evaluate(regionIndex, arguments, depth + 1, ins.opcodeLoc);
    if (result.tensor || static_cast<int64_t>(result.elements.size()) < carries)
      failOp(ins, fmt::format("to_apply=%{} returns {}, but a scan's region returns a tuple of its outputs and then "
                              "its {} carries",
                              region.name, result.tensor ? "an array" : "a shorter tuple", carries));
    size_t outputCount = result.elements.size() - static_cast<size_t>(carries);
    outputs.resize(outputCount, std::vector<Tensor>(static_cast<size_t>(length)));
    for (size_t o = 0; o < outputCount; ++o) {
      const Value &output = result.elements[o];
      if (!output.tensor)
        failOp(ins, fmt::format("to_apply=%{} returns a tuple as its output {}", region.name, o));
      Shape expanded = output.tensor->shape();
      expanded.insert(expanded.begin() + std::min<int64_t>(axis, output.tensor->rank()), 1);
      outputs[o][static_cast<size_t>(t)] = g.reshape(*output.tensor, expanded);
    }
    carried.assign(result.elements.end() - carries, result.elements.end());
  }
  unrolling_ = outer;
  Value tuple;
  tuple.tensor.reset();
  for (const std::vector<Tensor> &parts : outputs)
    tuple.elements.push_back(
        tensorValue(parts.size() == 1 ? parts[0] : g.concat(parts, std::min<int64_t>(axis, parts[0].rank() - 1))));
  tuple.elements.insert(tuple.elements.end(), carried.begin(), carried.end());
  return tuple;
}

} // namespace mlpipe::fe::hlo
