// Text emission of linalg-on-tensors MLIR from a recorded graph. See the
// header for the op each node becomes. The text is parsed and verified by the
// compiler before anything else sees it, so a slip here is caught at once.
#include "frontend/mlir_emitter.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <optional>

namespace mlpipe::fe {

std::string tensorType(const Shape &shape, DType dtype) {
  std::string text = "tensor<";
  for (int64_t dim : shape)
    text += std::to_string(dim) + "x";
  return text + dtypeName(dtype) + ">";
}

namespace {

using Reassociation = std::vector<std::vector<int64_t>>;

// Groups the dimensions of `big` so that each group multiplies to one
// dimension of `small` (trailing size-1 dimensions join the last group).
// Returns false when no such grouping exists (e.g. 2x3 -> 3x2).
bool groupDimensions(const Shape &small, const Shape &big, Reassociation &groups) {
  groups.clear();
  if (small.empty()) // a scalar: every dimension of `big` must be 1
    return std::all_of(big.begin(), big.end(), [](int64_t dim) { return dim == 1; });
  size_t next = 0;
  for (int64_t target : small) {
    std::vector<int64_t> group;
    int64_t product = 1;
    do {
      if (next >= big.size())
        return false;
      product *= big[next];
      group.push_back(static_cast<int64_t>(next++));
    } while (product < target);
    if (product != target)
      return false;
    groups.push_back(group);
  }
  for (; next < big.size(); ++next) {
    if (big[next] != 1)
      return false;
    groups.back().push_back(static_cast<int64_t>(next));
  }
  return true;
}

std::string formatReassociation(const Reassociation &groups) {
  std::vector<std::string> parts;
  for (auto &group : groups)
    parts.push_back(fmt::format("[{}]", fmt::join(group, ", ")));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

std::string floatLiteral(double value, DType dtype) {
  if (std::isinf(value) || std::isnan(value)) {
    if (dtype == DType::f32)
      return fmt::format("0x{:08X}", std::bit_cast<uint32_t>(static_cast<float>(value)));
    return fmt::format("0x{:016X}", std::bit_cast<uint64_t>(value));
  }
  if (dtype == DType::f32)
    return fmt::format("{:.9e}", static_cast<double>(static_cast<float>(value)));
  return fmt::format("{:.17e}", value);
}

std::string identityMap(size_t rank) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < rank; ++i)
    dims.push_back(fmt::format("d{}", i));
  return fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(dims, ", "));
}

// The map reading an operand of shape `in` while iterating over `out`,
// following NumPy broadcasting: right-aligned, size-1 dimensions pinned to 0.
// When `dropAxis` is set, that axis of `in` (a size-1 axis a keepdims
// reduction kept) is left out: the operand is read without it.
std::string broadcastMap(const Shape &in, const Shape &out, int64_t dropAxis = -1) {
  std::vector<std::string> dims, results;
  for (size_t i = 0; i < out.size(); ++i)
    dims.push_back(fmt::format("d{}", i));
  size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (static_cast<int64_t>(i) != dropAxis)
      results.push_back(in[i] == 1 && out[offset + i] != 1 ? "0" : dims[offset + i]);
  return fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(results, ", "));
}

std::string parallelIterators(size_t rank) {
  std::vector<std::string> kinds(rank, "\"parallel\"");
  return fmt::format("[{}]", fmt::join(kinds, ", "));
}

const char *unaryOp(UnaryFn fn) {
  switch (fn) {
  case UnaryFn::Exp:
    return "math.exp";
  case UnaryFn::Tanh:
    return "math.tanh";
  case UnaryFn::Sqrt:
    return "math.sqrt";
  case UnaryFn::Rsqrt:
    return "math.rsqrt";
  case UnaryFn::Neg:
    return "arith.negf";
  }
  return "";
}

const char *binaryOp(BinaryFn fn) {
  switch (fn) {
  case BinaryFn::Add:
    return "arith.addf";
  case BinaryFn::Sub:
    return "arith.subf";
  case BinaryFn::Mul:
    return "arith.mulf";
  case BinaryFn::Div:
    return "arith.divf";
  case BinaryFn::Max:
    return "arith.maximumf";
  case BinaryFn::Min:
    return "arith.minimumf";
  }
  return "";
}

