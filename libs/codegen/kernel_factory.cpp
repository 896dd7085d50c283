// KernelFactory: one gpu.module per distinct kernel, deduplicated by the
// kernel's printed IR.
#include "codegen/kernel_factory.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/Support/raw_ostream.h"

namespace mlpipe::emitters {

KernelFactory::KernelFactory(mlir::ModuleOp module) : module_(module) {
  // Kernels already in the module (from an earlier emitter run) count for
  // deduplication and naming too.
  module_.walk([&](mlir::gpu::GPUFuncOp kernel) { namesUsed_[kernel.getName()]++; });
}

// Kernel names are unique across the module (a profile names kernels by
// them); each kernel's module is named after it.
std::string KernelFactory::uniqueModuleName(llvm::StringRef name) {
  std::string candidate = name.str();
  for (int suffix = 1; namesUsed_.count(candidate) || module_.lookupSymbol(candidate + "_module"); ++suffix)
    candidate = name.str() + "_" + std::to_string(suffix);
  namesUsed_[candidate]++;
  return candidate;
}

namespace {

// The kernel's IR without its own name: equal strings, equal kernels.
std::string structuralKey(mlir::gpu::GPUFuncOp kernel) {
  std::string name = kernel.getName().str();
  kernel.setName("kernel");
  std::string text;
  llvm::raw_string_ostream os(text);
  kernel->print(os, mlir::OpPrintingFlags().useLocalScope());
  kernel.setName(name);
  return text;
}

} // namespace

mlir::gpu::GPUFuncOp KernelFactory::build(const KernelSignature &signature,
                                          const std::function<void(mlir::OpBuilder &, mlir::gpu::GPUFuncOp)> &body) {
  return *tryBuild(signature, [&](mlir::OpBuilder &builder, mlir::gpu::GPUFuncOp kernel) {
    body(builder, kernel);
    return mlir::success();
  });
}

mlir::FailureOr<mlir::gpu::GPUFuncOp>
KernelFactory::tryBuild(const KernelSignature &signature,
                        const std::function<mlir::LogicalResult(mlir::OpBuilder &, mlir::gpu::GPUFuncOp)> &body) {
  mlir::MLIRContext *context = module_.getContext();
  module_->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), mlir::UnitAttr::get(context));
  mlir::OpBuilder builder = mlir::OpBuilder::atBlockEnd(module_.getBody());
  mlir::Location loc = mlir::NameLoc::get(mlir::StringAttr::get(context, signature.name));
  std::string kernelName = uniqueModuleName(signature.name);
  auto kernelModule = mlir::gpu::GPUModuleOp::create(builder, loc, kernelName + "_module");
  builder.setInsertionPointToStart(kernelModule.getBody());
  auto type = mlir::FunctionType::get(context, signature.arguments, {});
  auto kernel = mlir::gpu::GPUFuncOp::create(builder, loc, kernelName, type, signature.workgroupBuffers);
  kernel->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), builder.getUnitAttr());
  kernel->setAttr("mlpipe.bytes", builder.getI64IntegerAttr(signature.bytesMoved));
  kernel->setAttr("mlpipe.flops", builder.getI64IntegerAttr(signature.flops));
  if (signature.launchAfterPredecessor)
    kernel->setAttr(kLaunchAfterPredecessorAttribute, builder.getUnitAttr());
  if (signature.blockSize[0] > 0)
    kernel.setKnownBlockSizeAttr(builder.getDenseI32ArrayAttr(signature.blockSize));
  mlir::Block &entry = kernel.getBody().front();
  builder.setInsertionPointToEnd(&entry);
  auto terminator = mlir::gpu::ReturnOp::create(builder, loc);
  builder.setInsertionPoint(terminator);
  if (mlir::failed(body(builder, kernel))) {
    namesUsed_.erase(kernelName);
    kernelModule.erase();
    return mlir::failure();
  }

  std::string key = structuralKey(kernel);
  auto found = byStructure_.find(key);
  if (found != byStructure_.end()) {
    namesUsed_.erase(kernelName);
    kernelModule.erase();
    ++shared_;
    return found->second;
  }
  byStructure_[key] = kernel;
  ++built_;
  return kernel;
}

mlir::gpu::LaunchFuncOp KernelFactory::launch(mlir::OpBuilder &host, mlir::Location loc, mlir::gpu::GPUFuncOp kernel,
                                              const LaunchDims &dims, mlir::ValueRange arguments,
                                              int64_t dynamicSharedBytes) {
  auto index = [&](int64_t value) { return mlir::arith::ConstantIndexOp::create(host, loc, value).getResult(); };
  mlir::gpu::KernelDim3 grid{index(dims.grid[0]), index(dims.grid[1]), index(dims.grid[2])};
  mlir::gpu::KernelDim3 block{index(dims.block[0]), index(dims.block[1]), index(dims.block[2])};
  mlir::Value shared;
  if (dynamicSharedBytes > 0)
    shared = mlir::arith::ConstantIntOp::create(host, loc, host.getI32Type(), dynamicSharedBytes);
  return mlir::gpu::LaunchFuncOp::create(host, loc, kernel, grid, block, shared, arguments);
}

} // namespace mlpipe::emitters
