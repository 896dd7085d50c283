// The FunctionEmitter's frame: the signature and the return, which nodes
// are live, each node's value and the constants it needs, the dispatch over
// node kinds, linalg.generic with its body, and conversions between stored
// and compute types.
#include "frontend/emitter/function_emitter.h"

#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace mlpipe::fe::emitter {

void FunctionEmitter::emit() {
  markLive();
  emitSignature();
  for (size_t id = 0; id < graph_.nodes().size(); ++id)
    if (live_[id] && graph_.node(static_cast<int>(id)).kind != OpKind::Input)
      emitNode(static_cast<int>(id));
  scope_.clear();
  std::vector<std::string> values, types;
  std::set<int> returned;
  for (auto &[name, id] : graph_.outputs()) {
    values.push_back(outputValue(name, id, !returned.insert(id).second));
    types.push_back(type(id));
  }
  for (auto &[input, id] : graph_.updates()) {
    values.push_back(value(id));
    types.push_back(type(id));
  }
  line("return {} : {}", fmt::join(values, ", "), fmt::join(types, ", "));
  out_ += "  }\n";
}

// Each result is a tensor an op computes, and no two are the same value:
// bufferization's results-to-out-params (MLIR 22) crashes on a function
// that returns its argument or a constant. So an input or a repeated
// output is copied (linalg.copy, which canonicalization keeps, into a
// fresh bufferization.alloc_tensor) and a constant is written by a
// generic that yields it.
std::string FunctionEmitter::outputValue(const std::string &name, int id, bool repeated) {
  const Node &node = graph_.node(id);
  bool splat = node.kind == OpKind::Constant ||
               (node.kind == OpKind::Literal &&
                std::all_of(node.values.begin(), node.values.end(), [&](double v) { return v == node.values[0]; }));
  if (splat) {
    double v = node.kind == OpKind::Constant ? node.value : node.values.front();
    return emitGeneric(node.shape, node.dtype, {},
                       [&](const std::vector<std::string> &) { return bodyConstant(v, node.dtype); });
  }
  if (node.kind == OpKind::Literal)
    fail("output '{}' of '{}' is a constant tensor of different values; mlpipe returns computed tensors (and "
         "constants that are one value everywhere)",
         name, graph_.name());
  // A loop's result may be its initial value, an input (a bound carried
  // through): copied like an input.
  if (node.kind != OpKind::Input && node.kind != OpKind::LoopResult && !repeated)
    return value(id);
  // A tensor of its own to copy into: tensor.empty values of one type are
  // merged by cse, and bufferization would then copy in place.
  std::string init = fresh(), copy = fresh();
  line("{} = bufferization.alloc_tensor() : {}", init, type(id));
  line("{} = linalg.copy ins({} : {}) outs({} : {}) -> {}", copy, value(id), type(id), init, type(id), type(id));
  return copy;
}

// Whether a line is the last of an operation (where its location goes):
// a one-line op, or the closing line of an op with a region.
bool FunctionEmitter::endsOperation(const std::string &text) {
  if (text.rfind("} ->", 0) == 0 || text == "  }")
    return true;
  return text.rfind("%", 0) == 0 && text.back() != '{' && text.find("linalg.reduce") == std::string::npos;
}

// The tensor value of node `id`; a Constant (a scalar captured by the ops
// that use it) becomes a rank-0 tensor here if something needs it whole.
const std::string &FunctionEmitter::value(int id) {
  if (isConstant(id) && !names_.count(id)) {
    std::string name = fresh();
    line("{} = arith.constant dense<{}> : {}", name, scalarLiteral(graph_.node(id).value, graph_.node(id).dtype),
         type(id));
    names_[id] = name;
  }
  return names_.at(id);
}

// The Constant an elementwise operand holds everywhere: the operand itself,
// or the Constant a Broadcast repeats (HLO spells every scalar constant of
// an elementwise op that way). Such an operand is captured as a scalar, so
// no generic fills a tensor with it.
std::optional<int> FunctionEmitter::constantSource(int id) const {
  const Node &node = graph_.node(id);
  if (node.kind == OpKind::Constant)
    return id;
  if (node.kind == OpKind::Broadcast && isConstant(node.operands[0]))
    return node.operands[0];
  return std::nullopt;
}

