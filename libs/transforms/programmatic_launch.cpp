// mlpipe-programmatic-launch: on chips with programmatic dependent launch,
// every kernel lets the next one be scheduled at once and waits for the one
// before it before touching memory. Passes.td holds its description, with IR
// before and after.
#include "codegen/debug.h"
#include "codegen/device_description.h"
#include "codegen/pass_support.h"
#include "transforms/passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlpipe {

#define GEN_PASS_DEF_PROGRAMMATICLAUNCHPASS
#include "transforms/Passes.h.inc"

namespace {

// The global the runtime looks for in a loaded module (runtime/module_loading.cpp
// names it too): its kernels wait for their predecessors in griddepcontrol.
constexpr const char *kProgrammaticLaunchMarker = "mlpipe_programmatic_launch";
constexpr const char *kDebugLaunch = "mlpipe-launch";

struct ProgrammaticLaunchPass : impl::ProgrammaticLaunchPassBase<ProgrammaticLaunchPass> {
  using ProgrammaticLaunchPassBase::ProgrammaticLaunchPassBase;

  void runOnOperation() final {
    const DeviceDescription *device = passDeviceDescription(getOperation(), chip);
    if (!device)
      return signalPassFailure();
    int kernels = 0;
    if (device->programmaticDependentLaunch)
      for (auto module : getOperation().getOps<mlir::gpu::GPUModuleOp>())
        kernels += markModule(module);
    MLPIPE_DEBUG(kDebugLaunch, os << chip << ": "
                                  << (device->programmaticDependentLaunch
                                          ? std::to_string(kernels) + " kernels launch programmatically"
                                          : std::string("no programmatic dependent launch on this chip"))
                                  << "\n");
  }

  // Returns how many kernels of the module now wait for their predecessor.
  static int markModule(mlir::gpu::GPUModuleOp module) {
    int kernels = 0;
    for (auto function : module.getOps<mlir::gpu::GPUFuncOp>()) {
      if (!function.isKernel() || function.getBody().empty())
        continue;
      mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(&function.getBody().front());
      mlir::Location loc = function.getLoc();
      mlir::NVVM::GriddepcontrolOp::create(b, loc, mlir::NVVM::GridDepActionKind::wait);
      mlir::NVVM::GriddepcontrolOp::create(b, loc, mlir::NVVM::GridDepActionKind::launch_dependents);
      ++kernels;
    }
    if (kernels == 0 || mlir::SymbolTable::lookupSymbolIn(module, kProgrammaticLaunchMarker))
      return kernels;
    mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(module.getBody());
    mlir::Type byte = b.getI8Type();
    mlir::LLVM::GlobalOp::create(b, module.getLoc(), byte, /*isConstant=*/true, mlir::LLVM::Linkage::External,
                                 kProgrammaticLaunchMarker, b.getI8IntegerAttr(1));
    return kernels;
  }
};

} // namespace

} // namespace mlpipe
