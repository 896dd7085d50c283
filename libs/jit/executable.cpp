// A lowered module compiled by the host JIT (host_jit.h), at O3 for the
// CPU, with the mgpu* runtime and BLAS defined as symbols, called through
// the packed wrapper of each _mlir_ciface_<entry> with memref descriptors.
#include "jit/executable.h"

#include "jit/host_jit.h"

#include "runtime/gemm_runtime.h"
#include "runtime/mgpu_runtime.h"
#include "support/blas.h"
#include "support/error.h"
#include "support/float16.h"
#include "transforms/entry_signature.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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
  if (type.isInteger(8))
    return DType::i8;
  if (type.isInteger(16))
    return DType::i16;
  fail("unsupported element type in an entry signature");
}

// A buffer's element type: its MLIR type's, or the unsigned integer its
// `dtype` entry names (MLIR's signless iN does not say).
DType declaredDType(mlir::DictionaryAttr buffer, mlir::Type elementType, llvm::StringRef attribute) {
  DType dtype = dtypeOf(elementType);
  auto note = buffer.getAs<mlir::StringAttr>("dtype");
  if (!note)
    return dtype;
  std::optional<DType> named = parseDType(note.getValue());
  if (!named || !isInteger(*named) || bitWidth(*named) != bitWidth(dtype) || !isInteger(dtype))
    fail("entry signature attribute {} gives '{}' the dtype '{}', which its type does not hold", attribute.str(),
         buffer.getAs<mlir::StringAttr>("name").str(), note.getValue().str());
  return *named;
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
    specs.push_back({name.str(), declaredDType(dictionary, shaped.getElementType(), attribute),
                     Shape(shaped.getShape().begin(), shaped.getShape().end())});
  }
  return specs;
}

ArenaInfo readArena(mlir::Operation *function) {
  ArenaInfo arena;
  auto dictionary = function->getAttrOfType<mlir::DictionaryAttr>("mlpipe.arena");
  if (!dictionary)
    return arena;
  auto field = [&](const char *name) {
    auto value = dictionary.getAs<mlir::IntegerAttr>(name);
    if (!value)
      fail("the mlpipe.arena attribute of {} has no {}",
           function->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName()).str(), name);
    return value.getInt();
  };
  arena.planned = true;
  arena.bytes = field("bytes");
  arena.unplannedBytes = field("unplanned_bytes");
  arena.peakLiveBytes = field("peak_live_bytes");
  arena.buffers = field("buffers");
  arena.allocatedAtRunTime = field("allocated_at_run_time");
  return arena;
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
  bool lowered = module.stage() == Stage::GpuBinary || module.stage() == Stage::CpuLowered;
  module.op().walk([&](mlir::Operation *op) {
    auto symbol = op->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
    if (!symbol || !op->hasAttr("mlpipe.inputs") || symbol.getValue().starts_with("_mlir_ciface_"))
      return;
    // The attributes size every buffer a caller passes to a lowered entry:
    // they must describe the function's real arguments.
    if (std::string mismatch = lowered ? loweredEntrySignatureMismatch(op) : ""; !mismatch.empty())
      fail("the module's entry signature does not match its function: {}", mismatch);
    entries.push_back({symbol.str(), readSpecs(op, "mlpipe.inputs"), readSpecs(op, "mlpipe.outputs"), readArena(op)});
    if (auto loops = op->getAttrOfType<mlir::IntegerAttr>("mlpipe.host_loops"))
      entries.back().hostLoops = loops.getInt();
  });
  return entries;
}

