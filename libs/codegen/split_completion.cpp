// Work split over blocks, completed by the last to finish: see
// split_completion.h.
#include "codegen/split_completion.h"

#include "codegen/conditional_building.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlpipe::emitters {

mlir::MemRefType completionFlagType(mlir::MLIRContext *context) {
  auto workgroup = mlir::gpu::AddressSpaceAttr::get(context, mlir::gpu::AddressSpace::Workgroup);
  return mlir::MemRefType::get({1, 1}, mlir::IntegerType::get(context, 32), mlir::MemRefLayoutAttrInterface{},
                               workgroup);
}

namespace {

// The LLVM synchronization scope of the whole GPU (NVPTX's "device":
// fence.acq_rel.gpu), lighter than a sequentially consistent membar.gl.
constexpr const char *kGpuSyncScope = "device";

// A fence at GPU scope: released, the writes before it (this thread's, and
// what a barrier ordered before it) are seen by whoever sees this thread's
// next atomic; acquired, after an atomic, what that atomic saw is seen.
void fenceAtGpuScope(mlir::OpBuilder &b, mlir::Location loc, mlir::LLVM::AtomicOrdering ordering) {
  mlir::LLVM::FenceOp::create(b, loc, ordering, kGpuSyncScope);
}

// The counters, a global of the kernel's module made on first use.
mlir::Value finishedSplitsCounters(mlir::OpBuilder &b, mlir::Location loc, mlir::gpu::GPUFuncOp f, int64_t groups) {
  auto module = f->getParentOfType<mlir::gpu::GPUModuleOp>();
  auto type = mlir::MemRefType::get({groups}, b.getI32Type());
  if (!module.lookupSymbol(kFinishedSplitsGlobal)) {
    mlir::OpBuilder inModule = mlir::OpBuilder::atBlockBegin(module.getBody());
    auto zeros = mlir::DenseElementsAttr::get(mlir::RankedTensorType::get({groups}, b.getI32Type()),
                                              b.getI32IntegerAttr(0).getValue());
    mlir::memref::GlobalOp::create(inModule, loc, kFinishedSplitsGlobal, inModule.getStringAttr("private"), type, zeros,
                                   /*constant=*/false, /*alignment=*/nullptr);
  }
  return mlir::memref::GetGlobalOp::create(b, loc, type, kFinishedSplitsGlobal);
}

} // namespace

void completeInLastBlock(mlir::OpBuilder &b, mlir::Location loc, mlir::gpu::GPUFuncOp f, mlir::Value flag,
                         mlir::Value threadId, mlir::Value group, int64_t groups, mlir::Value expected,
                         const std::function<void()> &completion) {
  mlir::Type i32 = b.getI32Type();
  auto index = [&](int64_t v) -> mlir::Value { return mlir::arith::ConstantIndexOp::create(b, loc, v); };
  mlir::gpu::BarrierOp::create(b, loc); // every thread's part, before the count
  mlir::Value first = b.createOrFold<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::eq, threadId, index(0));
  buildUnder(b, loc, first, [&] {
    mlir::Value counters = finishedSplitsCounters(b, loc, f, groups);
    mlir::Value one = mlir::arith::ConstantIntOp::create(b, loc, i32, 1);
    mlir::Value zero = mlir::arith::ConstantIntOp::create(b, loc, i32, 0);
    fenceAtGpuScope(b, loc, mlir::LLVM::AtomicOrdering::release);
    mlir::Value before = mlir::memref::AtomicRMWOp::create(b, loc, mlir::arith::AtomicRMWKind::addi, one, counters,
                                                           mlir::ValueRange{group});
    mlir::Value count = b.createOrFold<mlir::arith::IndexCastOp>(loc, i32, expected);
    mlir::Value last = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq,
                                                   mlir::arith::AddIOp::create(b, loc, before, one), count);
    buildUnder(b, loc, last, [&] {
      fenceAtGpuScope(b, loc, mlir::LLVM::AtomicOrdering::acquire);
      mlir::memref::AtomicRMWOp::create(b, loc, mlir::arith::AtomicRMWKind::assign, zero, counters,
                                        mlir::ValueRange{group});
    });
    mlir::Value lastFlag = mlir::arith::ExtUIOp::create(b, loc, i32, last);
    mlir::memref::StoreOp::create(b, loc, lastFlag, flag, mlir::ValueRange{index(0), index(0)});
  });
  mlir::gpu::BarrierOp::create(b, loc); // the flag (and thread 0's acquire, to the block)
  mlir::Value read = mlir::memref::LoadOp::create(b, loc, flag, mlir::ValueRange{index(0), index(0)});
  mlir::Value isLast = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne, read,
                                                   mlir::arith::ConstantIntOp::create(b, loc, i32, 0));
  buildUnder(b, loc, isLast, completion);
}

} // namespace mlpipe::emitters
