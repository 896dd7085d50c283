// KernelFactory: where every emitter puts the kernels it builds.
//
// Each kernel is a `gpu.func ... kernel` alone in its own `gpu.module` (so
// each is serialised, assembled and cached on its own), named for what it
// computes (`ln_1_row_reduction`). Structurally identical kernels are built
// once: the factory keys each new kernel by its printed IR (with the name
// left out), and a kernel equal to one built before is dropped in favour of
// the first, so GPT-2's twelve layers share one set of kernels.
//
//   KernelFactory kernels(module);
//   KernelSignature signature{"gelu_loop", {xType, yType}, {}};
//   gpu::GPUFuncOp kernel = kernels.build(signature, [&](OpBuilder &b, gpu::GPUFuncOp f) {
//     ... build the body at b's insertion point (before the gpu.return) ...
//   });
//   kernels.launch(hostBuilder, loc, kernel, grid, block, {x, y});
#pragma once

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/StringMap.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace mlpipe::emitters {

struct KernelSignature {
  std::string name;                               // what it computes: "ln_1_row_reduction"
  llvm::SmallVector<mlir::Type> arguments;        // memrefs (and scalars) the host passes
  llvm::SmallVector<mlir::Type> workgroupBuffers; // memref<..., #gpu.address_space<workgroup>>
  // Bytes read plus written by one launch, and its floating-point operations
  // (0 for memory-bound kernels): recorded on the kernel as mlpipe.bytes and
  // mlpipe.flops for the profiler.
  int64_t bytesMoved = 0;
  int64_t flops = 0;
  // The launch's block size, recorded as known_block_size so the backend may
  // use it.
  std::array<int32_t, 3> blockSize = {0, 0, 0};
  // Blocks of unequal work ordered longest first (causal attention's query
  // tiles): the kernel is launched only once the one before it has
  // finished, never early (mlpipe-programmatic-launch leaves it alone), so
  // that the block scheduler deals its first blocks over every SM rather
  // than stacking them on the SMs the kernel before frees first. Recorded
  // as kLaunchAfterPredecessorAttribute.
  bool launchAfterPredecessor = false;
};

// The unit attribute on a kernel that is launched only once the kernel
// before it has finished (KernelSignature::launchAfterPredecessor).
constexpr const char *kLaunchAfterPredecessorAttribute = "mlpipe.launch_after_predecessor";

// Grid and block sizes of one launch, as host-side constants.
struct LaunchDims {
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
};

class KernelFactory {
public:
  explicit KernelFactory(mlir::ModuleOp module);

  // Builds a kernel: `body` fills the function (the builder is placed before
  // its gpu.return; the entry block's arguments are the signature's
  // arguments, then its workgroup buffers). Returns this kernel, or an
  // identical one built before (then this one is erased).
  mlir::gpu::GPUFuncOp build(const KernelSignature &signature,
                             const std::function<void(mlir::OpBuilder &, mlir::gpu::GPUFuncOp)> &body);
  // The same, for bodies that can fail: on failure the kernel is dropped.
  mlir::FailureOr<mlir::gpu::GPUFuncOp>
  tryBuild(const KernelSignature &signature,
           const std::function<mlir::LogicalResult(mlir::OpBuilder &, mlir::gpu::GPUFuncOp)> &body);

  // A gpu.launch_func of `kernel` at the host builder's insertion point.
  mlir::gpu::LaunchFuncOp launch(mlir::OpBuilder &host, mlir::Location loc, mlir::gpu::GPUFuncOp kernel,
                                 const LaunchDims &dims, mlir::ValueRange arguments, int64_t dynamicSharedBytes = 0);

  int kernelsBuilt() const { return built_; }
  int kernelsShared() const { return shared_; }

private:
  std::string uniqueModuleName(llvm::StringRef name);

  mlir::ModuleOp module_;
  llvm::StringMap<mlir::gpu::GPUFuncOp> byStructure_;
  llvm::StringMap<int> namesUsed_;
  int built_ = 0;
  int shared_ = 0;
};

} // namespace mlpipe::emitters
