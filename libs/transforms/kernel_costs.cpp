// mlpipe-kernel-costs: what each kernel moves and computes, recorded on the
// module before the kernels are serialised, for the runtime's profiler.
// Passes.td holds its description, with IR before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <map>

namespace mlpipe {

#define GEN_PASS_DEF_KERNELCOSTSPASS
#include "transforms/Passes.h.inc"

namespace {

// The emitters' own count of bytes read plus written per launch, and of
// floating-point operations, when they give one.
constexpr const char *kBytesAttribute = "mlpipe.bytes";
constexpr const char *kFlopsAttribute = "mlpipe.flops";
// Bytes not known at compile time: the runtime counts the launch's memref
// arguments instead.
constexpr int64_t kCountedAtLaunch = -1;
// An argument that is no memref (an index, a float).
constexpr int64_t kScalarArgument = -1;

struct KernelCostsPass : impl::KernelCostsPassBase<KernelCostsPass> {
  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    llvm::SmallVector<mlir::gpu::GPUFuncOp> kernels;
    std::map<std::string, int> uses;
    module.walk([&](mlir::gpu::GPUFuncOp function) {
      if (function.isKernel()) {
        kernels.push_back(function);
        ++uses[function.getName().str()];
      }
    });
    if (kernels.empty())
      return;
    // The table is keyed by kernel name, as the runtime sees launches: a name
    // several modules share is replaced by its module's, which is unique.
    for (mlir::gpu::GPUFuncOp kernel : kernels)
      if (uses[kernel.getName().str()] > 1)
        renameAfterModule(kernel, module);

    mlir::Builder builder(module.getContext());
    llvm::SmallVector<mlir::NamedAttribute> table;
    for (mlir::gpu::GPUFuncOp kernel : kernels) {
      auto bytes = kernel->getAttrOfType<mlir::IntegerAttr>(kBytesAttribute);
      auto flops = kernel->getAttrOfType<mlir::IntegerAttr>(kFlopsAttribute);
      llvm::SmallVector<int64_t> arguments;
      for (mlir::Type type : kernel.getArgumentTypes()) {
        auto memref = mlir::dyn_cast<mlir::MemRefType>(type);
        arguments.push_back(memref ? memref.getRank() : kScalarArgument);
        arguments.push_back(memref ? (memref.getElementTypeBitWidth() + 7) / 8 : 0);
      }
      table.push_back(builder.getNamedAttr(
          kernel.getName(),
          builder.getDictionaryAttr({
              builder.getNamedAttr("bytes", builder.getI64IntegerAttr(bytes ? bytes.getInt() : kCountedAtLaunch)),
              builder.getNamedAttr("flops", builder.getI64IntegerAttr(flops ? flops.getInt() : 0)),
              builder.getNamedAttr("args", builder.getI64ArrayAttr(arguments)),
          })));
    }
    module->setAttr("mlpipe.kernels", builder.getDictionaryAttr(table));
  }

  static void renameAfterModule(mlir::gpu::GPUFuncOp kernel, mlir::ModuleOp module) {
    auto owner = kernel->getParentOfType<mlir::gpu::GPUModuleOp>();
    if (!owner)
      return;
    mlir::StringAttr oldName = kernel.getNameAttr(), newName = owner.getNameAttr();
    kernel.setName(newName);
    auto oldReference = mlir::SymbolRefAttr::get(owner.getNameAttr(), {mlir::FlatSymbolRefAttr::get(oldName)});
    auto newReference = mlir::SymbolRefAttr::get(owner.getNameAttr(), {mlir::FlatSymbolRefAttr::get(newName)});
    module.walk([&](mlir::gpu::LaunchFuncOp launch) {
      if (launch.getKernel() == oldReference)
        launch.setKernelAttr(newReference);
    });
  }
};

} // namespace

} // namespace mlpipe
