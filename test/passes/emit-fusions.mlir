// RUN: mlpipe-opt %s -split-input-file --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

// The loop emitter: the flattened output, consecutive threads on
// consecutive groups of four elements, 128-bit loads and stores through a
// flat view of each argument; the bias row is read through its own
// indexing (a broadcast), vectorised too.
// CHECK-LABEL: func.func @bias_gelu(
// CHECK: gpu.launch_func @bias_gelu_loop_module::@bias_gelu_loop blocks in (%{{.*}}) threads in (%c256, %c1, %c1)
// CHECK-SAME: args(%arg0 : memref<64x256xf32>, %arg1 : memref<256xf32>, %arg2 : memref<64x256xf32>)
// CHECK-NOT: call @
// CHECK: gpu.module @bias_gelu_loop_module
// CHECK: gpu.func @bias_gelu_loop(%[[X:.*]]: memref<64x256xf32>, %[[B:.*]]: memref<256xf32>, %[[Y:.*]]: memref<64x256xf32>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-SAME: mlpipe.bytes = 132096
// CHECK-DAG: %[[XFLAT:.*]] = memref.collapse_shape %[[X]] {{\[}}[0, 1]] : memref<64x256xf32> into memref<16384xf32>
// CHECK-DAG: %[[YFLAT:.*]] = memref.collapse_shape %[[Y]]
// CHECK-DAG: gpu.thread_id x
// CHECK-DAG: gpu.block_id x
// CHECK: vector.load %[[XFLAT]][%{{.*}}] {alignment = 16 : i64} : memref<16384xf32>, vector<4xf32>
// CHECK: vector.load %[[B]][%{{.*}}] {alignment = 16 : i64} : memref<256xf32>, vector<4xf32>
// CHECK: math.tanh
// CHECK: vector.store %{{.*}}, %[[YFLAT]][%{{.*}}] {alignment = 16 : i64} : memref<16384xf32>, vector<4xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @bias_gelu_loop(%x: memref<64x256xf32>, %b: memref<256xf32>, %y: memref<64x256xf32>)
      attributes {mlpipe.fusion = "loop"} {
    %half = arith.constant 0.5 : f32
    linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x, %b : memref<64x256xf32>, memref<256xf32>) outs(%y : memref<64x256xf32>) {
    ^bb0(%a: f32, %c: f32, %o: f32):
      %s = arith.addf %a, %c : f32
      %t = math.tanh %s : f32
      %v = arith.mulf %t, %half : f32
      linalg.yield %v : f32
    }
    return
  }
  func.func @bias_gelu(%x: memref<64x256xf32>, %b: memref<256xf32>, %y: memref<64x256xf32>) {
    call @bias_gelu_loop(%x, %b, %y) : (memref<64x256xf32>, memref<256xf32>, memref<64x256xf32>) -> ()
    return
  }
}

// -----

// An innermost extent of 3 cannot hold a group of four: scalar accesses,
// and a bounded loop for the groups the grid does not cover evenly.
// CHECK-LABEL: gpu.func @odd_loop(
// CHECK-NOT: vector.load
// CHECK: scf.for
// CHECK: memref.load
// CHECK: memref.store
#id = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @odd_loop(%x: memref<7x3xf32>, %y: memref<7x3xf32>) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<7x3xf32>) outs(%y : memref<7x3xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.negf %a : f32
      linalg.yield %v : f32
    }
    return
  }
  func.func @odd(%x: memref<7x3xf32>, %y: memref<7x3xf32>) {
    call @odd_loop(%x, %y) : (memref<7x3xf32>, memref<7x3xf32>) -> ()
    return
  }
}

// -----

