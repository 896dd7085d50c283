// mlpipe-persistent-kernels: a run of launches whose grids fit on the GPU at
// once becomes one kernel. Its blocks stay resident and run the launches'
// bodies one after another, as phases, with a barrier across the whole grid
// between two phases. Passes.td holds its description, with IR before and
// after.
#include "compiler/debug.h"
#include "compiler/device_description.h"
#include "compiler/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SetVector.h"

#include <algorithm>

namespace mlpipe {

#define GEN_PASS_DEF_PERSISTENTKERNELSPASS
#include "compiler/Passes.h.inc"

namespace {

constexpr const char *kDebugPersistent = "mlpipe-persistent";

// Resident blocks an SM may hold for a persistent kernel. Two blocks of up to
// 256 threads leave each thread 128 registers (the GEMV kernels already ask
// for two blocks an SM), and two in flight per SM keep enough loads in the
// air to stream weights; the grid is never larger than its widest phase needs.
constexpr int64_t kResidentBlocksPerSm = 2;
// A persistent kernel replaces at least this many launches: one launch alone
// gains nothing and would only pay for the grid barrier's bookkeeping.
constexpr size_t kMinLaunchesPerKernel = 2;
// Shared memory the hardware keeps back per resident block (sm_80 and later).
constexpr int64_t kSharedMemoryReservedPerBlock = 1024;
// Named barriers a block has for subgroups: 16, less barrier 0 (the whole
// block's). Virtual blocks side by side in one block are at most this many.
constexpr int64_t kSubgroupBarriers = 15;
// Each phase's workgroup buffers start at this alignment in the dynamic
// shared memory the phases share (the emitters align them to 16 bytes).
constexpr int64_t kWorkgroupAlignment = 16;

// The grid barrier's state, one per persistent kernel's module: how many
// times a block has arrived at one of its barriers, ever (64 bits never
// wrap). Every launch adds the grid's size once per barrier, so a launch
// starts at a multiple of it. The runtime (runtime/mgpu_runtime.cpp) looks
// for it: a kernel of a module that has it must have its whole grid
// resident at once.
constexpr const char *kArrivalsGlobal = "mlpipe_grid_barrier";

int64_t alignTo(int64_t value, int64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// One launch as a phase of a persistent kernel.
struct Phase {
  mlir::gpu::LaunchFuncOp launch;
  mlir::gpu::GPUFuncOp kernel;
  int64_t blocks = 0;         // the launch's grid: virtual blocks
  int64_t threads = 0;        // threads per virtual block
  int64_t workgroupBytes = 0; // shared memory of one virtual block
  llvm::SmallVector<int64_t> workgroupOffsets;
};

// The shape of the persistent kernel a run of phases becomes.
struct Plan {
  int64_t blockThreads = 0;   // threads per resident block
  int64_t residentBlocks = 0; // the grid
  int64_t blocksPerSm = 0;
  int64_t sharedBytes = 0; // dynamic shared memory
};

std::optional<int64_t> constant(mlir::Value value) {
  if (!value)
    return std::nullopt;
  return mlir::getConstantIntValue(value);
}

bool isOne(mlir::Value value) { return constant(value) == 1; }

// Ops of a kernel body the phase can take over: thread and block ids and
// sizes are rewritten to the virtual block's, barriers to the subgroup's.
bool rewritableGpuOp(mlir::Operation *op) {
  return mlir::isa<mlir::gpu::ThreadIdOp, mlir::gpu::BlockIdOp, mlir::gpu::BlockDimOp, mlir::gpu::GridDimOp,
                   mlir::gpu::BarrierOp, mlir::gpu::ShuffleOp, mlir::gpu::LaneIdOp, mlir::gpu::SubgroupReduceOp,
                   mlir::gpu::ReturnOp>(op);
}

// Why the launch cannot be a phase ("" when it can); fills `phase`.
std::string unsupported(mlir::gpu::LaunchFuncOp launch, Phase &phase) {
  if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty())
    return "it is asynchronous";
  if (launch.hasClusterSize())
    return "it launches clusters";
  if (mlir::Value shared = launch.getDynamicSharedMemorySize(); shared && constant(shared) != 0)
    return "it takes dynamic shared memory";
  std::optional<int64_t> blocks = constant(launch.getGridSizeX()), threads = constant(launch.getBlockSizeX());
  if (!blocks || !threads)
    return "its grid or block size is not a constant";
  if (!isOne(launch.getGridSizeY()) || !isOne(launch.getGridSizeZ()) || !isOne(launch.getBlockSizeY()) ||
      !isOne(launch.getBlockSizeZ()))
    return "its grid or block is not one-dimensional";
  auto kernel = mlir::SymbolTable::lookupNearestSymbolFrom<mlir::gpu::GPUFuncOp>(launch, launch.getKernel());
  if (!kernel || kernel.getBody().empty())
    return "its kernel is not in this module";
  if (!kernel.getBody().hasOneBlock())
    return "its kernel's body is not one block";
  if (kernel.getNumPrivateAttributions() != 0)
    return "its kernel has private attributions";
  phase = Phase{launch, kernel, *blocks, *threads};
  for (mlir::BlockArgument buffer : kernel.getWorkgroupAttributions()) {
    auto type = mlir::dyn_cast<mlir::MemRefType>(buffer.getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
      return "a workgroup buffer of its kernel has no static shape";
    phase.workgroupOffsets.push_back(phase.workgroupBytes);
    phase.workgroupBytes +=
        alignTo(type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8), kWorkgroupAlignment);
  }
  std::string reason;
  kernel.getBody().walk([&](mlir::Operation *op) {
    llvm::StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
    if ((dialect == "gpu" && !rewritableGpuOp(op)) || dialect == "nvvm") {
      reason = "its kernel uses " + op->getName().getStringRef().str();
      return mlir::WalkResult::interrupt();
    }
    if (auto global = mlir::dyn_cast<mlir::memref::GetGlobalOp>(op)) {
      reason = "its kernel reads the global " + global.getName().str();
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  return reason;
}

// The persistent kernel for `phases`, or why there is none: every phase runs
// in one round of a grid that is resident at once.
std::string plan(llvm::ArrayRef<Phase> phases, const DeviceDescription &device, Plan &result) {
  Plan p;
  for (const Phase &phase : phases)
    p.blockThreads = std::max(p.blockThreads, phase.threads);
  // A phase of fewer threads than a block runs several virtual blocks side
  // by side, each a whole number of warps with its own named barrier.
  for (const Phase &phase : phases) {
    if (phase.threads != p.blockThreads && phase.threads % device.warpSize != 0)
      return "a block of " + std::to_string(phase.threads) + " threads is not whole warps";
    if (phase.threads != p.blockThreads && p.blockThreads / phase.threads > kSubgroupBarriers)
      return std::to_string(p.blockThreads / phase.threads) + " blocks of " + std::to_string(phase.threads) +
             " threads side by side need more named barriers than the " + std::to_string(kSubgroupBarriers) +
             " there are";
    p.residentBlocks = std::max(p.residentBlocks,
                                (phase.blocks + p.blockThreads / phase.threads - 1) / (p.blockThreads / phase.threads));
  }
  int64_t mostResident = static_cast<int64_t>(device.smCount) * kResidentBlocksPerSm;
  if (p.residentBlocks > mostResident)
    return std::to_string(p.residentBlocks) + " blocks are needed, more than the " + std::to_string(mostResident) +
           " that stay resident";
  p.blocksPerSm = (p.residentBlocks + device.smCount - 1) / device.smCount;
  if (p.blockThreads * p.blocksPerSm > device.maxThreadsPerSm)
    return "blocks of " + std::to_string(p.blockThreads) + " threads do not fit " + std::to_string(p.blocksPerSm) +
           " to an SM";
  // A phase runs its virtual blocks in ceil(blocks / grid) subgroups, each
  // with its own copy of the phase's workgroup buffers.
  for (const Phase &phase : phases) {
    int64_t subgroups = (phase.blocks + p.residentBlocks - 1) / p.residentBlocks;
    p.sharedBytes = std::max(p.sharedBytes, subgroups * phase.workgroupBytes);
  }
  int64_t sharedBudget = (device.sharedMemoryPerBlockOptIn + kSharedMemoryReservedPerBlock) / p.blocksPerSm -
                         kSharedMemoryReservedPerBlock;
  if (p.sharedBytes > sharedBudget)
    return std::to_string(p.sharedBytes) + " bytes of shared memory a block, more than the " +
           std::to_string(sharedBudget) + " that fit";
  result = p;
  return "";
}

// A memref whose shape, strides and offset are all static travels to the
// persistent kernel as its aligned pointer alone (8 bytes instead of a
// descriptor of 3 + 2 * rank words), and the kernel rebuilds the
// descriptor from its type. A kernel's parameters may take 4352 bytes
// before PTX ISA 8.1, and a GPT-2 124M step's 160 memrefs as descriptors
// take 9 KiB.
bool travelsAsPointer(mlir::Type type) {
  auto memref = mlir::dyn_cast<mlir::MemRefType>(type);
  if (!memref || !memref.hasStaticShape() || memref.getMemorySpace())
    return false;
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (mlir::failed(memref.getStridesAndOffset(strides, offset)))
    return false;
  return !mlir::ShapedType::isDynamic(offset) && llvm::none_of(strides, mlir::ShapedType::isDynamic);
}

// The memref of static `type` whose aligned pointer is `address`, as the
// LLVM descriptor the lowering would have built from a full argument.
mlir::Value memrefFromAddress(mlir::OpBuilder &b, mlir::Location loc, mlir::MemRefType type, mlir::Value address) {
  using namespace mlir;
  MLIRContext *context = b.getContext();
  Type pointer = LLVM::LLVMPointerType::get(context);
  Type i64 = b.getI64Type();
  llvm::SmallVector<Type> fields = {pointer, pointer, i64};
  if (type.getRank() > 0) {
    fields.push_back(LLVM::LLVMArrayType::get(i64, type.getRank()));
    fields.push_back(LLVM::LLVMArrayType::get(i64, type.getRank()));
  }
  auto descriptorType = LLVM::LLVMStructType::getLiteral(context, fields);
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  (void)type.getStridesAndOffset(strides, offset);
  auto word = [&](int64_t value) { return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(value)); };
  Value data = LLVM::IntToPtrOp::create(b, loc, pointer, address);
  Value descriptor = LLVM::PoisonOp::create(b, loc, descriptorType);
  descriptor = LLVM::InsertValueOp::create(b, loc, descriptor, data, llvm::ArrayRef<int64_t>{0});
  descriptor = LLVM::InsertValueOp::create(b, loc, descriptor, data, llvm::ArrayRef<int64_t>{1});
  descriptor = LLVM::InsertValueOp::create(b, loc, descriptor, word(offset), llvm::ArrayRef<int64_t>{2});
  for (int64_t d = 0; d < type.getRank(); ++d) {
    descriptor =
        LLVM::InsertValueOp::create(b, loc, descriptor, word(type.getDimSize(d)), llvm::ArrayRef<int64_t>{3, d});
    descriptor = LLVM::InsertValueOp::create(b, loc, descriptor, word(strides[d]), llvm::ArrayRef<int64_t>{4, d});
  }
  return UnrealizedConversionCastOp::create(b, loc, TypeRange{type}, ValueRange{descriptor}).getResult(0);
}

mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc, int64_t value) {
  return mlir::arith::ConstantIndexOp::create(b, loc, value);
}

mlir::Value i32Constant(mlir::OpBuilder &b, mlir::Location loc, int32_t value) {
  return mlir::arith::ConstantIntOp::create(b, loc, b.getI32Type(), value);
}

constexpr llvm::StringLiteral kDeviceScope = "device";

// Thread 0's count of arrivals when the launch started (a multiple of the
// grid's size: no block can complete the first barrier before every block,
// this one too, has arrived). Other threads get 0 and never use it.
mlir::Value arrivalsAtStart(mlir::OpBuilder &b, mlir::Location loc, mlir::Value threadId, int64_t residentBlocks,
                            mlir::LLVM::GlobalOp arrivalsGlobal) {
  using namespace mlir;
  Type i64 = b.getI64Type();
  Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, threadId, indexConstant(b, loc, 0));
  auto ifFirst = scf::IfOp::create(b, loc, TypeRange{i64}, first, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifFirst.thenBlock());
  Value arrivals = LLVM::AddressOfOp::create(b, loc, arrivalsGlobal);
  Value count = LLVM::LoadOp::create(b, loc, i64, arrivals, 8, false, false, false, false,
                                     LLVM::AtomicOrdering::monotonic, kDeviceScope);
  Value grid = arith::ConstantIntOp::create(b, loc, i64, residentBlocks);
  Value base = arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, count, grid), grid);
  scf::YieldOp::create(b, loc, base);
  b.setInsertionPointToStart(ifFirst.elseBlock());
  scf::YieldOp::create(b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, i64, 0)});
  return ifFirst.getResult(0);
}

