// The tensor front end: a small NumPy-like API that records operations into a
// graph instead of computing them.
//
// Model code is written once against this API:
//
//   Graph g("gelu", DType::f32);
//   Tensor x = g.input("x", {64, 256});
//   Tensor y = 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
//   g.output("y", y);
//
// and the same graph is then either emitted as linalg-on-tensors MLIR
// (frontend/mlir_emitter.h) or evaluated eagerly in float64 as the reference
// (reference/evaluator.h). Shapes are static and checked as operations are
// recorded, with NumPy's broadcasting rules.
#pragma once

#include "support/tensor_types.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlpipe::fe {

class Graph;

enum class OpKind {
  Input,     // a named function argument
  Constant,  // a float scalar, broadcast wherever it is used
  Triu,      // out[i, j] = (j - i >= k) ? 1 : 0, the causal-mask building block
  Unary,     // elementwise function of one tensor
  Binary,    // elementwise function of two tensors, broadcasting
  Reduce,    // sum, max, min, product, and or or over one axis, optionally keeping it as size 1
  MatMul,    // [M,K]x[K,N], [..,M,K]x[K,N] or batched [B,M,K]x[B,K,N]
  Reshape,   // same elements, new shape
  Transpose, // permutation of the axes
  Slice,     // a contiguous range along one axis
  Gather,    // rows of a table picked by integer ids
  // The operations XLA's HLO needs beyond NumPy's (frontend/hlo_reader.h):
  Broadcast,    // operand axis i becomes axis ints[i] of a larger shape (HLO broadcast)
  Compare,      // elementwise comparison of two tensors, broadcasting; gives i1
  Select,       // elementwise where(pred, a, b), broadcasting
  Iota,         // the index along axis ints[0], in any element type
  Pad,          // edge and interior padding with a scalar; ints = {lows..., highs..., interiors...}
  Concat,       // the operands joined along axis ints[0]
  Convert,      // elementwise change of element type
  Literal,      // a dense constant tensor, its elements in `values`
  StridedSlice, // a box with a stride along every axis; ints = {starts..., strides...}
  // KV-cache decoding (frontend/graph.h: insert, positionMask):
  Insert,       // a tensor with a block written into it, at a static or run-time position
  PositionMask, // 0 up to a run-time position, a large negative value after it (per row: ints = {rows per position})
  // HLO's reduce-window: a reduction (fn) over a window placed at every output position
  ReduceWindow, // ints = {size, stride, padLow, baseDilation, windowDilation} per axis, in blocks
  // HLO's run-time indexing: operands {x or base, [update,] one rank-0 integer start per axis}
  DynamicSlice,       // a box of x, its corner at run-time starts, each clamped so the box stays inside
  DynamicUpdateSlice, // base with update written at run-time starts, clamped the same way
  // HLO's convolution: operands {input, kernel}; ints encode ConvolutionDims
  // (convolutionDims reads them). The reference computes it from its
  // definition; emitMlir lowers it to pads, slices and a matmul first
  // (frontend/convolution.h).
  Convolution,
  // HLO's sort: operands {the sort's operands}; ints = {axis, then (operand,
  // descending, SortOrder) per key, most significant first}; an s32 result:
  // where along the axis each element goes, ties kept in their order
  // (sortKeys reads them). The reference computes it by sorting; emitMlir
  // lowers it to comparisons counted along the axis first (frontend/sort.h).
  SortRank,
  // HLO's gather and scatter in their general form: operands {operand,
  // indices} and {operand, indices, updates}; ints encode a SliceIndexing
  // (sliceIndexing reads them), and a Scatter's fn is its combiner (a
  // ReduceFn, or kScatterAssign). The reference computes them from their
  // definitions; emitMlir lowers them first (frontend/scatter_gather.h).
  GatherSlices, // a slice of the operand at each start index, starts clamped so it stays inside
  Scatter,      // the operand with each update window combined in where it lies wholly inside
  // HLO's while, run as a loop (not unrolled): operands {the initial
  // carried tensors}; `condition` and `body` are closed graphs over the
  // carried tensors (their inputs, in order): the condition returns one
  // rank-0 i1, the body the next carried tensors. The While node has no
  // value of its own; LoopResult nodes read its results.
  While,
  LoopResult, // result ints[0] of the While node operands[0]: the carried tensor when the condition fails
};

