// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
