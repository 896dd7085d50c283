// The fusion kinds and the hero analysis shared by the partitioner (fuse)
// and the emitters' classifier (outline).
//
// As in XLA:GPU, every fusion is emitted by the strategy its "hero" asks
// for: a row reduction (over the innermost, contiguous dimension), a column
// reduction (over an outer dimension), a transpose that changes the
// innermost dimension, a matmul, or, when it has none of those, the loop
// emitter. heroRole() says which of these one linalg op is; it reads only
// the op's indexing maps and iterator types, so it works on tensors (in
// fuse) and on memrefs (in outline) alike.
#pragma once

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlpipe::emitters {

// What a fusion function is, recorded as its `mlpipe.fusion` attribute.
enum class FusionKind { Loop, RowReduction, ColumnReduction, Transpose, Matmul };
inline constexpr llvm::StringLiteral kFusionAttrName = "mlpipe.fusion";
const char *fusionKindName(FusionKind kind); // "loop", "row_reduction", ...
std::optional<FusionKind> parseFusionKind(llvm::StringRef name);

enum class HeroRole {
  Elementwise,     // every loop parallel, reads coalesced: the loop emitter's
  RowReduction,    // reduces a trailing block of the input's dimensions
  ColumnReduction, // reduces a block of outer dimensions, keeps the innermost
  Transpose,       // every loop parallel, but reads an input across its innermost dimension
  Matmul,          // linalg.matmul / linalg.batch_matmul
  Other,           // anything else: a fusion of its own, emitted op by op
};
HeroRole heroRole(mlir::linalg::LinalgOp op);
const char *heroRoleName(HeroRole role);
// The kind of fusion a hero of this role is emitted as (an elementwise op,
// or any other op, by the loop emitter).
FusionKind fusionKindFor(HeroRole role);

// For a reduction: its reduced operand (the first input).
mlir::OpOperand *reducedOperand(mlir::linalg::LinalgOp op);

// For a transpose hero: the input read across its innermost dimension.
mlir::OpOperand *transposedOperand(mlir::linalg::LinalgOp op);

} // namespace mlpipe::emitters