// Integer forms (Neg, Abs, Sign, Popcnt on integers; Not on i1 and integers;
// Add..Min, Rem, And, Or, Xor, the shifts) follow XLA: two's complement
// wrap-around, bitwise Not/And/Or/Xor, division and remainder that
// truncate, with x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 = INT_MIN
// and INT_MIN % -1 = 0. A shift amount is read as unsigned: from the bit
// width up, left and logical right shifts give 0 and the arithmetic right
// shift gives the sign (0 or -1). On floats, Sign keeps +-0 and NaN, Rem is
// C's fmod (the dividend's sign), RoundEven rounds halves to even and
// RoundAway away from zero; and on floats Max and Min propagate NaN.
enum class UnaryFn {
  Neg,
  Exp,
  Tanh,
  Sqrt,
  Rsqrt,
  Log,
  Abs,
  Not,
  Sin,
  Cos,
  Tan,
  Erf,
  Expm1,
  Log1p,
  Floor,
  Ceil,
  RoundEven,
  RoundAway,
  Sign,
  Popcnt,
  SignBit, // floats: 1 where the sign bit is set (-0 and -NaN included), else 0
};
enum class BinaryFn {
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
  Pow,
  And,
  Or,
  Atan2,
  Rem,
  Xor,
  ShiftLeft,
  ShiftRightLogical,
  ShiftRightArithmetic,
};
// And and Or are bitwise on integers and logical on i1 (XLA's all and any).
enum class ReduceFn { Sum, Max, Min, Prod, And, Or };
enum class CompareFn { Eq, Ne, Lt, Le, Gt, Ge };

// One axis of a reduce-window's window, as XLA's Window says it: the
// window's size, the step between windows, the padding before and after,
// and the dilation of the input (base) and of the window. With both
// dilations, window element w of output o reads position o * stride + w *
// windowDilation - padLow of the input dilated by baseDilation: a real
// element where that is a multiple of it, and nothing in a hole or in the
// padding.
struct WindowAxis {
  int64_t size = 1, stride = 1, padLow = 0, padHigh = 0, baseDilation = 1, windowDilation = 1;
};

// A convolution as XLA's ConvGeneralDilated says it: where the batch, the
// feature and each spatial axis are in the input, the kernel and the result
// (any permutation: NHWC, NCHW, ...), the window along each spatial axis
// (its size is the kernel's there), and the groups. With feature groups F,
// input feature group g (of C / F features) meets only the kernel's output
// features g * (O / F) ... (g + 1) * (O / F) - 1; with batch groups G, the
// input batch is G groups of B / G, group g meeting only output features
// g * (O / G) ... (g + 1) * (O / G) - 1, and the result has batch B / G.
// Output element (b, o, y) is the sum over the kernel's input features i
// and window positions k of input(batch, feature, x) * kernel(i, o, k),
// where x is position y * stride + k * windowDilation - padLow of the input
// dilated by baseDilation, and nothing where that is padding or a hole.
struct ConvolutionDims {
  int64_t inputBatch = 0, inputFeature = 1;
  std::vector<int64_t> inputSpatial;
  int64_t kernelInput = 0, kernelOutput = 1;
  std::vector<int64_t> kernelSpatial;
  int64_t outputBatch = 0, outputFeature = 1;
  std::vector<int64_t> outputSpatial;
  std::vector<WindowAxis> window; // one per spatial axis
  int64_t featureGroups = 1, batchGroups = 1;
};