// Emits the body of one function.
class FunctionEmitter {
public:
  FunctionEmitter(const Graph &graph, std::string &out) : graph_(graph), out_(out) {}

  void emit() {
    markLive();
    emitSignature();
    for (size_t id = 0; id < graph_.nodes().size(); ++id)
      if (live_[id] && graph_.node(static_cast<int>(id)).kind != OpKind::Input)
        emitNode(static_cast<int>(id));
    scope_.clear();
    std::vector<std::string> values, types;
    for (auto &[name, id] : graph_.outputs()) {
      if (graph_.node(id).kind == OpKind::Constant)
        fail("output '{}' of '{}' is a bare constant; outputs must be tensors", name, graph_.name());
      values.push_back(value(id));
      types.push_back(type(id));
    }
    for (auto &[input, id] : graph_.updates()) {
      values.push_back(value(id));
      types.push_back(type(id));
    }
    line("return {} : {}", fmt::join(values, ", "), fmt::join(types, ", "));
    out_ += "  }\n";
  }

private:
  template <typename... Args> void line(fmt::format_string<Args...> format, Args &&...args) {
    std::string text = fmt::format(format, std::forward<Args>(args)...);
    out_ += "    ";
    out_ += text;
    if (!scope_.empty() && endsOperation(text))
      out_ += " loc(" + quote(scope_) + ")";
    out_ += '\n';
  }

  // Whether a line is the last of an operation (where its location goes):
  // a one-line op, or the closing line of an op with a region.
  static bool endsOperation(const std::string &text) {
    if (text.rfind("} ->", 0) == 0 || text == "  }")
      return true;
    return text.rfind("%", 0) == 0 && text.back() != '{' && text.find("linalg.reduce") == std::string::npos;
  }

  std::string fresh() { return fmt::format("%v{}", counter_++); }
  const std::string &value(int id) const { return names_.at(id); }
  std::string type(int id) const { return tensorType(graph_.node(id).shape, graph_.node(id).dtype); }
  std::string elementType(int id) const { return dtypeName(graph_.node(id).dtype); }
  bool isConstant(int id) const { return graph_.node(id).kind == OpKind::Constant; }