// Softmax over rows of 1024: one kernel, a warp per row, the row in
// registers; each of the two reductions is a butterfly of xor shuffles.
// The row is loaded once: eight 128-bit loads per lane, no more.
// CHECK-LABEL: func.func @softmax(
// CHECK-COUNT-1: gpu.launch_func
// CHECK-LABEL: gpu.func @softmax_row_reduction(
// CHECK-COUNT-8: vector.load
// CHECK-NOT: vector.load
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c8_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c4_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32, %c32_i32 : f32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32, %c32_i32 : f32
// CHECK: math.exp
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32,
// CHECK: arith.divf
// CHECK: vector.store
// CHECK-NOT: gpu.barrier
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
module {
  func.func private @softmax_row_reduction(%x: memref<8x1024xf32>, %y: memref<8x1024xf32>)
      attributes {mlpipe.fusion = "row_reduction"} {
    %zero = arith.constant 0.0 : f32
    %ninf = arith.constant 0xFF800000 : f32
    %m = memref.alloc() : memref<8xf32>
    linalg.fill ins(%ninf : f32) outs(%m : memref<8xf32>)
    linalg.reduce ins(%x : memref<8x1024xf32>) outs(%m : memref<8xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %r = arith.maximumf %in, %acc : f32
        linalg.yield %r : f32
      }
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x, %m : memref<8x1024xf32>, memref<8xf32>) outs(%y : memref<8x1024xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %d = arith.subf %a, %b : f32
      %e = math.exp %d : f32
      linalg.yield %e : f32
    }
    linalg.fill ins(%zero : f32) outs(%m : memref<8xf32>)
    linalg.reduce ins(%y : memref<8x1024xf32>) outs(%m : memref<8xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
        ins(%y, %m : memref<8x1024xf32>, memref<8xf32>) outs(%y : memref<8x1024xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %v = arith.divf %a, %b : f32
      linalg.yield %v : f32
    }
    memref.dealloc %m : memref<8xf32>
    return
  }
  func.func @softmax(%x: memref<8x1024xf32>, %y: memref<8x1024xf32>) {
    call @softmax_row_reduction(%x, %y) : (memref<8x1024xf32>, memref<8x1024xf32>) -> ()
    return
  }
}

// -----

// Rows of 5000 need a block each: the warps' sums meet in workgroup memory
// behind a barrier.
// CHECK-LABEL: gpu.func @rowsum_row_reduction(
// CHECK-SAME: workgroup(%[[SLOTS:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[SLOTS]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SLOTS]]
module {
  func.func private @rowsum_row_reduction(%x: memref<3x5000xf32>, %y: memref<3xf32>)
      attributes {mlpipe.fusion = "row_reduction"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%y : memref<3xf32>)
    linalg.reduce ins(%x : memref<3x5000xf32>) outs(%y : memref<3xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    return
  }
  func.func @rowsum(%x: memref<3x5000xf32>, %y: memref<3xf32>) {
    call @rowsum_row_reduction(%x, %y) : (memref<3x5000xf32>, memref<3xf32>) -> ()
    return
  }
}

// -----

// Column sums: 32-column tiles, 8 rows at once, the partials meeting in an
// 8x33 workgroup tile; the rows are split over blocks, so a second kernel
// combines each column's partials from a workspace the host allocates.
// CHECK-LABEL: func.func @colsum(
// CHECK: %[[WS:.*]] = memref.alloc() : memref<1x{{[0-9]+}}x96xf32>
// CHECK: gpu.launch_func @colsum_column_reduction_partials_module::@colsum_column_reduction_partials {{.*}} threads in (%c32, %c8, %c1)
// CHECK: gpu.launch_func @colsum_column_reduction_module::@colsum_column_reduction
// CHECK: memref.dealloc %[[WS]]
// CHECK-LABEL: gpu.func @colsum_column_reduction_partials(
// CHECK-SAME: workgroup(%[[TILE:.*]] : memref<8x33xf32, #gpu.address_space<workgroup>>)
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %[[TILE]]
module {
  func.func private @colsum_column_reduction(%x: memref<20000x96xf32>, %y: memref<96xf32>)
      attributes {mlpipe.fusion = "column_reduction"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%y : memref<96xf32>)
    linalg.reduce ins(%x : memref<20000x96xf32>) outs(%y : memref<96xf32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    return
  }
  func.func @colsum(%x: memref<20000x96xf32>, %y: memref<96xf32>) {
    call @colsum_column_reduction(%x, %y) : (memref<20000x96xf32>, memref<96xf32>) -> ()
    return
  }
}

// -----

