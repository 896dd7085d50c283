// mlpipe-merge-identical-kernels: gpu.modules that are equal but for their
// names become one, so equal kernels are compiled, assembled and loaded
// once. Passes.td holds its description, with IR before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Pass/Pass.h"

#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlpipe {

#define GEN_PASS_DEF_MERGEIDENTICALKERNELSPASS
#include "transforms/Passes.h.inc"

namespace {

// The module's text under a fixed name: equal texts are equal kernels.
std::string canonicalText(mlir::gpu::GPUModuleOp module) {
  mlir::Operation *copy = module->clone();
  mlir::SymbolTable::setSymbolName(copy, "mlpipe_canonical");
  std::string text;
  llvm::raw_string_ostream stream(text);
  // Printed unverified: the detached copy has no parent module, and the
  // verifier of an atomic llvm.load looks for its data layout there.
  copy->print(stream, mlir::OpPrintingFlags().useLocalScope().assumeVerified());
  copy->destroy();
  return text;
}

struct MergeIdenticalKernelsPass : impl::MergeIdenticalKernelsPassBase<MergeIdenticalKernelsPass> {
  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    std::map<std::string, mlir::StringAttr> firstWith;
    llvm::DenseMap<mlir::StringAttr, mlir::StringAttr> replacement;
    llvm::SmallVector<mlir::gpu::GPUModuleOp> duplicates;
    for (auto kernels : module.getOps<mlir::gpu::GPUModuleOp>()) {
      auto [it, inserted] = firstWith.try_emplace(canonicalText(kernels), kernels.getSymNameAttr());
      if (!inserted) {
        replacement[kernels.getSymNameAttr()] = it->second;
        duplicates.push_back(kernels);
      }
    }
    if (duplicates.empty())
      return;
    module.walk([&](mlir::gpu::LaunchFuncOp launch) {
      mlir::SymbolRefAttr kernel = launch.getKernel();
      auto found = replacement.find(kernel.getRootReference());
      if (found != replacement.end())
        launch.setKernelAttr(mlir::SymbolRefAttr::get(found->second, kernel.getNestedReferences()));
    });
    for (mlir::gpu::GPUModuleOp kernels : duplicates)
      kernels.erase();
  }
};

} // namespace

} // namespace mlpipe
