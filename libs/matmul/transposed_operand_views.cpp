// mlpipe-transposed-operand-views: matmul operands that are transposed copies become views.
// Passes.td holds its description, with IR before and after.
#include "matmul/matmul_layout.h"
#include "matmul/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Pass/Pass.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlpipe {

#define GEN_PASS_DEF_TRANSPOSEDOPERANDVIEWSPASS
#include "matmul/Passes.h.inc"

namespace {

// The buffer a view was carved from (through subview, expand_shape, ...).
mlir::Value viewRoot(mlir::Value value) {
  while (auto view = value.getDefiningOp<mlir::ViewLikeOpInterface>())
    value = view.getViewSource();
  return value;
}

// True when `op` may write to or free memory rooted at `root`. Ops it
// cannot see into are assumed to write.
bool mayWriteOrFree(mlir::Operation *op, mlir::Value root) {
  if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(op))
    return viewRoot(dealloc.getMemref()) == root;
  if (auto dps = mlir::dyn_cast<mlir::DestinationStyleOpInterface>(op)) {
    for (mlir::Value init : dps.getDpsInits())
      if (viewRoot(init) == root)
        return true;
    return false;
  }
  if (auto copy = mlir::dyn_cast<mlir::memref::CopyOp>(op))
    return viewRoot(copy.getTarget()) == root;
  if (auto store = mlir::dyn_cast<mlir::memref::StoreOp>(op))
    return viewRoot(store.getMemRef()) == root;
  if (mlir::isa<mlir::ViewLikeOpInterface, mlir::memref::AllocOp>(op) ||
      (op->getNumRegions() == 0 && mlir::isMemoryEffectFree(op)))
    return false;
  return true;
}

struct TransposedOperandViewsPass : impl::TransposedOperandViewsPassBase<TransposedOperandViewsPass> {
  void runOnOperation() final {
    llvm::SmallVector<mlir::linalg::TransposeOp> transposes;
    getOperation().walk([&](mlir::linalg::TransposeOp op) { transposes.push_back(op); });
    for (auto transpose : transposes)
      if (transpose.hasPureBufferSemantics())
        tryReplaceWithView(transpose);
  }

  static void tryReplaceWithView(mlir::linalg::TransposeOp transpose) {
    mlir::Value copy = transpose.getInit();
    auto alloc = copy.getDefiningOp<mlir::memref::AllocOp>();
    if (!alloc || alloc->getBlock() != transpose->getBlock())
      return;
    CopyUses uses;
    if (!collectUses(copy, transpose, uses))
      return;
    // Matmul reads up to the first other use see the transposed copy; those
    // are the ones a view can serve.
    llvm::sort(uses.all, [](mlir::Operation *a, mlir::Operation *b) { return a->isBeforeInBlock(b); });
    llvm::SmallVector<mlir::Operation *> readers;
    size_t next = 0;
    while (next < uses.all.size() && uses.directMatmulReads.contains(uses.all[next]))
      readers.push_back(uses.all[next++]);
    if (readers.empty() || uses.all.front()->isBeforeInBlock(transpose))
      return;
    mlir::Value root = viewRoot(transpose.getInput());
    for (mlir::Operation *op = transpose->getNextNode(); op != readers.back(); op = op->getNextNode())
      if (mayWriteOrFree(op, root))
        return;
    // Bufferization may reuse the copy's buffer for a later value once the
    // matmuls are done with it; that is fine if the first later op writes
    // every element before anything reads them.
    bool reused = next < uses.all.size();
    if (reused && !overwritesWholeBuffer(uses.all[next], copy))
      return;

    mlir::OpBuilder builder(transpose);
    llvm::SmallVector<unsigned> permutation;
    for (int64_t axis : transpose.getPermutation())
      permutation.push_back(static_cast<unsigned>(axis));
    auto map = mlir::AffineMap::getPermutationMap(permutation, builder.getContext());
    auto view = mlir::memref::TransposeOp::create(builder, transpose.getLoc(), transpose.getInput(),
                                                  mlir::AffineMapAttr::get(map));
    for (mlir::Operation *reader : readers)
      reader->replaceUsesOfWith(copy, view.getResult());
    transpose.erase();
    if (!reused) {
      if (uses.dealloc)
        uses.dealloc.erase();
      alloc.erase();
    }
  }

  struct CopyUses {
    llvm::SmallVector<mlir::Operation *> all;                  // every op touching the buffer or a view of it
    llvm::SmallPtrSet<mlir::Operation *, 4> directMatmulReads; // matmuls reading the buffer itself as an input
    mlir::memref::DeallocOp dealloc;
  };

  // Gathers the uses of the copy's buffer (and of views of it); false if a
  // use is outside the block.
  static bool collectUses(mlir::Value buffer, mlir::Operation *transpose, CopyUses &uses) {
    mlir::Value copy = transpose->getOperand(1);
    for (mlir::OpOperand &use : buffer.getUses()) {
      mlir::Operation *user = use.getOwner();
      if (user == transpose)
        continue;
      if (user->getBlock() != transpose->getBlock())
        return false;
      if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(user); dealloc && buffer == copy) {
        uses.dealloc = dealloc;
        continue;
      }
      if (auto view = mlir::dyn_cast<mlir::ViewLikeOpInterface>(user); view && view.getViewSource() == buffer) {
        for (mlir::Value result : user->getResults())
          if (!collectUses(result, transpose, uses))
            return false;
        continue;
      }
      auto dps = mlir::dyn_cast<mlir::DestinationStyleOpInterface>(user);
      bool readsOnlyAsInput = isMatmul(user) && buffer == copy &&
                              llvm::none_of(dps.getDpsInits(), [&](mlir::Value v) { return viewRoot(v) == copy; });
      if (readsOnlyAsInput)
        uses.directMatmulReads.insert(user);
      if (!llvm::is_contained(uses.all, user))
        uses.all.push_back(user);
    }
    return true;
  }

  // True when `op` writes all of `buffer` (through `op`'s init) without
  // reading it first: an all-parallel linalg op whose payload ignores the
  // init, whose output map is a permutation and which covers every element.
  static bool overwritesWholeBuffer(mlir::Operation *op, mlir::Value buffer) {
    auto linalgOp = mlir::dyn_cast<mlir::linalg::LinalgOp>(op);
    if (!linalgOp || !linalgOp.hasPureBufferSemantics() || linalgOp.getNumReductionLoops() != 0)
      return false;
    auto bufferType = mlir::cast<mlir::MemRefType>(buffer.getType());
    bool writesIt = false;
    for (mlir::OpOperand &operand : op->getOpOperands()) {
      if (viewRoot(operand.get()) != buffer)
        continue;
      if (!linalgOp.isDpsInit(&operand) || linalgOp.payloadUsesValueFromOperand(&operand) ||
          !linalgOp.getMatchingIndexingMap(&operand).isPermutation())
        return false;
      auto initType = mlir::cast<mlir::MemRefType>(operand.get().getType());
      if (!initType.hasStaticShape() || !bufferType.hasStaticShape() ||
          initType.getNumElements() != bufferType.getNumElements())
        return false;
      writesIt = true;
    }
    return writesIt;
  }
};

} // namespace

} // namespace mlpipe
