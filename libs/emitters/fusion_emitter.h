// The emitters of outline: one class per strategy, chosen by the fusion's
// hero (XLA's GetFusionEmitter). Each replaces one call of a fusion function
// in host code with the launch(es) of the kernel(s) it builds.
//
//   loop             flattened output, consecutive threads on consecutive
//                    elements, 128-bit vector accesses, unrolled, grid-stride
//   row_reduction    a group of lanes (part of a warp, a warp or a block) per
//                    row, the row kept in registers, butterfly shuffles
//   column_reduction 32-column tiles, partial sums through shared memory, a
//                    second pass over the partials when rows are split
//   transpose        32x33 shared-memory tiles, coalesced on both sides
//   matmul           the generated register-tiled kernel, the elementwise
//                    epilogue applied in registers
//   op by op         the fallback: every op of the fusion its own kernel,
//                    temporaries in memory
#pragma once

#include "codegen/device_description.h"
#include "codegen/kernel_factory.h"
#include "codegen/type_sizes.h"
#include "emitters/elemental_emitter.h"
#include "fusion/fusion_graph.h"
#include "fusion/hero_analysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"

#include <array>
#include <functional>
#include <memory>
#include <string>

namespace mlpipe::emitters {

enum class MatmulBackend { Cublas, Generated };

struct EmitterOptions {
  const DeviceDescription *device = nullptr;
  MatmulBackend matmul = MatmulBackend::Generated;
  // The widest vector access, in bytes (128-bit loads and stores).
  int vectorBytes = 16;
  // Row-reduction calls one of whose arguments holds the causal penalty
  // over [query, key], computed by a fusion called before them: call ->
  // that argument. Found before any call is emitted, while the mask's
  // writer is still a call (causalMaskWriter). Null: none known.
  const llvm::DenseMap<mlir::Operation *, unsigned> *causalMaskArguments = nullptr;
  // Forced choices of the generated matmul kernel for matmul fusions (the
  // pass's matmul-* options; zeros: chosen per product).
  std::array<int64_t, 3> matmulBlockTile = {0, 0, 0};
  std::array<int64_t, 2> matmulWarpTile = {0, 0};
  int64_t matmulStages = 0;
  int64_t matmulSplitK = 0;
  bool matmulPrefetchFragments = false;
  std::string matmulForm = "auto";
  // f32 matmul fusions may round A and B to TF32 on tensor cores (the
  // pass's precision=tf32; GeneratedMatmulOptions::tf32).
  bool matmulTf32 = false;
  // As GeneratedMatmulOptions::lastSplitCompletes, for matmul fusions.
  int64_t matmulLastSplitCompletes = -1;
  // As GeneratedMatmulOptions::stagedEpilogue, for matmul fusions.
  int64_t matmulStagedEpilogue = -1;
  // The most rows of a row reduction that the matmul reading them as A
  // computes in its blocks (the pass's row-prologue-rows;
  // kRowPrologueMaxRows).
  int64_t rowPrologueMaxRows = 1;
  // Bytes a column reduction's thread reads at once (the pass's
  // column-read-bytes); 0: the emitter's named defaults.
  int64_t columnReadBytes = 0;
  // Blocks an SM a column reduction's row split aims for (the pass's
  // column-blocks-per-sm); 0: the emitter's kBlocksPerSm.
  int64_t columnBlocksPerSm = 0;
  // Threads a column in the kernel combining a column reduction's partials
  // (the pass's column-combine-rows); 0: the emitter's choice (about
  // kCombinePartialsPerThread partials a thread).
  int64_t columnCombineRows = 0;
  // The most partials a combining thread loads before its first add (the
  // pass's column-combine-at-once); -1: the emitter's kCombineLoadsAtOnce.
  int64_t columnCombineLoadsAtOnce = -1;
};

class FusionEmitter {
public:
  FusionEmitter(const FusionGraph &graph, const EmitterOptions &options) : graph_(graph), options_(options) {}
  virtual ~FusionEmitter() = default;
  virtual const char *name() const = 0;
  // Replaces `call` (a call of graph().function()) with kernel launches. On
  // failure nothing has changed and `why` says what the emitter could not do.
  virtual mlir::LogicalResult emit(mlir::func::CallOp call, KernelFactory &kernels, std::string &why) = 0;

