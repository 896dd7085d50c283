// The operand-layout matcher shared by mlpipe-blas-matmuls and
// mlpipe-cublas-matmuls (matmul_layout.h).
#include "matmul/matmul_layout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <algorithm>

namespace mlpipe {

std::optional<MatrixLayout> matrixLayout(mlir::MemRefType type) {
  int64_t rank = type.getRank();
  if (rank != 2 && rank != 3)
    return std::nullopt;
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (mlir::failed(type.getStridesAndOffset(strides, offset)))
    return std::nullopt;
  for (int64_t i = 0; i < rank; ++i)
    if (mlir::ShapedType::isDynamic(strides[i]) || mlir::ShapedType::isDynamic(type.getDimSize(i)))
      return std::nullopt;
  int64_t rows = type.getDimSize(rank - 2), cols = type.getDimSize(rank - 1);
  int64_t rowStride = strides[rank - 2], colStride = strides[rank - 1];
  int64_t batchStride = rank == 3 ? strides[0] : 0;
  if (colStride == 1 && rowStride >= std::max<int64_t>(1, cols))
    return MatrixLayout{false, rowStride, batchStride};
  if (rowStride == 1 && colStride >= std::max<int64_t>(1, rows))
    return MatrixLayout{true, colStride, batchStride};
  return std::nullopt;
}

std::optional<BlasMatmul> blasMatmul(mlir::linalg::LinalgOp op, std::string *whyNot, bool narrowInputs) {
  auto refuse = [&](const char *why) -> std::optional<BlasMatmul> {
    if (whyNot)
      *whyNot = why;
    return std::nullopt;
  };
  auto matmul = mlir::dyn_cast<mlir::linalg::MatmulOp>(op.getOperation());
  auto batched = mlir::dyn_cast<mlir::linalg::BatchMatmulOp>(op.getOperation());
  if (!matmul && !batched)
    return refuse("not a matmul");
  if (!op.hasPureBufferSemantics())
    return refuse("not on memrefs");
  // Transposing or broadcasting indexing maps are not BLAS's.
  if ((matmul && matmul.hasUserDefinedMaps()) || (batched && batched.hasUserDefinedMaps()))
    return refuse("its indexing maps are not the default ones");
  auto cType = mlir::cast<mlir::MemRefType>(op.getDpsInits()[0].getType());
  mlir::Type element = cType.getElementType();
  if (!element.isF32() && !element.isF64())
    return refuse("its element type is neither f32 nor f64");
  BlasMatmul problem;
  problem.element = element;
  problem.inputElement = mlir::cast<mlir::MemRefType>(op->getOperand(0).getType()).getElementType();
  bool sixteenBit = problem.inputElement.isBF16() || problem.inputElement.isF16();
  if (problem.inputElement != element && !(narrowInputs && sixteenBit && element.isF32()))
    return refuse("its operands' element types differ");
  MatrixLayout *layouts[] = {&problem.a, &problem.b, &problem.c};
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    auto type = mlir::cast<mlir::MemRefType>(operand.getType());
    if (type.getElementType() != (index < 2 ? problem.inputElement : element))
      return refuse("its operands' element types differ");
    auto layout = matrixLayout(type);
    if (!layout)
      return refuse("an operand's strides are neither row-major nor transposed (or not static)");
    *layouts[index] = *layout;
  }
  if (problem.c.transposed)
    return refuse("C is not row-major");
  int64_t rank = cType.getRank();
  auto aType = mlir::cast<mlir::MemRefType>(op->getOperand(0).getType());
  problem.batch = rank == 3 ? cType.getDimSize(0) : 1;
  problem.m = cType.getDimSize(rank - 2);
  problem.n = cType.getDimSize(rank - 1);
  problem.k = aType.getDimSize(rank - 1);
  return problem;
}

mlir::Value elementPointer(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value memref, mlir::Value batchIndex) {
  auto metadata = mlir::memref::ExtractStridedMetadataOp::create(builder, loc, memref);
  mlir::Value address = mlir::memref::ExtractAlignedPointerAsIndexOp::create(builder, loc, memref);
  mlir::Value address64 = mlir::arith::IndexCastOp::create(builder, loc, builder.getI64Type(), address);
  auto pointerType = mlir::LLVM::LLVMPointerType::get(builder.getContext());
  mlir::Value base = mlir::LLVM::IntToPtrOp::create(builder, loc, pointerType, address64);
  mlir::Value offset = metadata.getOffset();
  if (batchIndex) {
    mlir::Value step = mlir::arith::MulIOp::create(builder, loc, batchIndex, metadata.getStrides()[0]);
    offset = mlir::arith::AddIOp::create(builder, loc, offset, step);
  }
  mlir::Value offset64 = mlir::arith::IndexCastOp::create(builder, loc, builder.getI64Type(), offset);
  mlir::Type element = mlir::cast<mlir::MemRefType>(memref.getType()).getElementType();
  return mlir::LLVM::GEPOp::create(builder, loc, pointerType, element, base, mlir::ValueRange{offset64});
}

} // namespace mlpipe
