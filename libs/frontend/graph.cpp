// Recording operations: each call checks its operands' shapes, works out the
// result shape (NumPy rules) and appends one node.
#include "frontend/graph.h"

#include "support/error.h"
#include "support/memory.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace mlpipe::fe {

namespace {

int64_t normalizeAxis(int64_t axis, int64_t rank, const char *op) {
  int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized >= rank)
    fail("{}: axis {} is out of range for a tensor of rank {}", op, axis, rank);
  return normalized;
}

// NumPy broadcasting: align from the right; each pair of dimensions must be
// equal or one of them 1.
Shape broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("cannot broadcast shapes {} and {}", formatShape(a), formatShape(b));
    result[i] = da == 1 ? db : da;
  }
  return result;
}

// Shapes come from files (HLO) as well as from code: arithmetic on their
// sizes must not overflow.
int64_t checkedSum(int64_t a, int64_t b, const char *op) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    fail("{}: a size does not fit in 64 bits", op);
  return sum;
}

int64_t checkedProduct(int64_t a, int64_t b, const char *op) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    fail("{}: a size does not fit in 64 bits", op);
  return product;
}

// Which family of element types a type belongs to: a Constant joins a
// tensor of its own family.
int typeFamily(DType dtype) { return isFloat(dtype) ? 0 : isInteger(dtype) ? 1 : 2; }

// Two's complement arithmetic on 64 bits, the result's low bits read in
// `dtype` (wrap-around).
double wrapped(DType dtype, uint64_t bits) { return integerValue(dtype, bits); }

// An integer element's bits, sign-extended (signed types) or
// zero-extended (unsigned ones) to 64: what the integer functions compute on.
int64_t signedBits(DType dtype, double value) {
  uint64_t bits = integerBits(value);
  int width = bitWidth(dtype);
  if (width < 64) {
    uint64_t mask = (uint64_t(1) << width) - 1;
    bits &= mask;
    if (!isUnsigned(dtype) && (bits >> (width - 1)) & 1)
      bits |= ~mask;
  }
  return static_cast<int64_t>(bits);
}

// The bits of `value` as an element of `dtype`, sign-extended from its
// width whatever its signedness: what an arithmetic shift reads.
int64_t signExtended(DType dtype, double value) {
  uint64_t bits = integerBits(value);
  int width = bitWidth(dtype);
  if (width < 64) {
    bits &= (uint64_t(1) << width) - 1;
    if ((bits >> (width - 1)) & 1)
      bits |= ~((uint64_t(1) << width) - 1);
  }
  return static_cast<int64_t>(bits);
}

} // namespace

// ---- Tensor -------------------------------------------------------------------

const Shape &Tensor::shape() const { return graph_->node(id_).shape; }
DType Tensor::dtype() const { return graph_->node(id_).dtype; }
int64_t Tensor::dim(int64_t axis) const { return shape()[normalizeAxis(axis, rank(), "dim")]; }

// ---- Graph --------------------------------------------------------------------

Graph::Graph(std::string name, DType floatType) : name_(std::move(name)), floatType_(floatType) {
  if (!isFloat(floatType))
    fail("a graph's float type must be f32, f64, bf16 or f16, not {}", dtypeName(floatType));
}

Graph::Scope::Scope(Graph &graph, const std::string &name) : graph_(graph) {
  graph_.scopes_.push_back(graph_.scopes_.empty() ? name : graph_.scopes_.back() + "." + name);
}

Graph::Scope::~Scope() { graph_.scopes_.pop_back(); }

namespace {

// The most bytes one tensor of a program may take: 64 TiB, hundreds of times
// any GPU's memory, and small enough that every byte count the compiler
// sums over a kernel's tensors stays far inside int64.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 46;

} // namespace

Tensor Graph::add(Node node) {
  int64_t bytes = byteSize(node.shape, node.dtype);
  if (bytes > kMaxTensorBytes)
    fail("{} of shape {} ({}) would take {}, more than the {} one tensor may take",
         node.name.empty() ? std::string("a tensor") : "tensor '" + node.name + "'", formatShape(node.shape),
         dtypeName(node.dtype), humanBytes(double(bytes)), humanBytes(double(kMaxTensorBytes)));
  if (node.scope.empty() && !scopes_.empty())
    node.scope = scopes_.back();
  nodes_.push_back(std::move(node));
  return Tensor(this, static_cast<int>(nodes_.size()) - 1);
}

void Graph::checkOwned(Tensor t, const char *what) const {
  if (&t.graph() != this)
    fail("{}: operand belongs to another graph", what);
}

Tensor Graph::input(const std::string &name, Shape shape) { return input(name, std::move(shape), floatType_); }

Tensor Graph::input(const std::string &name, Shape shape, DType dtype) {
  for (int id : inputs_)
    if (nodes_[id].name == name)
      fail("graph '{}' already has an input named '{}'", name_, name);
  numElements(shape);
  Node node{OpKind::Input};
  node.shape = std::move(shape);
  node.dtype = dtype;
  node.name = name;
  Tensor t = add(std::move(node));
  inputs_.push_back(t.id());
  return t;
}

Tensor Graph::indexInput(const std::string &name, Shape shape, int64_t rows) {
  Tensor t = input(name, std::move(shape), DType::i32);
  nodes_[t.id()].ints = {rows};
  return t;
}

void Graph::output(const std::string &name, Tensor value) {
  checkOwned(value, "output");
  for (auto &[existing, id] : outputs_)
    if (existing == name)
      fail("graph '{}' already has an output named '{}'", name_, name);
  outputs_.emplace_back(name, value.id());
}

void Graph::update(Tensor inout, Tensor value) {
  checkOwned(inout, "update");
  checkOwned(value, "update");
  if (node(inout.id()).kind != OpKind::Input || !node(inout.id()).inout)
    fail("update: only an in-out input can be updated");
  if (inout.shape() != value.shape() || inout.dtype() != value.dtype())
    fail("update: '{}' is {}, its new value {}", node(inout.id()).name, formatShape(inout.shape()),
         formatShape(value.shape()));
  for (auto &[existing, id] : updates_)
    if (existing == inout.id())
      fail("update: '{}' is already updated", node(inout.id()).name);
  updates_.emplace_back(inout.id(), value.id());
}

void Graph::probe(const std::string &name, Tensor value) {
  checkOwned(value, "probe");
  probes_.emplace_back(name, value.id());
}

void Graph::markIndexInput(Tensor ids, int64_t rows) {
  checkOwned(ids, "markIndexInput");
  Node &node = nodes_[ids.id()];
  if (node.kind != OpKind::Input || !isInteger(node.dtype) || rows <= 0)
    fail("only an integer input can hold row ids of a table with rows");
  if (node.ints.empty() || node.ints[0] > rows)
    node.ints = {rows};
}

Tensor Graph::constant(double value) {
  // A formula's constant (GELU's 0.044715, an epsilon) in a 16-bit function
  // is kept to f32, the type it is computed with: only stored tensors are
  // 16-bit, as in the frameworks' compiled kernels.
  if (floatType_ == DType::bf16 || floatType_ == DType::f16) {
    Node node{OpKind::Constant};
    node.dtype = floatType_;
    node.value = storedValue(DType::f32, value);
    return add(std::move(node));
  }
  return constant(value, floatType_);
}

