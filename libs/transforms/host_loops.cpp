// mlpipe-host-loops: a loop left on the host (scf.while) reads its
// condition back from device memory one element per trip, the buffers
// bufferization's deallocation keeps its pointer bookkeeping in live in
// host memory, and a function with host loops is marked so that it is
// never captured as a CUDA graph. Passes.td holds its description, with IR
// before and after.
#include "transforms/passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlpipe {

#define GEN_PASS_DEF_HOSTLOOPSPASS
#include "transforms/Passes.h.inc"

namespace {

// The memref `value` is, seen through casts.
mlir::Value castSource(mlir::Value value) {
  while (auto cast = value.getDefiningOp<mlir::memref::CastOp>())
    value = cast.getSource();
  return value;
}

struct HostLoopsPass : impl::HostLoopsPassBase<HostLoopsPass> {
  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    for (auto function : module.getOps<mlir::func::FuncOp>())
      if (!function.isExternal() &&
          (mlir::failed(keepOnHost(function, module)) || mlir::failed(readBack(function, module))))
        return signalPassFailure();
      else if (!function.isExternal())
        restoreStackEachTrip(function);
  }

  // A kernel launch's arguments are put on the stack where it is launched
  // (LLVM's translation of gpu.launch_func allocates them there): in a
  // loop's region, every trip would take more stack, until a long loop
  // overflows it. Each region of a loop that launches kernels saves the
  // stack pointer on entry and restores it before its terminator; nothing
  // the region allocates on the stack outlives the trip (host buffers are
  // allocas at the function's start).
  static void restoreStackEachTrip(mlir::func::FuncOp function) {
    function.walk([](mlir::Operation *op) {
      if (!mlir::isa<mlir::scf::WhileOp, mlir::scf::ForOp>(op))
        return;
      bool launches = false;
      op->walk([&](mlir::gpu::LaunchFuncOp) { launches = true; });
      if (!launches)
        return;
      auto pointer = mlir::LLVM::LLVMPointerType::get(op->getContext());
      for (mlir::Region &region : op->getRegions())
        for (mlir::Block &block : region) {
          auto start = mlir::OpBuilder::atBlockBegin(&block);
          auto saved = mlir::LLVM::StackSaveOp::create(start, op->getLoc(), pointer);
          mlir::OpBuilder end(block.getTerminator());
          mlir::LLVM::StackRestoreOp::create(end, op->getLoc(), saved);
        }
    });
  }

  // Whether `op` (a user of a buffer in host code) works on the buffer on
  // the host: a host store, or a call of a host function of this module
  // (bufferization's dealloc helper), which reads and writes it there.
  static bool usesOnHost(mlir::Operation *op, mlir::ModuleOp module) {
    if (mlir::isa<mlir::memref::StoreOp>(op))
      return true;
    if (auto call = mlir::dyn_cast<mlir::func::CallOp>(op)) {
      auto callee = module.lookupSymbol<mlir::func::FuncOp>(call.getCallee());
      return callee && !callee.isExternal();
    }
    return false;
  }