std::map<std::string, KernelCost> kernelCosts(const MlirModule &module) {
  std::map<std::string, KernelCost> costs;
  auto table = module.op()->getAttrOfType<mlir::DictionaryAttr>("mlpipe.kernels");
  if (!table)
    return costs;
  for (mlir::NamedAttribute kernel : table) {
    auto fields = mlir::dyn_cast<mlir::DictionaryAttr>(kernel.getValue());
    auto bytes = fields ? fields.getAs<mlir::IntegerAttr>("bytes") : nullptr;
    auto flops = fields ? fields.getAs<mlir::IntegerAttr>("flops") : nullptr;
    auto arguments = fields ? fields.getAs<mlir::ArrayAttr>("args") : nullptr;
    if (!bytes || !flops || !arguments || arguments.size() % 2 != 0)
      fail("the module's mlpipe.kernels attribute is malformed at kernel '{}'", kernel.getName().str());
    KernelCost cost{bytes.getInt(), flops.getInt(), {}};
    for (size_t i = 0; i + 1 < arguments.size(); i += 2) {
      auto rank = mlir::dyn_cast<mlir::IntegerAttr>(arguments[i]);
      auto elementBytes = mlir::dyn_cast<mlir::IntegerAttr>(arguments[i + 1]);
      if (!rank || !elementBytes)
        fail("the module's mlpipe.kernels attribute is malformed at kernel '{}'", kernel.getName().str());
      cost.arguments.emplace_back(rank.getInt(), elementBytes.getInt());
    }
    costs[kernel.getName().str()] = std::move(cost);
  }
  return costs;
}

struct Executable::Impl {
  explicit Impl(MlirModule module) : module(std::move(module)) {}
  MlirModule module;
  Target target;
  std::vector<EntrySignature> entries;
  // cuBLAS's handles and workspace, for a module that calls mlpipeGemm;
  // declared before the JIT so that it outlives the JIT code.
  std::unique_ptr<gpu::GemmSession> gemmSession;
  std::unique_ptr<HostJit> jit;
  // The packed wrapper of each entry's _mlir_ciface_ function, looked up
  // once.
  std::map<std::string, HostJit::PackedFunction> wrappers;
  std::map<std::string, KernelCost> costs;
  std::unique_ptr<TargetBuffer> arena;
  double jitMs = 0, moduleLoadMs = 0;
};

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::Executable(Executable &&) noexcept = default;
Executable &Executable::operator=(Executable &&) noexcept = default;
Executable::~Executable() = default;

Target Executable::target() const { return impl_->target; }
const std::vector<EntrySignature> &Executable::entries() const { return impl_->entries; }
int64_t Executable::arenaBytes() const { return impl_->arena ? static_cast<int64_t>(impl_->arena->size()) : 0; }
const std::map<std::string, KernelCost> &Executable::kernelCosts() const { return impl_->costs; }
double Executable::jitMs() const { return impl_->jitMs; }
double Executable::moduleLoadMs() const { return impl_->moduleLoadMs; }

bool Executable::capturable() const {
  if (impl_->target != Target::Gpu)
    return false;
  for (const EntrySignature &entry : impl_->entries)
    if (!entry.arena.planned || entry.arena.allocatedAtRunTime > 0 || entry.hostLoops > 0)
      return false;
  return true;
}

bool Executable::hasHostLoops() const {
  for (const EntrySignature &entry : impl_->entries)
    if (entry.hostLoops > 0)
      return true;
  return false;
}

