#include "jit/host_jit.h"

#include "support/error.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

namespace mlpipe {

namespace {

// The prefix of the packed wrapper of each entry.
constexpr const char *kPackedPrefix = "_mlpipe_packed_";

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

// Section memory whose unwind frames stay unregistered (host_jit.h says
// why).
class UnregisteredFramesMemoryManager final : public llvm::SectionMemoryManager {
public:
  void registerEHFrames(uint8_t *, uint64_t, size_t) override {}
  void deregisterEHFrames() override {}
};

// Compiled code never unwinds (host_jit.h): no unwind tables.
void markNothingUnwinds(llvm::Module &llvmModule) {
  for (llvm::Function &function : llvmModule) {
    function.setDoesNotThrow();
    function.setUWTableKind(llvm::UWTableKind::None);
  }
}

// `_mlpipe_packed_<name>(ptr args)`: loads each argument of `name` from the
// pointer args[i] holds and calls it (its entries return nothing).
void addPackedWrapper(llvm::Module &llvmModule, const std::string &name) {
  llvm::Function *function = llvmModule.getFunction(name);
  if (!function || function->isDeclaration())
    fail("the module has no function {} to call", name);
  if (!function->getReturnType()->isVoidTy())
    fail("the module's function {} returns a value; entries return through their arguments", name);
  llvm::LLVMContext &context = llvmModule.getContext();
  llvm::IRBuilder<> builder(context);
  auto *type = llvm::FunctionType::get(builder.getVoidTy(), builder.getPtrTy(), /*isVarArg=*/false);
  auto *wrapper = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, kPackedPrefix + name, llvmModule);
  builder.SetInsertPoint(llvm::BasicBlock::Create(context, "entry", wrapper));
  llvm::Value *argumentPointers = wrapper->getArg(0);
  llvm::SmallVector<llvm::Value *> arguments;
  for (llvm::Argument &argument : function->args()) {
    llvm::Value *slot = builder.CreateConstGEP1_64(builder.getPtrTy(), argumentPointers, argument.getArgNo());
    llvm::Value *pointer = builder.CreateLoad(builder.getPtrTy(), slot);
    arguments.push_back(builder.CreateLoad(argument.getType(), pointer));
  }
  builder.CreateCall(function, arguments);
  builder.CreateRetVoid();
}

} // namespace

struct HostJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  bool initialized = false;
};

HostJit::HostJit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HostJit::~HostJit() {
  if (impl_->initialized)
    llvm::consumeError(impl_->jit->deinitialize(impl_->jit->getMainJITDylib()));
}

std::unique_ptr<HostJit> HostJit::create(mlir::ModuleOp module, const std::vector<std::string> &entries,
                                         const Options &options) {
  initializeNativeTarget();
  auto machineBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!machineBuilder)
    fail("the JIT cannot target this host: {}", llvm::toString(machineBuilder.takeError()));
  machineBuilder->setCodeGenOptLevel(options.codeGenOptLevel);
  auto machine = machineBuilder->createTargetMachine();
  if (!machine)
    fail("the JIT cannot target this host: {}", llvm::toString(machine.takeError()));

  auto context = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, *context);
  if (!llvmModule)
    fail("the module could not be translated to LLVM IR");
  llvmModule->setDataLayout((*machine)->createDataLayout());
  llvmModule->setTargetTriple((*machine)->getTargetTriple());
  markNothingUnwinds(*llvmModule);
  for (const std::string &entry : entries)
    addPackedWrapper(*llvmModule, entry);
  auto optimize = mlir::makeOptimizingTransformer(options.optLevel, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  if (llvm::Error error = optimize(llvmModule.get()))
    fail("optimising the module failed: {}", llvm::toString(std::move(error)));
  llvm::DataLayout dataLayout = llvmModule->getDataLayout();

  auto jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(*machineBuilder)
          .setDataLayout(dataLayout)
          .setObjectLinkingLayerCreator(
              [](llvm::orc::ExecutionSession &session) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(session, [](const llvm::MemoryBuffer &) {
                  return std::make_unique<UnregisteredFramesMemoryManager>();
                });
              })
          .create();
  if (!jit)
    fail("the JIT could not be set up: {}", llvm::toString(jit.takeError()));
  // Symbols the module does not define and defineSymbols does not give:
  // the process's own (the C library, libm).
  auto processSymbols = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(dataLayout.getGlobalPrefix());
  if (!processSymbols)
    fail("the JIT cannot search this process's symbols: {}", llvm::toString(processSymbols.takeError()));
  (*jit)->getMainJITDylib().addGenerator(std::move(*processSymbols));
  if (llvm::Error error = (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(llvmModule), std::move(context))))
    fail("the JIT could not take the module: {}", llvm::toString(std::move(error)));
  auto impl = std::make_unique<Impl>();
  impl->jit = std::move(*jit);
  return std::unique_ptr<HostJit>(new HostJit(std::move(impl)));
}

void HostJit::defineSymbols(const std::vector<std::pair<std::string, void *>> &symbols) {
  llvm::orc::LLJIT &jit = *impl_->jit;
  llvm::orc::SymbolMap map;
  for (const auto &[name, address] : symbols)
    map[jit.mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address), llvm::JITSymbolFlags::Exported};
  if (llvm::Error error = jit.getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(map))))
    fail("the JIT could not define the runtime's symbols: {}", llvm::toString(std::move(error)));
}

HostJit::PackedFunction HostJit::packed(const std::string &name) {
  auto address = impl_->jit->lookup(kPackedPrefix + name);
  if (!address)
    fail("the JIT has no entry {}: {}", name, llvm::toString(address.takeError()));
  return address->toPtr<PackedFunction>();
}

void HostJit::initialize() {
  if (llvm::Error error = impl_->jit->initialize(impl_->jit->getMainJITDylib()))
    fail("running the module's constructors failed: {}", llvm::toString(std::move(error)));
  impl_->initialized = true;
}

} // namespace mlpipe
