//===- emitters/Passes.td ---------------------------------------------===//
//
// mlpipe's emitters passes: outline: every fusion becomes the kernels its emitter builds. Each with its summary, a
// before/after description, its options and the dialects it creates.
// mlir-tblgen turns this file into emitters/Passes.h.inc; each pass file
// includes its GEN_PASS_DEF_ section, and compiler/'s registration calls
// registerEmittersPasses() so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLPIPE_EMITTERS_PASSES
#define MLPIPE_EMITTERS_PASSES

include "mlir/Pass/PassBase.td"

def EmitFusionsPass : Pass<"mlpipe-emit-fusions", "mlir::ModuleOp"> {
  let summary = "Replace every call of a fusion function with the kernels its emitter builds";
  let description = [{
    The emitters of `outline`. Each call of a bufferized fusion function (a
    private function with `mlpipe.fusion`, as the partitioner of `fuse`
    makes) in host code is handed to the emitter its kind names — loop,
    row_reduction, column_reduction, transpose or matmul — which builds the
    kernel in a `gpu.module` of its own (structurally identical kernels are
    built once) and replaces the call by `gpu.launch_func`. A fusion no
    emitter takes whole is emitted op by op. Launch configurations come from
    the device description of `chip`; `--debug-only=mlpipe-emitters` prints
    each choice.

    ```mlir
    func.func private @gelu_loop(%x: memref<64x256xf32>, %y: memref<64x256xf32>)
        attributes {mlpipe.fusion = "loop"} {
      linalg.generic ... ins(%x ...) outs(%y ...) { ... tanh ... }
      return
    }
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
      call @gelu_loop(%x, %y) : (memref<64x256xf32>, memref<64x256xf32>) -> ()
      return
    }
    ```
    becomes
    ```mlir
    gpu.module @gelu_loop {
      gpu.func @gelu_loop(%x: memref<64x256xf32>, %y: memref<64x256xf32>) kernel
          attributes {known_block_size = array<i32: 256, 1, 1>, mlpipe.bytes = 131072 : i64, ...} {
        ... vector.load ... : memref<16384xf32>, vector<4xf32>
        ... math.tanh ...
        vector.store ... : memref<16384xf32>, vector<4xf32>
      }
    }
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
      gpu.launch_func @gelu_loop::@gelu_loop blocks in (%c16, %c1, %c1) threads in (%c256, %c1, %c1)
          args(%x : memref<64x256xf32>, %y : memref<64x256xf32>)
      return
    }
    ```

    A row reduction of one row whose output only the matmul fusion right
    after it reads, where that product is one launch of the skinny kernel
    (a decode step's layer norm and its GEMV), is
    not a kernel of its own: every block of the GEMV computes the row
    itself, into the slice of A it stages in shared memory. The row-dot
    kernel (B stored [N, K]: a decode step's final layer norm and its tied
    logits) does the same, its blocks computing A's rows into shared memory
    after their wait and reading their vectors of A there.

    ```mlir
    call @ln_1_row_reduction(%x, %gamma, %beta, %h) : (memref<1x768xf32>, ...) -> ()
    call @attn_c_attn_matmul(%h, %w, %bias, %qkv) : (memref<1x768xf32>, ...) -> ()
    ```
    becomes
    ```mlir
    gpu.launch_func @attn_c_attn_matmul::@attn_c_attn_matmul blocks in (%c144, %c1, %c1) ...
        args(%h : memref<1x768xf32>, %w : memref<768x2304xf32>, %qkv : memref<1x2304xf32>,
             %bias : memref<2304xf32>, %x : memref<1x768xf32>, %gamma : memref<768xf32>, ...)
    ```

    With row-prologue-rows=N (up to 32; the default, kRowPrologueMaxRows,
    is 1) a 16-bit row reduction of 2 to N rows whose product takes the
    few-row tensor-core tiles (a short prompt's layer norm, a batched
    decode step's) goes into that product the same way: every block's
    warps compute the rows, a warp a row, into all of A's rows held in
    shared memory, and the tiles read their split's K of them while B's
    slices stream in by cp.async:

    ```mlir
    call @ln_1_row_reduction(%x, %gamma, %beta, %h) : (memref<16x768xbf16>, ...) -> ()
    call @attn_c_attn_matmul(%h, %w, %bias, %qkv) : (memref<16x768xbf16>, ...) -> ()
    ```
    becomes
    ```mlir
    gpu.launch_func @attn_c_attn_matmul::@attn_c_attn_matmul blocks in (%c1, %c36, %c3) ...
        dynamic_shared_memory_size %c... args(%h, %w, %partials, %x, %gamma, %beta)
    // in the kernel: B's first slices by cp.async, griddepcontrol.wait, then
    scf.for %pass = %c0 to %c4 step %c1 {       (16 rows, 4 warps: a warp a row)
      ... gpu.shuffle xor ... (mean, then variance, within the warp)
      vector.store %normalized, %a_rows[%c0, %row, %k] : memref<1x16x776xbf16, 3>, vector<8xbf16>
    }
    gpu.barrier
    scf.for %step ... { nvgpu.ldmatrix %a_rows[%c0, ..., %k_of_split_and_step] ... nvvm.mma.sync ... }
    gpu.launch_func @attn_c_attn_matmul_split_sum::@attn_c_attn_matmul_split_sum ...
    ```

    A causally masked softmax (its penalty computed in its prologue, or read
    from a mask that a fusion called before it computes from its indices)
    whose rows fit the registers reads only the chunks of keys up to each
    row's query; the rest are -inf, whose probabilities are the same exact
    zeros:

    ```mlir
    %x:4 = scf.if %first_key_le_query -> (f32, f32, f32, f32) {
      %s = vector.load %scores[...] : memref<...xf32>, vector<4xf32>
      ...                                    // scale, mask
      scf.yield %x0, %x1, %x2, %x3 : f32, f32, f32, f32
    } else {
      scf.yield %neg_inf, %neg_inf, %neg_inf, %neg_inf : f32, f32, f32, f32
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU the launch heuristics read the device description of">,
    Option<"matmul", "matmul", "std::string", /*default=*/"\"generated\"",
           "Matmul fusions left for this pass: 'generated' (the register-tiled kernel, or tensor cores for bf16/f16)">,
    ListOption<"matmulBlockTile", "matmul-block-tile", "int64_t",
               "The generated kernel's block tile M,N,K for every matmul fusion (default: chosen per product; "
               "as mlpipe-generated-matmuls' block-tile)">,
    ListOption<"matmulWarpTile", "matmul-warp-tile", "int64_t",
               "The tensor-core form's warp tile M,N under matmul-block-tile (as mlpipe-generated-matmuls' "
               "warp-tile)">,
    Option<"matmulPrefetchFragments", "matmul-prefetch-fragments", "bool", /*default=*/"false",
           "As mlpipe-generated-matmuls' prefetch-fragments, for every matmul fusion">,
    Option<"matmulStages", "matmul-stages", "int64_t", /*default=*/"0",
           "The tensor-core form's cp.async stages for every matmul fusion (0: chosen per product; as "
           "mlpipe-generated-matmuls' stages)">,
    Option<"matmulSplitK", "matmul-split-k", "int64_t", /*default=*/"0",
           "Splits of K across the grid for every matmul fusion (0: chosen per product; as "
           "mlpipe-generated-matmuls' split-k)">,
    Option<"matmulForm", "matmul-form", "std::string", /*default=*/"\"auto\"",
           "The generated kernel's form for every matmul fusion: auto, tiled, skinny, row_dot, tensor_core or warpgroup (as "
           "mlpipe-generated-matmuls' form)">,
    Option<"matmulLastSplitCompletes", "matmul-last-split-completes", "int64_t", /*default=*/"-1",
           "As mlpipe-generated-matmuls' last-split-completes, for every matmul fusion">,
    Option<"matmulStagedEpilogue", "matmul-staged-epilogue", "int64_t", /*default=*/"-1",
           "As mlpipe-generated-matmuls' staged-epilogue, for every matmul fusion">,
    Option<"rowPrologueRows", "row-prologue-rows", "int64_t", /*default=*/"-1",
           "The most rows of a row reduction (a layer norm) read only by the matmul after it, as A, that the "
           "matmul computes in its blocks: 1 (a decode step's one row, in the skinny GEMV), up to 32 (16-bit "
           "few-row tensor-core products too), 0 none (-1: kRowPrologueMaxRows, 1)">,
    Option<"columnReadBytes", "column-read-bytes", "int64_t", /*default=*/"0",
           "Bytes of its input a column reduction's thread reads at once, 4, 8 or 16 (0: kBytesPerThreadRead, "
           "4, or for 16-bit inputs kSixteenBitBytesPerThreadRead, 8)">,
    Option<"columnBlocksPerSm", "column-blocks-per-sm", "int64_t", /*default=*/"0",
           "Blocks an SM a column reduction's row split aims for (0: kBlocksPerSm, 8, or for 16-bit inputs kSixteenBitBlocksPerSm, 16)">,
    Option<"columnCombineRows", "column-combine-rows", "int64_t", /*default=*/"0",
           "Threads a column, 1 to 32, in the kernel combining a column reduction's partials (0: a power of two from 8 to 32 giving a thread about kCombinePartialsPerThread, 8, of them)">,
    Option<"columnCombineAtOnce", "column-combine-at-once", "int64_t", /*default=*/"-1",
           "The most partials a thread of that kernel loads before its first add, more taking a loop (-1: "
           "kCombineLoadsAtOnce, 32; 0: always a loop)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "f32 (f32 matmul fusions computed exactly in f32) or tf32 (opt-in: their A and B rounded to TF32 on "
           "tensor cores where the chip has them; as mlpipe-generated-matmuls' precision)">,
  ];
  // LLVM, NVVM and NVGPU: the tensor-core matmul's mma.sync and ldmatrix.
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect", "mlir::math::MathDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::NVVM::NVVMDialect", "mlir::nvgpu::NVGPUDialect"];
}

#endif // MLPIPE_EMITTERS_PASSES