bool FunctionEmitter::isElementwise(OpKind kind) {
  return kind == OpKind::Unary || kind == OpKind::Binary || kind == OpKind::Compare || kind == OpKind::Select ||
         kind == OpKind::Convert;
}

// Only what the outputs need is emitted.
void FunctionEmitter::markLive() {
  live_.assign(graph_.nodes().size(), false);
  std::vector<int> work;
  for (auto &[name, id] : graph_.outputs())
    work.push_back(id);
  for (auto &[input, id] : graph_.updates())
    work.push_back(id);
  while (!work.empty()) {
    int id = work.back();
    work.pop_back();
    if (live_[id])
      continue;
    live_[id] = true;
    // A reshape of a transpose reads the transpose's source itself.
    if (auto source = transposeUnderReshape(id)) {
      work.push_back(*source);
      continue;
    }
    // An elementwise op reads a broadcast constant as the constant.
    bool capturesConstants = isElementwise(graph_.node(id).kind);
    for (int operand : graph_.node(id).operands)
      work.push_back(capturesConstants ? constantSource(operand).value_or(operand) : operand);
  }
}

std::string FunctionEmitter::quote(const std::string &text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

// An unsigned element type, which the signless MLIR type does not tell
// from the signed one, as a `dtype` entry of the signature: ", dtype = "u32"".
std::string FunctionEmitter::unsignedNote(int id) const {
  DType dtype = graph_.node(id).dtype;
  return isUnsigned(dtype) ? fmt::format(", dtype = {}", quote(dtypeName(dtype))) : "";
}

void FunctionEmitter::emitSignature() {
  std::vector<std::string> args, results, inputs, outputs;
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    int id = graph_.inputs()[i];
    const Node &node = graph_.node(id);
    names_[id] = fmt::format("%arg{}", i);
    // An in-out input (a KV cache) is written in place: bufferization may
    // write into the caller's buffer.
    args.push_back(fmt::format("{}: {} {{{}mlpipe.name = {}}}", names_[id], type(id),
                               node.inout ? "bufferization.writable = true, " : "", quote(node.name)));
    inputs.push_back(fmt::format("{{{}name = {}, type = {}{}}}", node.inout ? "inout = true, " : "", quote(node.name),
                                 type(id), unsignedNote(id)));
  }
  for (auto &[name, id] : graph_.outputs()) {
    results.push_back(fmt::format("{} {{mlpipe.name = {}}}", type(id), quote(name)));
    outputs.push_back(fmt::format("{{name = {}, type = {}{}}}", quote(name), type(id), unsignedNote(id)));
  }
  // An update is returned only to keep it alive: bufferize checks it was
  // written in place and drops the result (mlpipe-drop-inout-results).
  for (auto &[input, id] : graph_.updates())
    results.push_back(fmt::format("{} {{mlpipe.updates = {}}}", type(id), quote(graph_.node(input).name)));
  out_ += fmt::format("  func.func @{}({}) -> ({})\n      attributes {{llvm.emit_c_interface, "
                      "mlpipe.inputs = [{}], mlpipe.outputs = [{}]}} {{\n",
                      graph_.name(), fmt::join(args, ", "), fmt::join(results, ", "), fmt::join(inputs, ", "),
                      fmt::join(outputs, ", "));
}

std::string FunctionEmitter::constant(double v, DType dtype) {
  std::string name = fresh();
  line("{} = arith.constant {}", name, typedLiteral(v, dtype));
  return name;
}

// Constant node `id` as a scalar of `dtype` (the type the op using it
// computes in), emitted once per type before its first use.
std::string FunctionEmitter::scalarConstant(int id, DType dtype) {
  auto key = std::make_pair(id, dtype);
  auto found = scalarConstants_.find(key);
  if (found != scalarConstants_.end())
    return found->second;
  return scalarConstants_[key] = constant(graph_.node(id).value, dtype);
}

