//===- attention/Passes.td ---------------------------------------------===//
//
// mlpipe's attention passes: outline: attention as one fused kernel. Each with its summary, a
// before/after description, its options and the dialects it creates.
// mlir-tblgen turns this file into attention/Passes.h.inc; each pass file
// includes its GEN_PASS_DEF_ section, and compiler/'s registration calls
// registerAttentionPasses() so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLPIPE_ATTENTION_PASSES
#define MLPIPE_ATTENTION_PASSES

include "mlir/Pass/PassBase.td"

def FusedAttentionPass : Pass<"mlpipe-fused-attention", "mlir::ModuleOp"> {
  let summary = "Fuse attention's scores matmul, softmax and values matmul into one online-softmax kernel (on tensor cores for 16-bit data)";
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

    With Q, K and V in bf16 or f16 on a chip with 16-bit mma.sync (sm_80
    on), a head size a multiple of 16 up to 128 and at least 16 query rows,
    the kernel puts both products on tensor cores instead, at every length
    (option `tensor-cores`): a warp per 16 query rows holding Q as mma
    fragments, K's tile in padded rows and V's as pairs of keys in shared
    memory, the scores' accumulator fragments reused as the probabilities'
    operand fragments:
    ```mlir
    gpu.func @attention_attention(%q: memref<2x40x64xbf16, ...>, ...)
        workgroup(%kt : memref<48x72xbf16, #gpu.address_space<workgroup>>,
                  %vp : memref<24x144xbf16, #gpu.address_space<workgroup>>) kernel {
      ... scf.for over key tiles:
        %s = nvvm.mma.sync A[%q0, %q1, %q2, %q3] B[%k0, %k1] C[%c0, %c1, %c2, %c3]
               {multiplicandAPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>, ...}
               : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
        ... prologue, gpu.shuffle xor 1, 2 (row max), math.exp, the same for P V ...
    }
    ```

    Few query rows against many keys (a decode step: one row per head
    against the KV cache, masked past a run-time position) would leave most
    SMs idle, so the keys are split over blocks: each writes its rows'
    partial max, sum and weighted values to a host temporary and counts
    itself done in its query tile's counter (a global of the kernel's
    module, zero at load; the writes released by a GPU-scope fence); the
    block that counts last combines the splits exactly into the output
    (each lane of the row scaling its splits once) and sets the counter back
    to zero:
    ```mlir
    memref.global "private" @finished_splits : memref<12xi32> = dense<0>
    %part = memref.alloc() {alignment = 16 : i64} : memref<12x1x32x68xf32>
    gpu.launch_func @attn_attention::@attn_attention blocks in (%c384, %c1, %c1) ...
        args(%q_view : ..., %kv : ..., %v_view : ..., %part : memref<12x1x32x68xf32>, %mask : ...,
             %o : memref<12x1x64xf32>)
    memref.dealloc %part : memref<12x1x32x68xf32>
    // in the kernel, after the loop over tiles:
    vector.store %acc, %part[%head, %row, %split, %d] ...
    gpu.barrier
    scf.if %thread_0 {
      llvm.fence syncscope("device") release
      %done = memref.atomic_rmw addi %c1_i32, %counters[%tile] : (i32, memref<12xi32>) -> i32
      scf.if %last { llvm.fence syncscope("device") acquire; memref.atomic_rmw assign %c0_i32, %counters[%tile] ... }
      memref.store %last_i32, %flag[%c0, %c0] : memref<1x1xi32, #gpu.address_space<workgroup>>
    }
    gpu.barrier
    scf.if %is_last { ... the splits' partials combined into %o ... }
    ```

    Where that mask is select(key > p, -1e10, 0) with p loaded from an input
    of the host function (computed in the prologue, or by a fusion writing
    the mask), the kernel takes p too and reads only the tiles of keys up
    to p's: a split past it writes nothing and does not count (the combine
    neither reads nor weighs it), and where p falls in the first split, that
    split's block writes the output itself.
    ```mlir
    %p = memref.load %position[] : memref<i32>
    %tiles = arith.minsi %split_end, %tiles_up_to_p : index
    scf.for %t = %split_begin to %tiles step %c1 iter_args(...) { ... }
    ```
    A mask a fusion writes so (one for every layer) is not read either: the
    kernel computes its elements from p as that fusion's op does, and the
    fusion's call goes with its buffer once no other call reads the mask:
    ```mlir
    // before
    call @attn_scores_loop(%position, %mask) : (memref<i32>, memref<1024xf32>) -> ()
    ... the three calls, the softmax reading %mask ...
    // after: no mask, no call writing it
    gpu.launch_func @attn_attention::@attn_attention ... args(..., %o : ..., %position : memref<i32>)
    // in the kernel, at each key:
    %masked = arith.cmpi sgt, %key, %p_index : index
    %penalty = arith.select %masked, %cst_minus_1e10, %cst_0 : f32
    ```

    A decode step's keys and values reach the cache through a host copy
    just before the attention (at a key computed from the position). Where
    that copy writes exactly row `key` of K and V for every head, and
    nothing between it and the attention touches the cache or the copy's
    source, the kernel does the copy: it is
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

    On a chip with programmatic dependent launch a decode step's kernel is
    resident while the kernel before it runs: each split first prefetches
    into L2 the cache lines of its first tiles up to p's (the cache was
    written by earlier steps; p is a host input no kernel writes), then
    waits for that kernel. A split of several tiles (batched decoding)
    prefetches only where asked (prefetched-tiles=N): its first N tiles,
    then the tile N ahead as it reads one.
    ```mlir
    %tiles = ... tiles up to p's, read before the wait ...
    scf.for ... { nvvm.prefetch level = L2, %k_row_line ... nvvm.prefetch level = L2, %v_row_line }
    nvvm.griddepcontrol wait
    ... the query, the step's key and value, the tiles ...
    ```

    A batched decode step (B sequences, sequence b's H heads the rows b * H
    ... b * H + H - 1 of the products, each at its own position) takes the
    same kernels, with a position per row: the mask is read as [B * H, 1,
    keys] from a fusion computing select(key > positions[b], big, 0) over
    [B, H, 1, keys], so row r reads the keys up to positions[r / H] (its
    splits past that are skipped, as above). The queries, which the scores fusion
    copies out of c_attn's output to read them as [B * H, 1, D], are read
    in place as [B, H, 1, D]; and the B copies of the sequences' new keys
    and values into the cache, each at its sequence's position, become
    the kernel's: the block of row r whose split holds its sequence's key
    writes that row.
    ```mlir
    linalg.copy ins(%new_kv_0 : memref<2x2x1x32xf32, ...>) outs(%cache_row_0 : ...)   // at positions[0]
    linalg.copy ins(%new_kv_1 : memref<2x2x1x32xf32, ...>) outs(%cache_row_1 : ...)   // at positions[1]
    call @attn_scores_loop(%positions, %mask) : (memref<2xi32>, memref<2x2x1x1024xf32>) -> ()
    ... the three calls, the softmax reading %mask as memref<4x1x1024xf32> ...
    ```
    becomes
    ```mlir
    %q = memref.expand_shape %q_view [[0], [1, 2, 3]] output_shape [2, 2, 1, 32] : ...
    gpu.launch_func @attn_attention::@attn_attention blocks in (%c128, %c1, %c1) ...
        args(%q : memref<2x2x1x32xf32, strided<[192, 32, 32, 1]>>, %kv : ..., %v_view : ..., %part : ...,
             %mask : memref<2x2x1x1024xf32>, %o : memref<4x1x32xf32>, %positions : memref<2xi32>,
             %qkv : memref<2x192xf32>)
    ```

    The heads' merge after the attention (a loop fusion reading the output
    [H, T, D] at (t, c) -> (c floordiv D, t, c mod D) into [T, H * D],
    rounded to its type or not) reads it and nothing else does: the kernel
    writes the merged buffer itself, through a view, rounding as the merge
    did (the same bits), and the merge's kernel and the [H, T, D] buffer
    go (fold-heads-merge, on by default):
    ```mlir
    %o = memref.alloc() : memref<12x16x64xf32>
    call @attn_values_matmul(%qkv, %probs, %o) : (...) -> ()
    %merged = memref.alloc() : memref<16x768xbf16>
    call @attn_merge_heads_loop(%o, %merged) : (memref<12x16x64xf32>, memref<16x768xbf16>) -> ()
    ```
    becomes
    ```mlir
    %merged = memref.alloc() : memref<16x768xbf16>
    %e = memref.expand_shape %merged [[0], [1, 2]] output_shape [16, 12, 64] : ...
    %view = memref.transpose %e (d0, d1, d2) -> (d1, d0, d2)
        : memref<16x12x64xbf16> to memref<12x16x64xbf16, strided<[64, 768, 1]>>
    gpu.launch_func @attn_attention::@attn_attention ... args(..., %view : memref<12x16x64xbf16, strided<[64, 768, 1]>>)
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "The GPU the launch heuristics read the device description of">,
    Option<"foldHeadsMerge", "fold-heads-merge", "bool", /*default=*/"true",
           "The fused kernel writes its output [H, T, D] straight into the heads' merge [T, H * D] after it "
           "(as it is or rounded to its type), through a view, and the merge's kernel goes (false: kept)">,
    Option<"maxKeys", "max-keys", "int64_t", /*default=*/"-1",
           "Fuse attentions whose queries and keys both number more than this only when 0 (-1: the heuristic's limit, kFusedAttentionMaxKeys); few queries against many keys (decode) always fuse">,
    Option<"allowTensorCores", "tensor-cores", "bool", /*default=*/"true",
           "Put 16-bit attention on tensor cores where tensorCoresFit says the kernel fits (then fused at every length)">,
    Option<"tcRowsPerBlock", "tc-rows-per-block", "int64_t", /*default=*/"0",
           "On tensor cores: query rows per block, a multiple of 16 (0: the heuristic's, kTensorCoreRowsPerBlock halved while SMs would idle)">,
    Option<"tcKeyGroups", "tc-key-groups", "int64_t", /*default=*/"0",
           "On tensor cores: groups of warps a block's key tiles are dealt to, a power of two (0: the heuristic's, kTensorCoreWarpsPerSm)">,
    Option<"tcKeysPerTile", "tc-keys-per-tile", "int64_t", /*default=*/"0",
           "On tensor cores: keys per K and V tile, a multiple of 16 (0: the heuristic's)">,
    Option<"tcBlocksPerSm", "tc-blocks-per-sm", "int64_t", /*default=*/"0",
           "On tensor cores: blocks that must fit an SM at once, ptxas bounding the registers to match (0: ptxas's choice)">,
    Option<"asyncCopy", "async-copy", "bool", /*default=*/"true",
           "On tensor cores: copy K and V tiles into shared stages by cp.async (where the stages fit shared memory and K and V are read as vectors), the next tiles loading while the current ones are computed; false: through registers">,
    Option<"tcDynamicShared", "tc-dynamic-shared", "bool", /*default=*/"false",
           "On tensor cores with async-copy: the shared buffers in dynamic shared memory, so that the stages may take up to the device's opt-in limit (not only the 48 KiB of static shared memory) before tiles are made smaller; without it, they go there where the heuristic's tiles (no tc-keys-per-tile or tc-key-groups given) do not fit the static 48 KiB">,
    Option<"tcSnakeOrder", "tc-snake-order", "int64_t", /*default=*/"-1",
           "On tensor cores, causal: 1 deals the query tiles, longest first, in rounds of the SM count with every other round reversed; 0 longest first throughout (-1: kSnakeCausalTiles, off)">,
    Option<"tcStages", "tc-stages", "int64_t", /*default=*/"0",
           "On tensor cores with async-copy: shared stages of K and V tiles, 2 or more (0: the heuristic's, kAsyncStages)">,
    Option<"tcScoresAhead", "tc-scores-ahead", "bool", /*default=*/"false",
           "On tensor cores with async-copy: each key tile's Q K^T issued a tile ahead, before the softmax of the tile before, so that the two overlap (tc-stages of at least 3; 4 unless given)">,
    Option<"batchedMinSplits", "batched-min-splits", "int64_t", /*default=*/"0",
           "A batched decode step: the fewest key splits a row, where the keys hold that many tiles (0: the heuristic's, kBatchedStepMinSplits; 1: as the blocks alone ask, the step falling back to the generic attention where that is one)">,
    Option<"prefetchedTiles", "prefetched-tiles", "int64_t", /*default=*/"0",
           "A decode step's kernel on a chip with programmatic launch: tiles of its split's cache prefetched into L2 before its wait, and that many ahead of the tile it reads (0: the heuristic's, a split of one tile only unless kPrefetchSeveralTileSplits; -1: none)">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect", "mlir::scf::SCFDialect", "mlir::arith::ArithDialect",
                           "mlir::memref::MemRefDialect", "mlir::vector::VectorDialect", "mlir::math::MathDialect",
                           "mlir::LLVM::LLVMDialect", "mlir::NVVM::NVVMDialect", "mlir::nvgpu::NVGPUDialect"];
}

#endif // MLPIPE_ATTENTION_PASSES