// One key of a sort, as an HLO sort's comparator is read: which operand,
// which way, and for floats which order. Numeric is the order of `<` with
// -0 equal to +0 and every NaN equal and after everything (JAX's order for
// floats); Total is XLA's TOTALORDER, -NaN < -inf < ... < -0 < +0 < ... <
// inf < +NaN (NaNs of one sign equal, whatever their payload). Integers
// and pred have one order, their type's (unsigned types read unsigned).
enum class SortOrder { Numeric, Total };
struct SortKey {
  int64_t operand = 0;
  bool descending = false;
  SortOrder order = SortOrder::Numeric;
};
// Where the slices of XLA's gather and the windows of its scatter lie, in
// one form for both. "Result" is the gather's result or the scatter's
// updates: its axes are batch axes (one per axis of the indices other than
// indexVectorDim, in order) and window axes (windowDims, increasing: one
// per operand axis not in collapsedDims or operandBatchingDims, in order).
// Element r of the result meets the operand at, along operand axis d, the
// slice's start plus r's coordinate on d's window axis (0 when d has none).
// The start is element k of the index vector of r's batch coordinates
// (the indices along indexVectorDim, or the one index when indexVectorDim
// is the indices' rank) where d = startIndexMap[k]; the batch coordinate
// on indicesBatchingDims[i] where d = operandBatchingDims[i]; else 0.
// gather: collapsedDims is collapsed_slice_dims, windowDims offset_dims,
// and sliceSizes the slice's size on every operand axis; each start is
// clamped to [0, dim - size]. scatter: collapsedDims is
// inserted_window_dims, windowDims update_window_dims, the window's size is
// the updates' on window axes (1 elsewhere), and a window that does not lie
// wholly inside the operand is skipped.
struct SliceIndexing {
  int64_t indexVectorDim = 0;
  std::vector<int64_t> windowDims, collapsedDims, startIndexMap;
  std::vector<int64_t> operandBatchingDims, indicesBatchingDims;
  std::vector<int64_t> sliceSizes; // gather only
};
// A Scatter node's fn when its combiner assigns the update (the region
// returns its second parameter); otherwise fn is the ReduceFn combining.
constexpr int kScatterAssign = -1;

// The scalar meaning of each elementwise function, in float64: the reference
// evaluates with these and the recorder folds constants with them.
double applyUnary(UnaryFn fn, double x);
double applyBinary(BinaryFn fn, double a, double b);
// The same for elements of `dtype`: integer and i1 semantics for those
// types, the float64 forms above (unrounded) for floats.
double applyUnary(UnaryFn fn, double x, DType dtype);
double applyBinary(BinaryFn fn, double a, double b, DType dtype);
bool applyCompare(CompareFn fn, double a, double b);
// Whether key value a sorts before b under `order` ascending (values as
// the reference holds them: floats with their sign, NaN's included).
bool sortsBefore(SortOrder order, double a, double b);
// What `value` of element type `from` becomes in `to`, as XLA converts:
// floats to integers truncate toward zero and saturate (NaN gives 0),
// anything to i1 is value != 0; the result is rounded to `to`.
double convertValue(double value, DType from, DType to);

struct Node {
  Node(OpKind kind, int fn = 0, std::vector<int> operands = {}, Shape shape = {}, DType dtype = DType::f32)
      : kind(kind), fn(fn), operands(std::move(operands)), shape(std::move(shape)), dtype(dtype) {}

  OpKind kind;
  int fn = 0;                // UnaryFn / BinaryFn / ReduceFn
  std::vector<int> operands; // node ids
  Shape shape;
  DType dtype;
  std::vector<int64_t> ints;  // axis+keepdims, permutation, slice {axis, start}, triu k,
                              // and for an index Input the number of rows it indexes
  double value = 0;           // Constant
  std::string name;           // Input
  std::string scope;          // where in the model it was recorded: "h.3.ln_1" (see Graph::Scope)
  std::vector<double> values; // Literal, C order
  bool inout = false;         // Input: updated in place by the function (a KV cache)
  // While: the condition and the body (see OpKind::While).
  std::shared_ptr<const Graph> condition, body;
};

// A Convolution node's dimensions, decoded from its ints.
ConvolutionDims convolutionDims(const Node &node);
// A SortRank node's axis and keys, decoded from its ints.
int64_t sortAxis(const Node &node);
std::vector<SortKey> sortKeys(const Node &node);
// A GatherSlices or Scatter node's indexing, decoded from its ints.
SliceIndexing sliceIndexing(const Node &node);

class Graph;

// A handle on one recorded value. Cheap to copy.
class Tensor {
public:
  Tensor() = default;
  Tensor(Graph *graph, int id) : graph_(graph), id_(id) {}

