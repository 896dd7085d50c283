// Matching elementwise epilogues against cuBLASLt's (gemm_epilogue.h): the
// generic's operands are classified by how it reads them (the product, a
// per-column bias, a residual), then its payload is taken apart as
// activation(sum of terms), with sums and products flattened so that their
// order and association do not matter.
#include "matmul/gemm_epilogue.h"

#include "matmul/matmul_layout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace mlpipe {

std::string GemmEpilogue::describe() const {
  std::string text;
  auto add = [&](const std::string &part) { text += (text.empty() ? "" : " + ") + part; };
  if (alpha != 1.0)
    add(fmt::format("alpha {:g}", alpha));
  if (residual)
    add("residual");
  if (bias)
    add("bias");
  if (activation == GemmActivation::GeluTanh)
    add("gelu");
  if (stored) {
    std::string name;
    llvm::raw_string_ostream os(name);
    stored.print(os);
    text += (text.empty() ? "" : ", ") + std::string("rounded to ") + name;
  }
  return text.empty() ? "none" : text;
}

namespace {

// GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
constexpr double kGeluHalf = 0.5;
constexpr double kGeluOne = 1.0;
const double kGeluSqrtTwoOverPi = std::sqrt(2.0 / M_PI);
constexpr double kGeluCubic = 0.044715;
// Constants are f32 in the program: equal to the double within f32 rounding.
constexpr double kConstantTolerance = 1e-6;

enum class Role { Product, Bias, Residual };

// What the payload's block arguments are.
struct Operands {
  llvm::DenseMap<mlir::Value, Role> roles;          // block argument -> role
  llvm::DenseMap<mlir::Value, mlir::Value> memrefs; // block argument -> the memref it reads
};

std::optional<double> constantValue(mlir::Value value) {
  mlir::FloatAttr attribute;
  if (mlir::matchPattern(value, mlir::m_Constant(&attribute)))
    return attribute.getValueAsDouble();
  return std::nullopt;
}

bool isConstant(mlir::Value value, double expected) {
  auto actual = constantValue(value);
  return actual && std::abs(*actual - expected) <= kConstantTolerance * std::max(1.0, std::abs(expected));
}

// The leaves of a tree of `Op` (arith.addf or arith.mulf) inside `body`;
// `keep` is a leaf even when it is such an op.
template <typename Op>
void flatten(mlir::Value value, mlir::Region &body, llvm::SmallVectorImpl<mlir::Value> &leaves, mlir::Value keep = {}) {
  auto op = value.getDefiningOp<Op>();
  if (op && op->getParentRegion() == &body && value != keep) {
    flatten<Op>(op.getLhs(), body, leaves, keep);
    flatten<Op>(op.getRhs(), body, leaves, keep);
    return;
  }
  leaves.push_back(value);
}

// Removes the first leaf equal to `value` (or, with a null value, the first
// constant equal to `constant`); false when there is none.
bool take(llvm::SmallVectorImpl<mlir::Value> &leaves, mlir::Value value, std::optional<double> constant = {}) {
  for (auto it = leaves.begin(); it != leaves.end(); ++it) {
    if ((value && *it == value) || (!value && constant && isConstant(*it, *constant))) {
      leaves.erase(it);
      return true;
    }
  }
  return false;
}

// The x of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), however the
// products and sums are ordered; null when `value` is not that.
mlir::Value geluTanhInput(mlir::Value value, mlir::Region &body) {
  llvm::SmallVector<mlir::Value> outer;
  flatten<mlir::arith::MulFOp>(value, body, outer);
  if (outer.size() != 3 || !take(outer, {}, kGeluHalf))
    return {};
  // The two left: x and (1 + tanh(...)), in either order.
  for (int candidate = 0; candidate < 2; ++candidate) {
    mlir::Value x = outer[candidate], onePlusTanh = outer[1 - candidate];
    llvm::SmallVector<mlir::Value> sum;
    flatten<mlir::arith::AddFOp>(onePlusTanh, body, sum, x);
    if (sum.size() != 2 || !take(sum, {}, kGeluOne))
      continue;
    auto tanh = sum[0].getDefiningOp<mlir::math::TanhOp>();
    if (!tanh || tanh->getParentRegion() != &body)
      continue;
    llvm::SmallVector<mlir::Value> scaled;
    flatten<mlir::arith::MulFOp>(tanh.getOperand(), body, scaled);
    if (scaled.size() != 2 || !take(scaled, {}, kGeluSqrtTwoOverPi))
      continue;
    llvm::SmallVector<mlir::Value> inner;
    flatten<mlir::arith::AddFOp>(scaled[0], body, inner, x);
    if (inner.size() != 2 || !take(inner, x))
      continue;
    llvm::SmallVector<mlir::Value> cubic;
    flatten<mlir::arith::MulFOp>(inner[0], body, cubic, x);
    if (cubic.size() == 4 && take(cubic, {}, kGeluCubic) && take(cubic, x) && take(cubic, x) && take(cubic, x))
      return x;
  }
  return {};
}

bool isIdentity(mlir::AffineMap map, int64_t rank) { return map.isIdentity() && map.getNumDims() == rank; }

// (d0, ..., dn) -> (dn): one value per column.
bool isColumnBroadcast(mlir::AffineMap map, int64_t rank) {
  if (map.getNumDims() != rank || map.getNumResults() != 1)
    return false;
  auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(map.getResult(0));
  return dim && dim.getPosition() == rank - 1;
}

std::string describeMap(mlir::AffineMap map) {
  std::string text;
  llvm::raw_string_ostream os(text);
  map.print(os);
  return text;
}

// Classifies every operand the payload reads; false (with why) for one that
// is none of the three.
bool classifyOperands(mlir::linalg::GenericOp generic, mlir::Value product, Operands &operands, std::string &whyNot) {
  auto productType = mlir::cast<mlir::MemRefType>(product.getType());
  int64_t rank = productType.getRank();
  mlir::Block *body = generic.getBody();
  for (mlir::OpOperand *input : generic.getDpsInputOperands()) {
    mlir::Value value = input->get();
    mlir::Value argument = body->getArgument(input->getOperandNumber());
    mlir::AffineMap map = generic.getMatchingIndexingMap(input);
    auto type = mlir::dyn_cast<mlir::MemRefType>(value.getType());
    if (!type) {
      whyNot = "it reads a scalar operand";
      return false;
    }
    Role role;
    if (value == product && isIdentity(map, rank)) {
      role = Role::Product;
    } else if (isIdentity(map, rank) && type.getShape() == productType.getShape()) {
      auto layout = matrixLayout(type);
      if (!layout || layout->transposed) {
        whyNot = "it reads a matrix that is not row-major";
        return false;
      }
      role = Role::Residual;
    } else if (type.getRank() == 1 && isColumnBroadcast(map, rank) &&
               type.getDimSize(0) == productType.getDimSize(rank - 1)) {
      llvm::SmallVector<int64_t> strides;
      int64_t offset = 0;
      if (mlir::failed(type.getStridesAndOffset(strides, offset)) || strides[0] != 1) {
        whyNot = "its per-column vector is not contiguous";
        return false;
      }
      role = Role::Bias;
    } else {
      whyNot = "it reads an operand through " + describeMap(map) + ", which no cuBLASLt epilogue does";
      return false;
    }
    operands.roles[argument] = role;
    operands.memrefs[argument] = value;
  }
  // A 16-bit bias or residual is read widened to f32: the extf stands for it.
  for (mlir::arith::ExtFOp extend : body->getOps<mlir::arith::ExtFOp>()) {
    auto found = operands.roles.find(extend.getIn());
    if (found != operands.roles.end() && found->second != Role::Product) {
      operands.roles[extend.getResult()] = found->second;
      operands.memrefs[extend.getResult()] = operands.memrefs[extend.getIn()];
    }
  }
  mlir::OpOperand *init = generic.getDpsInitOperand(0);
  if (generic.payloadUsesValueFromOperand(init)) {
    if (init->get() != product) {
      whyNot = "it reads the old value of its output";
      return false;
    }
    mlir::Value argument = body->getArgument(init->getOperandNumber());
    operands.roles[argument] = Role::Product;
    operands.memrefs[argument] = product;
  }
  return true;
}

} // namespace