// XLA's example exp -> transpose -> abs: one kernel. exp is computed as the
// tile is read (along the input's rows), abs as it is written (along the
// output's rows), through a 32x33 workgroup tile behind one barrier.
// CHECK-LABEL: func.func @exp_transpose_abs(
// CHECK-COUNT-1: gpu.launch_func
// CHECK-LABEL: gpu.func @exp_transpose_abs_transpose(
// CHECK-SAME: workgroup(%[[TILE:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: known_block_size = array<i32: 32, 8, 1>
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK-COUNT-1: gpu.barrier
// CHECK: memref.load %[[TILE]]
// CHECK: math.absf
// CHECK: memref.store
#id = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @exp_transpose_abs_transpose(%x: memref<100x70xf32>, %y: memref<70x100xf32>)
      attributes {mlpipe.fusion = "transpose"} {
    %e = memref.alloc() : memref<100x70xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<100x70xf32>) outs(%e : memref<100x70xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.exp %a : f32
      linalg.yield %v : f32
    }
    %t = memref.alloc() : memref<70x100xf32>
    linalg.transpose ins(%e : memref<100x70xf32>) outs(%t : memref<70x100xf32>) permutation = [1, 0]
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%t : memref<70x100xf32>) outs(%y : memref<70x100xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.absf %a : f32
      linalg.yield %v : f32
    }
    memref.dealloc %e : memref<100x70xf32>
    memref.dealloc %t : memref<70x100xf32>
    return
  }
  func.func @exp_transpose_abs(%x: memref<100x70xf32>, %y: memref<70x100xf32>) {
    call @exp_transpose_abs_transpose(%x, %y) : (memref<100x70xf32>, memref<70x100xf32>) -> ()
    return
  }
}

// -----

// Two calls of structurally identical fusions share one kernel; the
// fusion functions are gone.
// CHECK-LABEL: func.func @twice(
// CHECK: gpu.launch_func @first_loop_module::@first_loop
// CHECK: gpu.launch_func @first_loop_module::@first_loop
// CHECK-NOT: func.func private
// CHECK-COUNT-1: gpu.module
// CHECK-NOT: gpu.module
#id = affine_map<(d0) -> (d0)>
module {
  func.func private @first_loop(%x: memref<64xf32>, %y: memref<64xf32>) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%x : memref<64xf32>) outs(%y : memref<64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.exp %a : f32
      linalg.yield %v : f32
    }
    return
  }
  func.func private @second_loop(%x: memref<64xf32>, %y: memref<64xf32>) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%x : memref<64xf32>) outs(%y : memref<64xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.exp %a : f32
      linalg.yield %v : f32
    }
    return
  }
  func.func @twice(%x: memref<64xf32>, %y: memref<64xf32>, %z: memref<64xf32>) {
    call @first_loop(%x, %y) : (memref<64xf32>, memref<64xf32>) -> ()
    call @second_loop(%y, %z) : (memref<64xf32>, memref<64xf32>) -> ()
    return
  }
}

// -----

// A fusion no emitter takes whole (a loop fusion holding a row reduction)
// is emitted op by op: the temporary it used lives on the host, between a
// row reduction kernel and a loop kernel.
// CHECK-LABEL: func.func @mixed(
// CHECK: %[[TMP:.*]] = memref.alloc() : memref<4xf32>
// CHECK: gpu.launch_func @mixed_loop_0_module::@mixed_loop_0
// CHECK: gpu.launch_func @mixed_loop_1_module::@mixed_loop_1
// CHECK: gpu.launch_func @mixed_loop_2_module::@mixed_loop_2
// CHECK: memref.dealloc %[[TMP]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
module {
  func.func private @mixed_loop(%x: memref<4x8xf32>, %y: memref<4x8xf32>) attributes {mlpipe.fusion = "loop"} {
    %zero = arith.constant 0.0 : f32
    %s = memref.alloc() : memref<4xf32>
    linalg.fill ins(%zero : f32) outs(%s : memref<4xf32>)
    linalg.reduce ins(%x : memref<4x8xf32>) outs(%s : memref<4xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x, %s : memref<4x8xf32>, memref<4xf32>) outs(%y : memref<4x8xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %v = arith.subf %a, %b : f32
      linalg.yield %v : f32
    }
    memref.dealloc %s : memref<4xf32>
    return
  }
  func.func @mixed(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    call @mixed_loop(%x, %y) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
    return
  }
}

// -----

