//===- matmul/Passes.td ---------------------------------------------===//
//
// mlpipe's matmul passes: the paths a matmul takes: cuBLAS(Lt) calls, the generated kernel, BLAS on the CPU, and the operand views they read. Each with its summary, a
// before/after description, its options and the dialects it creates.
// mlir-tblgen turns this file into matmul/Passes.h.inc; each pass file
// includes its GEN_PASS_DEF_ section, and compiler/'s registration calls
// registerMatmulPasses() so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLPIPE_MATMUL_PASSES
#define MLPIPE_MATMUL_PASSES

include "mlir/Pass/PassBase.td"

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
    Products of at most skinny-rows rows (kGeneratedSkinnyMaxRows, 32; for
    16-bit operands kGeneratedSkinnyMaxRowsSixteenBit, 32), B read row by
    row and unbatched, are left to the generated kernel (the skinny kernel,
    or for 16-bit operands from 2 rows its few-row tensor-core tiles),
    which streams B faster; those of at most
    row-dot-rows rows (kGeneratedRowDotMaxRows, 16) with B stored [N, K]
    (the tied logits), to the row-dot kernel.

    A matmul fusion (a function with mlpipe.fusion = "matmul", as fuse's
    partitioner makes them) is replaced at each call site:

    ```mlir
    func.func private @c_attn_matmul(%x: memref<64x768xf32>, %w: memref<768x2304xf32>,
        %b: memref<2304xf32>, %y: memref<64x2304xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
      linalg.fill ins(%zero : f32) outs(%y : memref<64x2304xf32>)
      linalg.matmul ins(%x, %w : ...) outs(%y : memref<64x2304xf32>)
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
    call @mlpipeGemm(%f32, %exact, %false, %false, %c1, %c64, %c2304, %c768, %one,
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
    approximation). Folding is for f32; f64's DGEMM takes no epilogue.
    bf16 and f16 operands are read as stored, accumulating in f32; where the
    epilogue ends by rounding to their type, with the bias and residual
    stored in it,
    ```mlir
    ^bb0(%p: f32, %b: bf16, %out: bf16):
      %wide = arith.extf %b : bf16 to f32
      %sum = arith.addf %p, %wide : f32
      %d = arith.truncf %sum : f32 to bf16
    ```
    the GEMM writes the bf16 D itself (element 4, f16 5: C, D and bias in
    16 bits, rounded once) and the f32 product is never stored. The
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
           "Leave products of at most this many rows, B read row by row, unbatched, to the generated skinny kernel (-1: kGeneratedSkinnyMaxRows, 32, or for 16-bit operands kGeneratedSkinnyMaxRowsSixteenBit, 32; 0: none)">,
    Option<"rowDotRows", "row-dot-rows", "int64_t", /*default=*/"-1",
           "Leave products of at most this many rows, B stored [N, K], unbatched and at least kGeneratedRowDotMinColumns wide, to the generated row-dot kernel (-1: kGeneratedRowDotMaxRows, 16; 0: none)">,
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU compiled for: where it has wgmma (sm_90a), wide 16-bit products with unaligned rows of C go to the generated warpgroup form">,
    Option<"warpgroupMinColumns", "warpgroup-min-columns", "int64_t", /*default=*/"-1",
           "On a chip with wgmma, leave 16-bit products of at least kGeneratedWarpgroupMinRows rows and this many columns, unbatched, N no multiple of 8, to the generated warpgroup form (-1: kGeneratedWarpgroupMinColumns, 16384; 0: none)">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::func::FuncDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect"];
}

def GeneratedMatmulsPass : Pass<"mlpipe-generated-matmuls", "mlir::ModuleOp"> {
  let summary = "Replace floating-point linalg.matmul/batch_matmul with the generated GPU kernel (register-tiled, skinny or on tensor cores)";
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
    split along K: each split writes its partial product to a temporary
    (`memref.alloc` in host code, placed in the arena by the buffer plan),
    and a `_split_sum` kernel adds the splits in their order and applies the
    epilogue (no atomics: the same bits on every run). Products with at most
    64 rows whose B rows are contiguous take the skinny form, which streams B
    once. A one-row product whose blocks would hold too many rows of a
    weight in registers before their wait splits K too, and the last split
    of a column tile to finish adds the splits in their order and applies
    the epilogue in the same launch (each split counts itself done in a
    counter of the tile, `memref.global "private" @finished_splits`, its
    writes released by a GPU-scope fence):
    ```mlir
    gpu.launch_func @f_matmul::@f_matmul blocks in (%c24, %c4, %c1) threads in (%c256, %c1, %c1)
        args(%a : memref<1x3072xbf16>, %b : memref<3072x768xbf16>, %partials : memref<4x1x768xf32>,
             %c : memref<1x768xbf16>, %residual : ...)
    // in the kernel, after the split's partial sums are stored:
    gpu.barrier
    llvm.fence syncscope("device") release            (thread 0)
    %before = memref.atomic_rmw addi %c1_i32, %counters[%tile] : (i32, memref<24xi32>) -> i32
    scf.if %last { ... the 4 partial vectors added, the epilogue, C stored ... }
    ```
    `--debug-only=mlpipe-emitters` prints each choice; the options below
    override them.

    bf16 and f16 A and B (C in their type or f32) take the skinny form where
    f32 would (at most 64 rows, B's rows contiguous), and the tensor-core
    form otherwise, on chips with mma.sync m16n8k16 (sm_80 and later); there,
    products of 2 to 16 rows take the tensor-core form too, in tiles one m16
    tile high with K split across blocks where the tiles alone would leave
    SMs idle (the splits summed by a second kernel with the epilogue, or,
    with last-split-completes=1, by the last split of each tile to finish,
    in the same launch, as the one-row GEMV's splits are above):

    ```mlir
    linalg.matmul ins(%a, %b : memref<1024x768xbf16>, memref<768x3072xbf16>) outs(%c : memref<1024x3072xf32>)
    ```
    becomes
    ```mlir
    gpu.launch_func @f_matmul::@f_matmul blocks in (%c8, %c24, %c1) threads in (%c256, %c1, %c1)
        dynamic_shared_memory_size %c75776_i32 args(...)
    gpu.func @f_matmul(...) kernel {
      %shared = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %sa = memref.view %shared[%c0][] : ... to memref<4x128x40xbf16, #gpu.address_space<workgroup>>
      %sb = memref.view %shared[%c40960][] : ... to memref<4x32x136xbf16, #gpu.address_space<workgroup>>
      nvgpu.device_async_copy %a[...], %sa[%c0, ...], 8 {bypassL1} ...  (slices 0-2, cp.async, a group each)
      %g = nvgpu.device_async_create_group ...
      scf.for %step = ... iter_args(%acc0 = ..., ... %acc63 = ...) -> (f32, ...) {
        nvgpu.device_async_wait %g {numGroups = 2 : i32}; gpu.barrier
        nvgpu.device_async_copy ... %sa[%ahead, ...]       (slice step+3 into the stage step-1 read)
        nvgpu.device_async_create_group ...
        nvgpu.ldmatrix %sa[%stage, ...] {numTiles = 4 : i32, transpose = false} ... -> vector<4x2xbf16>
        nvgpu.ldmatrix %sb[%stage, ...] {numTiles = 4 : i32, transpose = true} ...
        nvvm.mma.sync A[...] B[...] C[...] {shape = #nvvm.shape<m = 16, n = 8, k = 16>,
            multiplicandAPtxType = #nvvm.mma_type<bf16>, ...}   (16 a warp per 16 of K)
      }
      vector.store ... %c[...] : ..., vector<2xf32>   (through the epilogue, masked at the edges)
    }
    ```
    Blocks of 128x128 (8 warps of 64x32), or 64x128 and 64x64 where the
    large tile leaves SMs idle, 32 of K per step; for at most 16 rows,
    tiles of one m16 row (warps of 16x16 along N, or one of 16x8, 128 of K
    per step). Where both operands are
    read as vectors, K-slices go to shared memory by cp.async in as many
    stages (2 to 4) as fit the block's share of the SM's shared memory
    while the register file holds two blocks of 8 warps (`stages=N` forces
    the count), in dynamic shared memory sized at launch (past the 48 KiB
    of static shared memory: four stages of 128x128 take 74 KiB), each
    operand stored along its contiguous axis with 16-byte row pads and
    read by ldmatrix (.trans for one stored along M or N), K past the edge
    zero-filled; otherwise (an odd extent: scalar reads) through registers
    into two stages. On sm_90a, products of more than 16 rows whose A is
    read along K and B along either axis in 16-byte vectors take the
    warpgroup form instead (warpgroup_matmul.cpp): one or two warpgroups a
    block, each an m64 x N accumulator of wgmma.mma_async m64nNk16 reading
    A and B from shared memory through matrix descriptors, K-slices of 64
    by cp.async into 128-byte-swizzled stages:

    ```mlir
    scf.for ... iter_args(%acc = ...) -> (!llvm.struct<(f32, ...)>) {
      nvgpu.device_async_wait ...; nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, ...}; gpu.barrier
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %descA, %descB, %acc, <m = 64, n = 192, k = 16>, D[<f32>, <one>],
          A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : ...     (four a slice)
      nvvm.wgmma.commit.group.sync.aligned; nvvm.wgmma.wait.group.sync.aligned 1; gpu.barrier
      nvgpu.device_async_copy ...                                    (slice t+S-1)
    }
    ```
    and C goes out through shared memory where the stages hold its f32
    tile (staged-epilogue): each thread's accumulators stored where they
    lie in the tile, then a row's consecutive columns a warp, 16 bytes a
    thread where C's layout allows:

    ```mlir
    nvvm.wgmma.wait.group.sync.aligned 0; gpu.barrier
    %tile = memref.view %dynamic[%pad][] : memref<?xi8, 3> to memref<128x264xf32, 3>
    vector.store %pair, %tile[%row, %col] : memref<128x264xf32, 3>, vector<2xf32>   (N / 4 a thread)
    gpu.barrier
    %run = vector.load %tile[%r, %c] : memref<128x264xf32, 3>, vector<8xf32>
    ... epilogue, arith.truncf ...
    vector.store %out, %C[%m0r, %n0c] : memref<1024x3072xbf16>, vector<8xbf16>
    ```
    On older
    chips (sm_75) only the skinny form's products are taken here (bf16 has
    no tensor cores there).

    f32 products under precision=tf32 (outline's --precision tf32; off by
    default, when f32 is computed exactly on CUDA cores) take the same
    tensor-core form where the skinny and row-dot forms do not take them,
    on sm_80 and later: K-slices of 16 (the bytes of 32 16-bit elements),
    each fragment register one f32 rounded to TF32 as it is loaded, and
    mma.sync m16n8k8:

    ```mlir
    %m = nvgpu.ldmatrix %sa[%stage, %row, %k] {numTiles = 4 : i32, transpose = false}
        : memref<4x128x20xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>   (A, K-major)
    %w = memref.load %sb[%stage, %kt, %col] : memref<4x16x136xf32, ...>            (B, N-major: a word)
    %a0 = nvvm.convert.float.to.tf32 %x {rnd = #nvvm.fp_rnd_mode<rna>}
    %d = nvvm.mma.sync A[%a0, %a1, %a2, %a3] B[%b0, %b1] C[...]
        {shape = #nvvm.shape<m = 16, n = 8, k = 8>, multiplicandAPtxType = #nvvm.mma_type<tf32>, ...}
    ```
    (ldmatrix moves 16-bit words: it hands a lane one 32-bit word of each
    8x8 matrix, the element its TF32 fragment holds there; an f32 tile
    stored along M or N is read a word a register instead of by .trans,
    its rows padded by 32 bytes so that a fragment's 32 words fall in 32
    banks.) On sm_75 such products stay on CUDA cores; forcing
    form=tensor_core there is refused.
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU whose device description the heuristics read">,
    Option<"form", "form", "std::string", /*default=*/"\"auto\"",
           "auto, tiled (the register-tiled kernel), skinny (the bandwidth-bound form for small M), row_dot (the "
           "same for B stored [N, K]), tensor_core (mma.sync on bf16/f16 A and B, sm_80 and later; auto takes "
           "it for every 16-bit product the skinny and row-dot forms do not) or warpgroup (wgmma from shared "
           "memory, sm_90a; auto takes it there for products of more than 16 rows whose A and B it reads)">,
    ListOption<"blockTile", "block-tile", "int64_t",
               "The tiled kernel's block tile M,N,K (default: chosen per product)">,
    ListOption<"threadTile", "thread-tile", "int64_t",
               "Each thread's register tile M,N, 4 or 8 each (default: chosen with the block tile; with a forced block tile 8x8, 4x4 for f64)">,
    Option<"splitK", "split-k", "int64_t", /*default=*/"0",
           "Slices K is split into across blocks (0: chosen per product, 1: none)">,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"0",
           "Widest global load or store, in elements (0: 128 bits)">,
    Option<"asyncCopy", "async-copy", "bool", /*default=*/"true",
           "The tensor-core form stages K-slices by cp.async where both operands are read as vectors (false: through registers)">,
    Option<"prefetchFragments", "prefetch-fragments", "bool", /*default=*/"false",
           "The tensor-core form's cp.async pipeline loads the next K-step's fragments before the current step's "
           "mma.sync (false: load, then multiply, each K-step)">,
    ListOption<"warpTile", "warp-tile", "int64_t",
               "The tensor-core form's warp tile M,N under a forced block tile (default: 64x32 for tiles of 128 "
               "rows or more, else 32x32)">,
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "The tensor-core form's cp.async stages, at least 2 (0: chosen per product and device; staging through registers keeps two)">,
    Option<"lastSplitCompletes", "last-split-completes", "int64_t", /*default=*/"-1",
           "Where the few-row tensor-core tiles split K, the last split of a tile adds the splits and applies the "
           "epilogue in the same launch (1) instead of a second kernel (0) (-1: kFewRowsLastSplitCompletes, off)">,
    Option<"stagedEpilogue", "staged-epilogue", "int64_t", /*default=*/"-1",
           "The warpgroup form writes C through shared memory, a row's consecutive columns a warp, 16 bytes a "
           "thread where C's layout allows (1), or each thread's accumulators where they lie in C (0) (-1: "
           "kWarpgroupStagedEpilogue)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "f32 (f32 products computed exactly in f32, on CUDA cores) or tf32 (opt-in: A and B rounded to TF32 "
           "by cvt.rna, products on mma.sync m16n8k8 .tf32 with f32 accumulation, sm_80 and later, for those "
           "the skinny and row-dot forms do not take)">,
    Option<"testEpilogueKind", "test-epilogue", "std::string", /*default=*/"\"\"",
           "For tests: give every matmul an epilogue (bias-gelu-residual: "
           "gelu_tanh(A B + bias[col]) + residual, from the arguments named bias and residual)",
           "llvm::cl::Hidden">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect", "mlir::math::MathDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::NVVM::NVVMDialect", "mlir::nvgpu::NVGPUDialect"];
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

#endif // MLPIPE_MATMUL_PASSES
