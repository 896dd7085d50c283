// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