Tensor Graph::constant(double value, DType dtype) {
  Node node{OpKind::Constant};
  node.dtype = dtype;
  node.value = storedValue(dtype, value);
  return add(std::move(node));
}

Tensor Graph::materialized(Tensor t) {
  const Node &node = this->node(t.id());
  if (node.kind != OpKind::Constant)
    return t;
  return literal({}, node.dtype, {node.value});
}

DType Graph::commonType(const std::vector<Tensor> &operands, const char *op) const {
  std::optional<DType> tensorType;
  for (Tensor t : operands) {
    if (node(t.id()).kind == OpKind::Constant)
      continue;
    if (tensorType && *tensorType != t.dtype())
      fail("{} needs operands of one element type, not {} and {}", op, dtypeName(*tensorType), dtypeName(t.dtype()));
    tensorType = t.dtype();
  }
  DType type = tensorType ? *tensorType : operands.front().dtype();
  for (Tensor t : operands)
    if (typeFamily(t.dtype()) != typeFamily(type) || (!tensorType && t.dtype() != type))
      fail("{} needs operands of one element type, not {} and {}", op, dtypeName(type), dtypeName(t.dtype()));
  return type;
}

Tensor Graph::triu(int64_t rows, int64_t cols, int64_t k, std::optional<DType> dtype) {
  Node node{OpKind::Triu};
  node.shape = {rows, cols};
  node.dtype = dtype.value_or(floatType_);
  node.ints = {k};
  return add(std::move(node));
}

double applyUnary(UnaryFn fn, double x) {
  switch (fn) {
  case UnaryFn::Neg:
    return -x;
  case UnaryFn::Exp:
    return std::exp(x);
  case UnaryFn::Tanh:
    return std::tanh(x);
  case UnaryFn::Sqrt:
    return std::sqrt(x);
  case UnaryFn::Rsqrt:
    return 1.0 / std::sqrt(x);
  case UnaryFn::Log:
    return std::log(x);
  case UnaryFn::Abs:
    return std::fabs(x);
  case UnaryFn::Sin:
    return std::sin(x);
  case UnaryFn::Cos:
    return std::cos(x);
  case UnaryFn::Tan:
    return std::tan(x);
  case UnaryFn::Erf:
    return std::erf(x);
  case UnaryFn::Expm1:
    return std::expm1(x);
  case UnaryFn::Log1p:
    return std::log1p(x);
  case UnaryFn::Floor:
    return std::floor(x);
  case UnaryFn::Ceil:
    return std::ceil(x);
  case UnaryFn::RoundEven: // the default rounding mode: to nearest, ties to even
    return std::nearbyint(x);
  case UnaryFn::RoundAway:
    return std::round(x);
  case UnaryFn::Sign: // +-0 and NaN are their own sign
    return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
  case UnaryFn::SignBit:
    return std::signbit(x) ? 1.0 : 0.0;
  case UnaryFn::Not: // integers and i1 only: see the typed form
  case UnaryFn::Popcnt:
    return x;
  }
  return x;
}

double applyBinary(BinaryFn fn, double a, double b) {
  switch (fn) {
  case BinaryFn::Add:
    return a + b;
  case BinaryFn::Sub:
    return a - b;
  case BinaryFn::Mul:
    return a * b;
  case BinaryFn::Div:
    return a / b;
  case BinaryFn::Max: // NaN wins, as XLA's maximum and minimum
    return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
  case BinaryFn::Min:
    return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
  case BinaryFn::Pow:
    return std::pow(a, b);
  case BinaryFn::Atan2:
    return std::atan2(a, b);
  case BinaryFn::Rem:
    return std::fmod(a, b);
  case BinaryFn::And: // integers and i1 only: see the typed form
  case BinaryFn::Or:
  case BinaryFn::Xor:
  case BinaryFn::ShiftLeft:
  case BinaryFn::ShiftRightLogical:
  case BinaryFn::ShiftRightArithmetic:
    return a;
  }
  return a;
}

double applyUnary(UnaryFn fn, double x, DType dtype) {
  if (isFloat(dtype))
    return applyUnary(fn, x);
  if (dtype == DType::i1)
    return fn == UnaryFn::Not ? (x != 0 ? 0.0 : 1.0) : fn == UnaryFn::Popcnt ? (x != 0 ? 1.0 : 0.0) : x;
  bool isSigned = !isUnsigned(dtype);
  int64_t value = signedBits(dtype, x);
  auto bits = static_cast<uint64_t>(value);
  switch (fn) {
  case UnaryFn::Neg:
    return wrapped(dtype, ~bits + 1);
  case UnaryFn::Abs: // |INT_MIN| wraps to INT_MIN
    return isSigned && value < 0 ? wrapped(dtype, ~bits + 1) : wrapped(dtype, bits);
  case UnaryFn::Not:
    return wrapped(dtype, ~bits);
  case UnaryFn::Sign:
    return isSigned ? (value > 0) - (value < 0) : bits != 0;
  case UnaryFn::Popcnt: // of the element's own bits, not of its 64-bit extension
    return std::popcount(bitWidth(dtype) < 64 ? bits & ((uint64_t(1) << bitWidth(dtype)) - 1) : bits);
  default:
    return x;
  }
}

double applyBinary(BinaryFn fn, double a, double b, DType dtype) {
  if (isFloat(dtype))
    return applyBinary(fn, a, b);
  if (dtype == DType::i1) {
    bool x = a != 0, y = b != 0;
    switch (fn) {
    case BinaryFn::And:
    case BinaryFn::Min:
      return x && y;
    case BinaryFn::Or:
    case BinaryFn::Max:
      return x || y;
    case BinaryFn::Xor:
      return x != y;
    default:
      return a;
    }
  }
  bool isSigned = !isUnsigned(dtype);
  int width = bitWidth(dtype);
  int64_t x = signedBits(dtype, a), y = signedBits(dtype, b);
  auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  // A shift amount is unsigned: from the width up every bit is shifted out.
  uint64_t amount = width < 64 ? uy & ((uint64_t(1) << width) - 1) : uy;
  switch (fn) {
  case BinaryFn::Add:
    return wrapped(dtype, ux + uy);
  case BinaryFn::Sub:
    return wrapped(dtype, ux - uy);
  case BinaryFn::Mul:
    return wrapped(dtype, ux * uy);
  case BinaryFn::Div: // x / 0 is all ones; INT_MIN / -1 wraps to INT_MIN
    if (y == 0)
      return wrapped(dtype, ~uint64_t(0));
    if (!isSigned)
      return wrapped(dtype, ux / uy);
    if (y == -1)
      return wrapped(dtype, ~ux + 1);
    return wrapped(dtype, static_cast<uint64_t>(x / y));
  case BinaryFn::Rem: // x % 0 is x; INT_MIN % -1 is 0; the sign is the dividend's
    if (y == 0)
      return wrapped(dtype, ux);
    if (!isSigned)
      return wrapped(dtype, ux % uy);
    if (y == -1)
      return 0;
    return wrapped(dtype, static_cast<uint64_t>(x % y));
  case BinaryFn::Max:
    return std::max(a, b);
  case BinaryFn::Min:
    return std::min(a, b);
  case BinaryFn::And:
    return wrapped(dtype, ux & uy);
  case BinaryFn::Or:
    return wrapped(dtype, ux | uy);
  case BinaryFn::Xor:
    return wrapped(dtype, ux ^ uy);
  case BinaryFn::ShiftLeft:
    return amount >= static_cast<uint64_t>(width) ? 0 : wrapped(dtype, ux << amount);
  case BinaryFn::ShiftRightLogical: { // on the element's own bits
    uint64_t own = width < 64 ? ux & ((uint64_t(1) << width) - 1) : ux;
    return amount >= static_cast<uint64_t>(width) ? 0 : wrapped(dtype, own >> amount);
  }
  case BinaryFn::ShiftRightArithmetic: { // fills with the element's top bit, signed or not
    int64_t extended = signExtended(dtype, a);
    uint64_t shift = std::min<uint64_t>(amount, static_cast<uint64_t>(width - 1));
    return wrapped(dtype, static_cast<uint64_t>(extended >> shift));
  }
  case BinaryFn::Pow:
  case BinaryFn::Atan2:
    return a;
  }
  return a;
}

