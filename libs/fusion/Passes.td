//===- fusion/Passes.td ---------------------------------------------===//
//
// mlpipe's fusion passes: fuse: partitioning linalg on tensors into fusions around one hero. Each with its summary, a
// before/after description, its options and the dialects it creates.
// mlir-tblgen turns this file into fusion/Passes.h.inc; each pass file
// includes its GEN_PASS_DEF_ section, and compiler/'s registration calls
// registerFusionPasses() so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
//
//===----------------------------------------------------------------------===//

#ifndef MLPIPE_FUSION_PASSES
#define MLPIPE_FUSION_PASSES

include "mlir/Pass/PassBase.td"

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
    variance, scale and shift; an argmax, a greedy token: the maximum in
    f32, then the least position holding it in i32); a matmul takes an elementwise epilogue that
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

    One exception computes an element twice: a small elementwise op of the
    function's inputs alone (at most kDuplicatedProducerMaxElements, 4096:
    a decode step's embedding, a gather of one row) read by a matmul
    fusion's epilogue and by other row reduction or matmul fusions goes
    into each of them, instead of being a kernel (a link in a decode
    step's chain of kernels) of its own:
    ```mlir
    %x = linalg.generic ins(%ids) { tensor.extract %wte[%id, %c] }    // the embedding
    %ln = ... layer norm of %x ...                                     // row_reduction
    %y = ... %x + matmul(%ln, %w) ...                                  // matmul + residual add
    ```
    becomes `@ln_row_reduction(%wte, %ids, ...)` and
    `@proj_matmul(%wte, %ids, %ln, %w, ...)`, each gathering the row itself.

    A loop (`scf.while`, an HLO `while` run at run time) stays: each of its
    regions' blocks is partitioned on its own, inner loops first, so the
    fusion calls land inside the loop and no fusion spans a region's
    boundary (a value the region's terminator or a nested loop reads leaves
    the block). A constant canonicalization hoisted out of the loop is
    copied into the fusions that read it.

    ```mlir
    %w = scf.while (%a = %x) : (tensor<4xf32>) -> tensor<4xf32> {
      %small = linalg.generic ... ins(%a ...) { max(|a|) < 1 }
      %flag = tensor.extract %small[] : tensor<i1>
      scf.condition(%flag) %a : tensor<4xf32>
    } do {
    ^bb0(%a: tensor<4xf32>):
      %h = linalg.generic ... ins(%a ...) { a * 0.5 }
      %n = linalg.generic ... ins(%h ...) { h + 1 }
      scf.yield %n : tensor<4xf32>
    }
    ```
    becomes
    ```mlir
    %w = scf.while (%a = %x) : (tensor<4xf32>) -> tensor<4xf32> {
      %small = func.call @small_row_reduction(%a) : (tensor<4xf32>) -> tensor<i1>
      %flag = tensor.extract %small[] : tensor<i1>
      scf.condition(%flag) %a : tensor<4xf32>
    } do {
    ^bb0(%a: tensor<4xf32>):
      %n = func.call @step_loop(%a) : (tensor<4xf32>) -> tensor<4xf32>
      scf.yield %n : tensor<4xf32>
    }
    ```

    Under `--debug-only=mlpipe-partitioner` it prints why each fusion
    starts where it does.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def ElideStorageRoundingsPass : Pass<"mlpipe-elide-storage-roundings"> {
  let summary = "Keep f32 between fused elementwise ops instead of rounding to 16 bits";
  let description = [{
    A 16-bit program (bf16 or f16 storage) computes every op in f32 and the
    front end rounds each op's result to its storage type, marking that
    rounding `mlpipe.storage_rounding` (an HLO `convert` is not marked: it
    rounds because the program says so). Once elementwise fusion has put a
    producer's body into its consumer's, such a rounding is followed by the
    consumer's widening back to f32; this pass drops the pair, so a fused
    chain (GELU's eight ops, a bias add after a matmul) rounds its result
    once, as the frameworks compute 16-bit models (XLA's excess precision).
    Values stored between kernels keep their storage type.

    ```mlir
    %y = linalg.generic ... ins(%x : tensor<8xbf16>) outs(%e : tensor<8xbf16>) {
    ^bb0(%in: bf16, %out: bf16):
      %0 = arith.extf %in : bf16 to f32
      %1 = math.tanh %0 : f32
      %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
      %3 = arith.extf %2 : bf16 to f32
      %4 = arith.mulf %3, %0 : f32
      %5 = arith.truncf %4 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %5 : bf16
    }
    ```
    becomes
    ```mlir
    ^bb0(%in: bf16, %out: bf16):
      %0 = arith.extf %in : bf16 to f32
      %1 = math.tanh %0 : f32
      %4 = arith.mulf %1, %0 : f32
      %5 = arith.truncf %4 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %5 : bf16
    ```

    Under `--debug-only=mlpipe-storage-roundings` it prints how many
    roundings it dropped in each function.
  }];
}

#endif // MLPIPE_FUSION_PASSES