// Every block waits here until every block of the grid has arrived; writes
// before it are visible to reads after it in any block. After the block's
// threads meet, thread 0 counts the block in with a releasing add it does
// not wait for, and spins, acquiring, until the count reaches the grid's
// size times the barriers passed so far in this launch (`index` + 1).
// Returns the barrier's first op.
mlir::Operation *emitGridBarrier(mlir::OpBuilder &b, mlir::Location loc, mlir::Value threadId, mlir::Value start,
                                 int64_t residentBlocks, int64_t index, mlir::LLVM::GlobalOp arrivalsGlobal) {
  using namespace mlir;
  Operation *first = gpu::BarrierOp::create(b, loc);
  Value isFirst = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, threadId, indexConstant(b, loc, 0));
  auto ifFirst = scf::IfOp::create(b, loc, isFirst, /*withElseRegion=*/false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    Type i64 = b.getI64Type();
    Value arrivals = LLVM::AddressOfOp::create(b, loc, arrivalsGlobal);
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, arrivals, arith::ConstantIntOp::create(b, loc, i64, 1),
                              LLVM::AtomicOrdering::release, kDeviceScope, 8);
    Value target =
        arith::AddIOp::create(b, loc, start, arith::ConstantIntOp::create(b, loc, i64, (index + 1) * residentBlocks));
    auto wait = scf::WhileOp::create(b, loc, TypeRange{}, ValueRange{});
    b.createBlock(&wait.getBefore());
    Value now = LLVM::LoadOp::create(b, loc, i64, arrivals, 8, false, false, false, false,
                                     LLVM::AtomicOrdering::acquire, kDeviceScope);
    Value early = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, now, target);
    scf::ConditionOp::create(b, loc, early, ValueRange{});
    b.createBlock(&wait.getAfter());
    scf::YieldOp::create(b, loc);
  }
  gpu::BarrierOp::create(b, loc);
  return first;
}