bool applyCompare(CompareFn fn, double a, double b) {
  switch (fn) {
  case CompareFn::Eq:
    return a == b;
  case CompareFn::Ne:
    return a != b;
  case CompareFn::Lt:
    return a < b;
  case CompareFn::Le:
    return a <= b;
  case CompareFn::Gt:
    return a > b;
  case CompareFn::Ge:
    return a >= b;
  }
  return false;
}

bool sortsBefore(SortOrder order, double a, double b) {
  bool nanA = std::isnan(a), nanB = std::isnan(b);
  if (order == SortOrder::Numeric)
    return nanA || nanB ? !nanA : a < b; // NaN after everything, NaNs equal
  // Total: -NaN, then the numbers with -0 before +0, then +NaN.
  auto rank = [](double x, bool nan) { return nan ? (std::signbit(x) ? 0 : 2) : 1; };
  int rankA = rank(a, nanA), rankB = rank(b, nanB);
  if (rankA != rankB || rankA != 1)
    return rankA < rankB;
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

double convertValue(double value, DType from, DType to) {
  if (to == DType::i1)
    return value != 0 ? 1.0 : 0.0;
  if (isFloat(to))
    return storedValue(to, value);
  if (!isFloat(from)) // the source's bits, sign- or zero-extended, then truncated to the target's width
    return integerValue(to, integerBits(value));
  if (std::isnan(value))
    return 0;
  return storedValue(to, std::clamp(std::trunc(value), integerMinimum(to), integerMaximum(to)));
}

// An elementwise function of constants is folded into a constant, so emitted
// code never holds scalar arithmetic that fusion would have to clean up.
Tensor Graph::unary(UnaryFn fn, Tensor x) {
  checkOwned(x, "unary");
  DType dtype = x.dtype();
  bool allowed = false;
  switch (fn) {
  case UnaryFn::Not:
    allowed = isInteger(dtype) || dtype == DType::i1;
    break;
  case UnaryFn::Neg:
  case UnaryFn::Abs:
  case UnaryFn::Sign:
    allowed = isFloat(dtype) || isInteger(dtype);
    break;
  case UnaryFn::Popcnt:
    allowed = isInteger(dtype);
    break;
  case UnaryFn::SignBit:
    allowed = isFloat(dtype);
    break;
  default:
    allowed = isFloat(dtype);
  }
  if (!allowed)
    fail("this elementwise function does not apply to a {} tensor", dtypeName(dtype));
  if (node(x.id()).kind == OpKind::Constant)
    return constant(applyUnary(fn, node(x.id()).value, dtype), dtype);
  Node node{OpKind::Unary, static_cast<int>(fn), {x.id()}, x.shape(), dtype};
  return add(std::move(node));
}

Tensor Graph::binary(BinaryFn fn, Tensor a, Tensor b) {
  checkOwned(a, "binary");
  checkOwned(b, "binary");
  DType dtype = commonType({a, b}, "elementwise arithmetic");
  bool allowed = false;
  switch (fn) {
  case BinaryFn::And:
  case BinaryFn::Or:
  case BinaryFn::Xor:
    allowed = isInteger(dtype) || dtype == DType::i1;
    break;
  case BinaryFn::Pow:
  case BinaryFn::Atan2:
    allowed = isFloat(dtype);
    break;
  case BinaryFn::ShiftLeft:
  case BinaryFn::ShiftRightLogical:
  case BinaryFn::ShiftRightArithmetic:
    allowed = isInteger(dtype);
    break;
  default:
    allowed = isFloat(dtype) || isInteger(dtype);
  }
  if (!allowed)
    fail("this elementwise arithmetic does not apply to {} tensors", dtypeName(dtype));
  if (node(a.id()).kind == OpKind::Constant && node(b.id()).kind == OpKind::Constant)
    return constant(applyBinary(fn, node(a.id()).value, node(b.id()).value, dtype), dtype);
  Node node{OpKind::Binary, static_cast<int>(fn), {a.id(), b.id()}, broadcastShapes(a.shape(), b.shape()), dtype};
  return add(std::move(node));
}

Tensor Graph::reduce(ReduceFn fn, Tensor x, int64_t axis, bool keepdims) {
  checkOwned(x, "reduce");
  x = materialized(x);
  bool bitwise = fn == ReduceFn::And || fn == ReduceFn::Or;
  if (bitwise ? isFloat(x.dtype()) : !isFloat(x.dtype()) && !isInteger(x.dtype()))
    fail("reduce: {} needs {} tensor, not {}", bitwise ? "a reduction by and or or" : "a reduction",
         bitwise ? "an i1 or integer" : "a float or integer", dtypeName(x.dtype()));
  int64_t normalized = normalizeAxis(axis, x.rank(), "reduce");
  Shape shape = x.shape();
  if (keepdims)
    shape[normalized] = 1;
  else
    shape.erase(shape.begin() + normalized);
  Node node{OpKind::Reduce, static_cast<int>(fn), {x.id()}, shape, x.dtype()};
  node.ints = {normalized, keepdims ? 1 : 0};
  return add(std::move(node));
}

Tensor Graph::matmul(Tensor a, Tensor b, std::optional<DType> resultType) {
  checkOwned(a, "matmul");
  checkOwned(b, "matmul");
  a = materialized(a);
  b = materialized(b);
  if (a.dtype() != b.dtype() || !isFloat(a.dtype()))
    fail("matmul needs two float tensors of one type");
  bool sixteenBit = a.dtype() == DType::bf16 || a.dtype() == DType::f16;
  if (resultType && *resultType != a.dtype() && !(sixteenBit && *resultType == DType::f32))
    fail("matmul: a result in {} takes operands of that type, or 16-bit ones (f32 only)", dtypeName(*resultType));
  const Shape &sa = a.shape(), &sb = b.shape();
  Shape result;
  if (sa.size() >= 2 && sb.size() == 2) {
    // [..., M, K] x [K, N]
    if (sa.back() != sb[0])
      fail("matmul: inner dimensions differ ({} x {})", formatShape(sa), formatShape(sb));
    result = sa;
    result.back() = sb[1];
  } else if (sa.size() == 3 && sb.size() == 3) {
    // [B, M, K] x [B, K, N]
    if (sa[0] != sb[0] || sa[2] != sb[1])
      fail("batched matmul: shapes {} and {} do not chain", formatShape(sa), formatShape(sb));
    result = {sa[0], sa[1], sb[2]};
  } else {
    fail("matmul supports [..,M,K]x[K,N] and [B,M,K]x[B,K,N], not {} x {}", formatShape(sa), formatShape(sb));
  }
  Node node{OpKind::MatMul, 0, {a.id(), b.id()}, result, resultType.value_or(a.dtype())};
  return add(std::move(node));
}

Tensor Graph::reshape(Tensor x, Shape shape) {
  checkOwned(x, "reshape");
  x = materialized(x);
  if (numElements(shape) != numElements(x.shape()))
    fail("cannot reshape {} into {}", formatShape(x.shape()), formatShape(shape));
  Node node{OpKind::Reshape, 0, {x.id()}, std::move(shape), x.dtype()};
  return add(std::move(node));
}

Tensor Graph::transpose(Tensor x, std::vector<int64_t> permutation) {
  checkOwned(x, "transpose");
  x = materialized(x);
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(static_cast<size_t>(x.rank()));
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    fail("transpose: the permutation does not permute the {} axes", x.rank());
  Shape shape(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i)
    shape[i] = x.shape()[permutation[i]];
  // A permutation that moves only axes of extent 1 keeps every element where
  // it was: it is a reshape, and costs no copy (a decode step's one-row head
  // split and merge).
  std::vector<int64_t> movedAxes;
  for (int64_t axis : permutation)
    if (x.shape()[axis] != 1)
      movedAxes.push_back(axis);
  if (std::is_sorted(movedAxes.begin(), movedAxes.end()))
    return reshape(x, shape);
  Node node{OpKind::Transpose, 0, {x.id()}, shape, x.dtype()};
  node.ints = std::move(permutation);
  return add(std::move(node));
}

Tensor Graph::slice(Tensor x, int64_t axis, int64_t start, int64_t length) {
  checkOwned(x, "slice");
  x = materialized(x);
  int64_t normalized = normalizeAxis(axis, x.rank(), "slice");
  if (start < 0 || length <= 0 || start + length > x.shape()[normalized])
    fail("slice [{}, {}) is out of range for axis {} of size {}", start, start + length, axis, x.shape()[normalized]);
  Shape shape = x.shape();
  shape[normalized] = length;
  Node node{OpKind::Slice, 0, {x.id()}, shape, x.dtype()};
  node.ints = {normalized, start};
  return add(std::move(node));
}

Tensor Graph::selectIndex(Tensor x, int64_t axis, int64_t index) {
  checkOwned(x, "selectIndex");
  int64_t normalized = normalizeAxis(axis, x.rank(), "select");
  if (index < 0 || index >= x.shape()[normalized])
    fail("selectIndex: index {} is out of range for axis {} of size {}", index, axis, x.shape()[normalized]);
  Shape shape = x.shape();
  shape.erase(shape.begin() + normalized);
  Node node{OpKind::Slice, 0, {x.id()}, shape, x.dtype()};
  node.ints = {normalized, index, 1};
  return add(std::move(node));
}

Tensor Graph::gather(Tensor table, Tensor ids) {
  checkOwned(table, "gather");
  checkOwned(ids, "gather");
  table = materialized(table);
  ids = materialized(ids);
  if (table.rank() != 2)
    fail("gather: the table must be 2-D, not {}", formatShape(table.shape()));
  if (ids.dtype() != DType::i32 && ids.dtype() != DType::i64)
    fail("gather: ids must be i32 or i64, not {}", dtypeName(ids.dtype()));
  Shape shape = ids.shape();
  shape.push_back(table.shape()[1]);
  Node node{OpKind::Gather, 0, {table.id(), ids.id()}, shape, table.dtype()};
  return add(std::move(node));
}

Tensor Graph::broadcast(Tensor x, Shape shape, std::vector<int64_t> dimensions) {
  checkOwned(x, "broadcast");
  numElements(shape);
  if (static_cast<int64_t>(dimensions.size()) != x.rank())
    fail("broadcast: {} dimensions given for a tensor of rank {}", dimensions.size(), x.rank());
  std::vector<bool> used(shape.size(), false);
  for (size_t i = 0; i < dimensions.size(); ++i) {
    int64_t to = dimensions[i];
    if (to < 0 || to >= static_cast<int64_t>(shape.size()) || used[to])
      fail("broadcast: dimension {} is out of range or repeated for a result of rank {}", to, shape.size());
    used[to] = true;
    if (x.shape()[i] != shape[to] && x.shape()[i] != 1)
      fail("broadcast: axis {} of {} does not fit axis {} of {}", i, formatShape(x.shape()), to, formatShape(shape));
  }
  Node node{OpKind::Broadcast, 0, {x.id()}, std::move(shape), x.dtype()};
  node.ints = std::move(dimensions);
  return add(std::move(node));
}

Tensor Graph::compare(CompareFn fn, Tensor a, Tensor b) {
  checkOwned(a, "compare");
  checkOwned(b, "compare");
  commonType({a, b}, "compare");
  if (node(a.id()).kind == OpKind::Constant && node(b.id()).kind == OpKind::Constant)
    return constant(applyCompare(fn, node(a.id()).value, node(b.id()).value) ? 1.0 : 0.0, DType::i1);
  Node node{OpKind::Compare, static_cast<int>(fn), {a.id(), b.id()}, broadcastShapes(a.shape(), b.shape()), DType::i1};
  return add(std::move(node));
}

Tensor Graph::select(Tensor pred, Tensor onTrue, Tensor onFalse) {
  checkOwned(pred, "select");
  checkOwned(onTrue, "select");
  checkOwned(onFalse, "select");
  if (pred.dtype() != DType::i1)
    fail("select needs an i1 predicate, not {}", dtypeName(pred.dtype()));
  DType dtype = commonType({onTrue, onFalse}, "select");
  auto isConstant = [&](Tensor t) { return node(t.id()).kind == OpKind::Constant; };
  if (isConstant(pred) && isConstant(onTrue) && isConstant(onFalse))
    return constant(node(pred.id()).value != 0 ? node(onTrue.id()).value : node(onFalse.id()).value, dtype);
  Shape shape = broadcastShapes(broadcastShapes(pred.shape(), onTrue.shape()), onFalse.shape());
  Node node{OpKind::Select, 0, {pred.id(), onTrue.id(), onFalse.id()}, shape, dtype};
  return add(std::move(node));
}

Tensor Graph::iota(Shape shape, DType dtype, int64_t axis) {
  numElements(shape);
  int64_t normalized = normalizeAxis(axis, static_cast<int64_t>(shape.size()), "iota");
  Node node{OpKind::Iota, 0, {}, std::move(shape), dtype};
  node.ints = {normalized};
  return add(std::move(node));
}

Tensor Graph::pad(Tensor x, Tensor value, std::vector<int64_t> low, std::vector<int64_t> high,
                  std::vector<int64_t> interior) {
  checkOwned(x, "pad");
  checkOwned(value, "pad");
  x = materialized(x);
  if (value.rank() != 0)
    fail("pad: the padding value must be a scalar, not {}", formatShape(value.shape()));
  DType dtype = commonType({x, value}, "pad");
  size_t rank = x.shape().size();
  if (low.size() != rank || high.size() != rank || interior.size() != rank)
    fail("pad: padding is given for {} axes of a tensor of rank {}", low.size(), rank);
  Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t size = x.shape()[i];
    if (interior[i] < 0)
      fail("pad: interior padding {} of axis {} is negative", interior[i], i);
    int64_t spread = size == 0 ? 0 : checkedSum(size, checkedProduct(size - 1, interior[i], "pad"), "pad");
    shape[i] = checkedSum(checkedSum(spread, low[i], "pad"), high[i], "pad");
    if (shape[i] <= 0)
      fail("pad: axis {} of {} would be left with {} elements", i, formatShape(x.shape()), shape[i]);
  }
  numElements(shape);
  Node node{OpKind::Pad, 0, {x.id(), value.id()}, shape, dtype};
  node.ints = low;
  node.ints.insert(node.ints.end(), high.begin(), high.end());
  node.ints.insert(node.ints.end(), interior.begin(), interior.end());
  return add(std::move(node));
}

