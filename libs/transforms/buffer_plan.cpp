// mlpipe-buffer-plan: the host's temporaries become views into one arena
// that the runtime allocates once per compiled module and reuses on every
// call. Passes.td holds its description, with IR before and after.
#include "codegen/debug.h"
#include "transforms/buffer_planner.h"
#include "transforms/passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/Pass.h"

namespace mlpipe {

#define GEN_PASS_DEF_BUFFERPLANPASS
#include "transforms/Passes.h.inc"

namespace {

// The debug type: each function's plan, one line per buffer.
constexpr const char *kDebugBufferPlan = "mlpipe-buffer-plan";

// What a temporary needs to live in the arena, found on the IR.
struct Temporary {
  mlir::memref::AllocOp alloc;
  llvm::SmallVector<mlir::memref::DeallocOp> deallocs;
  BufferRequest request;
  bool plannable = true;
  const char *whyNot = nullptr; // when not plannable
};

// The bytes of a statically shaped buffer; 0 for a dynamic one, which the
// plan leaves out (see unplannable).
int64_t byteSize(mlir::MemRefType type) {
  if (!type.hasStaticShape())
    return 0;
  // index (a pointer list's element) has no bit width of its own: 64 bits.
  int64_t bits = type.getElementType().isIndex() ? 64 : type.getElementTypeBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

// An entry is a function trace named (mlpipe.inputs) that nothing calls: it
// can take one more argument without any caller changing.
bool isEntry(mlir::func::FuncOp function, mlir::ModuleOp module) {
  return function->hasAttr("mlpipe.inputs") && mlir::SymbolTable::symbolKnownUseEmpty(function, module);
}

// Follows the buffer through every op that makes a memref from it (views,
// casts, reshapes): the lifetime ends at the last use of any alias, measured
// at the op of the function's body that contains the use.
//
// A loop's results may alias the buffer (it is passed in as a carried
// value): they extend its lifetime, but a dealloc reached through them
// frees a buffer the loop owns (ownership-based deallocation frees the
// loop's own allocations that way), not this one, and stays.
void measure(Temporary &temporary, mlir::Block &body, const llvm::DenseMap<mlir::Operation *, int64_t> &position) {
  int64_t first = position.lookup(temporary.alloc), last = first;
  llvm::SmallVector<std::pair<mlir::Value, bool>> aliases = {{temporary.alloc.getResult(), false}};
  llvm::SmallPtrSet<mlir::Value, 8> seen;
  while (!aliases.empty()) {
    auto [value, throughRegion] = aliases.pop_back_val();
    if (!seen.insert(value).second)
      continue;
    for (mlir::OpOperand &use : value.getUses()) {
      mlir::Operation *user = use.getOwner();
      if (auto dealloc = mlir::dyn_cast<mlir::memref::DeallocOp>(user)) {
        if (!throughRegion)
          temporary.deallocs.push_back(dealloc);
        continue;
      }
      if (mlir::isa<mlir::func::ReturnOp>(user)) {
        temporary.plannable = false;
        temporary.whyNot = "it is returned";
        return;
      }
      mlir::Operation *top = body.findAncestorOpInBlock(*user);
      if (top)
        last = std::max(last, position.lookup(top));
      for (mlir::Value result : user->getResults())
        if (mlir::isa<mlir::BaseMemRefType>(result.getType()))
          aliases.push_back({result, throughRegion || user->getNumRegions() > 0});
    }
  }
  temporary.request = {byteSize(temporary.alloc.getType()), first, last};
}

// Why a temporary cannot be a view of the arena; nullptr when it can.
const char *unplannable(mlir::memref::AllocOp alloc, mlir::Block &body, bool entry) {
  mlir::MemRefType type = alloc.getType();
  if (!entry)
    return "its function is not an entry the runtime calls";
  if (alloc->getBlock() != &body)
    return "it is allocated inside a region, perhaps once per iteration";
  if (!type.hasStaticShape())
    return "its shape is dynamic";
  if (type.getNumElements() == 0)
    return "it holds no elements";
  if (!type.getLayout().isIdentity() || type.getMemorySpace())
    return "it has a layout or memory space of its own";
  return nullptr;
}

// A memref.dealloc of device memory, as gpu.dealloc in a wait.
void freeOnDevice(mlir::memref::DeallocOp dealloc) {
  mlir::OpBuilder at(dealloc);
  auto tokenType = mlir::gpu::AsyncTokenType::get(at.getContext());
  auto before = mlir::gpu::WaitOp::create(at, dealloc.getLoc(), tokenType, mlir::ValueRange{});
  auto free = mlir::gpu::DeallocOp::create(at, dealloc.getLoc(), tokenType, mlir::ValueRange{before.getAsyncToken()},
                                           dealloc.getMemref());
  mlir::gpu::WaitOp::create(at, dealloc.getLoc(), mlir::Type(), mlir::ValueRange{free.getAsyncToken()});
  dealloc.erase();
}

// A temporary left out of the plan is allocated in device memory at run
// time, as before, only not managed: asynchronous in a wait, because
// gpu-to-llvm leaves a synchronous device gpu.alloc unconverted.
void allocateAtRunTime(Temporary &temporary) {
  mlir::memref::AllocOp alloc = temporary.alloc;
  mlir::OpBuilder builder(alloc);
  mlir::Location loc = alloc.getLoc();
  auto tokenType = mlir::gpu::AsyncTokenType::get(builder.getContext());
  auto start = mlir::gpu::WaitOp::create(builder, loc, tokenType, mlir::ValueRange{});
  auto device =
      mlir::gpu::AllocOp::create(builder, loc, alloc.getType(), tokenType, mlir::ValueRange{start.getAsyncToken()},
                                 alloc.getDynamicSizes(), alloc.getSymbolOperands(), /*hostShared=*/false);
  mlir::gpu::WaitOp::create(builder, loc, mlir::Type(), mlir::ValueRange{device.getAsyncToken()});
  alloc.getResult().replaceAllUsesWith(device.getMemref());
  alloc.erase();
  for (mlir::memref::DeallocOp dealloc : temporary.deallocs)
    freeOnDevice(dealloc);
}

struct BufferPlanPass : impl::BufferPlanPassBase<BufferPlanPass> {
  using BufferPlanPassBase::BufferPlanPassBase;

  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    if (alignment <= 0 || (alignment & (alignment - 1)) != 0) {
      module.emitError() << "mlpipe-buffer-plan: alignment must be a positive power of two, not "
                         << static_cast<int64_t>(alignment);
      return signalPassFailure();
    }
    for (auto function : llvm::to_vector(module.getOps<mlir::func::FuncOp>()))
      if (!function.isExternal())
        planFunction(function, module);
  }

  void planFunction(mlir::func::FuncOp function, mlir::ModuleOp module) {
    mlir::Block &body = function.getBody().front();
    bool entry = isEntry(function, module) && function.getBody().hasOneBlock();
    llvm::DenseMap<mlir::Operation *, int64_t> position;
    int64_t index = 0;
    for (mlir::Operation &op : body)
      position[&op] = index++;

    std::vector<Temporary> temporaries;
    function.walk([&](mlir::memref::AllocOp alloc) {
      Temporary temporary;
      temporary.alloc = alloc;
      temporaries.push_back(std::move(temporary));
    });
    std::vector<BufferRequest> requests;
    std::vector<size_t> planned;
    for (size_t i = 0; i < temporaries.size(); ++i) {
      Temporary &temporary = temporaries[i];
      temporary.whyNot = unplannable(temporary.alloc, body, entry);
      temporary.plannable = temporary.whyNot == nullptr;
      measure(temporary, body, position);
      if (temporary.plannable) {
        requests.push_back(temporary.request);
        planned.push_back(i);
      }
    }
    ArenaPlan plan = planArena(requests, alignment);

    MLPIPE_DEBUG(kDebugBufferPlan, os << "@" << function.getName() << ": " << planned.size()
                                      << " temporaries in an arena of " << plan.arenaBytes << " bytes ("
                                      << plan.unplannedBytes << " allocated one by one, peak live "
                                      << plan.peakLiveBytes << ")\n");
    for (size_t k = 0; k < planned.size(); ++k) {
      Temporary &temporary = temporaries[planned[k]];
      MLPIPE_DEBUG(kDebugBufferPlan, os << "  " << temporary.alloc.getType() << " live " << temporary.request.firstUse
                                        << ".." << temporary.request.lastUse << " at offset " << plan.offsets[k]
                                        << "\n");
    }

    mlir::Builder attributes(function.getContext());
    int64_t leftOut = static_cast<int64_t>(temporaries.size() - planned.size());
    if (entry)
      function->setAttr(
          "mlpipe.arena",
          attributes.getDictionaryAttr({
              attributes.getNamedAttr("bytes", attributes.getI64IntegerAttr(plan.arenaBytes)),
              attributes.getNamedAttr("unplanned_bytes", attributes.getI64IntegerAttr(plan.unplannedBytes)),
              attributes.getNamedAttr("peak_live_bytes", attributes.getI64IntegerAttr(plan.peakLiveBytes)),
              attributes.getNamedAttr("buffers", attributes.getI64IntegerAttr(static_cast<int64_t>(planned.size()))),
              attributes.getNamedAttr("alignment", attributes.getI64IntegerAttr(alignment)),
              attributes.getNamedAttr("allocated_at_run_time", attributes.getI64IntegerAttr(leftOut)),
          }));

    if (plan.arenaBytes > 0) {
      // The arena: one more argument, last, after the outputs.
      auto arenaType = mlir::MemRefType::get({plan.arenaBytes}, mlir::IntegerType::get(function.getContext(), 8));
      unsigned argument = function.getNumArguments();
      auto argumentAttributes = attributes.getDictionaryAttr(
          {attributes.getNamedAttr("mlpipe.arena", mlir::UnitAttr::get(function.getContext()))});
      if (mlir::failed(function.insertArgument(argument, arenaType, argumentAttributes, function.getLoc()))) {
        function.emitError() << "mlpipe-buffer-plan: cannot add the arena argument";
        return signalPassFailure();
      }
      mlir::Value arena = function.getArgument(argument);
      for (size_t k = 0; k < planned.size(); ++k) {
        Temporary &temporary = temporaries[planned[k]];
        mlir::OpBuilder builder(temporary.alloc);
        mlir::Location loc = temporary.alloc.getLoc();
        mlir::Value offset = mlir::arith::ConstantIndexOp::create(builder, loc, plan.offsets[k]);
        auto view =
            mlir::memref::ViewOp::create(builder, loc, temporary.alloc.getType(), arena, offset, mlir::ValueRange{});
        temporary.alloc.getResult().replaceAllUsesWith(view.getResult());
        temporary.alloc.erase();
        for (mlir::memref::DeallocOp dealloc : temporary.deallocs)
          dealloc.erase();
      }
    }
    for (Temporary &temporary : temporaries) {
      if (temporary.plannable)
        continue;
      MLPIPE_DEBUG(kDebugBufferPlan, os << "  " << temporary.alloc.getType()
                                        << " is allocated at run time: " << temporary.whyNot << "\n");
      allocateAtRunTime(temporary);
    }
    // What is left to free frees a buffer a loop allocated at run time,
    // reached through the loop's values (bufferization's ownership-based
    // deallocation frees the base buffer of a carried value): in device
    // memory, like every buffer of host code.
    llvm::SmallVector<mlir::memref::DeallocOp> leftover;
    function.walk([&](mlir::memref::DeallocOp dealloc) { leftover.push_back(dealloc); });
    for (mlir::memref::DeallocOp dealloc : leftover)
      freeOnDevice(dealloc);
  }
};

} // namespace

} // namespace mlpipe