// A KV-cache row written at a run-time position: the position is read in
// the kernel, and the slice's offset comes from the view's metadata.
// CHECK-LABEL: gpu.func @write_row_loop(
// CHECK: memref.load %{{.*}}[] : memref<i32>
// CHECK: memref.extract_strided_metadata
// CHECK: memref.store
module {
  func.func private @write_row_loop(%row: memref<2x1x4xf32>, %cache: memref<2x8x4xf32>, %pos: memref<i32>)
      attributes {mlpipe.fusion = "loop"} {
    %p = memref.load %pos[] : memref<i32>
    %i = arith.index_cast %p : i32 to index
    %view = memref.subview %cache[0, %i, 0] [2, 1, 4] [1, 1, 1] : memref<2x8x4xf32> to memref<2x1x4xf32, strided<[32, 4, 1], offset: ?>>
    linalg.copy ins(%row : memref<2x1x4xf32>) outs(%view : memref<2x1x4xf32, strided<[32, 4, 1], offset: ?>>)
    return
  }
  func.func @write_row(%row: memref<2x1x4xf32>, %cache: memref<2x8x4xf32>, %pos: memref<i32>) {
    call @write_row_loop(%row, %cache, %pos) : (memref<2x1x4xf32>, memref<2x8x4xf32>, memref<i32>) -> ()
    return
  }
}

// -----

// The matmul emitter: a matmul fusion (zero fill, matmul into a temporary,
// bias add and tanh into the output) is one launch of the generated kernel
// writing C, with the epilogue computed on each element in registers before
// it is stored: no zero-fill kernel, no pass over C afterwards. The kernel
// takes only the arguments the epilogue reads (the bias), not C again.
// CHECK-LABEL: func.func @dense(
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func @dense_matmul_module::@dense_matmul
// CHECK-SAME: args(%arg0 : memref<128x64xf32>, %arg1 : memref<64x256xf32>, %arg3 : memref<128x256xf32>, %arg2 : memref<256xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK: gpu.func @dense_matmul(
// CHECK: vector.fma
// CHECK: math.tanh
// CHECK-NOT: memref.atomic_rmw
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#col2 = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @dense_matmul(%a: memref<128x64xf32>, %w: memref<64x256xf32>, %y: memref<128x256xf32>, %bias: memref<256xf32>)
      attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.0 : f32
    %product = memref.alloc() : memref<128x256xf32>
    linalg.fill ins(%zero : f32) outs(%product : memref<128x256xf32>)
    linalg.matmul ins(%a, %w : memref<128x64xf32>, memref<64x256xf32>) outs(%product : memref<128x256xf32>)
    linalg.generic {indexing_maps = [#id2, #col2, #id2], iterator_types = ["parallel", "parallel"]}
        ins(%product, %bias : memref<128x256xf32>, memref<256xf32>) outs(%y : memref<128x256xf32>) {
    ^bb0(%p: f32, %b: f32, %out: f32):
      %s = arith.addf %p, %b : f32
      %t = math.tanh %s : f32
      linalg.yield %t : f32
    }
    memref.dealloc %product : memref<128x256xf32>
    return
  }
  func.func @dense(%a: memref<128x64xf32>, %w: memref<64x256xf32>, %bias: memref<256xf32>, %y: memref<128x256xf32>) {
    call @dense_matmul(%a, %w, %y, %bias) : (memref<128x64xf32>, memref<64x256xf32>, memref<128x256xf32>, memref<256xf32>) -> ()
    return
  }
}

// -----

