// mlpipe-programmatic-launch: on chips with programmatic dependent launch,
// every kernel lets the next one be scheduled at once and waits for the one
// before it before touching memory. Passes.td holds its description, with IR
// before and after.
#include "codegen/debug.h"
#include "codegen/device_description.h"
#include "codegen/kernel_factory.h"
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
    int kernels = 0, afterPredecessor = 0;
    for (auto module : getOperation().getOps<mlir::gpu::GPUModuleOp>()) {
      if (!device->programmaticDependentLaunch)
        dropOwnWaits(module);
      else if (launchesAfterPredecessor(module))
        ++afterPredecessor;
      else
        kernels += markModule(module);
    }
    MLPIPE_DEBUG(kDebugLaunch, os << chip << ": "
                                  << (device->programmaticDependentLaunch
                                          ? std::to_string(kernels) + " kernels launch programmatically, " +
                                                std::to_string(afterPredecessor) + " modules after their predecessor"
                                          : std::string("no programmatic dependent launch on this chip"))
                                  << "\n");
  }

  // On a chip without programmatic launch (a module outlined for a later
  // chip), a kernel's own wait and the L2 prefetches it issues before it
  // have nothing to overlap, and LLVM selects neither for such a chip: both
  // go, and the addresses they computed are left to be folded away.
  static void dropOwnWaits(mlir::gpu::GPUModuleOp module) {
    for (auto function : module.getOps<mlir::gpu::GPUFuncOp>()) {
      llvm::SmallVector<mlir::Operation *> dropped;
      function.walk([&](mlir::Operation *op) {
        if (mlir::isa<mlir::NVVM::GriddepcontrolOp, mlir::NVVM::PrefetchOp>(op))
          dropped.push_back(op);
      });
      for (mlir::Operation *op : dropped)
        op->erase();
    }
  }

  // A module holding a kernel marked to launch only after its predecessor
  // (kLaunchAfterPredecessorAttribute) is left as it is: no marker, so the
  // runtime launches none of its kernels early (the marker is per module).
  static bool launchesAfterPredecessor(mlir::gpu::GPUModuleOp module) {
    return llvm::any_of(module.getOps<mlir::gpu::GPUFuncOp>(), [](mlir::gpu::GPUFuncOp function) {
      return function->hasAttr(emitters::kLaunchAfterPredecessorAttribute);
    });
  }

  // Returns how many kernels of the module now wait for their predecessor.
  static int markModule(mlir::gpu::GPUModuleOp module) {
    int kernels = 0;
    for (auto function : module.getOps<mlir::gpu::GPUFuncOp>()) {
      if (!function.isKernel() || function.getBody().empty())
        continue;
      mlir::Block &entry = function.getBody().front();
      mlir::OpBuilder b = mlir::OpBuilder::atBlockBegin(&entry);
      mlir::Location loc = function.getLoc();
      // A kernel whose emitter already waits (after prefetches that touch no
      // value) lets the next one go right after its own wait.
      mlir::NVVM::GriddepcontrolOp ownWait;
      for (auto control : entry.getOps<mlir::NVVM::GriddepcontrolOp>())
        if (control.getKind() == mlir::NVVM::GridDepActionKind::wait) {
          ownWait = control;
          break;
        }
      if (ownWait)
        b.setInsertionPointAfter(ownWait);
      else
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
