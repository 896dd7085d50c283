// layernorm_gemv.mlir in bf16, as trace --dtype bf16, fuse and bufferize
// leave a decode step's layer norm and the GEMV that reads its row: x, the
// layer norm's weights and output, w, the bias and y stored in bf16, the
// sums and the product in f32. mlpipe-emit-fusions makes them one launch in
// which every block computes the layer norm's row into its staged slice of
// A, in bf16, and widens each element as it multiplies.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
#map2 = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @ln_row_reduction(%arg0: memref<1x300xbf16>, %arg1: memref<300xbf16>, %arg2: memref<300xbf16>, %arg3: memref<1x300xbf16> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 9.99999974E-6 : f32
    %cst_0 = arith.constant 3.000000e+02 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x300xf32>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<1x300xbf16>) outs(%alloc : memref<1x300xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      linalg.yield %0 : f32
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<1xf32>
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<1xf32>
    linalg.fill ins(%cst_1 : f32) outs(%alloc_3 : memref<1xf32>)
    linalg.fill ins(%cst_1 : f32) outs(%alloc_2 : memref<1xf32>)
    linalg.reduce ins(%alloc : memref<1x300xf32>) outs(%alloc_2 : memref<1xf32>) dimensions = [1] 
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0, %alloc_2 : memref<1x300xbf16>, memref<1xf32>) outs(%arg3 : memref<1x300xbf16>) {
    ^bb0(%in: bf16, %in_4: f32, %out: bf16):
      %0 = arith.divf %in_4, %cst_0 : f32
      %1 = arith.extf %in : bf16 to f32
      %2 = arith.subf %1, %0 : f32
      %3 = arith.truncf %2 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %3 : bf16
    }
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3 : memref<1x300xbf16>) outs(%alloc : memref<1x300xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.mulf %0, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.reduce ins(%alloc : memref<1x300xf32>) outs(%alloc_3 : memref<1xf32>) dimensions = [1] 
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map2, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3, %alloc_3, %arg1, %arg2 : memref<1x300xbf16>, memref<1xf32>, memref<300xbf16>, memref<300xbf16>) outs(%arg3 : memref<1x300xbf16>) {
    ^bb0(%in: bf16, %in_4: f32, %in_5: bf16, %in_6: bf16, %out: bf16):
      %0 = arith.divf %in_4, %cst_0 : f32
      %1 = arith.addf %0, %cst : f32
      %2 = math.sqrt %1 : f32
      %3 = arith.extf %in : bf16 to f32
      %4 = arith.divf %3, %2 : f32
      %5 = arith.extf %in_5 : bf16 to f32
      %6 = arith.mulf %4, %5 : f32
      %7 = arith.extf %in_6 : bf16 to f32
      %8 = arith.addf %6, %7 : f32
      %9 = arith.truncf %8 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %9 : bf16
    }
    memref.dealloc %alloc : memref<1x300xf32>
    memref.dealloc %alloc_2 : memref<1xf32>
    memref.dealloc %alloc_3 : memref<1xf32>
    return
  }
  func.func private @proj_matmul(%arg0: memref<1x300xbf16>, %arg1: memref<300x45xbf16>, %arg2: memref<45xbf16>, %arg3: memref<1x45xbf16> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x45xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<1x45xf32>)
    linalg.matmul ins(%arg0, %arg1 : memref<1x300xbf16>, memref<300x45xbf16>) outs(%alloc : memref<1x45xf32>)
    linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc, %arg2 : memref<1x45xf32>, memref<45xbf16>) outs(%arg3 : memref<1x45xbf16>) {
    ^bb0(%in: f32, %in_0: bf16, %out: bf16):
      %0 = arith.extf %in_0 : bf16 to f32
      %1 = arith.addf %in, %0 : f32
      %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %2 : bf16
    }
    memref.dealloc %alloc : memref<1x45xf32>
    return
  }
  func.func @layer(%x: memref<1x300xbf16> {mlpipe.name = "x"}, %gamma: memref<300xbf16> {mlpipe.name = "gamma"}, %beta: memref<300xbf16> {mlpipe.name = "beta"}, %w: memref<300x45xbf16> {mlpipe.name = "w"}, %bias: memref<45xbf16> {mlpipe.name = "bias"}, %out: memref<1x45xbf16> {mlpipe.name = "y"}) {
    %normalized = memref.alloc() : memref<1x300xbf16>
    call @ln_row_reduction(%x, %gamma, %beta, %normalized) : (memref<1x300xbf16>, memref<300xbf16>, memref<300xbf16>, memref<1x300xbf16>) -> ()
    call @proj_matmul(%normalized, %w, %bias, %out) : (memref<1x300xbf16>, memref<300x45xbf16>, memref<45xbf16>, memref<1x45xbf16>) -> ()
    memref.dealloc %normalized : memref<1x300xbf16>
    return
  }
}