Tensor Graph::concat(std::vector<Tensor> parts, int64_t axis) {
  if (parts.empty())
    fail("concat needs at least one tensor");
  std::vector<int> operands;
  for (Tensor &part : parts) {
    checkOwned(part, "concat");
    part = materialized(part);
    operands.push_back(part.id());
  }
  Shape shape = parts.front().shape();
  int64_t normalized = normalizeAxis(axis, static_cast<int64_t>(shape.size()), "concat");
  shape[normalized] = 0;
  for (Tensor part : parts) {
    Shape other = part.shape();
    if (part.dtype() != parts.front().dtype() || other.size() != shape.size())
      fail("concat: {} and {} do not join", formatShape(parts.front().shape()), formatShape(other));
    int64_t size = other[normalized];
    other[normalized] = shape[normalized];
    if (other != shape)
      fail("concat: {} and {} differ off axis {}", formatShape(parts.front().shape()), formatShape(part.shape()),
           normalized);
    shape[normalized] = checkedSum(shape[normalized], size, "concat");
  }
  numElements(shape);
  Node node{OpKind::Concat, 0, std::move(operands), shape, parts.front().dtype()};
  node.ints = {normalized};
  return add(std::move(node));
}

Tensor Graph::convert(Tensor x, DType dtype) {
  checkOwned(x, "convert");
  if (x.dtype() == dtype)
    return x;
  if (node(x.id()).kind == OpKind::Constant)
    return constant(convertValue(node(x.id()).value, x.dtype(), dtype), dtype);
  Node node{OpKind::Convert, 0, {x.id()}, x.shape(), dtype};
  return add(std::move(node));
}

