// Text emission of linalg-on-tensors MLIR from a recorded graph. See the
// header for the op each node becomes. The text is parsed and verified by the
// compiler before anything else sees it, so a slip here is caught at once.
//
// f16 and bf16 values are stored in their own type but computed in f32: an
// elementwise body extends its operands (arith.extf) and truncates its
// result (arith.truncf); reductions and matmuls run on f32 copies of their
// operands and truncate the result.
#include "frontend/mlir_emitter.h"

#include "support/error.h"
#include "support/host_tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

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
    if (dtype == DType::f16)
      return std::isnan(value) ? "0x7E00" : value > 0 ? "0x7C00" : "0xFC00";
    if (dtype == DType::bf16)
      return std::isnan(value) ? "0x7FC0" : value > 0 ? "0x7F80" : "0xFF80";
    return fmt::format("0x{:016X}", std::bit_cast<uint64_t>(value));
  }
  if (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16)
    return fmt::format("{:.9e}", static_cast<double>(static_cast<float>(value)));
  return fmt::format("{:.17e}", value);
}

// A scalar of any element type as MLIR writes it: 1.5e+00, 7, true.
std::string scalarLiteral(double value, DType dtype) {
  if (isFloat(dtype))
    return floatLiteral(value, dtype);
  if (dtype == DType::i1)
    return value != 0 ? "true" : "false";
  return fmt::format("{}", saturatingInt64(storedValue(dtype, value)));
}

// arith.constant's value: "1.5e+00 : f32", "7 : i32", "true" (an i1 is
// written without its type).
std::string typedLiteral(double value, DType dtype) {
  if (dtype == DType::i1)
    return scalarLiteral(value, dtype);
  return fmt::format("{} : {}", scalarLiteral(value, dtype), dtypeName(dtype));
}

// The type arithmetic on `dtype` runs in: f32 for the 16-bit floats.
DType computeType(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16 ? DType::f32 : dtype; }

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

const char *unaryFloatOp(UnaryFn fn) {
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
  case UnaryFn::Log:
    return "math.log";
  case UnaryFn::Abs:
    return "math.absf";
  case UnaryFn::Not:
    break;
  }
  fail("internal: no float form of this elementwise function");
}

const char *binaryFloatOp(BinaryFn fn) {
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
  case BinaryFn::Pow:
    return "math.powf";
  case BinaryFn::And:
  case BinaryFn::Or:
    break;
  }
  fail("internal: no float form of this elementwise arithmetic");
}

// Integer and i1 forms; Div has its own sequence (emitIntegerDivide).
const char *binaryIntegerOp(BinaryFn fn, DType dtype) {
  bool truth = dtype == DType::i1; // on i1, max is or and min is and
  switch (fn) {
  case BinaryFn::Add:
    return "arith.addi";
  case BinaryFn::Sub:
    return "arith.subi";
  case BinaryFn::Mul:
    return "arith.muli";
  case BinaryFn::Max:
    return truth ? "arith.ori" : "arith.maxsi";
  case BinaryFn::Min:
    return truth ? "arith.andi" : "arith.minsi";
  case BinaryFn::And:
    return "arith.andi";
  case BinaryFn::Or:
    return "arith.ori";
  case BinaryFn::Div:
  case BinaryFn::Pow:
    break;
  }
  fail("internal: no integer form of this elementwise arithmetic");
}

// The arith.cmpf / arith.cmpi predicate: ordered float comparisons (NaN
// compares false) except une, which is true for NaN as XLA's NE is; i1
// compares unsigned (true > false).
std::string comparePredicate(CompareFn fn, DType dtype) {
  static const char *floats[] = {"oeq", "une", "olt", "ole", "ogt", "oge"};
  static const char *signedInts[] = {"eq", "ne", "slt", "sle", "sgt", "sge"};
  static const char *truths[] = {"eq", "ne", "ult", "ule", "ugt", "uge"};
  auto index = static_cast<size_t>(fn);
  return isFloat(dtype) ? floats[index] : dtype == DType::i1 ? truths[index] : signedInts[index];
}

// The identity of each reduction in `dtype`, where the reduction starts.
double reductionIdentity(ReduceFn fn, DType dtype) {
  bool integer = isInteger(dtype);
  switch (fn) {
  case ReduceFn::Sum:
    return 0.0;
  case ReduceFn::Prod:
    return 1.0;
  case ReduceFn::Max:
    return integer ? static_cast<double>(dtype == DType::i32 ? std::numeric_limits<int32_t>::min()
                                                             : std::numeric_limits<int64_t>::min())
                   : -INFINITY;
  case ReduceFn::Min:
    return integer ? static_cast<double>(dtype == DType::i32 ? std::numeric_limits<int32_t>::max()
                                                             : std::numeric_limits<int64_t>::max())
                   : INFINITY;
  }
  return 0.0;
}