  Graph &graph() const { return *graph_; }
  int id() const { return id_; }
  const Shape &shape() const;
  DType dtype() const;
  int64_t rank() const { return static_cast<int64_t>(shape().size()); }
  int64_t dim(int64_t axis) const; // negative axes count from the end

private:
  Graph *graph_ = nullptr;
  int id_ = -1;
};

// One function: named inputs, recorded operations, named outputs, and named
// probes (intermediate values the reference can report but the compiled
// function does not return).
class Graph {
public:
  Graph(std::string name, DType floatType);

  // Names the part of the model the nodes recorded while it lives belong to;
  // scopes nest with dots ("h.3" then "ln_1" gives "h.3.ln_1"). The emitter
  // writes the scope as each op's location, so fusions and kernels are named
  // for what they compute ("ln_1_row_reduction").
  //
  //   { Graph::Scope scope(g, "ln_1"); h = nn::layerNorm(x, w, b); }
  class Scope {
  public:
    Scope(Graph &graph, const std::string &name);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Graph &graph_;
  };

  const std::string &name() const { return name_; }
  DType floatType() const { return floatType_; }

  // A named argument. `dtype` defaults to the graph's float type.
  Tensor input(const std::string &name, Shape shape);
  Tensor input(const std::string &name, Shape shape, DType dtype);
  // An i32 input of row ids into a table of `rows` rows; random test inputs
  // for it are drawn from [0, rows).
  Tensor indexInput(const std::string &name, Shape shape, int64_t rows);
  void output(const std::string &name, Tensor value);
  // The new value of an in-out input (what it holds when the function
  // returns); written in place, never copied.
  void update(Tensor inout, Tensor value);
  void probe(const std::string &name, Tensor value);

  // Records that integer input `ids` holds row ids into a table of `rows`
  // rows (random test inputs for it are drawn from [0, rows)).
  void markIndexInput(Tensor ids, int64_t rows);

  // A scalar of the function's float type; in a bf16 or f16 function its
  // value is kept to f32 (the type elementwise math computes in), not
  // rounded to 16 bits.
  Tensor constant(double value);
  // A scalar of `dtype` (its value rounded to it). A constant takes the type
  // of the tensor it combines with, among floats or among integers.
  Tensor constant(double value, DType dtype);
  // triu(ones(rows, cols), k): 1 where column - row >= k, else 0; of the
  // graph's float type unless `dtype` says another.
  Tensor triu(int64_t rows, int64_t cols, int64_t k, std::optional<DType> dtype = std::nullopt);

  Tensor unary(UnaryFn fn, Tensor x);
  Tensor binary(BinaryFn fn, Tensor a, Tensor b);
  Tensor reduce(ReduceFn fn, Tensor x, int64_t axis, bool keepdims);
  // a @ b, accumulated in f32 (f64 for f64), its result rounded to the
  // operands' type, or kept in f32 when `result` asks it of 16-bit
  // operands (as a dot's preferred element type).
  Tensor matmul(Tensor a, Tensor b, std::optional<DType> result = std::nullopt);
  Tensor reshape(Tensor x, Shape shape);
  Tensor transpose(Tensor x, std::vector<int64_t> permutation);
  Tensor slice(Tensor x, int64_t axis, int64_t start, int64_t length);
  // x[..., index, ...] along `axis`, the axis dropped (NumPy's x[i]).
  Tensor selectIndex(Tensor x, int64_t axis, int64_t index);
  Tensor gather(Tensor table, Tensor ids);
  // `base` with `update` written at `offsets`; along `positionAxis` (when
  // not -1) the offset is the run-time value of `position`, a rank-0 i32
  // tensor, clamped so the block stays inside. When base is an in-out
  // input, the write happens in its buffer: a KV cache grows in place.
  Tensor insert(Tensor base, Tensor update, std::vector<int64_t> offsets, int64_t positionAxis = -1,
                Tensor position = {});
  // [length]: 0 where the index is at most `position` (rank-0 i32), else
  // `masked`: the mask of a causal step at a run-time position.
  Tensor positionMask(int64_t length, Tensor position, double masked, std::optional<DType> dtype = std::nullopt);
  // [rows, 1, length]: row r's positionMask at positions[r / rowsPerPosition]
  // (positions: [rows / rowsPerPosition] i32): batched decoding's mask, B
  // sequences of H heads each. One op, no reshape of the positions: a
  // reshape next to the scores' product would be folded into it.
  Tensor positionsMask(int64_t rows, int64_t length, Tensor positions, int64_t rowsPerPosition, double masked,
                       std::optional<DType> dtype = std::nullopt);
  // An input the function updates in place (its buffer is both read and
  // written): inserts into it land in the caller's memory.
  Tensor inoutInput(const std::string &name, Shape shape);