Tensor Graph::literal(Shape shape, DType dtype, std::vector<double> values) {
  if (static_cast<int64_t>(values.size()) != numElements(shape))
    fail("a literal of shape {} needs {} values, not {}", formatShape(shape), numElements(shape), values.size());
  for (double &value : values)
    value = storedValue(dtype, value);
  Node node{OpKind::Literal, 0, {}, std::move(shape), dtype};
  node.values = std::move(values);
  return add(std::move(node));
}

Tensor Graph::stridedSlice(Tensor x, std::vector<int64_t> start, std::vector<int64_t> limit,
                           std::vector<int64_t> stride) {
  checkOwned(x, "stridedSlice");
  x = materialized(x);
  size_t rank = x.shape().size();
  if (start.size() != rank || limit.size() != rank || stride.size() != rank)
    fail("slice: {} ranges given for a tensor of rank {}", start.size(), rank);
  Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (stride[i] < 1 || start[i] < 0 || limit[i] <= start[i] || limit[i] > x.shape()[i])
      fail("slice [{}:{}:{}] is out of range or empty for axis {} of size {}", start[i], limit[i], stride[i], i,
           x.shape()[i]);
    shape[i] = (limit[i] - start[i] - 1) / stride[i] + 1;
  }
  Node node{OpKind::StridedSlice, 0, {x.id()}, shape, x.dtype()};
  node.ints = std::move(start);
  node.ints.insert(node.ints.end(), stride.begin(), stride.end());
  return add(std::move(node));
}

namespace {

// A Convolution node's ints: the groups and the rank, then where the batch
// and feature axes are (input, kernel, result), then per spatial axis where
// it is in each and its window.
constexpr size_t kConvolutionHeader = 9, kConvolutionPerAxis = 9;

} // namespace

ConvolutionDims convolutionDims(const Node &node) {
  const std::vector<int64_t> &ints = node.ints;
  ConvolutionDims dims;
  dims.featureGroups = ints[0];
  dims.batchGroups = ints[1];
  auto spatial = static_cast<size_t>(ints[2]);
  dims.inputBatch = ints[3];
  dims.inputFeature = ints[4];
  dims.kernelInput = ints[5];
  dims.kernelOutput = ints[6];
  dims.outputBatch = ints[7];
  dims.outputFeature = ints[8];
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t *axis = &ints[kConvolutionHeader + d * kConvolutionPerAxis];
    dims.inputSpatial.push_back(axis[0]);
    dims.kernelSpatial.push_back(axis[1]);
    dims.outputSpatial.push_back(axis[2]);
    dims.window.push_back(WindowAxis{axis[3], axis[4], axis[5], axis[6], axis[7], axis[8]});
  }
  return dims;
}

