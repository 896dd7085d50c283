// The JIT: MLIR's ExecutionEngine at O3 over a lowered module, with the
// mgpu* runtime and BLAS registered as symbols, called through the packed
// _mlir__mlir_ciface_<entry> wrappers with memref descriptors.
#include "runtime/executable.h"

#include "runtime/mgpu_runtime.h"
#include "support/blas.h"
#include "support/error.h"
#include "support/float16.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/TargetSelect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace mlpipe {

const char *targetName(Target target) { return target == Target::Gpu ? "gpu" : "cpu"; }

std::string TensorSpec::describe() const {
  return shape.empty() ? std::string(dtypeName(dtype)) : formatShape(shape) + "x" + dtypeName(dtype);
}

namespace {

DType dtypeOf(mlir::Type type) {
  if (type.isF32())
    return DType::f32;
  if (type.isF64())
    return DType::f64;
  if (type.isInteger(32))
    return DType::i32;
  if (type.isInteger(64))
    return DType::i64;
  if (type.isF16())
    return DType::f16;
  if (type.isBF16())
    return DType::bf16;
  if (type.isInteger(1))
    return DType::i1;
  fail("unsupported element type in an entry signature");
}

// f32 -> bf16 for code the JIT compiles: LLVM calls __truncsfbf2 where the
// CPU has no bf16 conversion instruction, and libgcc before GCC 13 does not
// provide it. The x86-64 and AArch64 calling conventions return a bf16 in
// the low 16 bits of the first float register, where this float's low bits
// go.
float truncateFloatToBf16(float value) { return std::bit_cast<float>(static_cast<uint32_t>(floatToBf16Bits(value))); }

std::vector<TensorSpec> readSpecs(mlir::Operation *function, llvm::StringRef attribute) {
  std::vector<TensorSpec> specs;
  auto array = function->getAttrOfType<mlir::ArrayAttr>(attribute);
  if (!array)
    return specs;
  for (mlir::Attribute element : array) {
    auto dictionary = mlir::dyn_cast<mlir::DictionaryAttr>(element);
    auto name = dictionary ? dictionary.getAs<mlir::StringAttr>("name") : nullptr;
    auto type = dictionary ? dictionary.getAs<mlir::TypeAttr>("type") : nullptr;
    auto shaped = type ? mlir::dyn_cast<mlir::ShapedType>(type.getValue()) : nullptr;
    if (!shaped || !shaped.hasStaticShape())
      fail("entry signature attribute {} is malformed", attribute.str());
    specs.push_back(
        {name.str(), dtypeOf(shaped.getElementType()), Shape(shaped.getShape().begin(), shaped.getShape().end())});
  }
  return specs;
}

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

// A memref descriptor for a dense C-ordered buffer:
// {allocated, aligned, offset, sizes[rank], strides[rank]}.
std::vector<int64_t> denseDescriptor(void *data, const Shape &shape) {
  std::vector<int64_t> descriptor = {reinterpret_cast<int64_t>(data), reinterpret_cast<int64_t>(data), 0};
  descriptor.insert(descriptor.end(), shape.begin(), shape.end());
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  descriptor.insert(descriptor.end(), strides.begin(), strides.end());
  return descriptor;
}

} // namespace

std::vector<EntrySignature> entrySignatures(const MlirModule &module) {
  std::vector<EntrySignature> entries;
  module.op().walk([&](mlir::Operation *op) {
    auto symbol = op->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
    if (!symbol || !op->hasAttr("mlpipe.inputs") || symbol.getValue().starts_with("_mlir_ciface_"))
      return;
    entries.push_back({symbol.str(), readSpecs(op, "mlpipe.inputs"), readSpecs(op, "mlpipe.outputs")});
  });
  return entries;
}

