// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