Executable Executable::load(MlirModule module, const ExecutionOptions &executionOptions) {
  Stage stage = module.stage();
  if (stage != Stage::GpuBinary && stage != Stage::CpuLowered)
    fail("the module is {}, but running needs a lowered module (what lower-nvvm or lower-cpu writes)",
         stageName(stage));
  auto impl = std::make_unique<Impl>(std::move(module));
  impl->target = executionOptions.target.value_or(stage == Stage::GpuBinary ? Target::Gpu : Target::Cpu);
  impl->entries = entrySignatures(impl->module);
  impl->costs = mlpipe::kernelCosts(impl->module);
  if (impl->entries.empty())
    fail("the module has no entry function (one with mlpipe.inputs, as trace writes)");
  if (impl->target == Target::Gpu && !gpu::available())
    fail("this module runs on the GPU, but {}", gpu::unavailableReason());
  for (auto &[name, cost] : impl->costs)
    gpu::describeKernel(name, {cost.bytes, cost.flops, cost.arguments});
  // A cubin for another chip is refused here, in a sentence, before the
  // kernels load.
  if (impl->target == Target::Gpu)
    impl->module.op().walk([](mlir::gpu::BinaryOp binary) {
      for (mlir::Attribute attribute : binary.getObjects()) {
        llvm::StringRef image = mlir::cast<mlir::gpu::ObjectAttr>(attribute).getObject().getValue();
        gpu::checkCubinRunsHere(image.data(), image.size());
      }
    });
  // Set up now, not on the first GEMM: a missing cuBLAS is reported before
  // anything runs, and no GEMM allocates (a CUDA graph could not capture it).
  if (impl->module.op().lookupSymbol(gemm_abi::kEntryName) &&
      !executionOptions.symbolOverrides.count(gemm_abi::kEntryName)) {
    try {
      impl->gemmSession = std::make_unique<gpu::GemmSession>();
    } catch (const Error &error) {
      fail("this module calls cuBLAS (it was compiled with --matmul cublas), but {}; compile it with --matmul "
           "generated to run without",
           error.what());
    }
  }

  auto start = std::chrono::steady_clock::now();
  // A GPU module's host code only launches kernels (and, under a CUDA graph,
  // runs once per capture): optimising it buys nothing and costs seconds for
  // the fused model's one large function. CPU code is the computation itself.
  bool gpuHost = impl->target == Target::Gpu;
  HostJit::Options jitOptions;
  jitOptions.optLevel = gpuHost ? 0 : 3;
  jitOptions.codeGenOptLevel = gpuHost ? llvm::CodeGenOptLevel::None : llvm::CodeGenOptLevel::Aggressive;
  std::vector<std::string> interfaces;
  for (const EntrySignature &entry : impl->entries)
    interfaces.push_back("_mlir_ciface_" + entry.name);
  impl->jit = HostJit::create(impl->module.op(), interfaces, jitOptions);
  std::vector<std::pair<std::string, void *>> symbols;
  for (auto &[name, address] : gpu::runtimeSymbols())
    symbols.emplace_back(name, address);
  for (auto &[name, address] : gpu::gemmSymbols())
    symbols.emplace_back(name, address);
  symbols.emplace_back("__truncsfbf2", reinterpret_cast<void *>(&truncateFloatToBf16));
  symbols.emplace_back("cblas_sgemm", reinterpret_cast<void *>(blas::sgemm()));
  symbols.emplace_back("cblas_dgemm", reinterpret_cast<void *>(blas::dgemm()));
  // An override replaces the runtime's symbol of the same name.
  for (auto &[name, address] : executionOptions.symbolOverrides) {
    std::erase_if(symbols, [&](const auto &symbol) { return symbol.first == name; });
    symbols.emplace_back(name, address);
  }
  impl->jit->defineSymbols(symbols);
  for (const EntrySignature &entry : impl->entries)
    impl->wrappers[entry.name] = impl->jit->packed("_mlir_ciface_" + entry.name);
  auto compiled = std::chrono::steady_clock::now();
  impl->jitMs = std::chrono::duration<double, std::milli>(compiled - start).count();
  // Runs the global constructors: for a GPU module, loading its kernels.
  impl->jit->initialize();
  impl->moduleLoadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - compiled).count();

  // One arena for the module: calls run one after another on one stream,
  // so every entry's temporaries can share it.
  int64_t arenaBytes = 0;
  for (const EntrySignature &entry : impl->entries)
    arenaBytes = std::max(arenaBytes, entry.arena.bytes);
  if (arenaBytes > 0)
    impl->arena =
        std::make_unique<TargetBuffer>(impl->target, static_cast<size_t>(arenaBytes), executionOptions.memory);
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