  // A buffer the host itself writes (ownership-based deallocation's lists
  // of pointers and flags, which it hands to its dealloc helper) becomes a
  // host buffer: a memref.alloca at the start of the function (a loop's
  // trip would otherwise grow the stack; each trip writes it before it
  // reads it), its deallocs gone.
  static mlir::LogicalResult keepOnHost(mlir::func::FuncOp function, mlir::ModuleOp module) {
    llvm::SmallVector<mlir::memref::AllocOp> allocs;
    function.walk([&](mlir::memref::AllocOp alloc) { allocs.push_back(alloc); });
    mlir::Block &entry = function.getBody().front();
    for (mlir::memref::AllocOp alloc : allocs) {
      llvm::SmallVector<mlir::Operation *> users;
      llvm::SmallVector<mlir::Value> work = {alloc.getResult()};
      bool onHost = false, onDevice = false;
      while (!work.empty()) {
        mlir::Value value = work.pop_back_val();
        for (mlir::Operation *user : value.getUsers()) {
          if (auto cast = mlir::dyn_cast<mlir::memref::CastOp>(user)) {
            work.push_back(cast.getResult());
            continue;
          }
          users.push_back(user);
          onHost |= usesOnHost(user, module);
          onDevice |= mlir::isa<mlir::gpu::LaunchFuncOp>(user);
        }
      }
      if (!onHost)
        continue;
      if (onDevice || !alloc.getType().hasStaticShape() || !alloc.getDynamicSizes().empty()) {
        alloc.emitError() << "mlpipe-host-loops: a buffer of " << alloc.getType()
                          << " is written on the host and on the device, or has a dynamic shape";
        return mlir::failure();
      }
      mlir::OpBuilder builder = mlir::OpBuilder::atBlockBegin(&entry);
      auto host = mlir::memref::AllocaOp::create(builder, alloc.getLoc(), alloc.getType());
      for (mlir::Operation *user : users)
        if (mlir::isa<mlir::memref::DeallocOp>(user))
          user->erase();
      alloc.getResult().replaceAllUsesWith(host.getResult());
      alloc.erase();
    }
    return mlir::success();
  }

  // Host loads of device buffers (a loop's condition) read a copy of the
  // element, made on the stream once the kernels before it are done.
  //
  // A host function the module calls (the dealloc helper) is handed host
  // buffers (keepOnHost made them so): its loads stay.
  static mlir::LogicalResult readBack(mlir::func::FuncOp function, mlir::ModuleOp module) {
    bool helper = !mlir::SymbolTable::symbolKnownUseEmpty(function, module);
    llvm::SmallVector<mlir::memref::LoadOp> loads;
    int64_t loops = 0;
    function.walk([&](mlir::Operation *op) {
      if (mlir::isa<mlir::scf::WhileOp, mlir::scf::ForOp>(op))
        ++loops;
      // A load inside a kernel body (gpu.launch) reads device memory there;
      // one of a host buffer (memref.alloca) reads host memory.
      auto load = mlir::dyn_cast<mlir::memref::LoadOp>(op);
      if (load && !helper && !op->getParentOfType<mlir::gpu::LaunchOp>() &&
          !castSource(load.getMemRef()).getDefiningOp<mlir::memref::AllocaOp>())
        loads.push_back(load);
    });
    mlir::Block &entry = function.getBody().front();
    for (mlir::memref::LoadOp load : loads) {
      auto type = mlir::cast<mlir::MemRefType>(load.getMemRef().getType());
      if (!type.hasStaticShape() || type.getNumElements() != 1) {
        load.emitError() << "mlpipe-host-loops: the host reads an element of " << type
                         << "; it reads back one-element buffers only (a loop's condition)";
        return mlir::failure();
      }
      mlir::Location loc = load.getLoc();
      mlir::OpBuilder top = mlir::OpBuilder::atBlockBegin(&entry);
      auto host =
          mlir::memref::AllocaOp::create(top, loc, mlir::MemRefType::get(type.getShape(), type.getElementType()));
      mlir::OpBuilder builder(load);
      auto tokenType = mlir::gpu::AsyncTokenType::get(builder.getContext());
      auto start = mlir::gpu::WaitOp::create(builder, loc, tokenType, mlir::ValueRange{});
      auto copy = mlir::gpu::MemcpyOp::create(builder, loc, tokenType, mlir::ValueRange{start.getAsyncToken()}, host,
                                              load.getMemRef());
      mlir::gpu::WaitOp::create(builder, loc, mlir::Type(), mlir::ValueRange{copy.getAsyncToken()});
      load.getMemrefMutable().assign(host);
    }
    if (loops > 0)
      function->setAttr("mlpipe.host_loops",
                        mlir::IntegerAttr::get(mlir::IntegerType::get(function.getContext(), 64), loops));
    return mlir::success();
  }
};

} // namespace

} // namespace mlpipe
