// mlpipe-blas-matmuls: CPU matmuls become cblas_sgemm / cblas_dgemm calls.
// Passes.td holds its description, with IR before and after.
#include "compiler/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>

namespace mlpipe {

#define GEN_PASS_DEF_BLASMATMULSPASS
#include "compiler/Passes.h.inc"

namespace {

// CBLAS enum values (cblas.h).
constexpr int32_t kCblasRowMajor = 101;
constexpr int32_t kCblasNoTrans = 111;
constexpr int32_t kCblasTrans = 112;

// How BLAS reads one matrix operand.
struct BlasLayout {
  bool transposed;
  int64_t leadingDimension;
};

// rows x cols matrix with the given strides (the last two of the memref).
std::optional<BlasLayout> blasLayout(int64_t rows, int64_t cols, int64_t rowStride, int64_t colStride) {
  int64_t dynamic = mlir::ShapedType::kDynamic;
  if (rowStride == dynamic || colStride == dynamic || rows == dynamic || cols == dynamic)
    return std::nullopt;
  if (colStride == 1 && rowStride >= std::max<int64_t>(1, cols))
    return BlasLayout{false, rowStride};
  if (rowStride == 1 && colStride >= std::max<int64_t>(1, rows))
    return BlasLayout{true, colStride};
  return std::nullopt;
}

struct MatrixOperand {
  mlir::Value memref;
  BlasLayout layout;
};

std::optional<MatrixOperand> matrixOperand(mlir::Value value) {
  auto type = mlir::cast<mlir::MemRefType>(value.getType());
  auto [strides, offset] = type.getStridesAndOffset();
  int64_t rank = type.getRank();
  auto layout = blasLayout(type.getDimSize(rank - 2), type.getDimSize(rank - 1), strides[rank - 2], strides[rank - 1]);
  if (!layout)
    return std::nullopt;
  return MatrixOperand{value, *layout};
}

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

  static bool isCandidate(mlir::linalg::LinalgOp op) {
    auto matmul = mlir::dyn_cast<mlir::linalg::MatmulOp>(op.getOperation());
    auto batched = mlir::dyn_cast<mlir::linalg::BatchMatmulOp>(op.getOperation());
    if ((!matmul && !batched) || !op.hasPureBufferSemantics())
      return false;
    if ((matmul && matmul.hasUserDefinedMaps()) || (batched && batched.hasUserDefinedMaps()))
      return false;
    mlir::Type element = mlir::cast<mlir::MemRefType>(op.getDpsInits()[0].getType()).getElementType();
    for (mlir::Value operand : op->getOperands())
      if (mlir::cast<mlir::MemRefType>(operand.getType()).getElementType() != element || !matrixOperand(operand))
        return false;
    // BLAS writes C row by row.
    return (element.isF32() || element.isF64()) && !matrixOperand(op.getDpsInits()[0])->layout.transposed;
  }

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
    MatrixOperand a = *matrixOperand(op->getOperand(0));
    MatrixOperand b = *matrixOperand(op->getOperand(1));
    MatrixOperand c = *matrixOperand(op->getOperand(2));
    auto cType = mlir::cast<mlir::MemRefType>(c.memref.getType());
    auto aType = mlir::cast<mlir::MemRefType>(a.memref.getType());
    mlir::Type element = cType.getElementType();
    int64_t rank = cType.getRank();
    mlir::func::FuncOp gemm = gemmFunction(module, element);

    auto i32 = [&](int64_t v) { return mlir::arith::ConstantIntOp::create(builder, loc, v, 32).getResult(); };
    auto one = mlir::arith::ConstantOp::create(builder, loc, builder.getFloatAttr(element, 1.0));
    int64_t m = cType.getDimSize(rank - 2), n = cType.getDimSize(rank - 1), k = aType.getDimSize(rank - 1);

    // Per operand: aligned base pointer, element offset, and batch stride.
    struct Pointer {
      mlir::Value base, offset, batchStride;
    };
    auto pointerOf = [&](mlir::Value memref) {
      auto metadata = mlir::memref::ExtractStridedMetadataOp::create(builder, loc, memref);
      mlir::Value address = mlir::memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
      mlir::Value address64 = mlir::arith::IndexCastOp::create(builder, loc, builder.getI64Type(), address);
      mlir::Value base = mlir::LLVM::IntToPtrOp::create(
          builder, loc, mlir::LLVM::LLVMPointerType::get(builder.getContext()), address64);
      mlir::Value batchStride = rank == 3 ? metadata.getStrides()[0] : mlir::Value();
      return Pointer{base, metadata.getOffset(), batchStride};
    };
    Pointer pa = pointerOf(a.memref), pb = pointerOf(b.memref), pc = pointerOf(c.memref);

    auto elementPointer = [&](const Pointer &p, mlir::Value batchIndex) -> mlir::Value {
      mlir::Value offset = p.offset;
      if (batchIndex) {
        mlir::Value step = mlir::arith::MulIOp::create(builder, loc, batchIndex, p.batchStride);
        offset = mlir::arith::AddIOp::create(builder, loc, offset, step);
      }
      mlir::Value offset64 = mlir::arith::IndexCastOp::create(builder, loc, builder.getI64Type(), offset);
      return mlir::LLVM::GEPOp::create(builder, loc, p.base.getType(), element, p.base, mlir::ValueRange{offset64});
    };
    auto emitCall = [&](mlir::Value batchIndex) {
      mlir::Value args[] = {i32(kCblasRowMajor),
                            i32(a.layout.transposed ? kCblasTrans : kCblasNoTrans),
                            i32(b.layout.transposed ? kCblasTrans : kCblasNoTrans),
                            i32(m),
                            i32(n),
                            i32(k),
                            one,
                            elementPointer(pa, batchIndex),
                            i32(a.layout.leadingDimension),
                            elementPointer(pb, batchIndex),
                            i32(b.layout.leadingDimension),
                            one,
                            elementPointer(pc, batchIndex),
                            i32(c.layout.leadingDimension)};
      mlir::func::CallOp::create(builder, loc, gemm, args);
    };

    if (rank == 2) {
      emitCall(mlir::Value());
    } else {
      mlir::Value zero = mlir::arith::ConstantIndexOp::create(builder, loc, 0);
      mlir::Value step = mlir::arith::ConstantIndexOp::create(builder, loc, 1);
      mlir::Value batches = mlir::memref::DimOp::create(builder, loc, c.memref, 0);
      auto loop = mlir::scf::ForOp::create(builder, loc, zero, batches, step);
      builder.setInsertionPointToStart(loop.getBody());
      emitCall(loop.getInductionVar());
    }
    op->erase();
  }
};

} // namespace

} // namespace mlpipe