Tensor Graph::convolution(Tensor input, Tensor kernel, const ConvolutionDims &dims) {
  const char *op = "convolution";
  checkOwned(input, op);
  checkOwned(kernel, op);
  input = materialized(input);
  kernel = materialized(kernel);
  if (input.dtype() != kernel.dtype() || !isFloat(input.dtype()))
    fail("convolution needs two float tensors of one type, not {} and {}", dtypeName(input.dtype()),
         dtypeName(kernel.dtype()));
  size_t spatial = dims.window.size();
  int64_t rank = static_cast<int64_t>(spatial) + 2;
  if (input.rank() != rank || kernel.rank() != rank || dims.inputSpatial.size() != spatial ||
      dims.kernelSpatial.size() != spatial || dims.outputSpatial.size() != spatial)
    fail("convolution: {} spatial axes for an input {} and a kernel {}", spatial, formatShape(input.shape()),
         formatShape(kernel.shape()));
  // Each list of axes must be a permutation of its tensor's axes.
  auto checkAxes = [&](int64_t batch, int64_t feature, const std::vector<int64_t> &axes, const char *what) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    std::vector<int64_t> all = axes;
    all.push_back(batch);
    all.push_back(feature);
    for (int64_t axis : all) {
      if (axis < 0 || axis >= rank || seen[axis])
        fail("convolution: the {} axes are not a permutation of {} axes", what, rank);
      seen[axis] = true;
    }
  };
  checkAxes(dims.inputBatch, dims.inputFeature, dims.inputSpatial, "input");
  checkAxes(dims.kernelInput, dims.kernelOutput, dims.kernelSpatial, "kernel");
  checkAxes(dims.outputBatch, dims.outputFeature, dims.outputSpatial, "result");
  int64_t batch = input.shape()[dims.inputBatch], features = input.shape()[dims.inputFeature];
  int64_t kernelInputs = kernel.shape()[dims.kernelInput], outputs = kernel.shape()[dims.kernelOutput];
  int64_t featureGroups = dims.featureGroups, batchGroups = dims.batchGroups;
  if (featureGroups < 1 || batchGroups < 1 || (featureGroups > 1 && batchGroups > 1))
    fail("convolution: feature groups {} and batch groups {}: each is at least 1 and one of them is 1", featureGroups,
         batchGroups);
  if (features != kernelInputs * featureGroups)
    fail("convolution: the input has {} features, but the kernel takes {} in each of {} groups", features, kernelInputs,
         featureGroups);
  if (outputs % featureGroups != 0 || outputs % batchGroups != 0 || batch % batchGroups != 0)
    fail("convolution: {} output features and a batch of {} do not split into {} groups", outputs, batch,
         std::max(featureGroups, batchGroups));
  Shape shape(static_cast<size_t>(rank));
  shape[dims.outputBatch] = batch / batchGroups;
  shape[dims.outputFeature] = outputs;
  Node node{OpKind::Convolution, 0, {input.id(), kernel.id()}, {}, input.dtype()};
  node.ints = {featureGroups,     batchGroups,       static_cast<int64_t>(spatial),
               dims.inputBatch,   dims.inputFeature, dims.kernelInput,
               dims.kernelOutput, dims.outputBatch,  dims.outputFeature};
  for (size_t d = 0; d < spatial; ++d) {
    const WindowAxis &axis = dims.window[d];
    if (axis.size != kernel.shape()[dims.kernelSpatial[d]])
      fail("convolution: the window along spatial axis {} has size {}, but the kernel has {}", d, axis.size,
           kernel.shape()[dims.kernelSpatial[d]]);
    if (axis.size < 1 || axis.stride < 1 || axis.baseDilation < 1 || axis.windowDilation < 1)
      fail("convolution: spatial axis {} has a size, stride or dilation below 1", d);
    int64_t dilated = checkedSum(checkedProduct(input.shape()[dims.inputSpatial[d]] - 1, axis.baseDilation, op), 1, op);
    int64_t padded = checkedSum(checkedSum(dilated, axis.padLow, op), axis.padHigh, op);
    int64_t span = checkedSum(checkedProduct(axis.size - 1, axis.windowDilation, op), 1, op);
    if (padded < span)
      fail("convolution: along spatial axis {} the window spans {} positions but the padded input has {}", d, span,
           padded);
    shape[dims.outputSpatial[d]] = (padded - span) / axis.stride + 1;
    node.ints.insert(node.ints.end(), {dims.inputSpatial[d], dims.kernelSpatial[d], dims.outputSpatial[d], axis.size,
                                       axis.stride, axis.padLow, axis.padHigh, axis.baseDilation, axis.windowDilation});
  }
  numElements(shape);
  node.shape = std::move(shape);
  return add(std::move(node));
}

namespace {

// A SortRank node's ints: the axis, then three per key.
constexpr size_t kSortKeyInts = 3;

} // namespace

int64_t sortAxis(const Node &node) { return node.ints.at(0); }

std::vector<SortKey> sortKeys(const Node &node) {
  std::vector<SortKey> keys;
  for (size_t i = 1; i + kSortKeyInts <= node.ints.size(); i += kSortKeyInts)
    keys.push_back({node.ints[i], node.ints[i + 1] != 0, static_cast<SortOrder>(node.ints[i + 2])});
  return keys;
}

Tensor Graph::sortRank(const std::vector<Tensor> &operands, int64_t axis, const std::vector<SortKey> &keys) {
  if (operands.empty() || keys.empty())
    fail("sort: no operands or no keys");
  Node node{OpKind::SortRank, 0, {}, operands[0].shape(), DType::i32};
  for (Tensor operand : operands) {
    checkOwned(operand, "sort");
    if (operand.shape() != node.shape)
      fail("sort: operands of shapes {} and {}", formatShape(node.shape), formatShape(operand.shape()));
    node.operands.push_back(materialized(operand).id());
  }
  if (axis < 0 || axis >= static_cast<int64_t>(node.shape.size()))
    fail("sort: axis {} is out of range for a tensor of rank {}", axis, node.shape.size());
  node.ints = {axis};
  for (const SortKey &key : keys) {
    if (key.operand < 0 || key.operand >= static_cast<int64_t>(operands.size()))
      fail("sort: key operand {} of {}", key.operand, operands.size());
    node.ints.insert(node.ints.end(), {key.operand, key.descending ? 1 : 0, static_cast<int64_t>(key.order)});
  }
  return add(std::move(node));
}

std::unique_ptr<Graph> Graph::expanded(OpKind kind, const Expansion &expand) const {
  auto copy = std::make_unique<Graph>(name_, floatType_);
  std::vector<int> ids(nodes_.size(), -1);
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node &node = nodes_[id];
    if (node.kind != kind) {
      Node same = node;
      for (int &operand : same.operands)
        operand = ids[operand];
      copy->nodes_.push_back(std::move(same));
      ids[id] = static_cast<int>(copy->nodes_.size()) - 1;
      continue;
    }
    std::vector<Tensor> operands;
    for (int operand : node.operands)
      operands.emplace_back(copy.get(), ids[operand]);
    if (!node.scope.empty())
      copy->scopes_.push_back(node.scope);
    Tensor replacement = expand(*copy, node, operands);
    copy->scopes_.clear();
    if (replacement.shape() != node.shape || replacement.dtype() != node.dtype)
      fail("expanding a node of '{}': {} {} replaced by {} {}", name_, formatShape(node.shape), dtypeName(node.dtype),
           formatShape(replacement.shape()), dtypeName(replacement.dtype()));
    ids[id] = replacement.id();
  }
  auto remapped = [&](const std::vector<std::pair<std::string, int>> &named) {
    std::vector<std::pair<std::string, int>> out;
    for (const auto &[name, id] : named)
      out.emplace_back(name, ids[id]);
    return out;
  };
  for (int id : inputs_)
    copy->inputs_.push_back(ids[id]);
  copy->outputs_ = remapped(outputs_);
  copy->probes_ = remapped(probes_);
  for (const auto &[inout, value] : updates_)
    copy->updates_.emplace_back(ids[inout], ids[value]);
  return copy;
}

namespace {

// The start operands of a dynamic slice: one rank-0 integer tensor per axis.
void checkStarts(const std::vector<Tensor> &starts, int64_t rank, const char *op) {
  if (static_cast<int64_t>(starts.size()) != rank)
    fail("{}: {} start indices given for a tensor of rank {}", op, starts.size(), rank);
  for (Tensor start : starts)
    if (start.rank() != 0 || !isInteger(start.dtype()))
      fail("{}: a start index must be a rank-0 integer tensor, not {} {}", op, dtypeName(start.dtype()),
           formatShape(start.shape()));
}

} // namespace

Tensor Graph::dynamicSlice(Tensor x, const std::vector<Tensor> &starts, Shape sizes) {
  checkOwned(x, "dynamicSlice");
  x = materialized(x);
  checkStarts(starts, x.rank(), "dynamicSlice");
  if (static_cast<int64_t>(sizes.size()) != x.rank())
    fail("dynamicSlice: {} sizes given for a tensor of rank {}", sizes.size(), x.rank());
  for (int64_t axis = 0; axis < x.rank(); ++axis)
    if (sizes[axis] <= 0 || sizes[axis] > x.shape()[axis])
      fail("dynamicSlice: a box of {} does not fit in {}", formatShape(sizes), formatShape(x.shape()));
  if (sizes == x.shape()) // every start clamps to 0
    return x;
  std::vector<int> operands = {x.id()};
  for (Tensor start : starts) {
    checkOwned(start, "dynamicSlice");
    operands.push_back(materialized(start).id());
  }
  return add(Node{OpKind::DynamicSlice, 0, operands, std::move(sizes), x.dtype()});
}

