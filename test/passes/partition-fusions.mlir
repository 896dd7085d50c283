// RUN: mlpipe-opt %s -split-input-file --mlpipe-partition-fusions | FileCheck %s

// XLA's example: log feeds both a transpose and an add, which read it
// through different indexings. log is its own fusion, computed once; the
// transpose and the add are fusions of their own.
// CHECK-LABEL: func.func private @log_loop(
// CHECK-SAME: attributes {mlpipe.fusion = "loop"}
// CHECK: math.log
// CHECK-LABEL: func.func private @flip_transpose(
// CHECK-SAME: attributes {mlpipe.fusion = "transpose"}
// CHECK-NOT: math.log
// CHECK-LABEL: func.func private @sum_loop(
// CHECK-NOT: math.log
// CHECK-LABEL: func.func @log_transpose_add
// CHECK: %[[LOG:.*]] = call @log_loop(%arg0)
// CHECK: call @flip_transpose(%[[LOG]])
// CHECK: call @sum_loop(%[[LOG]]
// CHECK-NOT: linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @log_transpose_add(%x: tensor<8x16xf32>) -> (tensor<16x8xf32>, tensor<8x16xf32>) {
  %e = tensor.empty() : tensor<8x16xf32>
  %log = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %l = math.log %a : f32
    linalg.yield %l : f32
  } -> tensor<8x16xf32> loc("log")
  %et = tensor.empty() : tensor<16x8xf32>
  %t = linalg.transpose ins(%log : tensor<8x16xf32>) outs(%et : tensor<16x8xf32>) permutation = [1, 0] loc("flip")
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%log, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32> loc("sum")
  return %t, %sum : tensor<16x8xf32>, tensor<8x16xf32>
}

// -----

// Softmax: two reductions over the same rows and their elementwise ops
// are one row_reduction fusion; exp, read by the sum and the divide through
// the same indexing, is in it once.
// CHECK-LABEL: func.func private @softmax_row_reduction(
// CHECK-SAME: attributes {mlpipe.fusion = "row_reduction"}
// CHECK: linalg.reduce
// CHECK: math.exp
// CHECK: linalg.reduce
// CHECK: arith.divf
// CHECK-LABEL: func.func @softmax
// CHECK-NEXT: call @softmax_row_reduction
// CHECK-NEXT: return
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%f1 : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %m = arith.maximumf %in, %acc : f32
      linalg.yield %m : f32
    } loc("softmax")
  %e2 = tensor.empty() : tensor<4x8xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %max : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32> loc("softmax")
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<4x8xf32>) outs(%f2 : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    } loc("softmax")
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %v = arith.divf %a, %s : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32> loc("softmax")
  return %y : tensor<4x8xf32>
}

// -----

// A linear layer: the matmul takes its bias add as an epilogue, and the
// transpose of its weight (read only by it) as a view; the layer's name
// comes from the ops' location, with the layer index dropped.
// CHECK-LABEL: func.func private @mlp_c_fc_matmul(
// CHECK-SAME: %{{.*}}: tensor<16x8xf32>, %{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<16xf32>
// CHECK-SAME: attributes {mlpipe.fusion = "matmul"}
// CHECK: linalg.transpose
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK: arith.addf
// CHECK-LABEL: func.func @linear
// CHECK-NEXT: call @mlp_c_fc_matmul
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<8x16xf32>
  %wT = linalg.transpose ins(%w : tensor<16x8xf32>) outs(%et : tensor<8x16xf32>) permutation = [1, 0] loc("h.3.mlp.c_fc")
  %e = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %mm = linalg.matmul ins(%x, %wT : tensor<4x8xf32>, tensor<8x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32> loc("h.3.mlp.c_fc")
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32> loc("h.3.mlp.c_fc")
  return %y : tensor<4x16xf32>
}

// -----

