// mlpipe-managed-allocations: the host's buffers become managed GPU memory.
// Passes.td holds its description, with IR before and after.
#include "compiler/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_MANAGEDALLOCATIONSPASS
#include "compiler/Passes.h.inc"

namespace {

struct ManagedAllocationsPass : impl::ManagedAllocationsPassBase<ManagedAllocationsPass> {
  void runOnOperation() final {
    for (auto function : getOperation().getOps<mlir::func::FuncOp>()) {
      llvm::SmallVector<mlir::memref::AllocOp> allocations;
      llvm::SmallVector<mlir::memref::DeallocOp> deallocations;
      function.walk([&](mlir::Operation *op) {
        if (auto alloc = mlir::dyn_cast<mlir::memref::AllocOp>(op))
          allocations.push_back(alloc);
        else if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(op))
          deallocations.push_back(dealloc);
      });
      for (auto alloc : allocations)
        replaceAllocation(alloc);
      for (auto dealloc : deallocations)
        replaceDeallocation(dealloc);
    }
  }

  static void replaceAllocation(mlir::memref::AllocOp alloc) {
    mlir::OpBuilder builder(alloc);
    auto managed = mlir::gpu::AllocOp::create(builder, alloc.getLoc(), alloc.getType(), /*asyncToken=*/mlir::Type(),
                                              /*asyncDependencies=*/mlir::ValueRange{}, alloc.getDynamicSizes(),
                                              alloc.getSymbolOperands(), /*hostShared=*/true);
    alloc.getResult().replaceAllUsesWith(managed.getMemref());
    alloc.erase();
  }

  static void replaceDeallocation(mlir::memref::DeallocOp dealloc) {
    mlir::OpBuilder builder(dealloc);
    mlir::Location loc = dealloc.getLoc();
    auto tokenType = mlir::gpu::AsyncTokenType::get(builder.getContext());
    auto start = mlir::gpu::WaitOp::create(builder, loc, tokenType, mlir::ValueRange{});
    auto free = mlir::gpu::DeallocOp::create(builder, loc, tokenType, mlir::ValueRange{start.getAsyncToken()},
                                             dealloc.getMemref());
    mlir::gpu::WaitOp::create(builder, loc, mlir::Type(), mlir::ValueRange{free.getAsyncToken()});
    dealloc.erase();
  }
};

} // namespace

} // namespace mlpipe