Tensor Graph::dynamicUpdateSlice(Tensor base, Tensor update, const std::vector<Tensor> &starts) {
  checkOwned(base, "dynamicUpdateSlice");
  checkOwned(update, "dynamicUpdateSlice");
  base = materialized(base);
  update = materialized(update);
  checkStarts(starts, base.rank(), "dynamicUpdateSlice");
  if (update.rank() != base.rank())
    fail("dynamicUpdateSlice: a block of rank {} into a tensor of rank {}", update.rank(), base.rank());
  if (update.dtype() != base.dtype())
    fail("dynamicUpdateSlice: the block is {}, the tensor {}", dtypeName(update.dtype()), dtypeName(base.dtype()));
  for (int64_t axis = 0; axis < base.rank(); ++axis)
    if (update.shape()[axis] > base.shape()[axis])
      fail("dynamicUpdateSlice: a block of {} does not fit in {}", formatShape(update.shape()),
           formatShape(base.shape()));
  if (update.shape() == base.shape()) // every start clamps to 0
    return update;
  std::vector<int> operands = {base.id(), update.id()};
  for (Tensor start : starts) {
    checkOwned(start, "dynamicUpdateSlice");
    operands.push_back(materialized(start).id());
  }
  return add(Node{OpKind::DynamicUpdateSlice, 0, operands, base.shape(), base.dtype()});
}

std::vector<Tensor> Graph::whileLoop(const std::vector<Tensor> &initial, std::shared_ptr<const Graph> condition,
                                     std::shared_ptr<const Graph> body) {
  if (!condition || !body)
    fail("whileLoop: a loop needs a condition and a body");
  if (initial.empty())
    fail("whileLoop: a loop carries at least one tensor");
  std::vector<int> operands;
  for (Tensor t : initial) {
    checkOwned(t, "whileLoop");
    operands.push_back(materialized(t).id());
  }
  auto sameSignature = [&](const Graph &graph, const char *what) {
    if (graph.inputs().size() != operands.size())
      fail("whileLoop: the {} takes {} tensors, but the loop carries {}", what, graph.inputs().size(), operands.size());
    for (size_t i = 0; i < operands.size(); ++i) {
      const Node &input = graph.node(graph.inputs()[i]), &carried = node(operands[i]);
      if (input.shape != carried.shape || input.dtype != carried.dtype)
        fail("whileLoop: the {}'s input {} is {} {}, but the loop carries {} {}", what, i, formatShape(input.shape),
             dtypeName(input.dtype), formatShape(carried.shape), dtypeName(carried.dtype));
    }
  };
  sameSignature(*condition, "condition");
  sameSignature(*body, "body");
  if (condition->outputs().size() != 1 || !condition->updates().empty())
    fail("whileLoop: the condition returns {} tensors, not one", condition->outputs().size());
  const Node &holds = condition->node(condition->outputs()[0].second);
  if (holds.dtype != DType::i1 || !holds.shape.empty())
    fail("whileLoop: the condition returns {} {}, not a rank-0 i1", formatShape(holds.shape), dtypeName(holds.dtype));
  if (body->outputs().size() != operands.size() || !body->updates().empty())
    fail("whileLoop: the body returns {} tensors, but the loop carries {}", body->outputs().size(), operands.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    const Node &next = body->node(body->outputs()[i].second), &carried = node(operands[i]);
    if (next.shape != carried.shape || next.dtype != carried.dtype)
      fail("whileLoop: the body returns {} {} as carried tensor {}, which is {} {}", formatShape(next.shape),
           dtypeName(next.dtype), i, formatShape(carried.shape), dtypeName(carried.dtype));
  }
  Node loop{OpKind::While, 0, operands, {}, DType::i1};
  loop.condition = std::move(condition);
  loop.body = std::move(body);
  int id = add(std::move(loop)).id();
  std::vector<Tensor> results;
  for (size_t i = 0; i < operands.size(); ++i) {
    Node result{OpKind::LoopResult, 0, {id}, node(operands[i]).shape, node(operands[i]).dtype};
    result.ints = {static_cast<int64_t>(i)};
    results.push_back(add(std::move(result)));
  }
  return results;
}

Tensor Graph::reduceWindow(ReduceFn fn, Tensor x, const std::vector<WindowAxis> &window) {
  checkOwned(x, "reduceWindow");
  x = materialized(x);
  bool bitwise = fn == ReduceFn::And || fn == ReduceFn::Or;
  if (bitwise ? isFloat(x.dtype()) : !isFloat(x.dtype()) && !isInteger(x.dtype()))
    fail("reduceWindow: {} needs {} tensor, not {}", bitwise ? "a reduction by and or or" : "a reduction",
         bitwise ? "an i1 or integer" : "a float or integer", dtypeName(x.dtype()));
  if (static_cast<int64_t>(window.size()) != x.rank())
    fail("reduceWindow: a window of {} axes for a tensor of rank {}", window.size(), x.rank());
  Shape shape;
  std::vector<int64_t> sizes, strides, lows, baseDilations, windowDilations;
  for (size_t i = 0; i < window.size(); ++i) {
    const WindowAxis &axis = window[i];
    if (axis.size <= 0 || axis.stride <= 0 || axis.baseDilation <= 0 || axis.windowDilation <= 0)
      fail("reduceWindow: axis {} has a size, stride or dilation below 1", i);
    const char *op = "reduceWindow";
    int64_t dilated = checkedSum(checkedProduct(x.shape()[i] - 1, axis.baseDilation, op), 1, op);
    int64_t padded = checkedSum(checkedSum(dilated, axis.padLow, op), axis.padHigh, op);
    int64_t span = checkedSum(checkedProduct(axis.size - 1, axis.windowDilation, op), 1, op);
    if (padded < span)
      fail("reduceWindow: along axis {} a window spanning {} does not fit the {} positions of the padded input", i,
           span, padded);
    shape.push_back((padded - span) / axis.stride + 1);
    sizes.push_back(axis.size);
    strides.push_back(axis.stride);
    lows.push_back(axis.padLow);
    baseDilations.push_back(axis.baseDilation);
    windowDilations.push_back(axis.windowDilation);
  }
  numElements(shape);
  Node node{OpKind::ReduceWindow, static_cast<int>(fn), {x.id()}, std::move(shape), x.dtype()};
  for (const std::vector<int64_t> *block : {&sizes, &strides, &lows, &baseDilations, &windowDilations})
    node.ints.insert(node.ints.end(), block->begin(), block->end());
  return add(std::move(node));
}

