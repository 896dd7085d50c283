// How a BLAS library reads the operands of a linalg.matmul or
// linalg.batch_matmul on memrefs in place: the one matcher behind the CPU's
// mlpipe-blas-matmuls (CBLAS) and the GPU's mlpipe-cublas-matmuls (cuBLAS).
//
// A BLAS library takes each matrix as rows of contiguous elements a leading
// dimension apart, or as the transpose of such a matrix; a batch steps every
// pointer by a fixed stride. So an operand qualifies when one of its last two
// strides is 1 and the other at least the length it steps over: a
// transposed view (memref.transpose) is read with the transpose flag and a
// slice (memref.subview) with its parent's leading dimension, never copied.
//
//   if (auto layouts = blasMatmulLayouts(matmul))
//     ... layouts->a.transposed, layouts->b.leadingDimension, layouts->m ...
#pragma once

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>
#include <string>

namespace mlpipe {

// Whether an op is a linalg.matmul or a linalg.batch_matmul.
inline bool isMatmul(mlir::Operation *op) { return mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op); }

// How a library reads one matrix operand.
struct MatrixLayout {
  bool transposed = false;      // stored as the transpose, read with the transpose flag
  int64_t leadingDimension = 0; // elements between consecutive stored rows
  int64_t batchStride = 0;      // elements between consecutive matrices (rank 3); 0 for rank 2
};

// The layout of a [rows, cols] or [batch, rows, cols] memref with static
// sizes and strides: row-major when the column stride is 1 and the row
// stride at least the row length (and at least 1), transposed when the row
// stride is 1 and the column stride at least the column length; nullopt
// when a library cannot read it without a copy.
std::optional<MatrixLayout> matrixLayout(mlir::MemRefType type);

// A matmul a library can compute in place: C (m x n) += A (m x k) B (k x n),
// `batch` times.
struct BlasMatmul {
  mlir::Type element;      // of C: f32 or f64
  mlir::Type inputElement; // of A and B: element, or bf16 or f16 under an f32 C
  bool narrowInputs() const { return inputElement != element; }
  int64_t batch = 1, m = 0, n = 0, k = 0;
  MatrixLayout a, b, c;
};

// For a linalg.matmul or linalg.batch_matmul on memrefs, with the default
// indexing maps, whose operands are all f32 or all f64 (or, with
// `narrowInputs`, A and B both bf16 or both f16 under an f32 C) and readable
// in place, with C row-major (libraries write C row by row): the problem.
// nullopt otherwise, and `whyNot` (when given) says why in a few words.
std::optional<BlasMatmul> blasMatmul(mlir::linalg::LinalgOp op, std::string *whyNot = nullptr,
                                     bool narrowInputs = false);

// An !llvm.ptr to the first element `memref` views (its aligned pointer plus
// its offset), stepped by `batchIndex` matrices along dimension 0 when
// given: what a library is passed for an operand.
mlir::Value elementPointer(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value memref,
                           mlir::Value batchIndex = {});

} // namespace mlpipe