// The values a phase's body sees for its ids and sizes.
struct VirtualBlock {
  mlir::Value threadId; // within the virtual block
  mlir::Value blockId;  // the virtual block
  mlir::Value subgroup; // which of the resident block's virtual blocks
};

// Rewrites the cloned body of a phase: ids and sizes become the virtual
// block's, and a barrier of a virtual block narrower than the resident block
// becomes its subgroup's named barrier.
void rewriteIds(mlir::Block &body, const Phase &phase, const Plan &plan, const VirtualBlock &virtualBlock) {
  using namespace mlir;
  llvm::SmallVector<Operation *> ops;
  body.walk([&](Operation *op) {
    if (isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp, gpu::BarrierOp>(op))
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto dimension = [&](gpu::Dimension d, Value x, int64_t other) -> Value {
      return d == gpu::Dimension::x ? x : indexConstant(b, loc, other);
    };
    Value replacement;
    if (auto id = dyn_cast<gpu::ThreadIdOp>(op))
      replacement = dimension(id.getDimension(), virtualBlock.threadId, 0);
    else if (auto id = dyn_cast<gpu::BlockIdOp>(op))
      replacement = dimension(id.getDimension(), virtualBlock.blockId, 0);
    else if (auto size = dyn_cast<gpu::BlockDimOp>(op))
      replacement = dimension(size.getDimension(), indexConstant(b, loc, phase.threads), 1);
    else if (auto size = dyn_cast<gpu::GridDimOp>(op))
      replacement = dimension(size.getDimension(), indexConstant(b, loc, phase.blocks), 1);
    else if (phase.threads != plan.blockThreads) {
      // Named barrier 1 + subgroup (0 is the whole block's) over the
      // subgroup's threads.
      Value id = arith::AddIOp::create(b, loc, virtualBlock.subgroup, indexConstant(b, loc, 1));
      id = arith::IndexCastOp::create(b, loc, b.getI32Type(), id);
      NVVM::BarrierOp::create(b, loc, Type(), id, i32Constant(b, loc, static_cast<int32_t>(phase.threads)),
                              NVVM::BarrierReductionAttr(), Value());
      op->erase();
      continue;
    } else {
      continue; // a whole-block barrier stays
    }
    op->getResult(0).replaceAllUsesWith(replacement);
    op->erase();
  }
}

// The memref a value views, through any chain of views: on the host the
// function argument or allocation, in a kernel its parameter.
mlir::Value viewRoot(mlir::Value value) {
  while (auto view = value.getDefiningOp<mlir::ViewLikeOpInterface>())
    value = view.getViewSource();
  return value;
}

// Whether the kernel only reads memory through `value`: every use loads, or
// makes a view whose uses only load.
bool onlyRead(mlir::Value value) {
  for (mlir::Operation *user : value.getUsers()) {
    if (mlir::isa<mlir::memref::LoadOp, mlir::vector::LoadOp, mlir::vector::TransferReadOp, mlir::memref::DimOp,
                  mlir::memref::ExtractStridedMetadataOp>(user))
      continue;
    auto view = mlir::dyn_cast<mlir::ViewLikeOpInterface>(user);
    if (view && view.getViewSource() == value && llvm::all_of(user->getResults(), onlyRead))
      continue;
    return false;
  }
  return true;
}

// The persistent kernel's memrefs (as the phases see them) that no phase
// writes: no phase writes through any view of the same host buffer.
llvm::DenseSet<mlir::Value> readOnlyParameters(llvm::MutableArrayRef<Phase> phases,
                                               llvm::ArrayRef<mlir::Value> parameters,
                                               const llvm::DenseMap<mlir::Value, unsigned> &argumentIndex) {
  llvm::DenseSet<mlir::Value> writtenRoots;
  for (Phase &phase : phases)
    for (auto [parameter, operand] : llvm::zip(phase.kernel.getArguments().take_front(phase.kernel.getNumArguments()),
                                               phase.launch.getKernelOperands()))
      if (mlir::isa<mlir::MemRefType>(parameter.getType()) && !onlyRead(parameter))
        writtenRoots.insert(viewRoot(operand));
  llvm::DenseSet<mlir::Value> readOnly;
  for (Phase &phase : phases)
    for (mlir::Value operand : phase.launch.getKernelOperands())
      if (mlir::isa<mlir::MemRefType>(operand.getType()) && !writtenRoots.contains(viewRoot(operand)))
        readOnly.insert(parameters[argumentIndex.lookup(operand)]);
  return readOnly;
}

// Ops that may move above the grid barrier: pure arithmetic, index and
// vector ops without regions (never gpu ops, which may need the whole warp
// or block), and loads of memory no phase writes.
bool hoistable(mlir::Operation *op, const llvm::DenseSet<mlir::Value> &readOnly) {
  if (op->getNumRegions() != 0)
    return false;
  llvm::StringRef dialect = op->getDialect() ? op->getDialect()->getNamespace() : "";
  if (mlir::isa<mlir::memref::LoadOp, mlir::vector::LoadOp>(op))
    return readOnly.contains(viewRoot(op->getOperand(0)));
  bool knownDialect = dialect == "arith" || dialect == "math" || dialect == "vector" || dialect == "index" ||
                      dialect == "affine" || mlir::isa<mlir::ViewLikeOpInterface>(op);
  return knownDialect && mlir::isMemoryEffectFree(op);
}

// Moves each load of read-only memory at the top of a phase's body, with
// the arithmetic its address needs, to just before the grid barrier ahead
// of the phase: weights do not depend on the phases before, so their loads
// are in flight while the grid waits. Returns how many loads moved.
int hoistReadOnlyLoads(mlir::Block &body, mlir::Operation *barrier, const llvm::DenseSet<mlir::Value> &readOnly) {
  int loads = 0;
  for (mlir::Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    if (!mlir::isa<mlir::memref::LoadOp, mlir::vector::LoadOp>(op) || !hoistable(&op, readOnly))
      continue;
    // The load's backward slice within the body, in order.
    llvm::SetVector<mlir::Operation *> slice;
    llvm::SmallVector<mlir::Operation *> work = {&op};
    bool movable = true;
    while (!work.empty() && movable) {
      mlir::Operation *current = work.pop_back_val();
      if (!slice.insert(current))
        continue;
      for (mlir::Value operand : current->getOperands()) {
        mlir::Operation *producer = operand.getDefiningOp();
        if (!producer || producer->getBlock() != &body)
          continue;
        if (!hoistable(producer, readOnly)) {
          movable = false;
          break;
        }
        work.push_back(producer);
      }
    }
    if (!movable)
      continue;
    llvm::SmallVector<mlir::Operation *> ordered(slice.begin(), slice.end());
    llvm::sort(ordered, [](mlir::Operation *a, mlir::Operation *b) { return a->isBeforeInBlock(b); });
    for (mlir::Operation *moving : ordered)
      moving->moveBefore(barrier);
    ++loads;
  }
  return loads;
}

struct PersistentKernelsPass : impl::PersistentKernelsPassBase<PersistentKernelsPass> {
  using PersistentKernelsPassBase::PersistentKernelsPassBase;

  void runOnOperation() final {
    const DeviceDescription *device = passDeviceDescription(getOperation(), chip);
    if (!device)
      return signalPassFailure();
    if (!enabled) {
      MLPIPE_DEBUG(kDebugPersistent, os << "persistent kernels are off\n");
      return;
    }
    device_ = device;
    llvm::SmallVector<mlir::func::FuncOp> hosts(getOperation().getOps<mlir::func::FuncOp>());
    for (mlir::func::FuncOp host : hosts)
      for (mlir::Block &block : host.getBody())
        mergeRuns(block);
    eraseUnusedModules();
  }

private:
  const DeviceDescription *device_ = nullptr;
  llvm::SmallVector<mlir::gpu::GPUModuleOp> touchedModules_;

  // Splits the block's launches into runs, each ended by an op that touches
  // memory (a library call, a copy) or a launch that cannot be a phase, and
  // turns each run of enough launches into one persistent kernel.
  void mergeRuns(mlir::Block &block) {
    llvm::SmallVector<Phase> run;
    Plan runPlan;
    auto flush = [&] {
      if (run.size() >= kMinLaunchesPerKernel)
        build(run, runPlan);
      run.clear();
    };
    for (mlir::Operation &op : llvm::make_early_inc_range(block)) {
      auto launch = mlir::dyn_cast<mlir::gpu::LaunchFuncOp>(op);
      if (!launch) {
        if (!mlir::isMemoryEffectFree(&op) || op.getNumRegions() != 0)
          flush();
        continue;
      }
      Phase phase;
      if (std::string why = unsupported(launch, phase); !why.empty()) {
        MLPIPE_DEBUG(kDebugPersistent, os << launch.getKernelName().getValue() << ": not a phase: " << why << "\n");
        flush();
        continue;
      }
      run.push_back(phase);
      Plan candidate;
      if (std::string why = plan(run, *device_, candidate); !why.empty()) {
        // The run so far becomes a kernel; this launch starts the next run.
        MLPIPE_DEBUG(kDebugPersistent, os << launch.getKernelName().getValue() << ": ends a run: " << why << "\n");
        run.pop_back();
        flush();
        run.push_back(phase);
        if (!plan(run, *device_, candidate).empty()) {
          run.clear();
          continue;
        }
      }
      runPlan = candidate;
    }
    flush();
  }

  void build(llvm::MutableArrayRef<Phase> phases, const Plan &p) {
    using namespace mlir;
    ModuleOp module = getOperation();
    MLIRContext *context = module.getContext();
    gpu::LaunchFuncOp lastLaunch = phases.back().launch;
    Location loc = lastLaunch.getLoc();

    llvm::SetVector<Value> arguments;
    for (Phase &phase : phases)
      arguments.insert(phase.launch.getKernelOperands().begin(), phase.launch.getKernelOperands().end());
    llvm::DenseMap<Value, unsigned> argumentIndex;
    for (auto [index, argument] : llvm::enumerate(arguments))
      argumentIndex[argument] = index;

    const std::string base =
        "persistent_" + phases.front().kernel.getName().str() + "_" + std::to_string(phases.size()) + "_phases";
    std::string name = base;
    for (int suffix = 1; module.lookupSymbol(name + "_module"); ++suffix)
      name = base + "_" + std::to_string(suffix);
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto kernelModule = gpu::GPUModuleOp::create(b, loc, name + "_module");
    b.setInsertionPointToStart(kernelModule.getBody());
    auto arrivalsGlobal = LLVM::GlobalOp::create(b, loc, b.getI64Type(), /*isConstant=*/false, LLVM::Linkage::External,
                                                 kArrivalsGlobal, b.getI64IntegerAttr(0), 8, /*addrSpace=*/1);
    llvm::SmallVector<Type> types;
    for (Value argument : arguments)
      types.push_back(travelsAsPointer(argument.getType()) ? b.getI64Type() : argument.getType());
    auto kernel = gpu::GPUFuncOp::create(b, loc, name, FunctionType::get(context, types, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(p.blockThreads), 1, 1}));
    kernel->setAttr("nvvm.minctasm", b.getI32IntegerAttr(static_cast<int32_t>(p.blocksPerSm)));
    int64_t bytes = 0, flops = 0;
    bool costed = true;
    llvm::SmallVector<Attribute> phaseNames;
    for (Phase &phase : phases) {
      auto phaseBytes = phase.kernel->getAttrOfType<IntegerAttr>("mlpipe.bytes");
      auto phaseFlops = phase.kernel->getAttrOfType<IntegerAttr>("mlpipe.flops");
      costed = costed && phaseBytes && phaseFlops;
      bytes += phaseBytes ? phaseBytes.getInt() : 0;
      flops += phaseFlops ? phaseFlops.getInt() : 0;
      phaseNames.push_back(b.getStringAttr(phase.kernel.getName()));
    }
    if (costed) {
      kernel->setAttr("mlpipe.bytes", b.getI64IntegerAttr(bytes));
      kernel->setAttr("mlpipe.flops", b.getI64IntegerAttr(flops));
    }
    kernel->setAttr("mlpipe.phases", b.getArrayAttr(phaseNames));

    Block &entry = kernel.getBody().front();
    b.setInsertionPointToEnd(&entry);
    auto terminator = gpu::ReturnOp::create(b, loc);
    b.setInsertionPoint(terminator);
    llvm::SmallVector<Value> parameters;
    for (auto [argument, parameter] : llvm::zip(arguments, entry.getArguments().take_front(arguments.size())))
      parameters.push_back(travelsAsPointer(argument.getType())
                               ? memrefFromAddress(b, loc, mlir::cast<MemRefType>(argument.getType()), parameter)
                               : Value(parameter));
    Value threadId = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value blockId = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value shared;
    if (p.sharedBytes > 0)
      shared = gpu::DynamicSharedMemoryOp::create(
          b, loc,
          MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
                          gpu::AddressSpaceAttr::get(context, gpu::AddressSpace::Workgroup)));

    Value start = arrivalsAtStart(b, loc, threadId, p.residentBlocks, arrivalsGlobal);
    llvm::DenseSet<Value> readOnly = readOnlyParameters(phases, parameters, argumentIndex);
    int hoisted = 0;
    for (auto [index, phase] : llvm::enumerate(phases)) {
      // A resident block runs virtual blocks subgroup * grid + block id, so
      // the first round of virtual blocks spreads over every SM.
      VirtualBlock virtualBlock{threadId, blockId, indexConstant(b, loc, 0)};
      if (phase.threads != p.blockThreads) {
        Value width = indexConstant(b, loc, phase.threads);
        virtualBlock.subgroup = arith::DivUIOp::create(b, loc, threadId, width);
        virtualBlock.threadId = arith::RemUIOp::create(b, loc, threadId, width);
        Value first = arith::MulIOp::create(b, loc, virtualBlock.subgroup, indexConstant(b, loc, p.residentBlocks));
        virtualBlock.blockId = arith::AddIOp::create(b, loc, first, blockId);
      }
      Value blocks = indexConstant(b, loc, phase.blocks);
      Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, virtualBlock.blockId, blocks);
      // The body sees its block id clamped to the grid: the same inside the
      // phase, and a real block's in the loads hoisted above the barrier,
      // which every block issues.
      VirtualBlock clamped = virtualBlock;
      clamped.blockId = arith::MinUIOp::create(b, loc, virtualBlock.blockId, indexConstant(b, loc, phase.blocks - 1));
      Operation *barrier = nullptr;
      if (index > 0)
        barrier = emitGridBarrier(b, loc, threadId, start, p.residentBlocks, index - 1, arrivalsGlobal);
      auto ifActive = scf::IfOp::create(b, loc, active, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifActive.thenBlock());
      IRMapping mapping;
      for (auto [parameter, operand] : llvm::zip(phase.kernel.getArguments().take_front(phase.kernel.getNumArguments()),
                                                 phase.launch.getKernelOperands()))
        mapping.map(parameter, parameters[argumentIndex.lookup(operand)]);
      if (phase.workgroupBytes > 0) {
        Value base = arith::MulIOp::create(b, loc, virtualBlock.subgroup, indexConstant(b, loc, phase.workgroupBytes));
        for (auto [buffer, offset] : llvm::zip(phase.kernel.getWorkgroupAttributions(), phase.workgroupOffsets)) {
          Value shift = arith::AddIOp::create(b, loc, base, indexConstant(b, loc, offset));
          mapping.map(buffer, memref::ViewOp::create(b, loc, buffer.getType(), shared, shift, ValueRange{}));
        }
      }
      Block &body = phase.kernel.getBody().front();
      Operation *yield = ifActive.thenBlock()->getTerminator();
      b.setInsertionPoint(yield);
      if (!barriersOnly)
        for (Operation &op : body.without_terminator())
          b.clone(op, mapping);
      rewriteIds(*ifActive.thenBlock(), phase, p, clamped);
      if (barrier)
        hoisted += hoistReadOnlyLoads(*ifActive.thenBlock(), barrier, readOnly);
    }

    // The host launches the persistent kernel where the last launch was.
    OpBuilder host(lastLaunch);
    gpu::KernelDim3 grid{indexConstant(host, loc, p.residentBlocks), indexConstant(host, loc, 1),
                         indexConstant(host, loc, 1)};
    gpu::KernelDim3 block{indexConstant(host, loc, p.blockThreads), indexConstant(host, loc, 1),
                          indexConstant(host, loc, 1)};
    Value sharedBytes;
    if (p.sharedBytes > 0)
      sharedBytes = arith::ConstantIntOp::create(host, loc, host.getI32Type(), p.sharedBytes);
    llvm::SmallVector<Value> operands;
    for (Value argument : arguments) {
      if (!travelsAsPointer(argument.getType())) {
        operands.push_back(argument);
        continue;
      }
      Value address = memref::ExtractAlignedPointerAsIndexOp::create(host, loc, argument);
      operands.push_back(arith::IndexCastOp::create(host, loc, host.getI64Type(), address));
    }
    gpu::LaunchFuncOp::create(host, loc, kernel, grid, block, sharedBytes, operands);
    for (Phase &phase : phases) {
      touchedModules_.push_back(phase.kernel->getParentOfType<gpu::GPUModuleOp>());
      phase.launch.erase();
    }
    MLPIPE_DEBUG(kDebugPersistent, os << name << ": " << phases.size() << " launches as phases of one kernel, "
                                      << p.residentBlocks << " blocks of " << p.blockThreads << " threads ("
                                      << p.blocksPerSm << " an SM of " << device_->smCount << "), " << p.sharedBytes
                                      << " bytes of shared memory, " << hoisted
                                      << " read-only loads issued ahead of their phase's barrier\n");
  }

  // Kernel modules no launch names any more go.
  void eraseUnusedModules() {
    mlir::ModuleOp module = getOperation();
    llvm::SmallPtrSet<mlir::Operation *, 16> seen;
    for (mlir::gpu::GPUModuleOp kernels : touchedModules_) {
      if (!seen.insert(kernels).second)
        continue;
      if (mlir::SymbolTable::symbolKnownUseEmpty(kernels, module))
        kernels.erase();
    }
  }
};

} // namespace

} // namespace mlpipe
