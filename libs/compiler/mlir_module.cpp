// The process-wide MLIR context, parsing with file:line:col diagnostics,
// printing, and telling which stage a module is at.
#include "codegen/debug.h"
#include "compiler/compiler.h"
#include "compiler/diagnostics.h"
#include "compiler/passes.h"
#include "runtime/gemm_abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string_view>
#include <unordered_set>

namespace mlpipe {

int mlpipeOptMain(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registerCompilerDialectsAndPasses(registry);
  registerDebugOnlyOption();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "mlpipe-opt: mlpipe's passes, and the upstream ones its pipelines use, on a .mlir file\n", registry));
}

mlir::MLIRContext &compilerContext() {
  static mlir::MLIRContext *context = [] {
    mlir::DialectRegistry registry;
    registerCompilerDialectsAndPasses(registry);
    auto *context = new mlir::MLIRContext(registry);
    // Every registered dialect loads now, not when a pass first builds one
    // of its ops: loading one while passes run on several threads is a
    // race (MLIR requires dialects to be loaded before multithreaded
    // execution). registration.cpp keeps the list to what mlpipe uses.
    context->loadAllAvailableDialects();
    return context;
  }();
  return *context;
}

struct MlirModule::Impl {
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

MlirModule::MlirModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MlirModule::MlirModule(MlirModule &&) noexcept = default;
MlirModule &MlirModule::operator=(MlirModule &&) noexcept = default;
MlirModule::~MlirModule() = default;

mlir::ModuleOp MlirModule::op() const { return *impl_->module; }

MlirModule MlirModule::parse(std::string_view text, const std::string &bufferName) {
  mlir::MLIRContext &ctx = compilerContext();
  DiagnosticCollector diagnostics(ctx);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(text.data(), text.size()), bufferName), llvm::SMLoc());
  mlir::ParserConfig config(&ctx);
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, config);
  if (!module)
    diagnostics.fail(bufferName + ": not valid MLIR");
  bool hasFunction = false;
  module->walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::func::FuncOp, mlir::LLVM::LLVMFuncOp>(op))
      hasFunction = true;
  });
  if (!hasFunction)
    fail("{}: the module holds no function", bufferName);
  auto impl = std::make_unique<Impl>();
  impl->module = std::move(module);
  return MlirModule(std::move(impl));
}

namespace {

// Drops " loc(unknown)", " loc(#A)" for every alias #A of loc(unknown), and
// those aliases' definitions, so printed locations show names alone. Linear
// in the text: two passes, each copying every kept byte once.
std::string withoutUnknownLocations(const std::string &text) {
  std::unordered_set<std::string_view> unknownAliases;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string_view line(text.data() + start, end - start);
    if (line.starts_with("#loc") && line.find(" = loc(unknown)") != std::string_view::npos)
      unknownAliases.insert(line.substr(0, line.find(' ')));
    start = end;
  }
  std::string kept;
  kept.reserve(text.size());
  constexpr std::string_view kOpen = " loc(";
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string_view line(text.data() + start, end - start);
    start = end;
    if (line.starts_with("#loc") && unknownAliases.count(line.substr(0, line.find(' '))))
      continue;
    size_t copied = 0;
    for (size_t at = line.find(kOpen); at != std::string_view::npos; at = line.find(kOpen, at + 1)) {
      size_t close = line.find(')', at + kOpen.size());
      if (close == std::string_view::npos)
        break;
      std::string_view inside = line.substr(at + kOpen.size(), close - at - kOpen.size());
      if (inside != "unknown" && !unknownAliases.count(inside))
        continue;
      kept.append(line.substr(copied, at - copied));
      copied = close + 1;
    }
    kept.append(line.substr(copied));
  }
  return kept;
}

} // namespace

std::string MlirModule::print(bool locations) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  mlir::OpPrintingFlags flags;
  if (locations) {
    // Only the front end's names are worth printing: positions in the
    // traced text are dropped.
    mlir::Location unknown = mlir::UnknownLoc::get(impl_->module->getContext());
    impl_->module->walk([&](mlir::Operation *op) {
      if (!mlir::isa<mlir::NameLoc>(op->getLoc()))
        op->setLoc(unknown);
      for (mlir::Region &region : op->getRegions())
        for (mlir::Block &block : region)
          for (mlir::BlockArgument argument : block.getArguments())
            argument.setLoc(unknown);
    });
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  }
  impl_->module->print(os, flags);
  os.flush();
  if (locations)
    text = withoutUnknownLocations(text);
  return text + (text.empty() || text.back() == '\n' ? "" : "\n");
}

const char *stageName(Stage stage) {
  switch (stage) {
  case Stage::Tensor:
    return "linalg on tensors (what trace and fuse write)";
  case Stage::Bufferized:
    return "bufferized memrefs (what bufferize writes)";
  case Stage::Outlined:
    return "host code with outlined GPU kernels (what outline writes)";
  case Stage::GpuBinary:
    return "LLVM host code with GPU binaries (what lower-nvvm writes)";
  case Stage::CpuLowered:
    return "LLVM code for the CPU (what lower-cpu writes)";
  }
  return "?";
}

Stage MlirModule::stage() const {
  bool binary = false, gpuModule = false, launch = false, tensors = false, funcOps = false;
  impl_->module->walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::gpu::BinaryOp>(op))
      binary = true;
    else if (mlir::isa<mlir::gpu::GPUModuleOp>(op))
      gpuModule = true;
    else if (mlir::isa<mlir::gpu::LaunchFuncOp>(op))
      launch = true;
    // A call of the runtime's GEMM is GPU work too (a module of matmuls alone
    // has no kernel): declared by func before lowering, by llvm after.
    if (auto symbol = op->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
        symbol && symbol.getValue() == gemm_abi::kEntryName) {
      launch |= mlir::isa<mlir::func::FuncOp>(op);
      binary |= mlir::isa<mlir::LLVM::LLVMFuncOp>(op);
    }
    if (auto func = mlir::dyn_cast<mlir::func::FuncOp>(op)) {
      funcOps = true;
      for (mlir::Type type : func.getFunctionType().getInputs())
        tensors |= mlir::isa<mlir::TensorType>(type);
      for (mlir::Type type : func.getFunctionType().getResults())
        tensors |= mlir::isa<mlir::TensorType>(type);
    }
    for (mlir::Type type : op->getResultTypes())
      tensors |= mlir::isa<mlir::TensorType>(type);
  });
  if (binary)
    return Stage::GpuBinary;
  if (gpuModule || launch)
    return Stage::Outlined;
  if (tensors)
    return Stage::Tensor;
  if (funcOps)
    return Stage::Bufferized;
  return Stage::CpuLowered;
}

int countOps(const MlirModule &module, std::string_view opName) {
  int count = 0;
  module.op()->walk([&](mlir::Operation *op) {
    if (op->getName().getStringRef() == llvm::StringRef(opName.data(), opName.size()))
      ++count;
  });
  return count;
}

} // namespace mlpipe
