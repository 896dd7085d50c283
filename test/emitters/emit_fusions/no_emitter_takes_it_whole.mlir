// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
