//===- Passes.td - mlpipe's own passes ------------------------------------===//
//
// Every pass of mlpipe's own, with its summary, a before/after description,
// its options and the dialects it creates. mlir-tblgen turns this file into
// Passes.h.inc: each pass file includes its GEN_PASS_DEF_ section, and
// registerMlpipePasses() registers them all so that the text pipelines in
// pipelines/ and mlpipe-opt can name them like any MLIR pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLPIPE_COMPILER_PASSES
#define MLPIPE_COMPILER_PASSES

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// fuse
//===----------------------------------------------------------------------===//

def FillPerUsePass : Pass<"mlpipe-fill-per-use", "mlir::func::FuncOp"> {
  let summary = "Give every use of a tensor linalg.fill its own fill";
  let description = [{
    cse merges equal fills, so two matmuls of one shape end up accumulating
    into one zero-filled tensor; bufferization must then copy it for the first
    matmul to keep it for the second. Refilling is cheaper than copying:

    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
    %a = linalg.batch_matmul ins(...) outs(%z : ...)
    %b = linalg.batch_matmul ins(...) outs(%z : ...)
    ```
    becomes
    ```mlir
    %z = linalg.fill ins(%zero : f32) outs(%e : ...) -> ...
    %a = linalg.batch_matmul ins(...) outs(%z : ...)
    %z2 = linalg.fill ins(%zero : f32) outs(%e : ...) -> ...
    %b = linalg.batch_matmul ins(...) outs(%z2 : ...)
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

//===----------------------------------------------------------------------===//
// outline and lower-cpu: matmuls
//===----------------------------------------------------------------------===//

def TransposedOperandViewsPass : Pass<"mlpipe-transposed-operand-views", "mlir::func::FuncOp"> {
  let summary = "Read matmul operands that are transposed copies through transposed views";
  let description = [{
    A matmul operand that is a transposed copy reads the original through a
    transposed view instead; the copy goes.

    ```mlir
    %kT = memref.alloc() : memref<2x64x64xf32>
    linalg.transpose ins(%k : memref<64x2x64xf32, strided<...>>) outs(%kT : ...) permutation = [1, 2, 0]
    linalg.batch_matmul ins(%q, %kT : ...) outs(%s : ...)
    memref.dealloc %kT : memref<2x64x64xf32>
    ```
    becomes
    ```mlir
    %kT = memref.transpose %k (d0, d1, d2) -> (d1, d2, d0) : ... to memref<2x64x64xf32, strided<...>>
    linalg.batch_matmul ins(%q, %kT : ...) outs(%s : ...)
    ```

    The matmul kernels take fully strided operands, so the view costs nothing
    but uncoalesced reads, while the copy cost a kernel and a buffer. It is
    done only when the copy is read by nothing but matmul inputs, no op
    between the copy and the last matmul writes to or frees the memory viewed,
    and any later reuse of the copy's buffer starts by overwriting all of it.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def TiledMatmulsPass : Pass<"mlpipe-tiled-matmuls", "mlir::ModuleOp"> {
  let summary = "Replace floating-point linalg.matmul/batch_matmul with shared-memory tiled GPU kernels";
  let description = [{
    Every floating-point linalg.matmul and linalg.batch_matmul on memrefs
    becomes a launch of a shared-memory tiled kernel.

    ```mlir
    linalg.matmul ins(%a, %b : memref<64x128xf32>, memref<128x96xf32>) outs(%c : memref<64x96xf32>)
    ```
    becomes
    ```mlir
    %0 = memref.cast %a : memref<64x128xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    ... (the same for %b and %c)
    gpu.launch_func @mlpipe_tiled_matmul_2d_f32::@tiled_matmul_2d_f32
        blocks in (%6, %4, %c1) threads in (%c16, %c16, %c1) args(%0 : ..., %1 : ..., %2 : ...)
    ```

    One kernel per rank and element type, taking fully dynamic strided
    memrefs, so transposed and sliced views need no copies. Each 16x16 thread
    block computes a 16x16 tile of C: per step along K it stages a 16x16 tile
    of A and of B in workgroup memory (out-of-range elements read as zero),
    with a gpu.barrier after the loads and after the inner product, then adds
    the sum to C (linalg semantics: C += A B). The batched kernel takes the
    batch from the third grid dimension.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect"];
}

def BlasMatmulsPass : Pass<"mlpipe-blas-matmuls", "mlir::ModuleOp"> {
  let summary = "Replace CPU matmuls with cblas_?gemm calls";
  let description = [{
    On the CPU, floating-point linalg.matmul and linalg.batch_matmul become
    cblas_sgemm / cblas_dgemm calls wherever the operand layouts allow it; the
    rest stay linalg and become loops.

    ```mlir
    linalg.matmul ins(%a, %b : memref<64x128xf32>, memref<128x96xf32>) outs(%c : memref<64x96xf32>)
    ```
    becomes (pointer arithmetic abbreviated)
    ```mlir
    %pa = <aligned pointer of %a + its offset> : !llvm.ptr   (the same for %b and %c)
    func.call @cblas_sgemm(%rowMajor, %noTrans, %noTrans, %c64, %c96, %c128, %one, %pa, %c128,
                           %pb, %c96, %one, %pc, %c96) : (...) -> ()
    ```

    BLAS takes each matrix as row-major or transposed with a leading
    dimension, so an operand qualifies when one of its two strides is 1 and
    the other at least the row length (a transposed view is read with
    CblasTrans, no copy). C must be row-major. beta = 1 keeps linalg's
    C += A B. A batched matmul is a loop of calls stepping each pointer by its
    batch stride.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect", "mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// outline: copies and memory
//===----------------------------------------------------------------------===//

def CopiesAsLinalgPass : Pass<"mlpipe-copies-as-linalg", "mlir::func::FuncOp"> {
  let summary = "Turn memref.copy into linalg.copy";
  let description = [{
    memref.copy becomes linalg.copy, so that the kernel pipeline turns copies
    (bufferization inserts them, e.g. when a result is an input) into GPU
    kernels instead of host loops.

    ```mlir
    memref.copy %src, %dst : memref<4x8xf32> to memref<4x8xf32>
    ```
    becomes
    ```mlir
    linalg.copy ins(%src : memref<4x8xf32>) outs(%dst : memref<4x8xf32>)
    ```
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def ManagedAllocationsPass : Pass<"mlpipe-managed-allocations", "mlir::ModuleOp"> {
  let summary = "Host memref.alloc/dealloc to gpu.alloc host_shared / gpu.dealloc";
  let description = [{
    The host's buffers become managed memory that both the host and the GPU
    can address.

    ```mlir
    %buf = memref.alloc() : memref<64xf32>
    ...
    memref.dealloc %buf : memref<64xf32>
    ```
    becomes
    ```mlir
    %buf = gpu.alloc host_shared () : memref<64xf32>
    ...
    %0 = gpu.wait async
    %1 = gpu.dealloc async [%0] %buf : memref<64xf32>
    gpu.wait [%1]
    ```

    The allocation stays synchronous: gpu-to-llvm refuses host_shared
    allocations that carry an async token. The deallocation is async inside a
    wait because gpu-to-llvm leaves a synchronous gpu.dealloc unconverted.
    Kernels (inside gpu.module) are left alone.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

#endif // MLPIPE_COMPILER_PASSES
