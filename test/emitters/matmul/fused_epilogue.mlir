// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
