// mlpipe-managed-allocations: the host's buffers become managed memory that
// both the host and the GPU can address.
//
//   %buf = memref.alloc() : memref<64xf32>
//   ...
//   memref.dealloc %buf : memref<64xf32>
// becomes
//   %buf = gpu.alloc host_shared () : memref<64xf32>
//   ...
//   %0 = gpu.wait async
//   %1 = gpu.dealloc async [%0] %buf : memref<64xf32>
//   gpu.wait [%1]
//
// The allocation stays synchronous: gpu-to-llvm refuses host_shared
// allocations that carry an async token. The deallocation is async inside a
// wait because gpu-to-llvm leaves a synchronous gpu.dealloc unconverted.
// Kernels (inside gpu.module) are left alone.
#include "compiler/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {
namespace {

struct ManagedAllocationsPass : mlir::PassWrapper<ManagedAllocationsPass, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ManagedAllocationsPass)
  llvm::StringRef getArgument() const final { return "mlpipe-managed-allocations"; }
  llvm::StringRef getDescription() const final {
    return "Host memref.alloc/dealloc to gpu.alloc host_shared / gpu.dealloc";
  }
  void getDependentDialects(mlir::DialectRegistry &registry) const final { registry.insert<mlir::gpu::GPUDialect>(); }

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

std::unique_ptr<mlir::Pass> createManagedAllocationsPass() { return std::make_unique<ManagedAllocationsPass>(); }

} // namespace mlpipe