std::string FunctionEmitter::indexConstant(int64_t v) {
  std::string name = fresh();
  line("{} = arith.constant {} : index", name, v);
  return name;
}

std::string FunctionEmitter::emptyTensor(const Shape &shape, DType dtype) {
  std::string name = fresh();
  line("{} = tensor.empty() : {}", name, tensorType(shape, dtype));
  return name;
}

std::string FunctionEmitter::filledTensor(const Shape &shape, DType dtype, double v) {
  std::string scalar = constant(v, dtype);
  std::string empty = emptyTensor(shape, dtype);
  std::string name = fresh();
  std::string t = tensorType(shape, dtype);
  line("{} = linalg.fill ins({} : {}) outs({} : {}) -> {}", name, scalar, mlirType(dtype), empty, t, t);
  return name;
}

// Reshapes `source` (shape `from`) to `to`, by one expand or collapse when
// the dimensions group, else through a flat 1-D tensor.
std::string FunctionEmitter::reshapeValue(const std::string &source, const Shape &from, const Shape &to, DType dtype) {
  if (from == to)
    return source;
  Reassociation groups;
  std::string name = fresh();
  if (from.size() < to.size() && groupDimensions(from, to, groups)) {
    line("{} = tensor.expand_shape {} {} output_shape [{}] : {} into {}", name, source, formatReassociation(groups),
         fmt::join(to, ", "), tensorType(from, dtype), tensorType(to, dtype));
    return name;
  }
  if (from.size() > to.size() && groupDimensions(to, from, groups)) {
    line("{} = tensor.collapse_shape {} {} : {} into {}", name, source, formatReassociation(groups),
         tensorType(from, dtype), tensorType(to, dtype));
    return name;
  }
  Shape flat{numElements(from)};
  return reshapeValue(reshapeValue(source, from, flat, dtype), flat, to, dtype);
}

void FunctionEmitter::emitNode(int id) {
  const Node &node = graph_.node(id);
  scope_ = node.scope;
  switch (node.kind) {
  case OpKind::Input:
    return;
  case OpKind::Constant: // emitted where it is used, in the type it is used in
    return;
  case OpKind::Triu:
    return emitTriu(id);
  case OpKind::Unary:
  case OpKind::Binary:
    return emitElementwise(id);
  case OpKind::Reduce:
    return emitReduce(id);
  case OpKind::ReduceWindow:
    return emitReduceWindow(id);
  case OpKind::MatMul:
    return emitMatMul(id);
  case OpKind::Reshape: {
    if (transposeUnderReshape(id))
      return emitTransposingReshape(id);
    const Node &source = graph_.node(node.operands[0]);
    names_[id] = reshapeValue(value(node.operands[0]), source.shape, node.shape, node.dtype);
    return;
  }
  case OpKind::Transpose:
    return emitTranspose(id);
  case OpKind::Slice:
    return emitSlice(id);
  case OpKind::Gather:
    return emitGather(id);
  case OpKind::Broadcast:
    return emitBroadcast(id);
  case OpKind::Compare:
  case OpKind::Select:
  case OpKind::Convert:
    return emitElementwise(id);
  case OpKind::Iota:
    return emitIota(id);
  case OpKind::Pad:
    return emitPad(id);
  case OpKind::Concat:
    return emitConcat(id);
  case OpKind::Literal:
    return emitLiteral(id);
  case OpKind::StridedSlice:
    return emitStridedSlice(id);
  case OpKind::Insert:
    return emitInsert(id);
  case OpKind::PositionMask:
    return emitPositionMask(id);
  case OpKind::DynamicSlice:
  case OpKind::DynamicUpdateSlice:
    return emitDynamicSlice(id);
  case OpKind::Convolution: // emitMlir lowers every convolution first
    fail("a convolution reached the MLIR emitter without being lowered (frontend/convolution.h)");
  case OpKind::SortRank: // emitMlir lowers every sort first
    fail("a sort reached the MLIR emitter without being lowered (frontend/sort.h)");
  case OpKind::GatherSlices: // and every gather and scatter
  case OpKind::Scatter:
    fail("a gather or scatter reached the MLIR emitter without being lowered (frontend/scatter_gather.h)");
  case OpKind::While:
    return emitWhile(id);
  case OpKind::LoopResult: // a result of the loop, emitted before it
    names_[id] = fmt::format("{}#{}", value(node.operands[0]), node.ints[0]);
    return;
  }
}

