// mlpipe-sixteen-bit-fast-math: in kernels that store only 16-bit floats,
// f32 math to the precision the rounding keeps (1 + tanh as a sigmoid,
// exp as exp2, divisions approximate; on request multiplies and adds
// fused). Passes.td holds its description,
// with IR before and after.
#include "codegen/debug.h"
#include "transforms/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

#include <numbers>

namespace mlpipe {

#define GEN_PASS_DEF_SIXTEENBITFASTMATHPASS
#include "transforms/Passes.h.inc"

namespace {

constexpr const char *kDebugFastMath = "mlpipe-fast-math";

// The rewrites' f32 errors (a few units in the last place, from ex2.approx
// and the approximate reciprocal) are invisible once every result is
// rounded to this many bits or fewer (bf16 keeps 8 significant bits, f16
// 11); kernels storing wider floats keep libdevice's functions.
constexpr unsigned kFastMathMaxStorageBits = 16;

// Whether every floating-point buffer the kernel takes is narrow enough.
bool storesOnlyNarrowFloats(mlir::gpu::GPUFuncOp kernel) {
  bool anyFloat = false;
  for (mlir::Type type : kernel.getArgumentTypes()) {
    auto memref = mlir::dyn_cast<mlir::MemRefType>(type);
    if (!memref || !mlir::isa<mlir::FloatType>(memref.getElementType()))
      continue;
    anyFloat = true;
    if (memref.getElementType().getIntOrFloatBitWidth() > kFastMathMaxStorageBits)
      return false;
  }
  return anyFloat;
}

bool isOne(mlir::Value value) {
  mlir::FloatAttr constant;
  return mlir::matchPattern(value, mlir::m_Constant(&constant)) && constant.getValueAsDouble() == 1.0;
}

mlir::Value f32Constant(mlir::OpBuilder &b, mlir::Location loc, double value) {
  return mlir::arith::ConstantOp::create(b, loc, b.getF32Type(), b.getF32FloatAttr(static_cast<float>(value)));
}

// 1 + tanh(u) = 2 / (1 + exp(-2u)) = 2 / (1 + 2^(-2u / ln 2)).
void rewriteOnePlusTanh(mlir::arith::AddFOp add, mlir::math::TanhOp tanh) {
  mlir::OpBuilder b(add);
  mlir::Location loc = add.getLoc();
  mlir::Value scaled =
      mlir::arith::MulFOp::create(b, loc, tanh.getOperand(), f32Constant(b, loc, -2.0 / std::numbers::ln2));
  mlir::Value power = mlir::math::Exp2Op::create(b, loc, scaled);
  mlir::Value denominator = mlir::arith::AddFOp::create(b, loc, power, f32Constant(b, loc, 1.0));
  auto quotient = mlir::arith::DivFOp::create(b, loc, f32Constant(b, loc, 2.0), denominator);
  quotient.setFastmath(mlir::arith::FastMathFlags::afn);
  add.replaceAllUsesWith(quotient.getResult());
  add.erase();
  tanh.erase();
}

// exp(x) = 2^(x log2 e).
void rewriteExp(mlir::math::ExpOp exp) {
  mlir::OpBuilder b(exp);
  mlir::Location loc = exp.getLoc();
  mlir::Value scaled = mlir::arith::MulFOp::create(b, loc, exp.getOperand(), f32Constant(b, loc, std::numbers::log2e));
  exp.replaceAllUsesWith(mlir::math::Exp2Op::create(b, loc, scaled).getResult());
  exp.erase();
}

struct SixteenBitFastMathPass : impl::SixteenBitFastMathPassBase<SixteenBitFastMathPass> {
  using SixteenBitFastMathPassBase::SixteenBitFastMathPassBase;
  void runOnOperation() final {
    for (auto kernel : getOperation().getOps<mlir::gpu::GPUFuncOp>()) {
      if (!kernel.isKernel() || !storesOnlyNarrowFloats(kernel))
        continue;
      llvm::SmallVector<std::pair<mlir::arith::AddFOp, mlir::math::TanhOp>> sums;
      kernel.walk([&](mlir::arith::AddFOp add) {
        if (!add.getType().isF32())
          return;
        for (unsigned i = 0; i < 2; ++i) {
          auto tanh = add.getOperand(i).getDefiningOp<mlir::math::TanhOp>();
          if (tanh && tanh->hasOneUse() && isOne(add.getOperand(1 - i))) {
            sums.push_back({add, tanh});
            return;
          }
        }
      });
      for (auto [add, tanh] : sums)
        rewriteOnePlusTanh(add, tanh);
      llvm::SmallVector<mlir::math::ExpOp> exps;
      kernel.walk([&](mlir::math::ExpOp exp) {
        if (exp.getType().isF32())
          exps.push_back(exp);
      });
      for (mlir::math::ExpOp exp : exps)
        rewriteExp(exp);
      int64_t divisions = 0;
      kernel.walk([&](mlir::arith::DivFOp div) {
        if (!div.getType().isF32())
          return;
        div.setFastmath(div.getFastmath() | mlir::arith::FastMathFlags::afn);
        ++divisions;
      });
      // With contract=true, multiplies, adds and subtractions may fuse into
      // one multiply-add (one rounding instead of two); off by default, as
      // it gained nothing measured (Passes.td).
      int64_t contractible = 0;
      if (contract)
        kernel.walk([&](mlir::Operation *op) {
          if (!mlir::isa<mlir::arith::MulFOp, mlir::arith::AddFOp, mlir::arith::SubFOp>(op) ||
              !op->getResult(0).getType().isF32())
            return;
          auto flags = mlir::cast<mlir::arith::ArithFastMathInterface>(op);
          op->setAttr(flags.getFastMathAttrName(),
                      mlir::arith::FastMathFlagsAttr::get(op->getContext(), flags.getFastMathFlagsAttr().getValue() |
                                                                                mlir::arith::FastMathFlags::contract));
          ++contractible;
        });
      MLPIPE_DEBUG(kDebugFastMath, os << kernel.getName() << ": " << sums.size() << " 1 + tanh as a sigmoid, "
                                      << exps.size() << " exp as exp2, " << divisions << " divisions approximate, "
                                      << contractible << " multiplies and adds contractible\n");
    }
  }
};

} // namespace

} // namespace mlpipe
