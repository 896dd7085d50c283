#include "codegen/unwritten_arguments.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlpipe::emitters {

namespace {

// Calls nest only as deep as fusions inside a program; a deeper chain is
// taken as a write rather than followed.
constexpr int kMaxCallDepth = 8;

bool mayBeWritten(mlir::Value value, int depth);

// The callee's argument `index` may be written there.
bool mayBeWrittenIn(mlir::FunctionOpInterface callee, unsigned index, int depth) {
  if (!callee || callee.isExternal() || index >= callee.getNumArguments() || depth >= kMaxCallDepth)
    return true;
  return mayBeWritten(callee.getArgument(index), depth + 1);
}

bool mayBeWritten(mlir::Value value, int depth) {
  for (mlir::OpOperand &use : value.getUses()) {
    mlir::Operation *user = use.getOwner();
    if (auto view = mlir::dyn_cast<mlir::ViewLikeOpInterface>(user)) {
      if (view.getViewSource() == value) {
        for (mlir::Value result : user->getResults())
          if (mayBeWritten(result, depth))
            return true;
        continue;
      }
    }
    // An address taken from the buffer may be written through unseen.
    if (mlir::isa<mlir::memref::ExtractAlignedPointerAsIndexOp, mlir::memref::ExtractStridedMetadataOp>(user))
      return true;
    if (auto launch = mlir::dyn_cast<mlir::gpu::LaunchFuncOp>(user)) {
      auto kernel = mlir::SymbolTable::lookupNearestSymbolFrom<mlir::gpu::GPUFuncOp>(launch, launch.getKernel());
      unsigned first = launch.getKernelOperands().getBeginOperandIndex();
      if (!kernel || use.getOperandNumber() < first ||
          mayBeWrittenIn(mlir::cast<mlir::FunctionOpInterface>(kernel.getOperation()), use.getOperandNumber() - first,
                         depth))
        return true;
      continue;
    }
    if (auto call = mlir::dyn_cast<mlir::CallOpInterface>(user)) {
      auto callee = mlir::dyn_cast_or_null<mlir::FunctionOpInterface>(call.resolveCallable());
      unsigned first = call.getArgOperands().getBeginOperandIndex();
      if (use.getOperandNumber() < first || mayBeWrittenIn(callee, use.getOperandNumber() - first, depth))
        return true;
      continue;
    }
    if (mlir::isMemoryEffectFree(user)) {
      // A select or cast of buffers: follow the buffers it gives.
      for (mlir::Value result : user->getResults())
        if (mlir::isa<mlir::BaseMemRefType>(result.getType()) && mayBeWritten(result, depth))
          return true;
      continue;
    }
    auto effects = mlir::dyn_cast<mlir::MemoryEffectOpInterface>(user);
    if (!effects)
      return true;
    llvm::SmallVector<mlir::MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const mlir::MemoryEffects::EffectInstance &effect : instances)
      if (mlir::isa<mlir::MemoryEffects::Write>(effect.getEffect()) &&
          (!effect.getValue() || effect.getValue() == value))
        return true;
  }
  return false;
}

} // namespace

bool isUnwrittenArgument(mlir::Value memref) {
  mlir::Value root = memref;
  while (true) {
    if (auto view = root.getDefiningOp<mlir::ViewLikeOpInterface>())
      root = view.getViewSource();
    else if (auto transpose = root.getDefiningOp<mlir::memref::TransposeOp>()) // a view, not ViewLike
      root = transpose.getIn();
    else
      break;
  }
  auto argument = mlir::dyn_cast<mlir::BlockArgument>(root);
  if (!argument || !mlir::isa<mlir::BaseMemRefType>(argument.getType()))
    return false;
  auto function = mlir::dyn_cast<mlir::FunctionOpInterface>(argument.getOwner()->getParentOp());
  if (!function || argument.getOwner() != &function.getFunctionBody().front())
    return false;
  return !mayBeWritten(argument, 0);
}

} // namespace mlpipe::emitters
