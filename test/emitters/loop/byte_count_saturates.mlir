// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 | FileCheck %s

// A kernel's byte count saturates at the largest i64 for memrefs too large
// for any GPU (2^30 x 2^30 f32 read and written: 2^63 bytes), instead of
// wrapping to a negative count.
// CHECK: gpu.func @huge_loop(
// CHECK-SAME: mlpipe.bytes = 9223372036854775807
#id = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @huge_loop(%x: memref<1073741824x1073741824xf32>, %y: memref<1073741824x1073741824xf32>)
      attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<1073741824x1073741824xf32>) outs(%y : memref<1073741824x1073741824xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.negf %a : f32
      linalg.yield %v : f32
    }
    return
  }
  func.func @huge(%x: memref<1073741824x1073741824xf32>, %y: memref<1073741824x1073741824xf32>) {
    call @huge_loop(%x, %y) : (memref<1073741824x1073741824xf32>, memref<1073741824x1073741824xf32>) -> ()
    return
  }
}