  // Only what the outputs need is emitted.
  void markLive() {
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
      if (auto source = transposeUnderReshape(id))
        work.push_back(*source);
      else
        for (int operand : graph_.node(id).operands)
          work.push_back(operand);
    }
  }

  static std::string quote(const std::string &text) {
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\')
        quoted += '\\';
      quoted += c;
    }
    return quoted + "\"";
  }

  void emitSignature() {
    std::vector<std::string> args, results, inputs, outputs;
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      int id = graph_.inputs()[i];
      const Node &node = graph_.node(id);
      names_[id] = fmt::format("%arg{}", i);
      // An in-out input (a KV cache) is written in place: bufferization may
      // write into the caller's buffer.
      args.push_back(fmt::format("{}: {} {{{}mlpipe.name = {}}}", names_[id], type(id),
                                 node.inout ? "bufferization.writable = true, " : "", quote(node.name)));
      inputs.push_back(
          fmt::format("{{{}name = {}, type = {}}}", node.inout ? "inout = true, " : "", quote(node.name), type(id)));
    }
    for (auto &[name, id] : graph_.outputs()) {
      results.push_back(fmt::format("{} {{mlpipe.name = {}}}", type(id), quote(name)));
      outputs.push_back(fmt::format("{{name = {}, type = {}}}", quote(name), type(id)));
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

  std::string constant(double v, DType dtype) {
    std::string name = fresh();
    line("{} = arith.constant {} : {}", name, floatLiteral(v, dtype), dtypeName(dtype));
    return name;
  }

  std::string indexConstant(int64_t v) {
    std::string name = fresh();
    line("{} = arith.constant {} : index", name, v);
    return name;
  }

  std::string emptyTensor(const Shape &shape, DType dtype) {
    std::string name = fresh();
    line("{} = tensor.empty() : {}", name, tensorType(shape, dtype));
    return name;
  }

  std::string filledTensor(const Shape &shape, DType dtype, double v) {
    std::string scalar = constant(v, dtype);
    std::string empty = emptyTensor(shape, dtype);
    std::string name = fresh();
    std::string t = tensorType(shape, dtype);
    line("{} = linalg.fill ins({} : {}) outs({} : {}) -> {}", name, scalar, dtypeName(dtype), empty, t, t);
    return name;
  }

  // Reshapes `source` (shape `from`) to `to`, by one expand or collapse when
  // the dimensions group, else through a flat 1-D tensor.
  std::string reshapeValue(const std::string &source, const Shape &from, const Shape &to, DType dtype) {
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

  void emitNode(int id) {
    const Node &node = graph_.node(id);
    scope_ = node.scope;
    switch (node.kind) {
    case OpKind::Input:
      return;
    case OpKind::Constant:
      names_[id] = constant(node.value, node.dtype);
      return;
    case OpKind::Triu:
      return emitTriu(id);
    case OpKind::Unary:
    case OpKind::Binary:
      return emitElementwise(id);
    case OpKind::Reduce:
      return emitReduce(id);
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
    case OpKind::Insert:
      return emitInsert(id);
    case OpKind::PositionMask:
      return emitPositionMask(id);
    }
  }

  // For reshape(transpose(x)) whose reshape only merges or splits
  // neighbouring dimensions: the id of x. Such a pair is emitted as one
  // linalg.generic that reads x through div/mod indexing, never as a
  // transpose plus tensor.collapse_shape: elementwise fusion would fold that
  // collapse into a consuming matmul and turn the matmul into a generic
  // contraction.
  std::optional<int> transposeUnderReshape(int id) const {
    const Node &node = graph_.node(id);
    if (node.kind != OpKind::Reshape || graph_.node(node.operands[0]).kind != OpKind::Transpose)
      return std::nullopt;
    const Node &transpose = graph_.node(node.operands[0]);
    Reassociation groups;
    bool regroups = transpose.shape.size() > node.shape.size() ? groupDimensions(node.shape, transpose.shape, groups)
                                                               : groupDimensions(transpose.shape, node.shape, groups);
    if (!regroups || transpose.shape.size() == node.shape.size())
      return std::nullopt;
    return transpose.operands[0];
  }

  // out = reshape(transpose(x, perm), shape) as one generic over out's
  // dimensions: each transposed index is a div/mod of out's indices (or a
  // sum of them), and x's index is that index permuted back.
  void emitTransposingReshape(int id) {
    const Node &node = graph_.node(id);
    const Node &transpose = graph_.node(node.operands[0]);
    int source = transpose.operands[0];
    const Shape &mid = transpose.shape, &out = node.shape;
    std::vector<std::string> midIndex(mid.size());
    Reassociation groups;
    if (mid.size() > out.size()) { // merging: out dim g covers mid dims groups[g]
      groupDimensions(out, mid, groups);
      for (size_t g = 0; g < groups.size(); ++g) {
        int64_t after = 1;
        for (size_t i = groups[g].size(); i-- > 0;) {
          int64_t dim = groups[g][i];
          std::string expr = after == 1 ? fmt::format("d{}", g) : fmt::format("(d{} floordiv {})", g, after);
          midIndex[dim] = i == 0 ? expr : fmt::format("{} mod {}", expr, mid[dim]);
          after *= mid[dim];
        }
      }
    } else { // splitting: mid dim g is covered by out dims groups[g]
      groupDimensions(mid, out, groups);
      for (size_t g = 0; g < groups.size(); ++g) {
        int64_t after = 1;
        std::vector<std::string> terms;
        for (size_t i = groups[g].size(); i-- > 0;) {
          int64_t dim = groups[g][i];
          terms.push_back(after == 1 ? fmt::format("d{}", dim) : fmt::format("d{} * {}", dim, after));
          after *= out[dim];
        }
        midIndex[g] = fmt::format("{}", fmt::join(terms, " + "));
      }
    }
    // mid dim i is source dim perm[i].
    std::vector<std::string> sourceIndex(mid.size());
    for (size_t i = 0; i < mid.size(); ++i)
      sourceIndex[transpose.ints[i]] = midIndex[i];
    std::vector<std::string> dims;
    for (size_t i = 0; i < out.size(); ++i)
      dims.push_back(fmt::format("d{}", i));
    std::string sourceMap =
        fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(sourceIndex, ", "));
    std::string init = emptyTensor(out, node.dtype);
    std::string name = fresh(), in = fresh(), outArg = fresh();
    std::string et = elementType(id);
    line("{} = linalg.generic {{indexing_maps = [{}, {}], iterator_types = {}}} ins({} : {}) outs({} : {}) {{", name,
         sourceMap, identityMap(out.size()), parallelIterators(out.size()), value(source), type(source), init,
         type(id));
    line("^bb0({}: {}, {}: {}):", in, et, outArg, et);
    line("  linalg.yield {} : {}", in, et);
    line("}} -> {}", type(id));
    names_[id] = name;
  }

  void emitElementwise(int id) {
    const Node &node = graph_.node(id);
    std::vector<std::string> inputs, inputTypes, maps, blockArgs;
    std::vector<std::string> scalarOperands; // SSA value used in the body for each operand
    for (int operand : node.operands) {
      if (isConstant(operand)) {
        scalarOperands.push_back(value(operand));
        continue;
      }
      std::string blockArg = fresh();
      const Node &source = graph_.node(operand);
      if (auto reduced = keptReductions_.find(operand); reduced != keptReductions_.end()) {
        // A keepdims reduction is read before its size-1 axis was added
        // back: no reshape between the two ops, so fusion sees through.
        inputs.push_back(reduced->second.first);
        inputTypes.push_back(reduced->second.second);
        maps.push_back(broadcastMap(source.shape, node.shape, source.ints[0]));
      } else {
        inputs.push_back(value(operand));
        inputTypes.push_back(type(operand));
        maps.push_back(broadcastMap(source.shape, node.shape));
      }
      blockArgs.push_back(fmt::format("{}: {}", blockArg, elementType(operand)));
      scalarOperands.push_back(blockArg);
    }
    maps.push_back(identityMap(node.shape.size()));
    std::string outArg = fresh();
    blockArgs.push_back(fmt::format("{}: {}", outArg, elementType(id)));
    std::string init = emptyTensor(node.shape, node.dtype);
    std::string name = fresh();
    std::string ins =
        inputs.empty() ? "" : fmt::format("ins({} : {}) ", fmt::join(inputs, ", "), fmt::join(inputTypes, ", "));
    line("{} = linalg.generic {{indexing_maps = [{}], iterator_types = {}}} {}outs({} : {}) {{", name,
         fmt::join(maps, ", "), parallelIterators(node.shape.size()), ins, init, type(id));
    line("^bb0({}):", fmt::join(blockArgs, ", "));
    std::string result = fresh();
    if (node.kind == OpKind::Unary)
      line("  {} = {} {} : {}", result, unaryOp(static_cast<UnaryFn>(node.fn)), scalarOperands[0], elementType(id));
    else
      line("  {} = {} {}, {} : {}", result, binaryOp(static_cast<BinaryFn>(node.fn)), scalarOperands[0],
           scalarOperands[1], elementType(id));
    line("  linalg.yield {} : {}", result, elementType(id));
    line("}} -> {}", type(id));
    names_[id] = name;
  }

  void emitReduce(int id) {
    const Node &node = graph_.node(id);
    int source = node.operands[0];
    int64_t axis = node.ints[0];
    bool keepdims = node.ints[1] != 0;
    Shape reduced = graph_.node(source).shape;
    reduced.erase(reduced.begin() + axis);
    auto fn = static_cast<ReduceFn>(node.fn);
    double identity = fn == ReduceFn::Sum ? 0.0 : -INFINITY;
    std::string init = filledTensor(reduced, node.dtype, identity);
    std::string name = fresh(), in = fresh(), acc = fresh(), combined = fresh();
    std::string et = elementType(id);
    line("{} = linalg.reduce ins({} : {}) outs({} : {}) dimensions = [{}]", name, value(source), type(source), init,
         tensorType(reduced, node.dtype), axis);
    line("  ({}: {}, {}: {}) {{", in, et, acc, et);
    line("    {} = {} {}, {} : {}", combined, fn == ReduceFn::Sum ? "arith.addf" : "arith.maximumf", in, acc, et);
    line("    linalg.yield {} : {}", combined, et);
    line("  }}");
    if (keepdims) {
      keptReductions_[id] = {name, tensorType(reduced, node.dtype)};
      names_[id] = reshapeValue(name, reduced, node.shape, node.dtype);
    } else {
      names_[id] = name;
    }
  }

  void emitMatMul(int id) {
    const Node &node = graph_.node(id);
    int a = node.operands[0], b = node.operands[1];
    const Shape &sa = graph_.node(a).shape, &sb = graph_.node(b).shape;
    if (sa.size() == 3 && sb.size() == 3) {
      std::string init = filledTensor(node.shape, node.dtype, 0.0);
      std::string name = fresh();
      line("{} = linalg.batch_matmul ins({}, {} : {}, {}) outs({} : {}) -> {}", name, value(a), value(b), type(a),
           type(b), init, type(id), type(id));
      names_[id] = name;
      return;
    }
    // [..., M, K] x [K, N]: fold the leading dimensions into M.
    Shape flatA{numElements(sa) / sa.back(), sa.back()};
    Shape flatOut{flatA[0], sb[1]};
    std::string lhs = reshapeValue(value(a), sa, flatA, node.dtype);
    std::string init = filledTensor(flatOut, node.dtype, 0.0);
    std::string name = fresh();
    line("{} = linalg.matmul ins({}, {} : {}, {}) outs({} : {}) -> {}", name, lhs, value(b),
         tensorType(flatA, node.dtype), type(b), init, tensorType(flatOut, node.dtype),
         tensorType(flatOut, node.dtype));
    names_[id] = reshapeValue(name, flatOut, node.shape, node.dtype);
  }

  void emitTranspose(int id) {
    const Node &node = graph_.node(id);
    int source = node.operands[0];
    std::string init = emptyTensor(node.shape, node.dtype);
    std::string name = fresh();
    line("{} = linalg.transpose ins({} : {}) outs({} : {}) permutation = [{}]", name, value(source), type(source), init,
         type(id), fmt::join(node.ints, ", "));
    names_[id] = name;
  }

  void emitSlice(int id) {
    const Node &node = graph_.node(id);
    int source = node.operands[0];
    const Shape &sourceShape = graph_.node(source).shape;
    std::vector<int64_t> offsets(sourceShape.size(), 0), strides(sourceShape.size(), 1);
    offsets[node.ints[0]] = node.ints[1];
    // A select drops its axis: a rank-reducing slice.
    Shape sizes = node.shape;
    if (node.ints.size() > 2 && node.ints[2] != 0)
      sizes.insert(sizes.begin() + node.ints[0], 1);
    std::string name = fresh();
    line("{} = tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", name, value(source), fmt::join(offsets, ", "),
         fmt::join(sizes, ", "), fmt::join(strides, ", "), type(source), type(id));
    names_[id] = name;
  }

  // out[..., c] = table[clamp(ids[...]), c]. Ids outside the table are
  // clamped into it, so a bad id can never read outside the table's memory
  // (the reference clamps the same way).
  void emitGather(int id) {
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

  // The run-time position held by a rank-0 i32 tensor, as an index clamped
  // to [0, last].
  std::string clampedPosition(int position, int64_t last) {
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
  void emitInsert(int id) {
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

  // mask[j] = j > position ? masked : 0
  void emitPositionMask(int id) {
    const Node &node = graph_.node(id);
    int position = node.operands[0];
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

  void emitTriu(int id) {
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

  const Graph &graph_;
  std::string &out_;
  std::vector<bool> live_;
  std::map<int, std::string> names_;
  std::string scope_; // the scope of the node being emitted: its ops' location
  // Keepdims reductions: the value before the size-1 axis went back, and its type.
  std::map<int, std::pair<std::string, std::string>> keptReductions_;
  int counter_ = 0;
};

} // namespace

std::string emitMlir(const Program &program) {
  std::string out = "module {\n";
  for (auto &function : program.functions) {
    if (function->outputs().empty())
      fail("function '{}' has no outputs", function->name());
    FunctionEmitter(*function, out).emit();
  }
  out += "}\n";
  return out;
}

} // namespace mlpipe::fe
