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

def PartitionFusionsPass : Pass<"mlpipe-partition-fusions", "mlir::ModuleOp"> {
  let summary = "Group each entry function's linalg ops into fusions around one hero";
  let description = [{
    The partitioner of `fuse`. Every entry function's linalg ops (on tensors)
    are grouped into fusions, each outlined into a private function that
    records its kind in `mlpipe.fusion` (loop, row_reduction,
    column_reduction, transpose or matmul) and is named after the front end's
    scope of its hero (`ln_1_row_reduction`). `outline` later hands each
    fusion to the emitter its kind names.

    XLA's rule decides who joins whom: an op is emitted with its users when
    it has one user, or when all its users are in one fusion and read it
    through the same indexing; otherwise it is its own piece, so no element
    is ever computed twice. Views (reshapes, slices), fills and empty tensors
    are copied into every fusion that reads them. Elementwise producers join
    any fusion but a matmul's; reductions over the same rows share one
    row_reduction fusion (softmax: max, sum of exp, divide; layer norm: mean,
    variance, scale and shift); a matmul takes an elementwise epilogue that
    reads its product element by element (bias add, GELU, residual add) and
    transposes of its operands, which the matmul emitters read as views.

    ```mlir
    func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %max = linalg.reduce ins(%x ...) outs(%fill ...) dimensions = [1] (maximumf)
      %exp = linalg.generic ins(%x, %max ...) { exp(x - max) }
      %sum = linalg.reduce ins(%exp ...) outs(%fill2 ...) dimensions = [1] (addf)
      %y = linalg.generic ins(%exp, %sum ...) { exp / sum }
      return %y
    }
    ```
    becomes
    ```mlir
    func.func private @softmax_row_reduction(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>
        attributes {mlpipe.fusion = "row_reduction"} {
      ... the same four ops, with their fills ...
    }
    func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %y = call @softmax_row_reduction(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      return %y
    }
    ```

    Under `--debug-only=mlpipe-partitioner` it prints why each fusion
    starts where it does.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
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

def CublasMatmulsPass : Pass<"mlpipe-cublas-matmuls", "mlir::ModuleOp"> {
  let summary = "Replace GPU matmuls with calls of the runtime's cuBLAS GEMM, folding the epilogues cuBLASLt computes";
  let description = [{
    Every f32 or f64 linalg.matmul and linalg.batch_matmul on memrefs whose
    operands cuBLAS can read in place becomes a call of the runtime's GEMM
    entry, @mlpipeGemm (runtime/gemm_abi.h): cuBLASLt for f32, cublasDgemm
    for f64. The operand-layout matcher is mlpipe-blas-matmuls' (one
    place): a transposed view becomes a transpose flag, a slice a leading
    dimension, a batch a batch stride; nothing is copied. The zero fill
    before a matmul becomes beta = 0; without one, beta = 1 adds C.

    A matmul fusion (a function with mlpipe.fusion = "matmul", as fuse's
    partitioner makes them) is replaced at each call site:

    ```mlir
    func.func private @c_attn_matmul(%x: memref<16x768xf32>, %w: memref<768x2304xf32>,
        %b: memref<2304xf32>, %y: memref<16x2304xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
      linalg.fill ins(%zero : f32) outs(%y : memref<16x2304xf32>)
      linalg.matmul ins(%x, %w : ...) outs(%y : memref<16x2304xf32>)
      linalg.generic {indexing_maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d1), (d0, d1) -> (d0, d1)], ...}
          ins(%y, %b : ...) outs(%y : ...) { %s = arith.addf %in, %bias : f32 ... }
      return
    }
    ... call @c_attn_matmul(%x, %w, %b, %out) : (...) -> ()
    ```
    becomes (pointer arithmetic abbreviated)
    ```mlir
    // element, compute, transpose A, transpose B, batch, m, n, k, alpha,
    // A, lda, stride A, B, ldb, stride B, beta, C, ldc, stride C, D, ldd, stride D, epilogue, bias
    call @mlpipeGemm(%f32, %exact, %false, %false, %c1, %c16, %c2304, %c768, %one,
                     %px, %c768, %c0, %pw, %c2304, %c0, %zero, %null, %c0, %c0,
                     %pout, %c2304, %c0, %bias_epilogue, %pb)
    ```
    and @c_attn_matmul goes once no call is left.

    The epilogue that follows the matmul (elementwise ops reading the product
    through the identity map) folds into the GEMM as far as cuBLASLt
    computes it the same way (gemm_epilogue.h): D = act(alpha (A B) +
    residual + bias), with a per-column bias (BIAS), a matrix shaped like D
    added as beta C with C apart from D, a constant scale as alpha, and
    GELU's tanh form (GELU, GPT-2's gelu_new; cuBLASLt's GELU is the tanh
    approximation). Folding is for f32; f64's DGEMM takes no epilogue. The
    first op that does not fold stops it: in a fusion, what is left becomes
    a new function with mlpipe.fusion = "loop", called right after the GEMM
    with the GEMM's output among its arguments; around a bare matmul it
    stays where it is. A matmul cuBLAS cannot read in place (a layout with
    no unit stride, an integer type, an empty dimension) is left to the
    generated kernel's pass, which runs next.

    With enabled=false the pass changes nothing (outline's --matmul
    generated); precision=tf32 lets f32 GEMMs round A and B to TF32 on tensor
    cores (outline's --precision tf32), which is off by default.
    `--debug-only=mlpipe-emitters` prints each GEMM and why an epilogue
    stopped folding.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", /*default=*/"true",
           "Replace matmuls (false leaves every one to the generated kernel)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "f32 (computed in f32, no TF32) or tf32 (opt-in: A and B rounded to TF32)">,
    Option<"skinnyRows", "skinny-rows", "int64_t", /*default=*/"-1",
           "Leave products of at most this many rows, B read row by row, unbatched, to the generated skinny kernel where it takes them in one launch (-1: kGeneratedSkinnyMaxRows, 1; 0: none)">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::func::FuncDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect"];
}

def GeneratedMatmulsPass : Pass<"mlpipe-generated-matmuls", "mlir::ModuleOp"> {
  let summary = "Replace floating-point linalg.matmul/batch_matmul with the generated register-tiled GPU kernel";
  let description = [{
    Every floating-point linalg.matmul and linalg.batch_matmul on memrefs in
    a host function becomes a launch of a kernel built for its shapes and
    operand layouts (emitters/matmul_kernel.h). A zero linalg.fill of C right
    before the matmul is folded into it: the kernel then writes C rather than
    adding to it.

    ```mlir
    linalg.fill ins(%zero : f32) outs(%c : memref<1024x3072xf32>)
    linalg.matmul ins(%a, %b : memref<1024x768xf32>, memref<768x3072xf32>) outs(%c : memref<1024x3072xf32>)
    ```
    becomes
    ```mlir
    gpu.launch_func @f_matmul::@f_matmul blocks in (%c8, %c48, %c1) threads in (%c256, %c1, %c1)
        args(%a : memref<1024x768xf32>, %b : memref<768x3072xf32>, %c : memref<1024x3072xf32>)
    gpu.module @f_matmul {
      gpu.func @f_matmul(%a: memref<1024x768xf32>, %b: ..., %c: ...)
          workgroup(%sa : memref<2x8x132xf32, #gpu.address_space<workgroup>>,
                    %sb : memref<2x8x68xf32, #gpu.address_space<workgroup>>)
          kernel attributes {known_block_size = array<i32: 256, 1, 1>, mlpipe.bytes = ..., mlpipe.flops = ...} {
        ... tile 0 -> stage 0, gpu.barrier
        scf.for %step = ... iter_args(%acc0 = ..., ... %acc15 = ...) -> (vector<4xf32>, ...) {
          vector.load %a[...] {alignment = 16}          (tile step+1, into registers)
          vector.load %sa[%stage, ...] {alignment = 16} (fragments; 8 K rows unrolled)
          vector.fma ...
          memref.store / vector.store ... %sa[%other, ...] (tile step+1 into the other stage)
          gpu.barrier
          scf.yield ...
        }
        vector.store ... %c[...]                        (masked at the edges)
      }
    }
    ```

    The tiled kernel: each block computes a tile of C (128x128 for large
    products, 128x64 or 64x64 where that fills the SMs better, 32x128 or
    16x128 for few rows; 64x64 for f64), each thread an 8x8, 8x4 or 4x4
    register tile from 128-bit loads of double-buffered shared K-slices, one
    gpu.barrier per K step. Global reads go along the contiguous axis of each
    operand (a transposed view is read along K), as 128-bit vectors where the
    layout keeps them aligned. Products whose grid would leave SMs idle are
    split along K (partial products added atomically). Products with at most
    64 rows whose B rows are contiguous take the skinny form, which streams B
    once. `--debug-only=mlpipe-emitters` prints each choice; the options
    below override them.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU whose device description the heuristics read">,
    Option<"form", "form", "std::string", /*default=*/"\"auto\"",
           "auto, tiled (the register-tiled kernel) or skinny (the bandwidth-bound form for small M)">,
    ListOption<"blockTile", "block-tile", "int64_t",
               "The tiled kernel's block tile M,N,K (default: chosen per product)">,
    ListOption<"threadTile", "thread-tile", "int64_t",
               "Each thread's register tile M,N, 4 or 8 each (default: chosen with the block tile; with a forced block tile 8x8, 4x4 for f64)">,
    Option<"splitK", "split-k", "int64_t", /*default=*/"0",
           "Slices K is split into across blocks (0: chosen per product, 1: none)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "Widest global load or store, in elements (0: 128 bits)">,
    Option<"testEpilogueKind", "test-epilogue", "std::string", /*default=*/"\"\"",
           "For tests: give every matmul an epilogue (bias-gelu-residual: "
           "gelu_tanh(A B + bias[col]) + residual, from the arguments named bias and residual)",
           "llvm::cl::Hidden">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect", "mlir::math::MathDialect"];
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
// outline: the emitters
//===----------------------------------------------------------------------===//

def FusedAttentionPass : Pass<"mlpipe-fused-attention", "mlir::ModuleOp"> {
  let summary = "Fuse attention's scores matmul, softmax and values matmul into one online-softmax kernel";
  let description = [{
    Causal attention as `fuse` leaves it is three fusions in a row: a
    batch_matmul of per-head views of Q and K^T into a [heads, T, T] scores
    buffer, a softmax row reduction over it (an elementwise prologue — the
    scale and the causal mask — then max, exp(x - max), sum, divide) and a
    batch_matmul of the probabilities with a per-head view of V. When the two
    buffers between them are used by nothing else, the three calls become
    one launch of a kernel in the flash-attention style, so the T x T scores
    never reach memory: a block per (head, tile of query rows), each row held
    by a group of lanes (its slice of q and of the output in registers),
    tiles of K and V staged through shared memory, and an online softmax
    carrying each row's running max and sum. The prologue and the
    exponential are the fusion's own ops, evaluated elementally; when the
    prologue is the traced causal mask, key tiles wholly after a block's
    last query are skipped (their weights are exactly zero). The launch
    configuration reads the device description of `chip`;
    `--debug-only=mlpipe-emitters` prints it, and why a softmax was not
    fused.

    ```mlir
    %s = memref.alloc() : memref<2x8x8xf32>
    call @attention_scores_matmul(%q, %k, %s) : (...) -> ()       // batch_matmul(Q view, K^T view)
    %p = memref.alloc() : memref<2x8x8xf32>
    call @attention_softmax_row_reduction(%s, %p) : (...) -> ()   // scale, mask, max, exp, sum, div
    call @attention_values_matmul(%v, %p, %o) : (...) -> ()       // batch_matmul(P, V view)
    ```
    becomes
    ```mlir
    gpu.module @attention_attention {
      gpu.func @attention_attention(%q: memref<2x8x16xf32, strided<[16, 32, 1]>>, %k: ..., %v: ...,
                                    %o: memref<2x8x16xf32>)
          workgroup(%kt : memref<32x16xf32, #gpu.address_space<workgroup>>, %vt : ...) kernel {
        ... scf.for over key tiles: stage K, V; scores, gpu.shuffle, max, math.exp, vector.fma ...
      }
    }
    %kv = memref.transpose %kt_view (d0, d1, d2) -> (d0, d2, d1) : ...
    gpu.launch_func @attention_attention::@attention_attention blocks in (%c2, %c1, %c1)
        threads in (%c32, %c1, %c1) args(%q_view : ..., %kv : ..., %v_view : ..., %o : ...)
    ```

    Few query rows against many keys (a decode step: one row per head
    against the KV cache, masked past a run-time position) would leave most
    SMs idle, so the keys are split over blocks: each writes its rows'
    partial max, sum and weighted values to a host temporary, and a second
    kernel combines the splits exactly:
    ```mlir
    %part = memref.alloc() {alignment = 16 : i64} : memref<12x1x32x68xf32>
    gpu.launch_func @attn_attention::@attn_attention blocks in (%c384, %c1, %c1) ...
        args(%q_view : ..., %kv : ..., %v_view : ..., %part : memref<12x1x32x68xf32>, %mask : ...)
    gpu.launch_func @attn_attention_combine::@attn_attention_combine blocks in (%c3, %c1, %c1) ...
        args(%part : memref<12x1x32x68xf32>, %o : memref<12x1x64xf32>)
    memref.dealloc %part : memref<12x1x32x68xf32>
    ```

    Where that mask is select(key > p, -1e10, 0) with p loaded from an input
    of the host function (computed in the prologue, or by a fusion writing
    the mask), the kernel takes p too and reads only the tiles of keys up
    to p's (kSkipKeysAfterThePosition): a split past it writes an empty
    partial (max -inf, sum 0), which the combining kernel, given p too,
    neither reads nor weighs.
    ```mlir
    %p = memref.load %position[] : memref<i32>
    %tiles = arith.minsi %split_end, %tiles_up_to_p : index
    scf.for %t = %split_begin to %tiles step %c1 iter_args(...) { ... }
    ```

    A decode step's keys and values reach the cache through a host copy
    just before the attention (at a key computed from the position). Where
    that copy writes exactly row `key` of K and V for every head, and
    nothing between it and the attention touches the cache or the copy's
    source, the kernel does the copy (kWriteTheCacheInTheAttention): it is
    given the source and recomputes the key from the position; the block
    whose split holds the key writes its head's row of K and of V first,
    then stages its tiles (the barrier before each tile orders the writes
    before the reads; no other block reads that key). One launch a layer
    fewer:
    ```mlir
    %key = arith.minsi (arith.maxsi (index_cast (memref.load %position[])), 0), 1023
    %row = memref.subview %cache[0, 0, 0, %key, 0] [1, 2, 12, 1, 64] [1, 1, 1, 1, 1]
    linalg.copy ins(%new_kv : memref<1x2x12x1x64xf32, ...>) outs(%row : ...)
    ... the three calls ...
    ```
    becomes
    ```mlir
    gpu.launch_func @attn_attention::@attn_attention ...
        args(..., %position : memref<i32>, %new_kv : memref<1x2x12x1x64xf32, ...>)
    // in the kernel, before the loop over tiles:
    scf.if %split_holds_key {
      %k_new = memref.load %new_kv[%c0, %c0, %head, %c0, %d]
      memref.store %k_new, %k[%head, %key, %d]
      ... and the value row ...
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU the launch heuristics read the device description of">,
    Option<"maxKeys", "max-keys", "int64_t", /*default=*/"-1",
           "Fuse attentions whose queries and keys both number more than this only when 0 (-1: the heuristic's limit, kFusedAttentionMaxKeys); few queries against many keys (decode) always fuse">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect", "mlir::math::MathDialect"];
}

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
    (a decode step's layer norm and its GEMV; kRowReductionIntoGemv), is
    not a kernel of its own: every block of the GEMV computes the row
    itself, into the slice of A it stages in shared memory.

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

    A causally masked softmax (its penalty computed in its prologue, or read
    from a mask that a fusion called before it computes from its indices)
    whose rows fit the registers reads only the chunks of keys up to each
    row's query; the rest are -inf, whose probabilities are the same exact
    zeros (kSkipKeysAfterTheQuery):

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
           "Matmul fusions left for this pass: 'generated' (the register-tiled kernel)">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect", "mlir::math::MathDialect"];
}

def DropInoutResultsPass : Pass<"mlpipe-drop-inout-results", "mlir::ModuleOp"> {
  let summary = "Drop the results that carry an in-out input's in-place update";
  let description = [{
    The front end returns the new value of an in-out input (a KV cache the
    function writes in place) as a result marked `mlpipe.updates`, only so
    that the writes are not dead code. After one-shot bufferization, such a
    result must be the input's own buffer — the writes went into the
    caller's memory — and is dropped; if bufferization had to copy instead,
    this pass fails, naming the input, rather than lose the update.

    ```mlir
    func.func @decode(%cache: memref<2x8x4xf32> {mlpipe.name = "kv_cache"}, ...)
        -> (memref<1x50xf32>, memref<2x8x4xf32> {mlpipe.updates = "kv_cache"}) {
      ... memref.copy %row, %subview_of_cache ...
      return %logits, %cache : memref<1x50xf32>, memref<2x8x4xf32>
    }
    ```
    becomes
    ```mlir
    func.func @decode(%cache: memref<2x8x4xf32> {mlpipe.name = "kv_cache"}, ...) -> memref<1x50xf32> {
      ... memref.copy %row, %subview_of_cache ...
      return %logits : memref<1x50xf32>
    }
    ```
  }];
}

def ElideResultCopiesPass : Pass<"mlpipe-elide-result-copies", "mlir::func::FuncOp"> {
  let summary = "Write results straight into their out-parameters instead of copying them there";
  let description = [{
    After buffer-results-to-out-params, a function whose result came from a
    call (a fusion) allocates a buffer for the call and copies it into the
    out-parameter at the end. When nothing else touches the out-parameter,
    the call writes into it directly and the copy (a kernel, on the GPU)
    goes:

    ```mlir
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
      %alloc = memref.alloc() : memref<64x256xf32>
      call @gelu_loop(%x, %alloc) : (...) -> ()
      memref.copy %alloc, %y : memref<64x256xf32> to memref<64x256xf32>
      memref.dealloc %alloc : memref<64x256xf32>
      return
    }
    ```
    becomes
    ```mlir
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) {
      call @gelu_loop(%x, %y) : (...) -> ()
      return
    }
    ```
  }];
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

def BufferPlanPass : Pass<"mlpipe-buffer-plan", "mlir::ModuleOp"> {
  let summary = "Give every host temporary of an entry function an offset in one arena planned from lifetimes";
  let description = [{
    The host's temporaries become views of one arena, a trailing argument of
    the entry function that the runtime allocates once per compiled module
    and shape, in device memory, and reuses on every call; no memory is
    allocated or freed while the function runs. As XLA's buffer assignment
    does, each temporary's lifetime runs from its allocation to the last use
    of it or of any view of it (in the order of the function's body), and
    temporaries whose lifetimes do not overlap share bytes: greedy by size,
    each at the lowest offset free for its whole lifetime, every offset a
    multiple of `alignment` (so kernels may use 128-bit vector accesses).

    ```mlir
    func.func @f(%x: memref<64xf32>, %y: memref<64xf32>) attributes {mlpipe.inputs = [...]} {
      %a = memref.alloc() : memref<64xf32>
      gpu.launch_func @k::@k ... args(%x : memref<64xf32>, %a : memref<64xf32>)
      %b = memref.alloc() : memref<64xf32>
      gpu.launch_func @k::@k ... args(%a : memref<64xf32>, %b : memref<64xf32>)
      memref.dealloc %a : memref<64xf32>
      gpu.launch_func @k::@k ... args(%b : memref<64xf32>, %y : memref<64xf32>)
      memref.dealloc %b : memref<64xf32>
      return
    }
    ```
    becomes
    ```mlir
    func.func @f(%x: memref<64xf32>, %y: memref<64xf32>, %arena: memref<512xi8> {mlpipe.arena})
        attributes {mlpipe.arena = {alignment = 256, allocated_at_run_time = 0, buffers = 2, bytes = 512,
                                    peak_live_bytes = 512, unplanned_bytes = 512}, mlpipe.inputs = [...]} {
      %c0 = arith.constant 0 : index
      %a = memref.view %arena[%c0][] : memref<512xi8> to memref<64xf32>
      ...
      %c256 = arith.constant 256 : index
      %b = memref.view %arena[%c256][] : memref<512xi8> to memref<64xf32>
      ...
    }
    ```

    The function attribute `mlpipe.arena` tells the runtime the arena's size
    (`bytes`; no argument is added when it is 0) and, for `bench`, what
    separate allocations would take (`unplanned_bytes`) and the most bytes
    live at once (`peak_live_bytes`, a bound no plan can beat). Temporaries
    that cannot be planned (in a function that is not an entry, allocated
    inside a region, dynamically shaped, returned) are allocated in device
    memory at run time instead, and counted in `allocated_at_run_time`.
    `--debug-only=mlpipe-buffer-plan` prints every plan.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Every offset in the arena is a multiple of this many bytes">,
  ];
  let dependentDialects = ["mlir::memref::MemRefDialect", "mlir::arith::ArithDialect", "mlir::gpu::GPUDialect"];
}

//===----------------------------------------------------------------------===//
// lower-nvvm: kernels to cubin
//===----------------------------------------------------------------------===//

def MergeIdenticalKernelsPass : Pass<"mlpipe-merge-identical-kernels", "mlir::ModuleOp"> {
  let summary = "Merge gpu.modules that are equal but for their names";
  let description = [{
    Kernels that are structurally identical (the twelve blocks of GPT-2
    launch the same kernels on different weights) are compiled, assembled
    and loaded once: launches of a duplicate module launch the first one
    instead, and the duplicate goes. Two modules are equal when their text,
    printed under one fixed name, is.

    ```mlir
    gpu.launch_func @block_kernel::@block_kernel ... args(%w0 : memref<768xf32>, ...)
    gpu.launch_func @block_kernel_0::@block_kernel ... args(%w1 : memref<768xf32>, ...)
    gpu.module @block_kernel { gpu.func @block_kernel(...) kernel { BODY } }
    gpu.module @block_kernel_0 { gpu.func @block_kernel(...) kernel { BODY } }
    ```
    becomes
    ```mlir
    gpu.launch_func @block_kernel::@block_kernel ... args(%w0 : memref<768xf32>, ...)
    gpu.launch_func @block_kernel::@block_kernel ... args(%w1 : memref<768xf32>, ...)
    gpu.module @block_kernel { gpu.func @block_kernel(...) kernel { BODY } }
    ```
  }];
}

def PersistentKernelsPass : Pass<"mlpipe-persistent-kernels", "mlir::ModuleOp"> {
  let summary = "Run a chain of small launches as the phases of one kernel whose blocks stay resident";
  let description = [{
    A GPT-2 decode step is seventy-odd dependent kernels of a few
    microseconds each, and each pays its launch, the ramp of its blocks and
    the drain of its last one: about half of every kernel's time. This pass
    makes such a chain one kernel. Its blocks stay resident, run the
    launches' bodies one after another as phases, and wait for each other
    between two phases at a barrier across the whole grid. lower-nvvm runs
    it only with MLPIPE_PERSISTENT_KERNELS=1: on the H200 a decode step is
    slower so (BENCHMARKS.md, "Persistent kernels").

    A run is a maximal sequence of `gpu.launch_func` in one host block with
    nothing between them that touches memory (views and constants may sit
    between; a library call or a copy ends the run). A launch joins a run
    when its grid and block are constant and one-dimensional, it is
    synchronous, without dynamic shared memory, and its kernel is one block
    that uses only thread and block ids and sizes, barriers and shuffles of
    the `gpu` dialect. The kernel's grid is the fewest blocks of the widest
    phase's threads that run every phase in one round, at most
    `kResidentBlocksPerSm` blocks on each SM of `chip`'s device description,
    so the whole grid is resident at once (the runtime checks this before
    it launches, `mlpipe_grid_barrier` marks the module). In each phase

      - block b runs the phase's virtual block b; a phase of narrower blocks
        runs several virtual blocks side by side in one block, each a
        subgroup of whole warps (virtual block `subgroup * grid + b`), whose
        `gpu.barrier` becomes the subgroup's named barrier;
      - thread and block ids and sizes become the virtual block's;
      - the phase's workgroup buffers become views of the kernel's dynamic
        shared memory, one copy per subgroup, reused by every phase.

    A memref of static shape, strides and offset is passed as its aligned
    pointer (an i64) and the kernel rebuilds its descriptor from the type:
    a GPT-2 124M step's 160 descriptors would pass PTX's 4352 bytes of
    parameters.

    The grid barrier between phases: the block's threads meet at a block
    barrier; thread 0 counts its block in with a releasing atomic add it
    does not wait for, and spins with acquiring loads until the count
    reaches the grid's size times the barriers passed in this launch, past
    the count it read when the launch started; a block barrier follows. The
    count (64 bits, never reset) is a global of the kernel's module, zero
    when it loads; each launch adds the grid's size per barrier, so a launch
    starts at a multiple of it.

    A phase's body sees its block id clamped to its grid, the same inside
    the phase. The loads of memory no phase writes (weights: no phase
    writes through any view of the same host buffer) at the top of a
    phase's body move above the barrier ahead of the phase, with the
    arithmetic their addresses need: every block issues them, clamped to a
    real block's addresses, and they are in flight while the grid waits.

    Kernel modules no launch names any more go.
    `--debug-only=mlpipe-persistent` prints every run, and why a launch ended
    one. `enabled=false` leaves every launch as it is; `barriers-only` keeps
    the barriers and drops the phases' bodies, to time the barriers alone.

    ```mlir
    gpu.launch_func @scale::@scale blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<128xf32>)
    gpu.launch_func @shift::@shift blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%x : memref<128xf32>, %y : memref<32xf32>)
    ```
    becomes
    ```mlir
    gpu.launch_func @persistent_scale_2_phases_module::@persistent_scale_2_phases
        blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%x_address : i64, %y_address : i64)
    gpu.module @persistent_scale_2_phases_module {
      llvm.mlir.global external @mlpipe_grid_barrier(0 : i64) {addr_space = 1 : i32} : i64
      gpu.func @persistent_scale_2_phases(%x: i64, %y: i64) kernel
          attributes {known_block_size = array<i32: 64, 1, 1>, mlpipe.phases = ["scale", "shift"], nvvm.minctasm = 1 : i32} {
        %xm, %ym = descriptors of memref<128xf32>, memref<32xf32> rebuilt from the addresses
        %tid = gpu.thread_id x
        %bid = gpu.block_id x
        scf.if %bid < 2 { SCALE'S BODY }
        GRID BARRIER
        %subgroup = %tid / 32, %vtid = %tid % 32, %vbid = %subgroup * 2 + %bid
        scf.if %vbid < 1 { SHIFT'S BODY on %vtid, %vbid; gpu.barrier -> nvvm.barrier id 1 + %subgroup, 32 threads }
        gpu.return
      }
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The chip whose SM count and shared memory size the grid is planned for">,
    Option<"enabled", "enabled", "bool", /*default=*/"true",
           "Make persistent kernels (false leaves every launch as it is)">,
    Option<"barriersOnly", "barriers-only", "bool", /*default=*/"false",
           "Keep the grid barriers but drop the phases' bodies: what the barriers alone cost (computes nothing)">,
  ];
  let dependentDialects = ["mlir::NVVM::NVVMDialect", "mlir::LLVM::LLVMDialect", "mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect", "mlir::arith::ArithDialect"];
}

def ProgrammaticLaunchPass : Pass<"mlpipe-programmatic-launch", "mlir::ModuleOp"> {
  let summary = "Let each kernel's launch overlap the end of the kernel before it (sm_90 and later)";
  let description = [{
    A launch that waits for the kernel before it to finish and only then
    starts costs a microsecond or two of an idle GPU, which a decode step of
    a hundred small kernels pays a hundred times. On chips with programmatic
    dependent launch (sm_90 and later, `programmaticDependentLaunch` in the
    device description of `chip`), every kernel

      - waits, before touching memory, until the kernel before it has
        finished and its writes are visible (`griddepcontrol.wait`);
      - then lets the kernel after it be scheduled
        (`griddepcontrol.launch_dependents`), so that kernel's blocks are
        resident, waiting, when this one ends.

    Letting the next kernel go only after the wait keeps one kernel waiting
    ahead at most;
    letting it go first thing let a whole chain of small kernels become
    resident at once, each waiting on the one before, and made a GPT-2
    decode step slower, not faster. A kernel launched without the attribute
    returns from the wait at once. Each module gets a marker global,
    `mlpipe_programmatic_launch`, that tells the runtime its kernels may be
    launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION. On
    older chips nothing changes. `--debug-only=mlpipe-launch` prints the
    choice.

    ```mlir
    gpu.module @gelu_kernel {
      gpu.func @gelu_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel { BODY }
    }
    ```
    becomes, for sm_90,
    ```mlir
    gpu.module @gelu_kernel {
      llvm.mlir.global external constant @mlpipe_programmatic_launch(1 : i8) : i8
      gpu.func @gelu_kernel(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
        nvvm.griddepcontrol wait
        nvvm.griddepcontrol launch_dependents
        BODY
      }
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The chip the kernels are compiled for (sm_90 and later launch programmatically)">,
  ];
  let dependentDialects = ["mlir::NVVM::NVVMDialect", "mlir::LLVM::LLVMDialect"];
}

def RecordEntrySignaturePass : Pass<"mlpipe-record-entry-signature", "mlir::ModuleOp"> {
  let summary = "Record each entry's argument types before lowering erases them, checked against its signature";
  let description = [{
    `run` binds `.npy` files to an entry's buffers by the `mlpipe.inputs`
    and `mlpipe.outputs` attributes trace wrote, and sizes each buffer from
    them. Lowering to LLVM expands every memref into a descriptor and keeps
    no shape, so before it this pass checks that those attributes describe
    the function's arguments exactly (inputs, then outputs, then the arena
    when the entry has one) and records the argument types as
    `mlpipe.argument_types`, which the runtime checks the attributes
    against again before it runs the lowered entry. A function whose
    attributes disagree with its arguments is an error here.

    ```mlir
    func.func @gelu(%x: memref<64x256xf32>, %y: memref<64x256xf32>) attributes {
        mlpipe.inputs = [{name = "x", type = tensor<64x256xf32>} ],
        mlpipe.outputs = [{name = "y", type = tensor<64x256xf32>} ]} { ... }
    ```
    gains
    ```mlir
        mlpipe.argument_types = [memref<64x256xf32>, memref<64x256xf32>]
    ```
    while `mlpipe.outputs = [{name = "y", type = tensor<1xf32>} ]` is refused:
    "@gelu declares 'y' in mlpipe.outputs as tensor<1xf32>, but its argument
    1 is memref<64x256xf32>".
  }];
}

def KernelCostsPass : Pass<"mlpipe-kernel-costs", "mlir::ModuleOp"> {
  let summary = "Record each kernel's bytes moved and flops on the module, for the runtime's profiler";
  let description = [{
    Before the kernels are serialised, each kernel's cost goes into one
    module attribute the runtime reads after lowering: the bytes it reads
    plus writes per launch and its floating-point operations, from the
    emitters' `mlpipe.bytes` and `mlpipe.flops` on the gpu.func. Without
    `mlpipe.bytes` the bytes are -1: the runtime's profiler then counts the
    extent of every memref argument of each launch, whose ranks and element
    sizes `args` lists (rank -1 for a scalar argument). The table is keyed
    by kernel name, as the runtime sees launches, so a kernel name that
    several modules share is replaced by its module's name.

    ```mlir
    gpu.module @gelu_kernel {
      gpu.func @gelu_kernel(%n: index, %x: memref<64x256xf32>, %y: memref<64x256xf32>) kernel
          attributes {mlpipe.bytes = 131072 : i64, mlpipe.flops = 0 : i64} { ... }
    }
    ```
    adds to the module
    ```mlir
    module attributes {mlpipe.kernels = {gelu_kernel = {args = [-1, 0, 2, 4, 2, 4], bytes = 131072 : i64,
                                                        flops = 0 : i64}}}
    ```
  }];
}

def AssembleKernelsPass : Pass<"mlpipe-assemble-kernels", "mlir::ModuleOp"> {
  let summary = "Assemble every kernel's PTX to cubin with ptxas, in parallel, each distinct PTX once, cached on disk";
  let description = [{
    gpu-module-to-binary leaves PTX, which the driver would assemble on every
    load. Here each distinct PTX text is assembled once by the toolkit's
    ptxas for the chip, several at a time (`jobs`, default one per core),
    and kept in `cache-dir` under a hash of the PTX, the chip, the
    optimisation level, the format and ptxas's version, so an unchanged
    kernel is never assembled twice. Each object becomes its cubin (or, for
    `format=fatbin`, a fatbin holding the cubin and the PTX); the PTX stays in
    the object's properties as `mlpipe.ptx`, so ptx-check reads it. With
    `format=isa` nothing changes. PTX calling a libdevice function it does
    not define is refused, naming the function.

    ```mlir
    gpu.binary @gelu_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90">, assembly = ".version 7.8 ...">]
    ```
    becomes
    ```mlir
    gpu.binary @gelu_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90">,
        properties = {mlpipe.ptx = ".version 7.8 ..."}, bin = "\7FELF...">]
    ```
    `--debug-only=mlpipe-ptxas` says how many kernels were assembled, how
    many came from the cache, on how many threads.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"bin\"", "isa (leave PTX), bin (cubin) or fatbin">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"", "The GPU to assemble for">,
    Option<"optLevel", "opt-level", "int", /*default=*/"3", "ptxas optimisation level, 0-3">,
    Option<"toolkit", "toolkit", "std::string", /*default=*/"\"/usr/local/cuda\"", "CUDA toolkit root (bin/ptxas)">,
    Option<"cacheDir", "cache-dir", "std::string", /*default=*/"\"\"", "Directory of assembled kernels; empty: no cache">,
    Option<"jobsOption", "jobs", "int", /*default=*/"0", "ptxas processes at once; 0: one per core">,
  ];
}

#endif // MLPIPE_COMPILER_PASSES
