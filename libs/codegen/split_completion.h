// Work split over the blocks of one launch, completed by the last of them
// to finish instead of by a second kernel (split-key attention's combine,
// a split-K GEMV's sum and epilogue). Each block writes its part; after a
// barrier its thread 0 releases the block's writes (a GPU-scope fence:
// fences are cumulative over what the barrier ordered before them) and
// counts the block done in its group's counter (an i32 of a global of the
// kernel's module, kFinishedSplitsGlobal, zero when the module loads). The
// block that counts last acquires the other blocks' parts (a fence after
// the count, which the next barrier extends to its threads), sets the
// counter back to zero for the next launch and completes the group's work;
// the others are done.
//
//   ... the block's part written to global memory ...
//   gpu.barrier
//   scf.if %thread_0 {
//     llvm.fence syncscope("device") release
//     %before = memref.atomic_rmw addi %c1_i32, %counters[%group]
//     %last = arith.cmpi eq, (%before + 1), %expected
//     scf.if %last { llvm.fence syncscope("device") acquire; memref.atomic_rmw assign %c0_i32, %counters[%group] }
//     memref.store (extui %last), %flag[%c0, %c0]
//   }
//   gpu.barrier
//   scf.if (memref.load %flag[%c0, %c0] != 0) { ... completion ... }
//
// Launches of one kernel must not overlap (a stream's launches, programmatic
// launch included: a kernel touches memory only after its wait).
#pragma once

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace mlpipe::emitters {

constexpr const char *kFinishedSplitsGlobal = "finished_splits";

// The shared flag the election passes from thread 0 to the block: a
// workgroup buffer of this type the kernel declares.
mlir::MemRefType completionFlagType(mlir::MLIRContext *context);

// Built where every thread of the block arrives (the condition under
// which it does is the same for the whole block), after the block's part
// is written: the election above among the `expected` blocks (an index)
// of group `group` (of `groups` in the launch), and `completion` built
// inside the last block's branch.
void completeInLastBlock(mlir::OpBuilder &b, mlir::Location loc, mlir::gpu::GPUFuncOp f, mlir::Value flag,
                         mlir::Value threadId, mlir::Value group, int64_t groups, mlir::Value expected,
                         const std::function<void()> &completion);

} // namespace mlpipe::emitters
