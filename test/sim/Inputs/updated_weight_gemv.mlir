// A bf16 GEMV whose B the program itself writes first (a weight updated in
// place by a loop fusion, then read by the product): no kernel may read B
// before it waits for the kernel before it, so the skinny kernel only
// brings its slice into L2 there (kSkinnyPrefetchesB), and reads it after.
#map = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @scale_w(%arg0: memref<96x40xbf16>, %arg1: memref<96x40xbf16> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<96x40xbf16>) outs(%arg1 : memref<96x40xbf16>) {
    ^bb0(%in: bf16, %out: bf16):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.addf %0, %0 : f32
      %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %2 : bf16
    }
    return
  }
  func.func private @matmul_matmul(%arg0: memref<1x96xbf16>, %arg1: memref<96x40xbf16>, %arg2: memref<1x40xbf16> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<1x40xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<1x40xf32>)
    linalg.matmul ins(%arg0, %arg1 : memref<1x96xbf16>, memref<96x40xbf16>) outs(%alloc : memref<1x40xf32>)
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc : memref<1x40xf32>) outs(%arg2 : memref<1x40xbf16>) {
    ^bb0(%in: f32, %out: bf16):
      %0 = arith.truncf %in {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %0 : bf16
    }
    memref.dealloc %alloc : memref<1x40xf32>
    return
  }
  func.func @gemv(%arg0: memref<1x96xbf16> {mlpipe.name = "a"}, %arg1: memref<96x40xbf16> {mlpipe.name = "w"}, %arg2: memref<1x40xbf16> {bufferize.result, mlpipe.name = "y"}) attributes {llvm.emit_c_interface, mlpipe.inputs = [{name = "a", type = tensor<1x96xbf16>}, {name = "w", type = tensor<96x40xbf16>}], mlpipe.outputs = [{name = "y", type = tensor<1x40xbf16>}]} {
    call @scale_w(%arg1, %arg1) : (memref<96x40xbf16>, memref<96x40xbf16>) -> ()
    call @matmul_matmul(%arg0, %arg1, %arg2) : (memref<1x96xbf16>, memref<96x40xbf16>, memref<1x40xbf16>) -> ()
    return
  }
}
