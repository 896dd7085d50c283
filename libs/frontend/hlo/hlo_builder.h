// The HLO builder: records a parsed module's ENTRY computation into a
// front-end graph. The ENTRY computation is walked in dependency order (so
// operands may be defined after their use, and a cycle is reported as one)
// and each instruction is recorded into the graph; call and fusion
// computations are walked the same way with their operands as parameters,
// which inlines them. Every result is checked against the shape the
// instruction declares.
//
// The Builder's members live in several files, one concern each:
//   hlo_builder.cpp               the walk, the dispatch by opcode, tuples, inlining,
//                                 the entry's inputs, outputs and layouts
//   hlo_attributes.cpp            an instruction's attributes, operands and declared shape
//   hlo_opcodes.cpp               the opcode tables: unary, binary, and those refused
//   hlo_ops_elementwise.cpp       constants and elementwise arithmetic, compare, select, convert
//   hlo_ops_shape.cpp             broadcast, reshape, bitcast, transpose, slice, concatenate, pad, iota,
//                                 dynamic-slice, dynamic-update-slice
//   hlo_ops_reduce_dot_gather.cpp reduce, dot and gather
//   hlo_ops_scatter_gather.cpp    scatter, and gather in its general form
//   hlo_ops_arg_reduce.cpp        reduce of two inputs: argmax and argmin
//   hlo_ops_reduce_window.cpp     reduce-window: pooling and running reductions
//   hlo_ops_control.cpp           while (unrolled, or run as a loop), conditional (every branch, then a select) and
//                                 asynchronous pairs (fusion-start, fusion-done, ...)
//   hlo_ops_convolution.cpp       convolution: dimension labels, window and groups
//   hlo_ops_sort.cpp              sort: the comparator read as keys, then ranks
//   hlo_ops_scan.cpp              scan: a running reduction, or unrolled
//   hlo_ops_custom_call.cpp       custom-call to cuBLAS GEMMs and cuDNN convolutions, read as dots and
//                                 convolutions with their epilogues
#pragma once

#include "frontend/graph.h"
#include "frontend/hlo/hlo_cursor.h"
#include "frontend/hlo/hlo_syntax.h"

