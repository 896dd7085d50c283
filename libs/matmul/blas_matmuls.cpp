// mlpipe-blas-matmuls: CPU matmuls become cblas_sgemm / cblas_dgemm calls.
// Passes.td holds its description, with IR before and after.
#include "matmul/matmul_layout.h"
#include "matmul/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_BLASMATMULSPASS
#include "matmul/Passes.h.inc"

namespace {

// CBLAS enum values (cblas.h).
constexpr int32_t kCblasRowMajor = 101;
constexpr int32_t kCblasNoTrans = 111;
constexpr int32_t kCblasTrans = 112;

struct BlasMatmulsPass : impl::BlasMatmulsPassBase<BlasMatmulsPass> {
  void runOnOperation() final {
    llvm::SmallVector<mlir::linalg::LinalgOp> matmuls;
    getOperation().walk([&](mlir::linalg::LinalgOp op) {
      if (isCandidate(op))
        matmuls.push_back(op);
    });
    for (auto op : matmuls)
      replaceWithCalls(op);
  }

  // What BLAS can read in place (matmul_layout.h); the rest stays linalg.
  static bool isCandidate(mlir::linalg::LinalgOp op) { return blasMatmul(op).has_value(); }

  // The gemm declaration, added to the module once.
  static mlir::func::FuncOp gemmFunction(mlir::ModuleOp module, mlir::Type element) {
    const char *name = element.isF32() ? "cblas_sgemm" : "cblas_dgemm";
    if (auto existing = module.lookupSymbol<mlir::func::FuncOp>(name))
      return existing;
    mlir::OpBuilder builder = mlir::OpBuilder::atBlockBegin(module.getBody());
    auto i32 = builder.getI32Type();
    auto ptr = mlir::LLVM::LLVMPointerType::get(builder.getContext());
    auto type =
        builder.getFunctionType({i32, i32, i32, i32, i32, i32, element, ptr, i32, ptr, i32, element, ptr, i32}, {});
    auto function = mlir::func::FuncOp::create(builder, module.getLoc(), name, type);
    function.setPrivate();
    return function;
  }

  static void replaceWithCalls(mlir::linalg::LinalgOp op) {
    mlir::ModuleOp module = op->getParentOfType<mlir::ModuleOp>();
    mlir::OpBuilder builder(op);
    mlir::Location loc = op.getLoc();
    BlasMatmul problem = *blasMatmul(op);
    mlir::Value a = op->getOperand(0), b = op->getOperand(1), c = op->getOperand(2);
    mlir::Type element = problem.element;
    int64_t rank = mlir::cast<mlir::MemRefType>(c.getType()).getRank();
    mlir::func::FuncOp gemm = gemmFunction(module, element);

    auto i32 = [&](int64_t v) { return mlir::arith::ConstantIntOp::create(builder, loc, v, 32).getResult(); };
    auto one = mlir::arith::ConstantOp::create(builder, loc, builder.getFloatAttr(element, 1.0));
    auto emitCall = [&](mlir::Value batchIndex) {
      mlir::Value args[] = {i32(kCblasRowMajor),
                            i32(problem.a.transposed ? kCblasTrans : kCblasNoTrans),
                            i32(problem.b.transposed ? kCblasTrans : kCblasNoTrans),
                            i32(problem.m),
                            i32(problem.n),
                            i32(problem.k),
                            one,
                            elementPointer(builder, loc, a, batchIndex),
                            i32(problem.a.leadingDimension),
                            elementPointer(builder, loc, b, batchIndex),
                            i32(problem.b.leadingDimension),
                            one,
                            elementPointer(builder, loc, c, batchIndex),
                            i32(problem.c.leadingDimension)};
      mlir::func::CallOp::create(builder, loc, gemm, args);
    };

    if (rank == 2) {
      emitCall(mlir::Value());
    } else {
      mlir::Value zero = mlir::arith::ConstantIndexOp::create(builder, loc, 0);
      mlir::Value step = mlir::arith::ConstantIndexOp::create(builder, loc, 1);
      mlir::Value batches = mlir::memref::DimOp::create(builder, loc, c, 0);
      auto loop = mlir::scf::ForOp::create(builder, loc, zero, batches, step);
      builder.setInsertionPointToStart(loop.getBody());
      emitCall(loop.getInductionVar());
    }
    op->erase();
  }
};

} // namespace

} // namespace mlpipe