  // x placed in `shape`: axis i of x is axis dimensions[i] of the result
  // (distinct axes; x's size there is the same, or 1 to be repeated).
  Tensor broadcast(Tensor x, Shape shape, std::vector<int64_t> dimensions);
  Tensor compare(CompareFn fn, Tensor a, Tensor b);
  Tensor select(Tensor pred, Tensor onTrue, Tensor onFalse);
  Tensor iota(Shape shape, DType dtype, int64_t axis);
  // Adds low[i] and high[i] elements of `value` (a scalar) before and after
  // axis i, and interior[i] between its elements; negative low or high
  // cut elements off instead.
  Tensor pad(Tensor x, Tensor value, std::vector<int64_t> low, std::vector<int64_t> high,
             std::vector<int64_t> interior);
  Tensor concat(std::vector<Tensor> parts, int64_t axis);
  Tensor convert(Tensor x, DType dtype);
  // A dense constant; `values` in C order, rounded to `dtype`.
  Tensor literal(Shape shape, DType dtype, std::vector<double> values);
  // Elements start[i], start[i] + stride[i], ... below limit[i] on each axis.
  Tensor stridedSlice(Tensor x, std::vector<int64_t> start, std::vector<int64_t> limit, std::vector<int64_t> stride);
  // `fn` over the window at every output position (XLA's reduce-window);
  // a window that holds no element (all padding or holes) gives the
  // reduction's identity.
  Tensor reduceWindow(ReduceFn fn, Tensor x, const std::vector<WindowAxis> &window);
  // The box of `sizes` whose corner is at `starts` (rank-0 integer tensors,
  // one per axis, read at run time), each start clamped to [0, dim - size]
  // as XLA's dynamic-slice clamps it, so the box is always inside x.
  Tensor dynamicSlice(Tensor x, const std::vector<Tensor> &starts, Shape sizes);
  // base with `update` written with its corner at `starts`, clamped the same
  // way (XLA's dynamic-update-slice).
  Tensor dynamicUpdateSlice(Tensor base, Tensor update, const std::vector<Tensor> &starts);
  // XLA's convolution of `input` by `kernel` (two float tensors of one type)
  // as `dims` say; a result with an empty axis is refused.
  Tensor convolution(Tensor input, Tensor kernel, const ConvolutionDims &dims);
  // Where each element of `operands` (tensors of one shape) goes when they
  // are sorted together along `axis` by `keys` (lexicographically, the
  // first most significant), ties kept in their order: an s32 tensor of
  // their shape holding positions along the axis.
  Tensor sortRank(const std::vector<Tensor> &operands, int64_t axis, const std::vector<SortKey> &keys);
  // XLA's gather of slices of `operand` at `indices` (integers) as `dims`
  // say (SliceIndexing); an empty result is refused.
  Tensor gatherSlices(Tensor operand, Tensor indices, const SliceIndexing &dims);
  // XLA's scatter: `operand` with each window of `updates` combined in by
  // `fn` (a ReduceFn, or kScatterAssign) at `indices`, as `dims` say;
  // windows not wholly inside are skipped. Duplicates are all combined;
  // with kScatterAssign the last update (in the updates' row-major order)
  // aimed at an element is the one kept.
  Tensor scatter(Tensor operand, Tensor indices, Tensor updates, const SliceIndexing &dims, int fn);
  // A loop run at run time: while `condition` (a graph whose inputs are the
  // carried tensors and whose one output is a rank-0 i1) holds, the carried
  // tensors become what `body` (the same inputs; one output per carried
  // tensor, of its shape and type) computes from them. Starts from
  // `initial`; returns the carried tensors once the condition fails (the
  // initial ones when it fails at once).
  std::vector<Tensor> whileLoop(const std::vector<Tensor> &initial, std::shared_ptr<const Graph> condition,
                                std::shared_ptr<const Graph> body);

