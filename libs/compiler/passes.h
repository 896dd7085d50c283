// mlpipe's own passes, registered so that the text pipelines in pipelines/
// can name them like any MLIR pass.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace mlpipe {

// mlpipe-fill-per-use: each use of a tensor linalg.fill gets its own fill, so
// bufferization zeroes buffers instead of copying a shared zeroed one.
std::unique_ptr<mlir::Pass> createFillPerUsePass();
// mlpipe-transposed-operand-views: a matmul operand copied by linalg.transpose
// becomes a memref.transpose view of the original (no copy).
std::unique_ptr<mlir::Pass> createTransposedOperandViewsPass();
// mlpipe-tiled-matmuls: linalg.matmul / batch_matmul -> launch of the
// hand-written shared-memory tiled kernel.
std::unique_ptr<mlir::Pass> createTiledMatmulsPass();
// mlpipe-copies-as-linalg: memref.copy -> linalg.copy, so copies become kernels.
std::unique_ptr<mlir::Pass> createCopiesAsLinalgPass();
// mlpipe-managed-allocations: host memref.alloc/dealloc -> gpu.alloc
// host_shared / gpu.dealloc.
std::unique_ptr<mlir::Pass> createManagedAllocationsPass();
// mlpipe-blas-matmuls: linalg.matmul / batch_matmul on the CPU -> cblas_?gemm
// calls where the operand layouts allow.
std::unique_ptr<mlir::Pass> createBlasMatmulsPass();

void registerMlpipePasses();

} // namespace mlpipe