struct Executable::Impl {
  MlirModule module;
  Target target;
  std::vector<EntrySignature> entries;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::Executable(Executable &&) noexcept = default;
Executable &Executable::operator=(Executable &&) noexcept = default;
Executable::~Executable() = default;

Target Executable::target() const { return impl_->target; }
const std::vector<EntrySignature> &Executable::entries() const { return impl_->entries; }

Executable Executable::load(MlirModule module) {
  Stage stage = module.stage();
  if (stage != Stage::GpuBinary && stage != Stage::CpuLowered)
    fail("the module is {}, but running needs a lowered module (what lower-nvvm or lower-cpu writes)",
         stageName(stage));
  auto impl = std::make_unique<Impl>(
      Impl{std::move(module), stage == Stage::GpuBinary ? Target::Gpu : Target::Cpu, {}, nullptr});
  impl->entries = entrySignatures(impl->module);
  if (impl->entries.empty())
    fail("the module has no entry function (one with mlpipe.inputs, as trace writes)");
  if (impl->target == Target::Gpu && !gpu::available())
    fail("this module runs on the GPU, but {}", gpu::unavailableReason());

  initializeNativeTarget();
  auto transformer = mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, /*targetMachine=*/nullptr);
  mlir::ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  auto engine = mlir::ExecutionEngine::create(impl->module.op(), options);
  if (!engine)
    fail("the JIT could not compile the module: {}", llvm::toString(engine.takeError()));
  impl->engine = std::move(*engine);
  impl->engine->registerSymbols([](llvm::orc::MangleAndInterner interner) {
    llvm::orc::SymbolMap symbols;
    auto add = [&](const std::string &name, void *address) {
      symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address), llvm::JITSymbolFlags::Exported};
    };
    for (auto &[name, address] : gpu::runtimeSymbols())
      add(name, address);
    add("__truncsfbf2", reinterpret_cast<void *>(&truncateFloatToBf16));
    add("cblas_sgemm", reinterpret_cast<void *>(blas::sgemm()));
    add("cblas_dgemm", reinterpret_cast<void *>(blas::dgemm()));
    return symbols;
  });
  // Runs the global constructors: for a GPU module, loading its kernels.
  impl->engine->initialize();
  return Executable(std::move(impl));
}

const EntrySignature &selectEntry(const std::vector<EntrySignature> &entries, const std::string &name) {
  std::vector<std::string> names;
  for (auto &entry : entries) {
    if (entry.name == name)
      return entry;
    names.push_back(entry.name);
  }
  if (name.empty() && entries.size() == 1)
    return entries.front();
  if (name.empty())
    fail("the module has several entries ({}): choose one with --entry", fmt::join(names, ", "));
  fail("the module has no entry '{}': its entries are {}", name, fmt::join(names, ", "));
}

const EntrySignature &Executable::entry(const std::string &name) const { return selectEntry(impl_->entries, name); }

void Executable::call(const EntrySignature &entry, const std::vector<void *> &buffers) const {
  size_t expected = entry.inputs.size() + entry.outputs.size();
  if (buffers.size() != expected)
    fail("{} takes {} buffers, not {}", entry.name, expected, buffers.size());
  std::vector<std::vector<int64_t>> descriptors;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const TensorSpec &spec = i < entry.inputs.size() ? entry.inputs[i] : entry.outputs[i - entry.inputs.size()];
    descriptors.push_back(denseDescriptor(buffers[i], spec.shape));
  }
  std::vector<void *> descriptorPointers, arguments;
  for (auto &descriptor : descriptors)
    descriptorPointers.push_back(descriptor.data());
  for (auto &pointer : descriptorPointers)
    arguments.push_back(&pointer);
  if (auto error = impl_->engine->invokePacked("_mlir_ciface_" + entry.name, arguments))
    fail("calling {} failed: {}", entry.name, llvm::toString(std::move(error)));
  if (impl_->target == Target::Gpu)
    gpu::synchronize();
}

double timeOnTarget(Target target, const std::function<void()> &work) {
  if (target == Target::Gpu) {
    gpu::EventTimer timer;
    timer.start();
    work();
    timer.stop();
    return timer.milliseconds();
  }
  auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// ---- TargetBuffer ---------------------------------------------------------------

TargetBuffer::TargetBuffer(Target target, size_t bytes) : target_(target), bytes_(bytes) {
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  data_ = target == Target::Gpu ? gpu::allocateManaged(rounded) : std::aligned_alloc(64, rounded);
  if (!data_)
    fail("cannot allocate {} bytes", bytes);
}

TargetBuffer::TargetBuffer(TargetBuffer &&other) noexcept
    : target_(other.target_), data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
}

TargetBuffer &TargetBuffer::operator=(TargetBuffer &&other) noexcept {
  if (this != &other) {
    release();
    target_ = other.target_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
  }
  return *this;
}

TargetBuffer::~TargetBuffer() { release(); }

void TargetBuffer::release() {
  if (!data_)
    return;
  if (target_ == Target::Gpu) {
    try {
      gpu::freeManaged(data_);
    } catch (const Error &error) { // a destructor must not throw; say it
      std::fprintf(stderr, "mlpipe: %s\n", error.what());
    }
  } else
    std::free(data_);
  data_ = nullptr;
}

} // namespace mlpipe