// A one-row layer norm whose row only the GEMV after it reads: one launch
// of the skinny kernel, whose every block computes the layer norm (the
// shuffle trees of its two reductions, their warps combined through the
// prologue's slots) into its staged A before the product; no kernel of its
// own. Where another fusion reads the row too, or the GEMV writes the
// buffer the layer norm reads, it stays a kernel.
// CHECK-LABEL: func.func @layer
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.launch_func @proj_matmul_module::@proj_matmul {{.*}} args(%{{.*}} : memref<1x768xf32>, %arg3 : memref<768x96xf32>, %arg5 : memref<1x96xf32>, %arg4 : memref<96xf32>, %arg0 : memref<1x768xf32>, %arg1 : memref<768xf32>, %arg2 : memref<768xf32>, %{{.*}} : memref<1x768xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: return
// CHECK-LABEL: func.func @shared_row
// CHECK: gpu.launch_func @ln_row_reduction_module::@ln_row_reduction
// CHECK: gpu.launch_func @proj_matmul_1_module::@proj_matmul_1 {{.*}} args(%{{.*}} : memref<1x768xf32>, %arg3 : memref<768x96xf32>, %arg5 : memref<1x96xf32>, %arg4 : memref<96xf32>)
// CHECK: gpu.launch_func @copy_loop_module::@copy_loop
// CHECK-LABEL: func.func @overwrite
// CHECK: gpu.launch_func @ln_row_reduction_module::@ln_row_reduction
// CHECK: gpu.launch_func @square_matmul_module::@square_matmul
// CHECK: gpu.func @proj_matmul({{.*}}) workgroup({{.*}}, %[[SLOTS:.*]] : memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[SLOTS]]
// CHECK: gpu.barrier
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: vector.fma
#row = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @ln_row_reduction(%x: memref<1x768xf32>, %gamma: memref<768xf32>, %beta: memref<768xf32>, %y: memref<1x768xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %eps = arith.constant 1.0e-05 : f32
    %width = arith.constant 7.68e+02 : f32
    %zero = arith.constant 0.0 : f32
    %sum = memref.alloc() : memref<1xf32>
    %squares = memref.alloc() : memref<1xf32>
    linalg.fill ins(%zero : f32) outs(%squares : memref<1xf32>)
    linalg.fill ins(%zero : f32) outs(%sum : memref<1xf32>)
    linalg.reduce ins(%x : memref<1x768xf32>) outs(%sum : memref<1xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    %centered = memref.alloc() : memref<1x768xf32>
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : memref<1x768xf32>, memref<1xf32>) outs(%centered : memref<1x768xf32>) {
    ^bb0(%in: f32, %s: f32, %out: f32):
      %0 = arith.divf %s, %width : f32
      %1 = arith.subf %in, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%centered : memref<1x768xf32>) outs(%y : memref<1x768xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.mulf %in, %in : f32
      linalg.yield %0 : f32
    }
    linalg.reduce ins(%y : memref<1x768xf32>) outs(%squares : memref<1xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#id, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%centered, %squares, %gamma, %beta : memref<1x768xf32>, memref<1xf32>, memref<768xf32>, memref<768xf32>) outs(%y : memref<1x768xf32>) {
    ^bb0(%in: f32, %q: f32, %g: f32, %b: f32, %out: f32):
      %0 = arith.divf %q, %width : f32
      %1 = arith.addf %0, %eps : f32
      %2 = math.sqrt %1 : f32
      %3 = arith.divf %in, %2 : f32
      %4 = arith.mulf %3, %g : f32
      %5 = arith.addf %4, %b : f32
      linalg.yield %5 : f32
    }
    memref.dealloc %sum : memref<1xf32>
    memref.dealloc %squares : memref<1xf32>
    memref.dealloc %centered : memref<1x768xf32>
    return
  }
  func.func private @proj_matmul(%a: memref<1x768xf32>, %w: memref<768x96xf32>, %bias: memref<96xf32>, %c: memref<1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%c : memref<1x96xf32>)
    linalg.matmul ins(%a, %w : memref<1x768xf32>, memref<768x96xf32>) outs(%c : memref<1x96xf32>)
    linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%c, %bias : memref<1x96xf32>, memref<96xf32>) outs(%c : memref<1x96xf32>) {
    ^bb0(%in: f32, %b: f32, %out: f32):
      %0 = arith.addf %in, %b : f32
      linalg.yield %0 : f32
    }
    return
  }
  func.func @layer(%x: memref<1x768xf32> {mlpipe.name = "x"}, %gamma: memref<768xf32> {mlpipe.name = "gamma"}, %beta: memref<768xf32> {mlpipe.name = "beta"}, %w: memref<768x96xf32> {mlpipe.name = "w"}, %bias: memref<96xf32> {mlpipe.name = "bias"}, %out: memref<1x96xf32> {mlpipe.name = "y"}) {
    %normalized = memref.alloc() : memref<1x768xf32>
    call @ln_row_reduction(%x, %gamma, %beta, %normalized) : (memref<1x768xf32>, memref<768xf32>, memref<768xf32>, memref<1x768xf32>) -> ()
    call @proj_matmul(%normalized, %w, %bias, %out) : (memref<1x768xf32>, memref<768x96xf32>, memref<96xf32>, memref<1x96xf32>) -> ()
    memref.dealloc %normalized : memref<1x768xf32>
    return
  }
  func.func private @copy_loop(%a: memref<1x768xf32>, %b: memref<1x768xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : memref<1x768xf32>) outs(%b : memref<1x768xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @shared_row(%x: memref<1x768xf32>, %gamma: memref<768xf32>, %beta: memref<768xf32>, %w: memref<768x96xf32>, %bias: memref<96xf32>, %out: memref<1x96xf32>, %kept: memref<1x768xf32>) {
    %normalized = memref.alloc() : memref<1x768xf32>
    call @ln_row_reduction(%x, %gamma, %beta, %normalized) : (memref<1x768xf32>, memref<768xf32>, memref<768xf32>, memref<1x768xf32>) -> ()
    call @proj_matmul(%normalized, %w, %bias, %out) : (memref<1x768xf32>, memref<768x96xf32>, memref<96xf32>, memref<1x96xf32>) -> ()
    call @copy_loop(%normalized, %kept) : (memref<1x768xf32>, memref<1x768xf32>) -> ()
    memref.dealloc %normalized : memref<1x768xf32>
    return
  }
  func.func private @square_matmul(%a: memref<1x768xf32>, %w: memref<768x768xf32>, %c: memref<1x768xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%c : memref<1x768xf32>)
    linalg.matmul ins(%a, %w : memref<1x768xf32>, memref<768x768xf32>) outs(%c : memref<1x768xf32>)
    return
  }
  func.func @overwrite(%x: memref<1x768xf32>, %gamma: memref<768xf32>, %beta: memref<768xf32>, %w: memref<768x768xf32>) {
    %normalized = memref.alloc() : memref<1x768xf32>
    call @ln_row_reduction(%x, %gamma, %beta, %normalized) : (memref<1x768xf32>, memref<768xf32>, memref<768xf32>, memref<1x768xf32>) -> ()
    call @square_matmul(%normalized, %w, %x) : (memref<1x768xf32>, memref<768x768xf32>, memref<1x768xf32>) -> ()
    memref.dealloc %normalized : memref<1x768xf32>
    return
  }
}

