// FunctionEmitter: writes one front-end function as a func.func of linalg
// on tensors (see mlir_emitter.h for the op each node becomes). Its members
// live in several files, one concern each:
//   function_emitter.cpp    the signature, liveness, values and constants, the
//                           node dispatch, linalg.generic and type conversion
//   emit_elementwise.cpp    Unary, Binary, Compare, Select, Convert
//   emit_reduce_matmul.cpp  Reduce, ReduceWindow, MatMul
//   emit_shapes.cpp         Reshape, Transpose, Slice, StridedSlice,
//                           Broadcast, Concat, Literal
//   emit_indexing.cpp       Gather, Iota, Pad, Insert, DynamicSlice,
//                           DynamicUpdateSlice, PositionMask, Triu:
//                           bodies and offsets that compute indices
//   emit_control.cpp        While and LoopResult: scf.while, its regions
//                           written by emitters of their own graphs
#pragma once

#include "frontend/emitter/mlir_text.h"
#include "frontend/graph.h"
#include "frontend/mlir_emitter.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlpipe::fe {

// `graph` with the nodes the emitter does not write (convolutions, sorts,
// gathers and scatters) lowered to those it does; null when it has none
// (mlir_emitter.cpp).
std::unique_ptr<Graph> withOpsLowered(const Graph &graph);

} // namespace mlpipe::fe

namespace mlpipe::fe::emitter {

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
  // An emitter of a region's graph, numbering its values on from (and
  // back into) `counter`, its enclosing emitter's: a region sees the names
  // around it, so none may repeat.
  FunctionEmitter(const Graph &graph, std::string &out, int &counter) : graph_(graph), out_(out), counter_(counter) {}

  void emit();
  // The graph's nodes as the body of a region whose block arguments are
  // `arguments` (one per input of the graph); returns the value of each
  // output, in order, for the region's terminator.
  std::vector<std::string> emitRegion(const std::vector<std::string> &arguments);

private:
  // ---- Lines, values and constants (function_emitter.cpp) ----

  std::string outputValue(const std::string &name, int id, bool repeated);

  // One line of the function, with the node's scope as the location of the
  // operation it ends.
  template <typename... Args> void line(fmt::format_string<Args...> format, Args &&...args) {
    std::string text = fmt::format(format, std::forward<Args>(args)...);
    out_ += "    ";
    out_ += text;
    if (!scope_.empty() && endsOperation(text))
      out_ += " loc(" + quote(scope_) + ")";
    out_ += '\n';
  }
  static bool endsOperation(const std::string &text);

  std::string fresh() { return fmt::format("%v{}", counter_++); }
  const std::string &value(int id);
  std::string type(int id) const { return tensorType(graph_.node(id).shape, graph_.node(id).dtype); }
  std::string elementType(int id) const { return mlirType(graph_.node(id).dtype); }
  bool isConstant(int id) const { return graph_.node(id).kind == OpKind::Constant; }
  std::optional<int> constantSource(int id) const;
  static bool isElementwise(OpKind kind);
  void markLive();
  static std::string quote(const std::string &text);
  std::string unsignedNote(int id) const;
  void emitSignature();
  std::string constant(double v, DType dtype);
  std::string scalarConstant(int id, DType dtype);
  std::string indexConstant(int64_t v);
  std::string emptyTensor(const Shape &shape, DType dtype);
  std::string filledTensor(const Shape &shape, DType dtype, double v);
  std::string reshapeValue(const std::string &source, const Shape &from, const Shape &to, DType dtype);
  void emitNode(int id);

  // ---- linalg.generic and its body (function_emitter.cpp) ----

  std::string emitGeneric(const Shape &shape, DType dtype, const std::vector<GenericInput> &inputs,
                          const std::function<std::string(const std::vector<std::string> &)> &body);

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
  std::string toCompute(const std::string &v, DType dtype);
  // Why a value is rounded to 16 bits: it is an op's result stored in its
  // type, or the program converts it.
  enum class Rounding { Storage, Convert };
  std::string fromCompute(const std::string &v, DType dtype, Rounding rounding = Rounding::Storage);
  std::string valueAs(int id, DType dtype);
  std::string convertedResult(const std::string &v, const Shape &shape, DType from, DType to);

  // ---- Elementwise ops (emit_elementwise.cpp) ----

  std::string convertScalar(const std::string &v, DType from, DType to, Rounding rounding = Rounding::Storage);
  std::string integerDivide(const std::string &a, const std::string &b, DType dtype);
  std::string integerRemainder(const std::string &a, const std::string &b, DType dtype);
  std::string signedOverflow(const std::string &a, const std::string &b, DType dtype);
  std::string integerShift(BinaryFn fn, const std::string &a, const std::string &b, DType dtype);
  std::string floatSign(const std::string &x, DType compute);
  std::string floatSignBit(const std::string &x, DType compute);
  std::string integerSign(const std::string &x, DType dtype);
  std::string integerPopcount(const std::string &x, DType dtype);
  void emitElementwise(int id);

  // ---- Reductions, windowed reductions and matmuls (emit_reduce_matmul.cpp) ----

  void emitReduce(int id);
  void emitReduceWindow(int id);
  void emitMatMul(int id);

  // ---- Ops that move elements (emit_shapes.cpp) ----

  std::optional<int> transposeUnderReshape(int id) const;
  void emitTransposingReshape(int id);
  void emitTranspose(int id);
  void emitSlice(int id);
  void emitStridedSlice(int id);
  void emitBroadcast(int id);
  void emitConcat(int id);
  void emitLiteral(int id);
  static std::string nestedLiteral(const std::vector<double> &values, const Shape &shape, DType dtype);

  // ---- Ops whose bodies compute indices (emit_indexing.cpp) ----

  void emitGather(int id);
  void emitIota(int id);
  void emitPad(int id);
  std::string clampedPosition(int position, int64_t last);
  void emitInsert(int id);
  std::string clampedStart(int start, int64_t limit);
  void emitDynamicSlice(int id);
  void emitPositionMask(int id);
  void emitTriu(int id);

  // ---- Loops (emit_control.cpp) ----

  void emitWhile(int id);

  const Graph &graph_;
  std::string &out_;
  std::vector<bool> live_;
  std::map<int, std::string> names_;
  std::string scope_; // the scope of the node being emitted: its ops' location
  // Keepdims reductions: the value before the size-1 axis went back, and its type.
  std::map<int, std::pair<std::string, std::string>> keptReductions_;
  std::map<std::pair<int, DType>, std::string> scalarConstants_, converted_;
  int ownCounter_ = 0;
  int &counter_ = ownCounter_;
};

} // namespace mlpipe::fe::emitter