// Emits a linalg.generic over `shape` producing `dtype` elements from
// `inputs`; `body` gets the block argument of each input, emits the body's
// ops with bodyLine and returns the value to yield. Returns the result.
std::string FunctionEmitter::emitGeneric(const Shape &shape, DType dtype, const std::vector<GenericInput> &inputs,
                                         const std::function<std::string(const std::vector<std::string> &)> &body) {
  std::vector<std::string> values, types, maps, blockArgs, args;
  for (const GenericInput &input : inputs) {
    values.push_back(input.value);
    types.push_back(input.type);
    maps.push_back(input.map);
    args.push_back(fresh());
    blockArgs.push_back(fmt::format("{}: {}", args.back(), mlirType(input.elementType)));
  }
  maps.push_back(identityMap(shape.size()));
  std::string outArg = fresh();
  blockArgs.push_back(fmt::format("{}: {}", outArg, mlirType(dtype)));
  std::string init = emptyTensor(shape, dtype);
  std::string name = fresh();
  std::string resultType = tensorType(shape, dtype);
  std::string ins = inputs.empty() ? "" : fmt::format("ins({} : {}) ", fmt::join(values, ", "), fmt::join(types, ", "));
  line("{} = linalg.generic {{indexing_maps = [{}], iterator_types = {}}} {}outs({} : {}) {{", name,
       fmt::join(maps, ", "), parallelIterators(shape.size()), ins, init, resultType);
  line("^bb0({}):", fmt::join(blockArgs, ", "));
  std::string result = body(args);
  bodyLine("linalg.yield {} : {}", result, mlirType(dtype));
  line("}} -> {}", resultType);
  return name;
}

// A 16-bit float extended to f32 (the compute type); others unchanged.
std::string FunctionEmitter::toCompute(const std::string &v, DType dtype) {
  if (computeType(dtype) == dtype)
    return v;
  return bodyOp("arith.extf {} : {} to f32", v, mlirType(dtype));
}

// An f32 result truncated to the 16-bit float it is stored as. The rounding
// of an op's result is marked mlpipe.storage_rounding (fuse drops it where
// the value is widened again in the same fused body); that of a convert the
// program asks for is not.
std::string FunctionEmitter::fromCompute(const std::string &v, DType dtype, Rounding rounding) {
  if (computeType(dtype) == dtype)
    return v;
  return bodyOp("arith.truncf {} {}: f32 to {}", v, rounding == Rounding::Storage ? "{mlpipe.storage_rounding} " : "",
                mlirType(dtype));
}

// A tensor node converted elementwise to `dtype` (f16/bf16 operands of
// reductions and matmuls run in f32), once per node and type.
std::string FunctionEmitter::valueAs(int id, DType dtype) {
  const Node &node = graph_.node(id);
  if (node.dtype == dtype)
    return value(id);
  auto key = std::make_pair(id, dtype);
  if (auto found = converted_.find(key); found != converted_.end())
    return found->second;
  std::vector<GenericInput> inputs = {{value(id), type(id), identityMap(node.shape.size()), node.dtype}};
  return converted_[key] = emitGeneric(node.shape, dtype, inputs, [&](const std::vector<std::string> &args) {
           return convertScalar(args[0], node.dtype, dtype);
         });
}

// A value of `shape` computed in `from`, stored as `to`.
std::string FunctionEmitter::convertedResult(const std::string &v, const Shape &shape, DType from, DType to) {
  if (from == to)
    return v;
  std::vector<GenericInput> inputs = {{v, tensorType(shape, from), identityMap(shape.size()), from}};
  return emitGeneric(shape, to, inputs,
                     [&](const std::vector<std::string> &args) { return convertScalar(args[0], from, to); });
}

} // namespace mlpipe::fe::emitter
