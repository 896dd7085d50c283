// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