  const FusionGraph &graph() const { return graph_; }

protected:
  const FusionGraph &graph_;
  const EmitterOptions &options_;
};

std::unique_ptr<FusionEmitter> makeLoopEmitter(const FusionGraph &graph, const EmitterOptions &options);
std::unique_ptr<FusionEmitter> makeRowReductionEmitter(const FusionGraph &graph, const EmitterOptions &options);
std::unique_ptr<FusionEmitter> makeColumnReductionEmitter(const FusionGraph &graph, const EmitterOptions &options);
std::unique_ptr<FusionEmitter> makeTransposeEmitter(const FusionGraph &graph, const EmitterOptions &options);
std::unique_ptr<FusionEmitter> makeMatmulEmitter(const FusionGraph &graph, const EmitterOptions &options);
// The most rows of a row reduction (a layer norm) whose output only the
// matmul after it reads, as its A, that the matmul computes in its blocks
// instead of a kernel of its own (emitMatmulWithRowPrologue). One row: a
// decode step's layer norm in the skinny GEMV, which measured faster than
// its own kernel (decoding, BENCHMARKS.md). Up to 32 (kTensorCoreFewRowsMaxRows)
// would take those of the 16-bit few-row tensor-core products too (a short
// prompt's, a batched decode step's): every block computes all of A's rows
// into shared memory, a warp a row; built and checked on the simulator, not
// yet timed against the kernel boundary it saves, so not the default
// (mlpipe-emit-fusions' row-prologue-rows=32 turns it on).
constexpr int64_t kRowPrologueMaxRows = 1;

// The matmul fusion `call` whose A is all of the one-row output of the row
// reduction fusion `rowCall` just before it (a decode step's layer norm and
// the GEMV after it): one launch of the skinny kernel in which every block
// computes the row itself (emitRowInBlock) into its staged A; both calls
// go. Fails, changing nothing, where the product is not one launch's
// (skinnyIsOneLaunch) or the row reduction cannot be computed in a block.
mlir::LogicalResult emitMatmulWithRowPrologue(const FusionGraph &matmul, mlir::func::CallOp call,
                                              const FusionGraph &row, mlir::func::CallOp rowCall,
                                              const EmitterOptions &options, KernelFactory &kernels, std::string &why);

// The classifier: the emitter for a fusion of `kind` (its mlpipe.fusion
// attribute), checked against the graph's heroes; null when no emitter
// but the op-by-op fallback applies.
std::unique_ptr<FusionEmitter> getFusionEmitter(FusionKind kind, const FusionGraph &graph,
                                                const EmitterOptions &options, std::string &why);
// What the hero analysis of a bufferized fusion says its kind is (for
// fusions without the attribute, e.g. hand-written IR).
FusionKind inferFusionKind(const FusionGraph &graph);

// A row reduction computed by a block of another kernel (the product that
// reads its rows as A) instead of a kernel of its own. One row (a decode
// step's layer norm, the GEMV after it): each lane of the whole block keeps
// its chunks of the row in registers, the block combines each reduction
// with shuffles and `slots` (rowInBlockSlots elements of workgroup memory).
// Several rows (a short prompt's or a batched step's layer norm, the
// few-row product after it): a warp a row, the block's warps taking the
// rows in turn, each reduction combined by shuffles alone (no slots). The
// output goes, W consecutive elements at a time, to `sink` (row, column,
// values; the row 0 for one) instead of to memory. `elemental` is over
// `graph`, its arguments the host kernel's values for the fusion's
// arguments. Fails, with `why`, for a fusion that is not rows in, the same
// rows out (and, for several rows, rows a warp's registers hold).
using RowSink = std::function<void(mlir::Value row, mlir::Value column, llvm::ArrayRef<mlir::Value> values)>;
int64_t rowInBlockSlots(const FusionGraph &graph, const EmitterOptions &options, int64_t threads);
mlir::LogicalResult emitRowInBlock(const FusionGraph &graph, const EmitterOptions &options, ElementalEmitter &elemental,
                                   mlir::Value slots, int64_t threads, const RowSink &sink, std::string &why);

// ---- Shared by the emitters ------------------------------------------------

// Builds one kernel for a fusion: its arguments are the fusion function's
// arguments, in order, then any already in `signature` (a workspace);
// `body` gets an ElementalEmitter over the graph.
// Fails (dropping the kernel) when `body` does or the elemental emitter
// could not express something.
mlir::FailureOr<mlir::gpu::GPUFuncOp>
buildFusionKernel(KernelFactory &kernels, const FusionGraph &graph, KernelSignature signature,
                  const std::function<mlir::LogicalResult(ElementalEmitter &, mlir::gpu::GPUFuncOp)> &body,
                  std::string &why);
// Runs `body` with an ElementalEmitter over `graph` that builds at
// `builder` inside `kernel` (whose values `arguments` maps the fusion's
// arguments to), its kernel-wide values placed at the top of the kernel.
// Fails when `body` does, or, with `why`, when the elemental emitter could
// not express something.
mlir::LogicalResult emitElementally(const FusionGraph &graph, mlir::OpBuilder &builder, mlir::gpu::GPUFuncOp kernel,
                                    const mlir::IRMapping &arguments,
                                    const std::function<mlir::LogicalResult(ElementalEmitter &)> &body,
                                    std::string &why);

// Bytes one launch over the whole fusion reads and writes: every argument
// region read (a gathered table counts the rows read), every output.
int64_t fusionBytes(const FusionGraph &graph);
// The kernel's name for a fusion function: its own name.
std::string kernelName(const FusionGraph &graph);
// Thread and block ids (index values) in a kernel.
mlir::Value threadIdX(mlir::OpBuilder &builder, mlir::Location loc);
mlir::Value blockIdX(mlir::OpBuilder &builder, mlir::Location loc);
// Butterfly reduction across `width` lanes (a power of two up to the warp):
// every lane ends with the combination of its group's values.
mlir::Value butterflyReduce(ElementalEmitter &elemental, int node, mlir::Value value, int width);
// The vector width (elements per 128-bit access) for a fusion whose
// iteration runs over `elementType`: set by the narrowest element the
// fusion stores or loads, so 16-bit data moves 8 elements at a time even
// where it is computed on as f32 (a bf16 softmax reduces an f32 view).
int vectorWidthFor(mlir::Type elementType, const FusionGraph &graph, const EmitterOptions &options);

} // namespace mlpipe::emitters