const char *reductionOp(ReduceFn fn, DType dtype) {
  bool integer = isInteger(dtype);
  switch (fn) {
  case ReduceFn::Sum:
    return integer ? "arith.addi" : "arith.addf";
  case ReduceFn::Prod:
    return integer ? "arith.muli" : "arith.mulf";
  case ReduceFn::Max:
    return integer ? "arith.maxsi" : "arith.maximumf";
  case ReduceFn::Min:
    return integer ? "arith.minsi" : "arith.minimumf";
  }
  return "";
}

// One input of a linalg.generic: its value, tensor type, indexing map and
// element type.
struct GenericInput {
  std::string value, type, map;
  DType elementType;
};

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

private:
  // Each result is a tensor an op computes, and no two are the same value:
  // bufferization's results-to-out-params (MLIR 22) crashes on a function
  // that returns its argument or a constant. So an input or a repeated
  // output is copied (linalg.copy, which canonicalization keeps, into a
  // fresh bufferization.alloc_tensor) and a constant is written by a
  // generic that yields it.
  std::string outputValue(const std::string &name, int id, bool repeated) {
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
    if (node.kind != OpKind::Input && !repeated)
      return value(id);
    // A tensor of its own to copy into: tensor.empty values of one type are
    // merged by cse, and bufferization would then copy in place.
    std::string init = fresh(), copy = fresh();
    line("{} = bufferization.alloc_tensor() : {}", init, type(id));
    line("{} = linalg.copy ins({} : {}) outs({} : {}) -> {}", copy, value(id), type(id), init, type(id), type(id));
    return copy;
  }

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
  // The tensor value of node `id`; a Constant (a scalar captured by the ops
  // that use it) becomes a rank-0 tensor here if something needs it whole.
  const std::string &value(int id) {
    if (isConstant(id) && !names_.count(id)) {
      std::string name = fresh();
      line("{} = arith.constant dense<{}> : {}", name, scalarLiteral(graph_.node(id).value, graph_.node(id).dtype),
           type(id));
      names_[id] = name;
    }
    return names_.at(id);
  }
  std::string type(int id) const { return tensorType(graph_.node(id).shape, graph_.node(id).dtype); }
  std::string elementType(int id) const { return dtypeName(graph_.node(id).dtype); }
  bool isConstant(int id) const { return graph_.node(id).kind == OpKind::Constant; }

  // The Constant an elementwise operand holds everywhere: the operand itself,
  // or the Constant a Broadcast repeats (HLO spells every scalar constant of
  // an elementwise op that way). Such an operand is captured as a scalar, so
  // no generic fills a tensor with it.
  std::optional<int> constantSource(int id) const {
    const Node &node = graph_.node(id);
    if (node.kind == OpKind::Constant)
      return id;
    if (node.kind == OpKind::Broadcast && isConstant(node.operands[0]))
      return node.operands[0];
    return std::nullopt;
  }

  static bool isElementwise(OpKind kind) {
    return kind == OpKind::Unary || kind == OpKind::Binary || kind == OpKind::Compare || kind == OpKind::Select ||
           kind == OpKind::Convert;
  }

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
    line("{} = arith.constant {}", name, typedLiteral(v, dtype));
    return name;
  }

  // Constant node `id` as a scalar of `dtype` (the type the op using it
  // computes in), emitted once per type before its first use.
  std::string scalarConstant(int id, DType dtype) {
    auto key = std::make_pair(id, dtype);
    auto found = scalarConstants_.find(key);
    if (found != scalarConstants_.end())
      return found->second;
    return scalarConstants_[key] = constant(graph_.node(id).value, dtype);
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
    case OpKind::Constant: // emitted where it is used, in the type it is used in
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

  // Emits a linalg.generic over `shape` producing `dtype` elements from
  // `inputs`; `body` gets the block argument of each input, emits the body's
  // ops with bodyLine and returns the value to yield. Returns the result.
  std::string emitGeneric(const Shape &shape, DType dtype, const std::vector<GenericInput> &inputs,
                          const std::function<std::string(const std::vector<std::string> &)> &body) {
    std::vector<std::string> values, types, maps, blockArgs, args;
    for (const GenericInput &input : inputs) {
      values.push_back(input.value);
      types.push_back(input.type);
      maps.push_back(input.map);
      args.push_back(fresh());
      blockArgs.push_back(fmt::format("{}: {}", args.back(), dtypeName(input.elementType)));
    }
    maps.push_back(identityMap(shape.size()));
    std::string outArg = fresh();
    blockArgs.push_back(fmt::format("{}: {}", outArg, dtypeName(dtype)));
    std::string init = emptyTensor(shape, dtype);
    std::string name = fresh();
    std::string resultType = tensorType(shape, dtype);
    std::string ins =
        inputs.empty() ? "" : fmt::format("ins({} : {}) ", fmt::join(values, ", "), fmt::join(types, ", "));
    line("{} = linalg.generic {{indexing_maps = [{}], iterator_types = {}}} {}outs({} : {}) {{", name,
         fmt::join(maps, ", "), parallelIterators(shape.size()), ins, init, resultType);
    line("^bb0({}):", fmt::join(blockArgs, ", "));
    std::string result = body(args);
    bodyLine("linalg.yield {} : {}", result, dtypeName(dtype));
    line("}} -> {}", resultType);
    return name;
  }

  template <typename... Args> void bodyLine(fmt::format_string<Args...> format, Args &&...args) {
    out_ += "      ";
    out_ += fmt::format(format, std::forward<Args>(args)...);
    out_ += '\n';
  }

  // Body helpers: one op each, returning the new value.
  template <typename... Args> std::string bodyOp(fmt::format_string<Args...> format, Args &&...args) {
    std::string name = fresh();
    bodyLine("{} = {}", name, fmt::format(format, std::forward<Args>(args)...));
    return name;
  }
  std::string bodyConstant(double v, DType dtype) { return bodyOp("arith.constant {}", typedLiteral(v, dtype)); }
  // A 16-bit float extended to f32 (the compute type); others unchanged.
  std::string toCompute(const std::string &v, DType dtype) {
    if (computeType(dtype) == dtype)
      return v;
    return bodyOp("arith.extf {} : {} to f32", v, dtypeName(dtype));
  }
  // An f32 result truncated to the 16-bit float it is stored as.
  std::string fromCompute(const std::string &v, DType dtype) {
    if (computeType(dtype) == dtype)
      return v;
    return bodyOp("arith.truncf {} : f32 to {}", v, dtypeName(dtype));
  }

  // One element converted as XLA's convert does (graph.h: convertValue).
  std::string convertScalar(const std::string &v, DType from, DType to) {
    if (from == to)
      return v;
    std::string fromName = dtypeName(from), toName = dtypeName(to);
    if (to == DType::i1) {
      if (isFloat(from))
        return bodyOp("arith.cmpf une, {}, {} : {}", toCompute(v, from), bodyConstant(0, computeType(from)),
                      dtypeName(computeType(from)));
      return bodyOp("arith.cmpi ne, {}, {} : {}", v, bodyConstant(0, from), fromName);
    }
    if (isFloat(from) && isFloat(to)) {
      std::string wide = toCompute(v, from);
      DType wideType = computeType(from), target = computeType(to);
      if (wideType != target)
        wide = bodyOp("arith.{} {} : {} to {}", dtypeSize(wideType) < dtypeSize(target) ? "extf" : "truncf", wide,
                      dtypeName(wideType), dtypeName(target));
      return fromCompute(wide, to);
    }
    if (isFloat(to)) { // from an integer or i1
      std::string converted = bodyOp("arith.{} {} : {} to {}", from == DType::i1 ? "uitofp" : "sitofp", v, fromName,
                                     dtypeName(computeType(to)));
      return fromCompute(converted, to);
    }
    if (isFloat(from)) { // to an integer: truncate toward zero, saturating, NaN -> 0
      DType wideType = computeType(from);
      std::string wideName = dtypeName(wideType), wide = toCompute(v, from);
      double limit = to == DType::i32 ? 2147483648.0 : 9223372036854775808.0; // 2^31, 2^63: exact in floats
      std::string high = bodyConstant(limit, wideType), low = bodyConstant(-limit, wideType);
      std::string tooHigh = bodyOp("arith.cmpf oge, {}, {} : {}", wide, high, wideName);
      std::string tooLow = bodyOp("arith.cmpf olt, {}, {} : {}", wide, low, wideName);
      std::string inRange = bodyOp("arith.cmpf olt, {}, {} : {}", wide, high, wideName);
      inRange = bodyOp("arith.andi {}, {} : i1", inRange, bodyOp("arith.cmpf oge, {}, {} : {}", wide, low, wideName));
      // fptosi only ever sees a value it can convert (NaN and the
      // out-of-range values become 0 first).
      std::string safe = bodyOp("arith.select {}, {}, {} : {}", inRange, wide, bodyConstant(0, wideType), wideName);
      std::string integer = bodyOp("arith.fptosi {} : {} to {}", safe, wideName, toName);
      std::string maximum = bodyConstant(reductionIdentity(ReduceFn::Min, to), to);
      std::string minimum = bodyConstant(reductionIdentity(ReduceFn::Max, to), to);
      std::string saturated = bodyOp("arith.select {}, {}, {} : {}", tooLow, minimum, integer, toName);
      return bodyOp("arith.select {}, {}, {} : {}", tooHigh, maximum, saturated, toName);
    }
    // integer or i1 to integer
    if (from == DType::i1)
      return bodyOp("arith.extui {} : i1 to {}", v, toName);
    return bodyOp("arith.{} {} : {} to {}", dtypeSize(from) < dtypeSize(to) ? "extsi" : "trunci", v, fromName, toName);
  }

  // XLA's integer division: truncating, x / 0 = -1, INT_MIN / -1 = INT_MIN.
  std::string integerDivide(const std::string &a, const std::string &b, DType dtype) {
    std::string t = dtypeName(dtype);
    double minimum = reductionIdentity(ReduceFn::Max, dtype);
    std::string zero = bodyConstant(0, dtype), minusOne = bodyConstant(-1, dtype), one = bodyConstant(1, dtype);
    std::string byZero = bodyOp("arith.cmpi eq, {}, {} : {}", b, zero, t);
    std::string overflow =
        bodyOp("arith.andi {}, {} : i1", bodyOp("arith.cmpi eq, {}, {} : {}", a, bodyConstant(minimum, dtype), t),
               bodyOp("arith.cmpi eq, {}, {} : {}", b, minusOne, t));
    std::string unsafe = bodyOp("arith.ori {}, {} : i1", byZero, overflow);
    std::string divisor = bodyOp("arith.select {}, {}, {} : {}", unsafe, one, b, t);
    std::string quotient = bodyOp("arith.divsi {}, {} : {}", a, divisor, t);
    std::string wrapped = bodyOp("arith.select {}, {}, {} : {}", overflow, a, quotient, t);
    return bodyOp("arith.select {}, {}, {} : {}", byZero, minusOne, wrapped, t);
  }

  // Unary, Binary, Compare, Select and Convert: one linalg.generic over the
  // result, reading each tensor operand through a broadcasting map and
  // capturing Constant operands as scalars.
  void emitElementwise(int id) {
    const Node &node = graph_.node(id);
    // The type the (value) operands are read in: the result's, except for
    // Compare and Convert, whose operands have their own. A Constant
    // adopts the type of the tensors it combines with.
    DType operandType = node.dtype;
    if (node.kind == OpKind::Compare || node.kind == OpKind::Convert) {
      operandType = graph_.node(node.operands[0]).dtype;
      for (int operand : node.operands)
        if (!constantSource(operand))
          operandType = graph_.node(operand).dtype;
    }
    std::vector<GenericInput> inputs;
    std::vector<std::optional<std::string>> captured; // a Constant operand's scalar
    for (size_t i = 0; i < node.operands.size(); ++i) {
      int operand = node.operands[i];
      DType readType = node.kind == OpKind::Select && i == 0 ? DType::i1 : operandType;
      if (auto constant = constantSource(operand)) {
        bool computed = node.kind != OpKind::Select;
        captured.push_back(scalarConstant(*constant, computed ? computeType(readType) : readType));
        continue;
      }
      captured.push_back(std::nullopt);
      const Node &source = graph_.node(operand);
      if (auto reduced = keptReductions_.find(operand); reduced != keptReductions_.end()) {
        // A keepdims reduction is read before its size-1 axis was added
        // back: no reshape between the two ops, so fusion sees through.
        inputs.push_back({reduced->second.first, reduced->second.second,
                          broadcastMap(source.shape, node.shape, source.ints[0]), source.dtype});
      } else {
        inputs.push_back({value(operand), type(operand), broadcastMap(source.shape, node.shape), source.dtype});
      }
    }
    names_[id] = emitGeneric(node.shape, node.dtype, inputs, [&](const std::vector<std::string> &args) {
      // Each operand's value in the body: its block argument or its scalar.
      std::vector<std::string> operands;
      std::vector<bool> isScalar;
      size_t next = 0;
      for (auto &scalar : captured) {
        operands.push_back(scalar ? *scalar : args[next++]);
        isScalar.push_back(scalar.has_value());
      }
      auto computed = [&](size_t i) { return isScalar[i] ? operands[i] : toCompute(operands[i], operandType); };
      DType compute = computeType(operandType);
      std::string t = dtypeName(compute);
      switch (node.kind) {
      case OpKind::Unary: {
        auto fn = static_cast<UnaryFn>(node.fn);
        std::string x = computed(0);
        if (isFloat(operandType))
          return fromCompute(bodyOp("{} {} : {}", unaryFloatOp(fn), x, t), node.dtype);
        if (fn == UnaryFn::Abs)
          return bodyOp("math.absi {} : {}", x, t);
        if (fn == UnaryFn::Not)
          return bodyOp("arith.xori {}, {} : {}", x, bodyConstant(operandType == DType::i1 ? 1 : -1, compute), t);
        return bodyOp("arith.subi {}, {} : {}", bodyConstant(0, compute), x, t); // Neg
      }
      case OpKind::Binary: {
        auto fn = static_cast<BinaryFn>(node.fn);
        std::string a = computed(0), b = computed(1);
        if (isFloat(operandType))
          return fromCompute(bodyOp("{} {}, {} : {}", binaryFloatOp(fn), a, b, t), node.dtype);
        if (fn == BinaryFn::Div)
          return integerDivide(a, b, compute);
        return bodyOp("{} {}, {} : {}", binaryIntegerOp(fn, compute), a, b, t);
      }
      case OpKind::Compare:
        return bodyOp("arith.{} {}, {}, {} : {}", isFloat(operandType) ? "cmpf" : "cmpi",
                      comparePredicate(static_cast<CompareFn>(node.fn), operandType), computed(0), computed(1), t);
      case OpKind::Select:
        return bodyOp("arith.select {}, {}, {} : {}", operands[0], operands[1], operands[2], dtypeName(node.dtype));
      case OpKind::Convert:
        return convertScalar(operands[0], operandType, node.dtype);
      default:
        fail("internal: not an elementwise node");
      }
    });
  }

  // A tensor node converted elementwise to `dtype` (f16/bf16 operands of
  // reductions and matmuls run in f32), once per node and type.
  std::string valueAs(int id, DType dtype) {
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
  std::string convertedResult(const std::string &v, const Shape &shape, DType from, DType to) {
    if (from == to)
      return v;
    std::vector<GenericInput> inputs = {{v, tensorType(shape, from), identityMap(shape.size()), from}};
    return emitGeneric(shape, to, inputs,
                       [&](const std::vector<std::string> &args) { return convertScalar(args[0], from, to); });
  }

  void emitReduce(int id) {
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
    std::string et = dtypeName(compute);
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
           name, fmt::join(dims, ", "), fmt::join(sourceIndex, ", "), fmt::join(dims, ", "),
           fmt::join(resultIndex, ", "), fmt::join(iterators, ", "), input, tensorType(sourceShape, compute), init,
           tensorType(reduced, compute));
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

  void emitMatMul(int id) {
    const Node &node = graph_.node(id);
    int a = node.operands[0], b = node.operands[1];
    const Shape &sa = graph_.node(a).shape, &sb = graph_.node(b).shape;
    DType compute = computeType(node.dtype);
    std::string lhsValue = valueAs(a, compute), rhsValue = valueAs(b, compute);
    std::string lhsType = tensorType(sa, compute), rhsType = tensorType(sb, compute);
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
    std::string lhs = reshapeValue(lhsValue, sa, flatA, compute);
    std::string init = filledTensor(flatOut, compute, 0.0);
    std::string name = fresh();
    line("{} = linalg.matmul ins({}, {} : {}, {}) outs({} : {}) -> {}", name, lhs, rhsValue, tensorType(flatA, compute),
         rhsType, init, tensorType(flatOut, compute), tensorType(flatOut, compute));
    std::string result = reshapeValue(name, flatOut, node.shape, compute);
    names_[id] = convertedResult(result, node.shape, compute, node.dtype);
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

  // HLO's broadcast: operand axis i read at result axis ints[i] (or at 0 if
  // it has size 1); a Constant operand fills the result.
  void emitBroadcast(int id) {
    const Node &node = graph_.node(id);
    int source = node.operands[0];
    if (isConstant(source)) {
      std::string scalar = scalarConstant(source, node.dtype);
      names_[id] = emitGeneric(node.shape, node.dtype, {}, [&](const std::vector<std::string> &) { return scalar; });
      return;
    }
    const Shape &in = graph_.node(source).shape;
    std::vector<std::string> dims, results;
    for (size_t i = 0; i < node.shape.size(); ++i)
      dims.push_back(fmt::format("d{}", i));
    for (size_t i = 0; i < in.size(); ++i)
      results.push_back(in[i] == 1 && node.shape[node.ints[i]] != 1 ? "0" : dims[node.ints[i]]);
    std::string map = fmt::format("affine_map<({}) -> ({})>", fmt::join(dims, ", "), fmt::join(results, ", "));
    names_[id] = emitGeneric(node.shape, node.dtype, {{value(source), type(source), map, node.dtype}},
                             [](const std::vector<std::string> &args) { return args[0]; });
  }

  // The index along axis ints[0], converted to the element type.
  void emitIota(int id) {
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
  void emitPad(int id) {
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
      return bodyOp("arith.select {}, {}, {} : {}", inside, element, padValue, dtypeName(node.dtype));
    });
  }

  // Each part inserted at its offset along the axis of an empty tensor.
  void emitConcat(int id) {
    const Node &node = graph_.node(id);
    int64_t axis = node.ints[0];
    std::string result = emptyTensor(node.shape, node.dtype);
    int64_t offset = 0;
    for (int part : node.operands) {
      const Shape &shape = graph_.node(part).shape;
      std::vector<int64_t> offsets(shape.size(), 0), strides(shape.size(), 1);
      offsets[axis] = offset;
      std::string name = fresh();
      line("{} = tensor.insert_slice {} into {}[{}] [{}] [{}] : {} into {}", name, value(part), result,
           fmt::join(offsets, ", "), fmt::join(shape, ", "), fmt::join(strides, ", "), type(part), type(id));
      result = name;
      offset += shape[axis];
    }
    names_[id] = result;
  }

  // arith.constant dense<...>: a splat when every element is the same, the
  // raw little-endian bytes in hex when one is not finite, else nested lists.
  void emitLiteral(int id) {
    const Node &node = graph_.node(id);
    const std::vector<double> &values = node.values;
    std::string body;
    bool splat = std::all_of(values.begin(), values.end(), [&](double v) {
      return std::bit_cast<uint64_t>(v) == std::bit_cast<uint64_t>(values.front());
    });
    bool finite = std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
    if (splat) {
      body = scalarLiteral(values.front(), node.dtype);
    } else if (!finite) {
      HostTensor bytes = HostTensor::fromDoubles(node.dtype, node.shape, values);
      body = "\"0x";
      for (size_t i = 0; i < bytes.byteSize(); ++i)
        body += fmt::format("{:02X}", static_cast<const unsigned char *>(bytes.data())[i]);
      body += "\"";
    } else {
      body = nestedLiteral(values, node.shape, node.dtype);
    }
    std::string name = fresh();
    line("{} = arith.constant dense<{}> : {}", name, body, type(id));
    names_[id] = name;
  }

  static std::string nestedLiteral(const std::vector<double> &values, const Shape &shape, DType dtype) {
    std::string text;
    std::vector<int64_t> index(shape.size(), 0);
    for (size_t flat = 0; flat < values.size(); ++flat) {
      // Open a bracket for every axis whose index just returned to 0.
      size_t opened = shape.size();
      while (opened > 0 && index[opened - 1] == 0)
        --opened;
      if (flat > 0)
        text += ", ";
      text += std::string(shape.size() - opened, '[');
      text += scalarLiteral(values[flat], dtype);
      size_t axis = shape.size();
      while (axis > 0) {
        --axis;
        if (++index[axis] < shape[axis])
          break;
        index[axis] = 0;
        text += ']';
      }
    }
    return text;
  }

  void emitStridedSlice(int id) {
    const Node &node = graph_.node(id);
    size_t rank = node.shape.size();
    std::vector<int64_t> starts(node.ints.begin(), node.ints.begin() + rank),
        strides(node.ints.begin() + rank, node.ints.end());
    std::string name = fresh();
    line("{} = tensor.extract_slice {}[{}] [{}] [{}] : {} to {}", name, value(node.operands[0]),
         fmt::join(starts, ", "), fmt::join(node.shape, ", "), fmt::join(strides, ", "), type(node.operands[0]),
         type(id));
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
  std::map<std::pair<int, DType>, std::string> scalarConstants_, converted_;
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