// A column reduction whose scaled sums feed a matmul: the matmul takes no
// producers, so the scale stays with the reduction as its epilogue.
// CHECK-LABEL: func.func private @fusion_column_reduction(
// CHECK-SAME: attributes {mlpipe.fusion = "column_reduction"}
// CHECK: linalg.reduce
// CHECK: arith.mulf
// CHECK-LABEL: func.func private @fusion_matmul(
// CHECK-SAME: attributes {mlpipe.fusion = "matmul"}
// CHECK-NOT: linalg.reduce
// CHECK: linalg.matmul
#vec = affine_map<(d0) -> (d0)>
func.func @fusion(%x: tensor<32x8xf32>, %w: tensor<1x8xf32>) -> tensor<1x1xf32> {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %sums = linalg.reduce ins(%x : tensor<32x8xf32>) outs(%f : tensor<8xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %scaled = linalg.generic {indexing_maps = [#vec, #vec], iterator_types = ["parallel"]}
      ins(%sums : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %half : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %column = tensor.expand_shape %scaled [[0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
  %e2 = tensor.empty() : tensor<1x1xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x1xf32>) -> tensor<1x1xf32>
  %y = linalg.matmul ins(%w, %column : tensor<1x8xf32>, tensor<8x1xf32>) outs(%z : tensor<1x1xf32>) -> tensor<1x1xf32>
  return %y : tensor<1x1xf32>
}

// -----

// Row sums broadcast into a value of another shape: the row reduction
// emitter computes only rows or one value per row, so the reduction is a
// fusion of its own and the broadcast another.
// CHECK-LABEL: func.func private @spread_row_reduction(
// CHECK: linalg.reduce
// CHECK-NOT: linalg.generic
// CHECK-LABEL: func.func private @spread_loop(
// CHECK: linalg.generic
#rows = affine_map<(d0, d1) -> (d1)>
#out = affine_map<(d0, d1) -> (d0, d1)>
func.func @spread(%x: tensor<4x8xf32>) -> tensor<2x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %sums = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    } loc("spread")
  %e2 = tensor.empty() : tensor<2x4xf32>
  %y = linalg.generic {indexing_maps = [#rows, #out], iterator_types = ["parallel", "parallel"]}
      ins(%sums : tensor<4xf32>) outs(%e2 : tensor<2x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.negf %a : f32
    linalg.yield %v : f32
  } -> tensor<2x4xf32> loc("spread")
  return %y : tensor<2x4xf32>
}

// -----

// A loop (scf.while): each region's block is partitioned alone, so the
// loop stays and its fusions are called inside it. The condition's compare
// reaches only tensor.extract, which leaves the block, so it is a fusion of
// its own; the body's two elementwise ops are one. A constant hoisted out
// of the loop (canonicalization puts them at the function's start) is
// copied into the fusion that reads it, not passed to it.
// CHECK-LABEL: func.func private @small_loop(
// CHECK-SAME: %{{.*}}: tensor<f32>) -> tensor<i1>
// CHECK: arith.cmpf olt
// CHECK-LABEL: func.func private @step_loop(
// CHECK-SAME: %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK: arith.constant 5.000000e-01 : f32
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK-LABEL: func.func @halve_loop
// CHECK: scf.while
// CHECK: %[[FLAG:.*]] = func.call @small_loop(
// CHECK: tensor.extract %[[FLAG]][]
// CHECK: scf.condition
// CHECK: } do {
// CHECK: %[[NEXT:.*]] = func.call @step_loop(
// CHECK: scf.yield %[[NEXT]]
// CHECK-NOT: linalg.
#s = affine_map<() -> ()>
#v = affine_map<(d0) -> (d0)>
func.func @halve_loop(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %w:2 = scf.while (%a = %x, %b = %s) : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
    %e = tensor.empty() : tensor<i1>
    %small = linalg.generic {indexing_maps = [#s, #s], iterator_types = []}
        ins(%b : tensor<f32>) outs(%e : tensor<i1>) {
    ^bb0(%in: f32, %o: i1):
      %c = arith.cmpf olt, %in, %one : f32
      linalg.yield %c : i1
    } -> tensor<i1> loc("small")
    %flag = tensor.extract %small[] : tensor<i1>
    scf.condition(%flag) %a, %b : tensor<4xf32>, tensor<f32>
  } do {
  ^bb0(%a: tensor<4xf32>, %b: tensor<f32>):
    %e = tensor.empty() : tensor<4xf32>
    %m = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
        ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %o: f32):
      %h = arith.mulf %in, %half : f32
      linalg.yield %h : f32
    } -> tensor<4xf32> loc("step")
    %n = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
        ins(%m : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %o: f32):
      %p = arith.addf %in, %one : f32
      linalg.yield %p : f32
    } -> tensor<4xf32> loc("step")
    scf.yield %n, %b : tensor<4xf32>, tensor<f32>
  }
  return %w#0 : tensor<4xf32>
}

// -----

// A decode step's embedding (one row, a gather of the function's inputs)
// read by the layer norm before c_attn and by c_proj's residual add: it is
// computed in both fusions (kDuplicatedProducerMaxElements), not in a
// kernel of its own.
// CHECK-LABEL: func.func private @ln_row_reduction(
// CHECK-SAME: %arg0: tensor<4x8xf32>, %arg1: tensor<1xi32>
// CHECK: tensor.extract %arg0
// CHECK: linalg.reduce
// CHECK-LABEL: func.func private @proj_matmul(
// CHECK: tensor.extract
// CHECK: linalg.matmul
// CHECK: arith.addf
// CHECK-LABEL: func.func @embed_twice
// CHECK-NOT: embed
// CHECK: %[[LN:.*]] = call @ln_row_reduction(%arg0, %arg1)
// CHECK: call @proj_matmul(%arg0, %arg1, %[[LN]], %arg2)
// CHECK-NOT: linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#first = affine_map<(d0, d1) -> (0)>
func.func @embed_twice(%table: tensor<4x8xf32>, %ids: tensor<1xi32>, %w: tensor<8x8xf32>) -> tensor<1x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8xf32>
  %x = linalg.generic {indexing_maps = [#first, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<1xi32>) outs(%e : tensor<1x8xf32>) {
  ^bb0(%id: i32, %o: f32):
    %c = linalg.index 1 : index
    %r = arith.index_cast %id : i32 to index
    %v = tensor.extract %table[%r, %c] : tensor<4x8xf32>
    linalg.yield %v : f32
  } -> tensor<1x8xf32> loc("embed")
  %e1 = tensor.empty() : tensor<1xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1xf32>) -> tensor<1xf32>
  %sum = linalg.reduce ins(%x : tensor<1x8xf32>) outs(%f1 : tensor<1xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    } loc("ln")
  %centered = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<1x8xf32>, tensor<1xf32>) outs(%e : tensor<1x8xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  } -> tensor<1x8xf32> loc("ln")
  %f2 = linalg.fill ins(%zero : f32) outs(%e : tensor<1x8xf32>) -> tensor<1x8xf32>
  %p = linalg.matmul ins(%centered, %w : tensor<1x8xf32>, tensor<8x8xf32>) outs(%f2 : tensor<1x8xf32>) -> tensor<1x8xf32> loc("proj")
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %x : tensor<1x8xf32>, tensor<1x8xf32>) outs(%e : tensor<1x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x8xf32> loc("proj")
  return %y : tensor<1x8xf32>
}

// -----

// The same for 600 rows (4800 elements, more than
// kDuplicatedProducerMaxElements): the embedding is a fusion of its own,
// computed once.
// CHECK-LABEL: func.func private @embed_loop(
// CHECK-LABEL: func.func private @ln_row_reduction(
// CHECK-NOT: tensor.extract
// CHECK-LABEL: func.func private @proj_matmul(
// CHECK-NOT: tensor.extract
// CHECK-LABEL: func.func @embed_once
// CHECK: %[[X:.*]] = call @embed_loop(
// CHECK: call @ln_row_reduction(%[[X]])
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @embed_once(%table: tensor<4x8xf32>, %ids: tensor<600xi32>, %w: tensor<8x8xf32>) -> tensor<600x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<600x8xf32>
  %x = linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<600xi32>) outs(%e : tensor<600x8xf32>) {
  ^bb0(%id: i32, %o: f32):
    %c = linalg.index 1 : index
    %r = arith.index_cast %id : i32 to index
    %v = tensor.extract %table[%r, %c] : tensor<4x8xf32>
    linalg.yield %v : f32
  } -> tensor<600x8xf32> loc("embed")
  %e1 = tensor.empty() : tensor<600xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<600xf32>) -> tensor<600xf32>
  %sum = linalg.reduce ins(%x : tensor<600x8xf32>) outs(%f1 : tensor<600xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    } loc("ln")
  %centered = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : tensor<600x8xf32>, tensor<600xf32>) outs(%e : tensor<600x8xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    linalg.yield %d : f32
  } -> tensor<600x8xf32> loc("ln")
  %f2 = linalg.fill ins(%zero : f32) outs(%e : tensor<600x8xf32>) -> tensor<600x8xf32>
  %p = linalg.matmul ins(%centered, %w : tensor<600x8xf32>, tensor<8x8xf32>) outs(%f2 : tensor<600x8xf32>) -> tensor<600x8xf32> loc("proj")
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %x : tensor<600x8xf32>, tensor<600x8xf32>) outs(%e : tensor<600x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<600x8xf32> loc("proj")
  return %y : tensor<600x8xf32>
}