// -----

// A layer norm of 1024 rows (a warp each: about 8 warps an SM) leaves the
// registers mostly unused: the weight and bias are loaded with the row, before
// the first shuffle. At 16384 rows (the register file is what bounds the
// warps an SM holds) they are loaded where the epilogue uses them, after
// both reductions.
// CHECK-LABEL: gpu.func @ln_small_row_reduction(
// CHECK-SAME: %[[X:[^:]*]]: memref<1024x768xf32>, %[[G:[^:]*]]: memref<768xf32>, %[[B:[^:]*]]: memref<768xf32>
// CHECK: vector.load %[[G]]
// CHECK: vector.load %[[B]]
// CHECK: gpu.shuffle xor
// CHECK-NOT: vector.load
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @ln_large_row_reduction(
// CHECK-SAME: %[[X:[^:]*]]: memref<16384x768xf32>, %[[G:[^:]*]]: memref<768xf32>, %[[B:[^:]*]]: memref<768xf32>
// CHECK-NOT: vector.load %[[G]]
// CHECK: gpu.shuffle xor
// CHECK: gpu.shuffle xor
// CHECK: vector.load %[[G]]
// CHECK: vector.load %[[B]]
// CHECK: gpu.return
#row = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @ln_small_row_reduction(%x: memref<1024x768xf32>, %gamma: memref<768xf32>, %beta: memref<768xf32>, %y: memref<1024x768xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %eps = arith.constant 1.0e-05 : f32
    %width = arith.constant 7.68e+02 : f32
    %zero = arith.constant 0.0 : f32
    %sum = memref.alloc() : memref<1024xf32>
    %squares = memref.alloc() : memref<1024xf32>
    linalg.fill ins(%zero : f32) outs(%squares : memref<1024xf32>)
    linalg.fill ins(%zero : f32) outs(%sum : memref<1024xf32>)
    linalg.reduce ins(%x : memref<1024x768xf32>) outs(%sum : memref<1024xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    %centered = memref.alloc() : memref<1024x768xf32>
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : memref<1024x768xf32>, memref<1024xf32>) outs(%centered : memref<1024x768xf32>) {
    ^bb0(%in: f32, %s: f32, %out: f32):
      %0 = arith.divf %s, %width : f32
      %1 = arith.subf %in, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%centered : memref<1024x768xf32>) outs(%y : memref<1024x768xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.mulf %in, %in : f32
      linalg.yield %0 : f32
    }
    linalg.reduce ins(%y : memref<1024x768xf32>) outs(%squares : memref<1024xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#id, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%centered, %squares, %gamma, %beta : memref<1024x768xf32>, memref<1024xf32>, memref<768xf32>, memref<768xf32>) outs(%y : memref<1024x768xf32>) {
    ^bb0(%in: f32, %q: f32, %g: f32, %b: f32, %out: f32):
      %0 = arith.divf %q, %width : f32
      %1 = arith.addf %0, %eps : f32
      %2 = math.sqrt %1 : f32
      %3 = arith.divf %in, %2 : f32
      %4 = arith.mulf %3, %g : f32
      %5 = arith.addf %4, %b : f32
      linalg.yield %5 : f32
    }
    memref.dealloc %sum : memref<1024xf32>
    memref.dealloc %squares : memref<1024xf32>
    memref.dealloc %centered : memref<1024x768xf32>
    return
  }
  func.func private @ln_large_row_reduction(%x: memref<16384x768xf32>, %gamma: memref<768xf32>, %beta: memref<768xf32>, %y: memref<16384x768xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %eps = arith.constant 1.0e-05 : f32
    %width = arith.constant 7.68e+02 : f32
    %zero = arith.constant 0.0 : f32
    %sum = memref.alloc() : memref<16384xf32>
    %squares = memref.alloc() : memref<16384xf32>
    linalg.fill ins(%zero : f32) outs(%squares : memref<16384xf32>)
    linalg.fill ins(%zero : f32) outs(%sum : memref<16384xf32>)
    linalg.reduce ins(%x : memref<16384x768xf32>) outs(%sum : memref<16384xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    %centered = memref.alloc() : memref<16384x768xf32>
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : memref<16384x768xf32>, memref<16384xf32>) outs(%centered : memref<16384x768xf32>) {
    ^bb0(%in: f32, %s: f32, %out: f32):
      %0 = arith.divf %s, %width : f32
      %1 = arith.subf %in, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%centered : memref<16384x768xf32>) outs(%y : memref<16384x768xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.mulf %in, %in : f32
      linalg.yield %0 : f32
    }
    linalg.reduce ins(%y : memref<16384x768xf32>) outs(%squares : memref<16384xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#id, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%centered, %squares, %gamma, %beta : memref<16384x768xf32>, memref<16384xf32>, memref<768xf32>, memref<768xf32>) outs(%y : memref<16384x768xf32>) {
    ^bb0(%in: f32, %q: f32, %g: f32, %b: f32, %out: f32):
      %0 = arith.divf %q, %width : f32
      %1 = arith.addf %0, %eps : f32
      %2 = math.sqrt %1 : f32
      %3 = arith.divf %in, %2 : f32
      %4 = arith.mulf %3, %g : f32
      %5 = arith.addf %4, %b : f32
      linalg.yield %5 : f32
    }
    memref.dealloc %sum : memref<16384xf32>
    memref.dealloc %squares : memref<16384xf32>
    memref.dealloc %centered : memref<16384x768xf32>
    return
  }
  func.func @layer_norms(%x: memref<1024x768xf32>, %x2: memref<16384x768xf32>, %gamma: memref<768xf32>, %beta: memref<768xf32>, %y: memref<1024x768xf32>, %y2: memref<16384x768xf32>) {
    call @ln_small_row_reduction(%x, %gamma, %beta, %y) : (memref<1024x768xf32>, memref<768xf32>, memref<768xf32>, memref<1024x768xf32>) -> ()
    call @ln_large_row_reduction(%x2, %gamma, %beta, %y2) : (memref<16384x768xf32>, memref<768xf32>, memref<768xf32>, memref<16384x768xf32>) -> ()
    return
  }
}
