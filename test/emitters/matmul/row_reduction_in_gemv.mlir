// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

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
