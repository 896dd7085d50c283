// The generated matmul kernel (`--matmul generated`): C = epilogue(A·B [+ C])
// as a register-tiled GPU kernel built with builders (on tensor cores for
// bf16 and f16 A and B).
//
//   MatmulOperands operands{a, b, c};        // host-side memrefs, rank 2 or 3 (batch first)
//   emitGeneratedMatmul(host, loc, operands, /*accumulate=*/false, nullptr, kernels, device, "c_fc_matmul");
//
// Shapes are static; operands may be strided views (a transposed weight is
// read in place). Each thread block computes a tile of C, each thread a small
// register tile of it; K-slices of A and B are staged through double-buffered
// workgroup memory with 128-bit loads where the layout allows. Every edge
// size is handled without out-of-bounds access. Skinny products (M small, as
// in GPT-2 decoding) take a bandwidth-bound form that streams B once. The
// choices read the device description and are printed under
// --debug-only=mlpipe-emitters.
#pragma once

#include "codegen/device_description.h"
#include "codegen/kernel_factory.h"

#include "mlir/IR/Builders.h"

#include <array>
#include <functional>
#include <string>

namespace mlpipe::emitters {

struct MatmulOperands {
  mlir::Value a; // [M, K] or [B, M, K]
  mlir::Value b; // [K, N] or [B, K, N]
  mlir::Value c; // [M, N] or [B, M, N]: the output (and, when accumulating, an input)
};

// What happens to each element of A·B before it is stored into C. The
// emitter of a matmul fusion builds it from the fusion's elementwise
// epilogue (a bias add, GELU, a residual add).
struct MatmulEpilogue {
  // Host-side buffers the epilogue reads; they become extra kernel arguments.
  llvm::SmallVector<mlir::Value> hostOperands;
  // Builds, inside the kernel, the value to store at `index` ((batch,) row,
  // column; index-typed values) from the accumulated `product`;
  // `kernelOperands` are the kernel's values of hostOperands.
  std::function<mlir::Value(mlir::OpBuilder &, mlir::Location, mlir::ValueRange kernelOperands, mlir::ValueRange index,
                            mlir::Value product)>
      apply;
};

// A's rows computed inside the kernel instead of read from memory: a
// decode step's layer norm, computed by every block of the GEMV that reads
// its output (one row: only for a product the skinny form computes in one
// launch, skinnyIsOneLaunch, whose block stages A's whole row in shared
// memory); or, for 16-bit products of 2 to kTensorCoreFewRowsMaxRows rows
// on the few-row tensor-core tiles, the layer norm of a short prompt or a
// batched decode step, every block holding all of A's rows in shared
// memory (kRowPrologueMaxRows says which are taken).
struct MatmulRowPrologue {
  // Host-side buffers the prologue reads; extra kernel arguments after the
  // epilogue's.
  llvm::SmallVector<mlir::Value> hostOperands;
  // Elements of workgroup memory (A's element type) it needs.
  int64_t slots = 0;
  // Builds the rows inside the kernel, whose block has `threads` threads;
  // `kernelOperands` are the kernel's values of hostOperands. It hands
  // `store` each row's elements k, k+1, ... (index-typed row and k) as it
  // computes them, each exactly once.
  std::function<mlir::LogicalResult(
      mlir::OpBuilder &, mlir::Location, mlir::ValueRange kernelOperands, mlir::Value slots, int64_t threads,
      const std::function<void(mlir::Value row, mlir::Value k, llvm::ArrayRef<mlir::Value>)> &store)>
      build;
};

// Overrides of the emitter's choices, for experiments and tests (the pass
// mlpipe-generated-matmuls exposes them as options). Zero, or "auto", leaves
// the choice to the heuristics.
struct GeneratedMatmulOptions {
  // "tiled" (the register-tiled kernel), "skinny" (the bandwidth-bound form
  // for small M; refused where B's rows are not contiguous), "row_dot" (the
  // bandwidth-bound form for small M with B stored [N, K]; refused where it
  // is not), "tensor_core" (mma.sync on bf16 or f16 A and B; sm_80 and
  // later) or "auto" (the skinny form for few rows with B's rows
  // contiguous, the row-dot form for few rows, unbatched, with B stored
  // [N, K] and wide, 16-bit or not; tensor cores for every other 16-bit
  // product, where the chip has them).
  std::string form = "auto";
  // The tiled kernel's block tile (M, N, K) and each thread's register tile
  // (M, N; multiples of 4, at most 8).
  std::array<int64_t, 3> blockTile = {0, 0, 0};
  std::array<int64_t, 2> threadTile = {0, 0};
  // Number of slices K is split into across the grid (1: none).
  int64_t splitK = 0;
  // The widest global load or store, in elements (0: 128 bits).
  int64_t vectorWidth = 0;
  // The tensor-core form stages K-slices by cp.async where both operands
  // are read as vectors (false: through registers, as the CUDA-core forms).
  bool asyncCopy = true;
  // The tensor-core form's cp.async stages (0: as many as the heuristic
  // picks; at least 2, within the block's opt-in shared memory). Staging
  // through registers keeps its two.
  int64_t stages = 0;
  // The tensor-core form's warp tile (M, N; multiples of 16 and 8) under a
  // forced block tile (0: 64x32 where the block tile has 128 rows or more,
  // else 32x32).
  std::array<int64_t, 2> warpTile = {0, 0};
  // The tensor-core form's cp.async pipeline loads the next mma K-step's
  // fragments (across a stage's end: after its wait and barrier) before
  // the current step's mma.sync (false: each K-step loads, then
  // multiplies). Off by default until timed: on c_fc it takes 8 bytes of
  // spills at the 128 registers two blocks an SM allow.
  bool prefetchFragments = false;
  // f32 products may round A and B to TF32 (precision=tf32): those the
  // skinny and row-dot forms do not take go to the tensor-core form on
  // mma.sync m16n8k8 .tf32 (device.tf32Mma), accumulating in f32. Off: f32
  // products stay exact, on CUDA cores.
  bool tf32 = false;
  // Where the few-row tensor-core tiles split K, the last split of a tile
  // adds the splits and applies the epilogue in the same launch instead of
  // a second kernel (1), or not (0); -1: kFewRowsLastSplitCompletes.
  int64_t lastSplitCompletes = -1;
  // The warpgroup form writes C through shared memory: each thread stores
  // its accumulators there, then the block writes C a row's run of
  // consecutive columns a warp, 16 bytes a thread where C's layout allows
  // (1), or each thread stores its accumulators where they lie in C, two
  // columns a store (0); -1: kWarpgroupStagedEpilogue.
  int64_t stagedEpilogue = -1;
};

// Whether the generated kernel computes an unbatched product of `m` rows
// and depth `k` (B read row by row) in one launch without splitting K: its
// one-row skinny form, whose row of A fits one staged slice (what a row
// computed in the kernel, a MatmulRowPrologue, needs).
bool skinnyIsOneLaunch(int64_t m, int64_t k, int64_t elementBytes);

// Whether the generated kernel reads a product of 16-bit (bf16 or f16) A
// and B of these types in place, and C (`cType`, in their type or f32),
// adding to C's old value where `accumulate`: any static product of rank 2
// or 3 on a chip with 16-bit mma.sync m16n8k16 (device.sixteenBitMma: the
// tensor-core form, or the skinny one for few rows); elsewhere only those
// of the skinny form (at most kSkinnyMaxRows rows, B's rows contiguous).
// Other 16-bit products go to cuBLASLt, or are widened to f32 first.
bool generatedMatmulTakesSixteenBit(mlir::MemRefType aType, mlir::MemRefType bType, mlir::MemRefType cType,
                                    const DeviceDescription &device, bool accumulate);

// Builds the kernel (through `kernels`, named `name`) and launches it at the
// host builder's insertion point. With `accumulate`, C's old value is added
// to the product before the epilogue (linalg's C += A·B); otherwise C is
// only written. Fails (with a diagnostic at `loc`) for shapes or types it
// does not handle.
//
// Where the product is split along K across thread blocks (split-K, chosen
// when the grid would not fill the GPU otherwise), each split writes its
// partial product to a temporary (memref.alloc in host code, which the
// buffer plan places in the arena), and a second, elementwise kernel adds
// the splits in their order (after C's old value where accumulating),
// applies the epilogue and writes C: no atomics, so a product gives the
// same bits run after run. Both launches go to the host builder's
// insertion point in that order.
//
// With a `prologue`, A is not read: the product must be one the skinny form
// computes in one launch (the caller checks skinnyIsOneLaunch), else it
// fails.
mlir::LogicalResult emitGeneratedMatmul(mlir::OpBuilder &host, mlir::Location loc, const MatmulOperands &operands,
                                        bool accumulate, const MatmulEpilogue *epilogue, KernelFactory &kernels,
                                        const DeviceDescription &device, const std::string &name,
                                        const GeneratedMatmulOptions &options = {},
                                        const MatmulRowPrologue *prologue = nullptr);

} // namespace mlpipe::emitters