Tensor Graph::insert(Tensor base, Tensor update, std::vector<int64_t> offsets, int64_t positionAxis, Tensor position) {
  checkOwned(base, "insert");
  checkOwned(update, "insert");
  if (base.rank() != update.rank() || static_cast<int64_t>(offsets.size()) != base.rank())
    fail("insert: a {} block into a {} tensor needs one offset per axis", formatShape(update.shape()),
         formatShape(base.shape()));
  if (base.dtype() != update.dtype())
    fail("insert: the block is {}, the tensor {}", dtypeName(update.dtype()), dtypeName(base.dtype()));
  for (int64_t axis = 0; axis < base.rank(); ++axis) {
    int64_t offset = axis == positionAxis ? 0 : offsets[axis];
    if (offset < 0 || offset + update.shape()[axis] > base.shape()[axis])
      fail("insert: a {} block at {} does not fit a {} tensor", formatShape(update.shape()),
           formatShape(Shape(offsets.begin(), offsets.end())), formatShape(base.shape()));
  }
  std::vector<int> operands = {base.id(), update.id()};
  if (positionAxis >= 0) {
    checkOwned(position, "insert");
    if (position.rank() != 0 || position.dtype() != DType::i32)
      fail("insert: the position must be a rank-0 i32 tensor");
    if (positionAxis >= base.rank())
      fail("insert: axis {} is out of range for a tensor of rank {}", positionAxis, base.rank());
    operands.push_back(position.id());
  }
  Node node{OpKind::Insert, 0, operands, base.shape(), base.dtype()};
  node.ints = {positionAxis};
  node.ints.insert(node.ints.end(), offsets.begin(), offsets.end());
  return add(std::move(node));
}

Tensor Graph::positionMask(int64_t length, Tensor position, double masked, std::optional<DType> dtype) {
  checkOwned(position, "positionMask");
  if (position.rank() != 0 || position.dtype() != DType::i32)
    fail("positionMask: the position must be a rank-0 i32 tensor");
  Node node{OpKind::PositionMask, 0, {position.id()}, {length}, dtype.value_or(floatType_)};
  node.value = masked;
  return add(std::move(node));
}

Tensor Graph::positionsMask(int64_t rows, int64_t length, Tensor positions, int64_t rowsPerPosition, double masked,
                            std::optional<DType> dtype) {
  checkOwned(positions, "positionsMask");
  if (positions.rank() != 1 || positions.dtype() != DType::i32)
    fail("positionsMask: the positions must be a rank-1 i32 tensor");
  if (rowsPerPosition < 1 || rows != positions.dim(0) * rowsPerPosition)
    fail("positionsMask: {} rows are not {} positions of {} rows each", rows, positions.dim(0), rowsPerPosition);
  Node node{OpKind::PositionMask, 0, {positions.id()}, {rows, 1, length}, dtype.value_or(floatType_)};
  node.value = masked;
  node.ints = {rowsPerPosition};
  return add(std::move(node));
}

Tensor Graph::inoutInput(const std::string &name, Shape shape) {
  Tensor t = input(name, std::move(shape));
  nodes_[t.id()].inout = true;
  return t;
}

// ---- Program ------------------------------------------------------------------

Graph &Program::addFunction(const std::string &name, DType floatType) {
  for (auto &f : functions)
    if (f->name() == name)
      fail("program already has a function named '{}'", name);
  functions.push_back(std::make_unique<Graph>(name, floatType));
  return *functions.back();
}

const Graph &Program::function(const std::string &name) const {
  for (auto &f : functions)
    if (f->name() == name)
      return *f;
  fail("program has no function named '{}'", name);
}

// ---- Free functions -----------------------------------------------------------

namespace {
Tensor scalarLike(Tensor t, double value) { return t.graph().constant(value); }
} // namespace

Tensor operator+(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Add, a, b); }
Tensor operator-(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Sub, a, b); }
Tensor operator*(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Mul, a, b); }
Tensor operator/(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Div, a, b); }
Tensor operator-(Tensor a) { return a.graph().unary(UnaryFn::Neg, a); }
Tensor operator+(Tensor a, double b) { return a + scalarLike(a, b); }
Tensor operator+(double a, Tensor b) { return scalarLike(b, a) + b; }
Tensor operator-(Tensor a, double b) { return a - scalarLike(a, b); }
Tensor operator-(double a, Tensor b) { return scalarLike(b, a) - b; }
Tensor operator*(Tensor a, double b) { return a * scalarLike(a, b); }
Tensor operator*(double a, Tensor b) { return scalarLike(b, a) * b; }
Tensor operator/(Tensor a, double b) { return a / scalarLike(a, b); }
Tensor operator/(double a, Tensor b) { return scalarLike(b, a) / b; }

Tensor exp(Tensor x) { return x.graph().unary(UnaryFn::Exp, x); }
Tensor tanh(Tensor x) { return x.graph().unary(UnaryFn::Tanh, x); }
Tensor sqrt(Tensor x) { return x.graph().unary(UnaryFn::Sqrt, x); }
Tensor rsqrt(Tensor x) { return x.graph().unary(UnaryFn::Rsqrt, x); }
Tensor log(Tensor x) { return x.graph().unary(UnaryFn::Log, x); }
Tensor abs(Tensor x) { return x.graph().unary(UnaryFn::Abs, x); }
Tensor maximum(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Max, a, b); }
Tensor minimum(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Min, a, b); }
Tensor power(Tensor a, Tensor b) { return a.graph().binary(BinaryFn::Pow, a, b); }
Tensor where(Tensor pred, Tensor a, Tensor b) { return pred.graph().select(pred, a, b); }
Tensor astype(Tensor x, DType dtype) { return x.graph().convert(x, dtype); }

Tensor sum(Tensor x, int64_t axis, bool keepdims) { return x.graph().reduce(ReduceFn::Sum, x, axis, keepdims); }
Tensor max(Tensor x, int64_t axis, bool keepdims) { return x.graph().reduce(ReduceFn::Max, x, axis, keepdims); }
Tensor mean(Tensor x, int64_t axis, bool keepdims) { return sum(x, axis, keepdims) / static_cast<double>(x.dim(axis)); }

Tensor matmul(Tensor a, Tensor b) { return a.graph().matmul(a, b); }
Tensor reshape(Tensor x, Shape shape) { return x.graph().reshape(x, std::move(shape)); }
Tensor reshaped(Graph &graph, Tensor x, const Shape &shape) { return x.shape() == shape ? x : graph.reshape(x, shape); }
Tensor transpose(Tensor x, std::vector<int64_t> permutation) { return x.graph().transpose(x, std::move(permutation)); }

Tensor swapLastAxes(Tensor x) {
  if (x.rank() < 2)
    fail("swapLastAxes needs at least 2 axes, not {}", x.rank());
  std::vector<int64_t> permutation(static_cast<size_t>(x.rank()));
  std::iota(permutation.begin(), permutation.end(), 0);
  std::swap(permutation[permutation.size() - 1], permutation[permutation.size() - 2]);
  return transpose(x, permutation);
}

std::vector<Tensor> split(Tensor x, int64_t sections, int64_t axis) {
  int64_t size = x.dim(axis);
  if (sections <= 0 || size % sections != 0)
    fail("split: axis of size {} does not divide into {} equal parts", size, sections);
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < sections; ++i)
    parts.push_back(x.graph().slice(x, axis, i * (size / sections), size / sections));
  return parts;
}

Tensor take(Tensor table, Tensor ids) { return table.graph().gather(table, ids); }

} // namespace mlpipe::fe