  // A copy of this graph in which every node of `kind` is replaced by what
  // `expand` records for it in the copy, given its operands there (with the
  // node's scope); it must have the node's shape and type. Every other
  // node, and the inputs, outputs, updates and probes, are copied as they
  // are.
  using Expansion = std::function<Tensor(Graph &copy, const Node &node, const std::vector<Tensor> &operands)>;
  std::unique_ptr<Graph> expanded(OpKind kind, const Expansion &expand) const;

  const std::vector<Node> &nodes() const { return nodes_; }
  const Node &node(int id) const { return nodes_.at(static_cast<size_t>(id)); }
  const std::vector<int> &inputs() const { return inputs_; }
  const std::vector<std::pair<std::string, int>> &outputs() const { return outputs_; }
  // (in-out input node, its new value)
  const std::vector<std::pair<int, int>> &updates() const { return updates_; }
  const std::vector<std::pair<std::string, int>> &probes() const { return probes_; }

private:
  Tensor add(Node node);
  void checkOwned(Tensor t, const char *what) const;
  // A Constant operand of an op that needs a tensor becomes a rank-0 Literal.
  Tensor materialized(Tensor t);
  // The element type of an elementwise op over these operands: the tensors'
  // common type, which a Constant adopts if it is of the same kind.
  DType commonType(const std::vector<Tensor> &operands, const char *op) const;

  std::string name_;
  DType floatType_;
  std::vector<std::string> scopes_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_;
  std::vector<std::pair<std::string, int>> outputs_;
  std::vector<std::pair<int, int>> updates_;
  std::vector<std::pair<std::string, int>> probes_;
};

// A module: one or more functions compiled together (GPT-2's sublayer mode
// has four).
struct Program {
  std::vector<std::unique_ptr<Graph>> functions;

  Graph &addFunction(const std::string &name, DType floatType);
  const Graph &function(const std::string &name) const;
};

// ---- NumPy-style free functions ---------------------------------------------
Tensor operator+(Tensor a, Tensor b);
Tensor operator-(Tensor a, Tensor b);
Tensor operator*(Tensor a, Tensor b);
Tensor operator/(Tensor a, Tensor b);
Tensor operator-(Tensor a);
Tensor operator+(Tensor a, double b);
Tensor operator+(double a, Tensor b);
Tensor operator-(Tensor a, double b);
Tensor operator-(double a, Tensor b);
Tensor operator*(Tensor a, double b);
Tensor operator*(double a, Tensor b);
Tensor operator/(Tensor a, double b);
Tensor operator/(double a, Tensor b);

Tensor exp(Tensor x);
Tensor tanh(Tensor x);
Tensor sqrt(Tensor x);
Tensor rsqrt(Tensor x);
Tensor log(Tensor x);
Tensor abs(Tensor x);
Tensor maximum(Tensor a, Tensor b);
Tensor minimum(Tensor a, Tensor b);
Tensor power(Tensor a, Tensor b);
// np.where(pred, a, b)
Tensor where(Tensor pred, Tensor a, Tensor b);
// x.astype(dtype)
Tensor astype(Tensor x, DType dtype);

Tensor sum(Tensor x, int64_t axis, bool keepdims = false);
Tensor max(Tensor x, int64_t axis, bool keepdims = false);
Tensor mean(Tensor x, int64_t axis, bool keepdims = false);

Tensor matmul(Tensor a, Tensor b);
Tensor reshape(Tensor x, Shape shape);
// x reshaped to `shape` in `graph`, or x itself where it has that shape
// already (no reshape node).
Tensor reshaped(Graph &graph, Tensor x, const Shape &shape);
Tensor transpose(Tensor x, std::vector<int64_t> permutation);
// Swaps the last two axes (x.T for a matrix, x.transpose(0, 2, 1) for a batch).
Tensor swapLastAxes(Tensor x);
// np.split(x, sections, axis): equal parts.
std::vector<Tensor> split(Tensor x, int64_t sections, int64_t axis);
// table[ids]: one row of `table` per id.
Tensor take(Tensor table, Tensor ids);

} // namespace mlpipe::fe