bool foldIntoEpilogue(mlir::linalg::GenericOp generic, mlir::Value product, GemmEpilogue &epilogue,
                      std::string &whyNot) {
  auto productType = mlir::cast<mlir::MemRefType>(product.getType());
  if (!generic.hasPureBufferSemantics() || generic.getNumDpsInits() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops()) {
    whyNot = "it is not an elementwise op on memrefs with one output";
    return false;
  }
  mlir::OpOperand *init = generic.getDpsInitOperand(0);
  auto initType = mlir::cast<mlir::MemRefType>(init->get().getType());
  mlir::Type outputElement = initType.getElementType();
  bool sixteenBit = outputElement.isBF16() || outputElement.isF16();
  if (!isIdentity(generic.getMatchingIndexingMap(init), productType.getRank()) ||
      initType.getShape() != productType.getShape() || !(outputElement.isF32() || sixteenBit)) {
    whyNot = "its output is not an f32, bf16 or f16 matrix shaped like the product";
    return false;
  }
  if (!productType.getElementType().isF32()) {
    whyNot = "cuBLASLt epilogues are used for f32 only";
    return false;
  }
  if (epilogue.stored) {
    whyNot = "the product has already been rounded to 16 bits";
    return false;
  }
  Operands operands;
  if (!classifyOperands(generic, product, operands, whyNot))
    return false;
  if (epilogue.activation != GemmActivation::None) {
    whyNot = "the product has already been through the activation";
    return false;
  }
  // A bias or residual is stored as D is: f32 while D is, else the 16-bit
  // type D is rounded to (cuBLASLt's C and bias take D's type).
  for (auto &[argument, memref] : operands.memrefs) {
    mlir::Type element = mlir::cast<mlir::MemRefType>(memref.getType()).getElementType();
    if (operands.roles[argument] != Role::Product && element != outputElement) {
      whyNot = "it adds a vector or matrix stored in another type than its output";
      return false;
    }
  }

  mlir::Region &body = generic.getRegion();
  mlir::Value result = generic.getBody()->getTerminator()->getOperand(0);
  GemmEpilogue extended = epilogue;
  if (sixteenBit) {
    // The f32 value rounded once to the output's type.
    auto round = result.getDefiningOp<mlir::arith::TruncFOp>();
    if (!round || round->getParentRegion() != &body || !round.getIn().getType().isF32()) {
      whyNot = "its 16-bit result is not an f32 value rounded once";
      return false;
    }
    result = round.getIn();
    extended.stored = outputElement;
  }
  mlir::Value sumRoot = result;
  if (mlir::Value x = geluTanhInput(result, body)) {
    extended.activation = GemmActivation::GeluTanh;
    sumRoot = x;
  }
  llvm::SmallVector<mlir::Value> terms;
  flatten<mlir::arith::AddFOp>(sumRoot, body, terms);
  int products = 0;
  for (mlir::Value term : terms) {
    auto role = [&](mlir::Value value) -> std::optional<Role> {
      auto found = operands.roles.find(value);
      return found == operands.roles.end() ? std::nullopt : std::optional<Role>(found->second);
    };
    if (auto termRole = role(term)) {
      if (*termRole == Role::Product) {
        ++products;
      } else if (*termRole == Role::Bias) {
        if (extended.bias) {
          whyNot = "it adds a second bias";
          return false;
        }
        extended.bias = operands.memrefs[term];
      } else {
        if (extended.residual) {
          whyNot = "it adds a second matrix";
          return false;
        }
        extended.residual = operands.memrefs[term];
      }
      continue;
    }
    // scale * product, in either order.
    llvm::SmallVector<mlir::Value> factors;
    flatten<mlir::arith::MulFOp>(term, body, factors);
    std::optional<double> scale;
    if (factors.size() == 2 && role(factors[0]) == Role::Product)
      scale = constantValue(factors[1]);
    else if (factors.size() == 2 && role(factors[1]) == Role::Product)
      scale = constantValue(factors[0]);
    if (!scale) {
      mlir::Operation *op = term.getDefiningOp();
      whyNot = std::string("it adds a term (") + (op ? op->getName().getStringRef().str() : "a value") +
               ") that is neither the product, a bias nor a matrix";
      return false;
    }
    if (epilogue.bias || epilogue.residual) {
      whyNot = "it scales a sum, and alpha scales the product alone";
      return false;
    }
    extended.alpha *= *scale;
    ++products;
  }
  if (products != 1) {
    whyNot = products == 0 ? "it does not add the product" : "it uses the product more than once";
    return false;
  }
  if (extended.residual && extended.activation != GemmActivation::None) {
    whyNot = "a matrix added inside the activation is not folded";
    return false;
  }
  epilogue = extended;
  return true;
}

} // namespace mlpipe