void Executable::enqueue(const EntrySignature &entry, const std::vector<void *> &buffers) const {
  size_t expected = entry.inputs.size() + entry.outputs.size();
  if (buffers.size() != expected)
    fail("{} takes {} buffers, not {}", entry.name, expected, buffers.size());
  auto wrapper = impl_->wrappers.find(entry.name);
  if (wrapper == impl_->wrappers.end())
    fail("{} is not an entry of this module", entry.name);
  // One descriptor per input and output, then the arena's, if any.
  std::vector<std::vector<int64_t>> descriptors;
  descriptors.reserve(buffers.size() + 1);
  for (size_t i = 0; i < buffers.size(); ++i) {
    const TensorSpec &spec = i < entry.inputs.size() ? entry.inputs[i] : entry.outputs[i - entry.inputs.size()];
    descriptors.push_back(denseDescriptor(buffers[i], spec.shape));
  }
  if (entry.arena.bytes > 0)
    descriptors.push_back(denseDescriptor(impl_->arena->data(), {entry.arena.bytes}));
  std::vector<void *> descriptorPointers, arguments;
  for (auto &descriptor : descriptors)
    descriptorPointers.push_back(descriptor.data());
  for (auto &pointer : descriptorPointers)
    arguments.push_back(&pointer);
  wrapper->second(arguments.data());
}

void Executable::call(const EntrySignature &entry, const std::vector<void *> &buffers) const {
  enqueue(entry, buffers);
  if (impl_->target == Target::Gpu)
    gpu::waitForCurrentStream();
}

// ---- TargetStream and CallReplay ---------------------------------------------

TargetStream::TargetStream(Target target) : target_(target) {
  if (target == Target::Gpu)
    stream_ = std::make_unique<gpu::Stream>();
}

TargetStream::~TargetStream() = default;

void TargetStream::synchronize() const {
  if (stream_)
    stream_->synchronize();
}

TargetStream::Scope::Scope(const TargetStream &stream) {
  if (stream.gpu())
    scope_ = std::make_unique<gpu::StreamScope>(*stream.gpu());
}

TargetStream::Scope::~Scope() = default;

void CallReplay::run(const TargetStream &stream, const Executable &executable, const std::vector<void *> &buffers,
                     const std::function<void()> &enqueue, bool graphs) {
  TargetStream::Scope current(stream);
  if (!graphs || !stream.gpu() || !executable.capturable()) {
    if (graphs && stream.gpu() && !executable.capturable() && !warned_) {
      std::fprintf(stderr, executable.hasHostLoops()
                               ? "mlpipe: note: running without CUDA graphs: the module runs loops whose trip counts "
                                 "the host reads as they run\n"
                               : "mlpipe: note: running without CUDA graphs: the module allocates memory while it "
                                 "runs (its temporaries were not all planned)\n");
      warned_ = true;
    }
    enqueue();
    return;
  }
  if (!ranDirectly_) {
    enqueue();
    ranDirectly_ = true;
    return;
  }
  if (graph_.empty() || buffers != capturedBuffers_) {
    graph_.capture(*stream.gpu(), enqueue);
    capturedBuffers_ = buffers;
    ++captures_;
  }
  graph_.launch(*stream.gpu());
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

TargetBuffer::TargetBuffer(Target target, size_t bytes, gpu::Memory memory) : target_(target), bytes_(bytes) {
  // Whole 256-byte units: kernels may read a vector past a tensor's end
  // within its last unit, and the CPU's aligned_alloc needs a multiple of
  // its alignment.
  size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  data_ = target == Target::Gpu ? gpu::allocate(rounded, memory) : std::aligned_alloc(64, rounded);
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

void TargetBuffer::upload(const void *host, size_t bytes) {
  if (bytes > bytes_)
    fail("cannot upload {} bytes into a buffer of {}", bytes, bytes_);
  if (target_ == Target::Gpu)
    gpu::copyToDevice(data_, host, bytes);
  else
    std::memcpy(data_, host, bytes);
}

void TargetBuffer::download(void *host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_)
    fail("cannot download bytes {} to {} of a buffer of {}", offset, offset + bytes, bytes_);
  if (target_ == Target::Gpu)
    gpu::copyToHost(host, static_cast<const char *>(data_) + offset, bytes);
  else
    std::memcpy(host, static_cast<const char *>(data_) + offset, bytes);
}

void TargetBuffer::release() {
  if (!data_)
    return;
  if (target_ == Target::Gpu) {
    try {
      gpu::release(data_);
    } catch (const Error &error) { // a destructor must not throw; say it
      std::fprintf(stderr, "mlpipe: %s\n", error.what());
    }
  } else
    std::free(data_);
  data_ = nullptr;
}

} // namespace mlpipe