#include <fmt/format.h>

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mlpipe::fe::hlo {

struct Json; // a backend_config (hlo_json.h)

// A value: one tensor, or a tuple of values.
struct Value {
  std::optional<Tensor> tensor;
  std::vector<Value> elements;
  bool defaultLayout = true; // as its instruction declares it (bitcast reads this)
  // Its declared layout, minor to major, when it is a plain permutation of
  // the axes (empty: row-major, or a tiled layout, which defaultLayout says).
  std::vector<int64_t> minorToMajor;
  // A library call's workspace or an asynchronous start's context: no
  // values (it may be empty, u8[0]); reading it is refused.
  bool unread = false;
};

// The element types mlpipe reads, by HLO's names ("s32", "pred"), and
// their list as messages give it ("pred, s8, ... and f64").
const std::map<std::string_view, DType> &elementTypes();
std::string elementTypeList();

// HLO's spelling of an element type ("s32", "pred") and of an array shape
// ("f32[2,3]").
const char *hloTypeName(DType dtype);
std::string hloShape(DType dtype, const Shape &dims);

// Whether a written shape (every element of a tuple) has the default,
// row-major layout.
bool hasDefaultLayout(const ShapeText &shape);

// An array shape's layout, minor to major, when it is written as a plain
// permutation of its axes (no tiling or memory space after ':'); nullopt
// otherwise. An absent layout is the default one, {rank-1, ..., 0}.
std::optional<std::vector<int64_t>> plainLayout(const ShapeText &shape);

// An op the reader reads, and what it reads of it ("" when it reads every
// form): the single list `trace --list-ops` prints and the builder lets
// through (hlo_opcodes.cpp).
struct SupportedOp {
  std::string_view opcode, limits;
};
const std::vector<SupportedOp> &supportedOps();
const SupportedOp *findSupportedOp(std::string_view opcode);

// The opcodes recorded as the graph's unary and binary functions, and every
// opcode XLA knows that mlpipe does not read (to tell "not supported" from
// "unknown").
const std::map<std::string_view, UnaryFn> &unaryOpcodes();
const std::map<std::string_view, BinaryFn> &binaryOpcodes();
const std::set<std::string_view> &unsupportedOpcodes();

class Builder {
public:
  Builder(const ModuleText &module, const std::string &source) : module_(module), source_(source) {}

  Program build();

private:
  [[noreturn]] void fail(Location loc, const std::string &message) const { failAt(source_, loc, message); }

  [[noreturn]] void failOp(const Instruction &ins, const std::string &message) const {
    fail(ins.opcodeLoc, fmt::format("{} %{}: {}", ins.opcode, ins.name, message));
  }

  // ---- The walk, the entry and its results (hlo_builder.cpp) ----

  void checkEntryLayout(const Computation &entry) const;
  void createInputs(const Computation &entry);
  Value evaluate(size_t index, const std::vector<Value> &arguments, int depth, Location callLoc);
  Value buildChecked(const Instruction &ins, const std::vector<const Value *> &operands,
                     const std::vector<Value> &arguments, bool isEntry, int depth);
  static std::string scopeName(const Instruction &ins);
  void checkDeclared(const Instruction &ins, const ShapeText &declared, const Value &value) const;
  Value tensorValue(Tensor t) const {
    Value value;
    value.tensor = t;
    return value;
  }
  Value buildInstruction(const Instruction &ins, const std::vector<const Value *> &operands,
                         const std::vector<Value> &arguments, bool isEntry, int depth);
  Value buildParameter(const Instruction &ins, const std::vector<Value> &arguments, bool isEntry);
  static Value tupleOf(const std::vector<const Value *> &operands);
  Value tupleElement(const Instruction &ins, const std::vector<const Value *> &operands);
  Value inlineCall(const Instruction &ins, const std::vector<const Value *> &operands, int depth);
  [[noreturn]] void refuse(const Instruction &ins) const;
  static size_t parameterCount(const Computation &computation);
  static void flatten(const Value &value, std::vector<Tensor> &out);
  void markIndexInputs();

  // ---- Attributes, operands and declared shapes (hlo_attributes.cpp) ----

  static DType elementType(const ShapeText &shape);
  const ShapeText &arrayShape(const Instruction &ins) const;
  const Attribute *findAttribute(const Instruction &ins, std::string_view name) const;
  const Attribute &attribute(const Instruction &ins, std::string_view name) const;
  // Parses an attribute's text with `parse`, which must read all of it.
  template <typename Parse> auto parseAttribute(const Attribute &attribute, Parse parse) const {
    Cursor in(attribute.text, source_, attribute.valueLoc);
    auto result = parse(in);
    if (in.next() != '\0' || !in.atEnd())
      in.unexpected(fmt::format("the end of the {} attribute", attribute.name));
    return result;
  }
  std::vector<int64_t> intList(const Attribute &attribute) const;
  std::vector<int64_t> optionalIntList(const Instruction &ins, std::string_view name) const;
  int64_t intValue(const Attribute &attribute) const;
  std::string word(const Attribute &attribute) const;
  std::optional<Json> backendConfig(const Instruction &ins) const;
  size_t computationNamed(const Attribute &attribute) const;
  Tensor tensorOperand(const Instruction &ins, const std::vector<const Value *> &operands, size_t i) const;
  void expectOperands(const Instruction &ins, size_t count) const;
  std::string describe(Tensor t) const { return hloShape(t.dtype(), t.shape()); }
  void expectSameShape(const Instruction &ins, const std::vector<Tensor> &tensors, bool scalarsAllowed) const;

  // ---- Constants and elementwise ops (hlo_ops_elementwise.cpp) ----

  Value buildConstant(const Instruction &ins);
  std::optional<Value> buildElementwise(const Instruction &ins, const std::vector<const Value *> &operands);
  void checkLiteralValue(const Instruction &ins, double v, DType dtype) const;
  static double largestFinite(DType dtype);

  // ---- Shape ops (hlo_ops_shape.cpp) ----

  std::optional<Value> buildShapeOp(const Instruction &ins, const std::vector<const Value *> &operands);
  Tensor bitcast(const Instruction &ins, const Value &operand, const ShapeText &shape);
  Tensor slice(const Instruction &ins, Tensor x);
  Tensor pad(const Instruction &ins, Tensor x, Tensor value);
  Tensor reverse(const Instruction &ins, Tensor x);
  // x with each of `axes` (valid, distinct) in reverse order.
  Tensor reversed(Tensor x, const std::vector<int64_t> &axes);
  Tensor dynamicSlice(const Instruction &ins, const std::vector<const Value *> &operands);

  // ---- Reduce, dot and gather (hlo_ops_reduce_dot_gather.cpp) ----

  std::optional<Value> buildReduceDotGather(const Instruction &ins, const std::vector<const Value *> &operands);
  ReduceFn reduction(const Instruction &ins, const Attribute &toApply, DType dtype) const;
  static bool isIdentity(ReduceFn fn, double value, DType dtype);
  static BinaryFn combiningFunction(ReduceFn fn);
  std::vector<int64_t> reducedAxes(const Instruction &ins, int64_t rank) const;
  Tensor reduce(const Instruction &ins, const std::vector<const Value *> &operands);
  struct DotDimensions {
    std::vector<int64_t> lhsBatch, rhsBatch, lhsContracting, rhsContracting;
  };
  Tensor dot(const Instruction &ins, Tensor lhs, Tensor rhs);
  Tensor dotGeneral(const Instruction &ins, Tensor lhs, Tensor rhs, const DotDimensions &dims,
                    std::optional<DType> result);
  Tensor gather(const Instruction &ins, Tensor table, Tensor indices);

  // ---- Scatter and the general gather (hlo_ops_scatter_gather.cpp) ----

  Tensor gatherSlices(const Instruction &ins, Tensor operand, Tensor indices);
  int scatterCombiner(const Instruction &ins, DType dtype) const;
  std::vector<int> scatterCombiners(const Instruction &ins, const std::vector<DType> &dtypes) const;
  Value scatter(const Instruction &ins, const std::vector<const Value *> &operands);

  // ---- Windowed reductions (hlo_ops_reduce_window.cpp) ----

  std::vector<WindowAxis> window(const Instruction &ins, int64_t rank, std::string_view axesWhat) const;
  Tensor reduceWindow(const Instruction &ins, const std::vector<const Value *> &operands);

  // ---- Convolutions (hlo_ops_convolution.cpp) ----

  ConvolutionDims dimensionLabels(const Instruction &ins, int64_t rank) const;
  ConvolutionDims convolutionAttributes(const Instruction &ins, int64_t rank) const;
  Tensor convolution(const Instruction &ins, Tensor input, Tensor kernel);
  // The graph's Convolution of `dims` (its window included), checked against
  // the operands' shapes, computed in `result`.
  Tensor checkedConvolution(const Instruction &ins, Tensor input, Tensor kernel, const ConvolutionDims &dims,
                            DType result);

  // ---- Library calls: cuBLAS GEMMs and cuDNN convolutions (hlo_ops_custom_call.cpp) ----

  Value customCall(const Instruction &ins, const std::vector<const Value *> &operands);
  Tensor cudnnConvolution(const Instruction &ins, const std::vector<const Value *> &operands, const std::string &target,
                          const ShapeText &result);
  Tensor cudnnBackwardFilter(const Instruction &ins, const std::vector<const Value *> &operands,
                             const ShapeText &result);
  Tensor cudnnBackwardInput(const Instruction &ins, const std::vector<const Value *> &operands,
                            const ShapeText &result);
  Tensor cublasGemm(const Instruction &ins, const std::vector<const Value *> &operands, const std::string &target,
                    const ShapeText &result);

  // ---- Reduce of two inputs: argmax and argmin (hlo_ops_arg_reduce.cpp) ----

  std::pair<double, double> runComparator(const Instruction &ins, const Computation &region,
                                          const std::array<double, 4> &parameters) const;
  ReduceFn argReduction(const Instruction &ins, const Attribute &toApply, DType valueType, DType indexType) const;
  Value argReduce(const Instruction &ins, const std::vector<const Value *> &operands);

  // ---- Sort and scan (hlo_ops_sort.cpp, hlo_ops_scan.cpp) ----

  bool runSortComparator(const Instruction &ins, const std::string &sorting, const Computation &region,
                         const std::vector<double> &parameters, const std::vector<DType> &types) const;
  std::vector<SortKey> sortComparatorKeys(const Instruction &ins, const std::string &sorting, const Computation &region,
                                          const std::vector<DType> &types) const;
  Value sort(const Instruction &ins, const std::vector<const Value *> &operands);
  std::optional<ReduceFn> scanReduction(const Computation &region, DType dtype) const;
  Value scan(const Instruction &ins, const std::vector<const Value *> &operands, int depth);

  // ---- Control flow: while and conditional (hlo_ops_control.cpp) ----

  // A loop's counter: the tuple element its condition compares with
  // `bound` in `direction` (counter on the left), stepped by `step` in the
  // body.
  struct LoopCounter {
    size_t element = 0;
    CompareFn direction = CompareFn::Lt;
    double bound = 0, step = 0;
    DType dtype = DType::i32;
  };
  // How many trips a loop makes, or -1 and why it never ends.
  struct TripCount {
    int64_t count = 0;
    std::string why;
  };
  // The outermost loop being unrolled, named when the module passes the
  // operation limit.
  struct Unrolling {
    const Instruction *loop = nullptr;
    int64_t trips = 0;
  };
  std::optional<LoopCounter> loopCounter(const Computation &condition, const Computation &body, std::string &why) const;
  std::optional<int64_t> knownTripCount(const Instruction &ins) const;
  static TripCount countTrips(const LoopCounter &counter, double start);
  Value whileLoop(const Instruction &ins, const std::vector<const Value *> &operands, int depth);
  Value runtimeLoop(const Instruction &ins, size_t conditionIndex, size_t bodyIndex, const Value &initial, int depth);
  std::vector<size_t> computationList(const Attribute &attribute) const;
  Value selectValue(Tensor pred, const Value &onTrue, const Value &onFalse);
  Value conditional(const Instruction &ins, const std::vector<const Value *> &operands, int depth);
  static Value placeholder();
  std::optional<Value> asyncOp(const Instruction &ins, const std::vector<const Value *> &operands,
                               const std::vector<Value> &arguments, bool isEntry, int depth);

  const ModuleText &module_;
  const std::string &source_;
  Graph *graph_ = nullptr;
  std::vector<Tensor> inputs_;
  std::vector<size_t> active_; // computations being walked, for recursion
  std::optional<Unrolling> unrolling_;
};

} // namespace mlpipe::fe::hlo
