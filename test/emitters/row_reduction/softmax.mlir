// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
