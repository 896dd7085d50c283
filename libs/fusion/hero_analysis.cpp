// Hero roles from indexing maps and iterator types.
#include "fusion/hero_analysis.h"

#include "mlir/IR/AffineExpr.h"

namespace mlpipe::emitters {

const char *fusionKindName(FusionKind kind) {
  switch (kind) {
  case FusionKind::Loop:
    return "loop";
  case FusionKind::RowReduction:
    return "row_reduction";
  case FusionKind::ColumnReduction:
    return "column_reduction";
  case FusionKind::Transpose:
    return "transpose";
  case FusionKind::Matmul:
    return "matmul";
  }
  return "?";
}

std::optional<FusionKind> parseFusionKind(llvm::StringRef name) {
  for (FusionKind kind : {FusionKind::Loop, FusionKind::RowReduction, FusionKind::ColumnReduction,
                          FusionKind::Transpose, FusionKind::Matmul})
    if (name == fusionKindName(kind))
      return kind;
  return std::nullopt;
}

const char *heroRoleName(HeroRole role) {
  switch (role) {
  case HeroRole::Elementwise:
    return "elementwise";
  case HeroRole::RowReduction:
    return "row reduction";
  case HeroRole::ColumnReduction:
    return "column reduction";
  case HeroRole::Transpose:
    return "transpose";
  case HeroRole::Matmul:
    return "matmul";
  case HeroRole::Other:
    return "other";
  }
  return "?";
}

FusionKind fusionKindFor(HeroRole role) {
  switch (role) {
  case HeroRole::RowReduction:
    return FusionKind::RowReduction;
  case HeroRole::ColumnReduction:
    return FusionKind::ColumnReduction;
  case HeroRole::Transpose:
    return FusionKind::Transpose;
  case HeroRole::Matmul:
    return FusionKind::Matmul;
  case HeroRole::Elementwise:
  case HeroRole::Other:
    return FusionKind::Loop;
  }
  return FusionKind::Loop;
}

namespace {

bool isShaped(mlir::Value value) { return mlir::isa<mlir::ShapedType>(value.getType()); }

// The loop dimension an expression is exactly (d3), if it is one.
std::optional<unsigned> loopDim(mlir::AffineExpr expr) {
  if (auto dim = mlir::dyn_cast<mlir::AffineDimExpr>(expr))
    return dim.getPosition();
  return std::nullopt;
}

} // namespace

mlir::OpOperand *reducedOperand(mlir::linalg::LinalgOp op) {
  for (mlir::OpOperand *input : op.getDpsInputOperands())
    if (isShaped(input->get()))
      return input;
  return nullptr;
}

mlir::OpOperand *transposedOperand(mlir::linalg::LinalgOp op) {
  if (op.getNumReductionLoops() != 0 || op.getNumLoops() < 2)
    return nullptr;
  // The op's loops run over its output; its innermost loop is the output's
  // innermost dimension when the output map is the identity.
  if (op.getNumDpsInits() != 1 || !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return nullptr;
  unsigned innermostLoop = op.getNumLoops() - 1;
  for (mlir::OpOperand *input : op.getDpsInputOperands()) {
    if (!isShaped(input->get()))
      continue;
    mlir::AffineMap map = op.getMatchingIndexingMap(input);
    if (map.getNumResults() < 2)
      continue;
    // The input's innermost index does not move with the innermost loop,
    // but another of its indices does: neighbouring threads would read
    // addresses a row apart.
    bool innermostMoves = map.getResults().back().isFunctionOfDim(innermostLoop);
    bool otherMoves = false;
    for (mlir::AffineExpr expr : map.getResults().drop_back())
      otherMoves |= expr.isFunctionOfDim(innermostLoop);
    if (!innermostMoves && otherMoves)
      return input;
  }
  return nullptr;
}

HeroRole heroRole(mlir::linalg::LinalgOp op) {
  if (mlir::isa<mlir::linalg::MatmulOp, mlir::linalg::BatchMatmulOp>(op.getOperation()))
    return HeroRole::Matmul;
  if (op.getNumReductionLoops() == 0)
    return transposedOperand(op) ? HeroRole::Transpose : HeroRole::Elementwise;

  // A reduction: one output, read through a projected permutation of the
  // loops, and an input whose indexing is a permutation of the loops.
  mlir::OpOperand *input = reducedOperand(op);
  if (!input || op.getNumDpsInits() != 1 || op.getDpsInputOperands().size() != 1)
    return HeroRole::Other;
  mlir::AffineMap inputMap = op.getMatchingIndexingMap(input);
  if (!inputMap.isPermutation())
    return HeroRole::Other;
  llvm::SmallVector<mlir::utils::IteratorType> iterators = op.getIteratorTypesArray();
  // Which input dimensions are reduced, in the input's order.
  llvm::SmallVector<bool> reduced;
  for (mlir::AffineExpr expr : inputMap.getResults())
    reduced.push_back(iterators[*loopDim(expr)] == mlir::utils::IteratorType::reduction);
  // The reduced dimensions must be one contiguous block.
  int first = -1, last = -1;
  for (int i = 0; i < static_cast<int>(reduced.size()); ++i)
    if (reduced[i]) {
      if (first < 0)
        first = i;
      else if (last != i - 1)
        return HeroRole::Other;
      last = i;
    }
  // The output keeps the kept dimensions in the input's order.
  mlir::AffineMap outputMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  unsigned previous = 0;
  bool firstResult = true;
  for (mlir::AffineExpr expr : outputMap.getResults()) {
    std::optional<unsigned> dim = loopDim(expr);
    if (!dim)
      return HeroRole::Other;
    unsigned position = *inputMap.getResultPosition(mlir::getAffineDimExpr(*dim, op.getContext()));
    if (!firstResult && position < previous)
      return HeroRole::Other;
    previous = position;
    firstResult = false;
  }
  return last == static_cast<int>(reduced.size()) - 1 ? HeroRole::RowReduction : HeroRole::ColumnReduction;
}

} // namespace mlpipe::emitters
