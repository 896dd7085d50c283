// Layer norms (bf16, as trace writes them) whose rows only the product
// after them reads, as its A: few-row products the few-row tensor-core
// tiles take with K split across blocks, each run alone (--function).
// @rows16: one m16 tile; @rows17: two m16 tiles high (rows 17-31 never
// stored), N = 72; @rows32: two whole m16 tiles, K = 384, N = 40.
#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
#map2 = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @rows16_ln_row_reduction(%arg0: memref<16x256xbf16>, %arg1: memref<256xbf16>, %arg2: memref<256xbf16>, %arg3: memref<16x256xbf16> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 9.99999974E-6 : f32
    %cst_0 = arith.constant 2.560000e+02 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<16x256xf32>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<16x256xbf16>) outs(%alloc : memref<16x256xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      linalg.yield %0 : f32
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
    linalg.fill ins(%cst_1 : f32) outs(%alloc_3 : memref<16xf32>)
    linalg.fill ins(%cst_1 : f32) outs(%alloc_2 : memref<16xf32>)
    linalg.reduce ins(%alloc : memref<16x256xf32>) outs(%alloc_2 : memref<16xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0, %alloc_2 : memref<16x256xbf16>, memref<16xf32>) outs(%arg3 : memref<16x256xbf16>) {
    ^bb0(%in: bf16, %in_4: f32, %out: bf16):
      %0 = arith.divf %in_4, %cst_0 : f32
      %1 = arith.extf %in : bf16 to f32
      %2 = arith.subf %1, %0 : f32
      %3 = arith.truncf %2 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %3 : bf16
    }
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3 : memref<16x256xbf16>) outs(%alloc : memref<16x256xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.mulf %0, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.reduce ins(%alloc : memref<16x256xf32>) outs(%alloc_3 : memref<16xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map2, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3, %alloc_3, %arg1, %arg2 : memref<16x256xbf16>, memref<16xf32>, memref<256xbf16>, memref<256xbf16>) outs(%arg3 : memref<16x256xbf16>) {
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
    memref.dealloc %alloc : memref<16x256xf32>
    memref.dealloc %alloc_2 : memref<16xf32>
    memref.dealloc %alloc_3 : memref<16xf32>
    return
  }
  func.func private @rows16_proj_matmul(%arg0: memref<16x256xbf16>, %arg1: memref<256x64xbf16>, %arg2: memref<64xbf16>, %arg3: memref<16x64xbf16> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<16x64xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<16x64xf32>)
    linalg.matmul ins(%arg0, %arg1 : memref<16x256xbf16>, memref<256x64xbf16>) outs(%alloc : memref<16x64xf32>)
    linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc, %arg2 : memref<16x64xf32>, memref<64xbf16>) outs(%arg3 : memref<16x64xbf16>) {
    ^bb0(%in: f32, %in_0: bf16, %out: bf16):
      %0 = arith.extf %in_0 : bf16 to f32
      %1 = arith.addf %in, %0 : f32
      %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %2 : bf16
    }
    memref.dealloc %alloc : memref<16x64xf32>
    return
  }
  func.func @rows16(%x: memref<16x256xbf16>, %gamma: memref<256xbf16>, %beta: memref<256xbf16>, %w: memref<256x64xbf16>, %bias: memref<64xbf16>, %y: memref<16x64xbf16>) {
    %a = memref.alloc() : memref<16x256xbf16>
    call @rows16_ln_row_reduction(%x, %gamma, %beta, %a) : (memref<16x256xbf16>, memref<256xbf16>, memref<256xbf16>, memref<16x256xbf16>) -> ()
    call @rows16_proj_matmul(%a, %w, %bias, %y) : (memref<16x256xbf16>, memref<256x64xbf16>, memref<64xbf16>, memref<16x64xbf16>) -> ()
    memref.dealloc %a : memref<16x256xbf16>
    return
  }
  func.func private @rows17_ln_row_reduction(%arg0: memref<17x256xbf16>, %arg1: memref<256xbf16>, %arg2: memref<256xbf16>, %arg3: memref<17x256xbf16> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 9.99999974E-6 : f32
    %cst_0 = arith.constant 2.560000e+02 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<17x256xf32>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<17x256xbf16>) outs(%alloc : memref<17x256xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      linalg.yield %0 : f32
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<17xf32>
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<17xf32>
    linalg.fill ins(%cst_1 : f32) outs(%alloc_3 : memref<17xf32>)
    linalg.fill ins(%cst_1 : f32) outs(%alloc_2 : memref<17xf32>)
    linalg.reduce ins(%alloc : memref<17x256xf32>) outs(%alloc_2 : memref<17xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0, %alloc_2 : memref<17x256xbf16>, memref<17xf32>) outs(%arg3 : memref<17x256xbf16>) {
    ^bb0(%in: bf16, %in_4: f32, %out: bf16):
      %0 = arith.divf %in_4, %cst_0 : f32
      %1 = arith.extf %in : bf16 to f32
      %2 = arith.subf %1, %0 : f32
      %3 = arith.truncf %2 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %3 : bf16
    }
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3 : memref<17x256xbf16>) outs(%alloc : memref<17x256xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.mulf %0, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.reduce ins(%alloc : memref<17x256xf32>) outs(%alloc_3 : memref<17xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map2, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3, %alloc_3, %arg1, %arg2 : memref<17x256xbf16>, memref<17xf32>, memref<256xbf16>, memref<256xbf16>) outs(%arg3 : memref<17x256xbf16>) {
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
    memref.dealloc %alloc : memref<17x256xf32>
    memref.dealloc %alloc_2 : memref<17xf32>
    memref.dealloc %alloc_3 : memref<17xf32>
    return
  }
  func.func private @rows17_proj_matmul(%arg0: memref<17x256xbf16>, %arg1: memref<256x72xbf16>, %arg2: memref<72xbf16>, %arg3: memref<17x72xbf16> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<17x72xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<17x72xf32>)
    linalg.matmul ins(%arg0, %arg1 : memref<17x256xbf16>, memref<256x72xbf16>) outs(%alloc : memref<17x72xf32>)
    linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc, %arg2 : memref<17x72xf32>, memref<72xbf16>) outs(%arg3 : memref<17x72xbf16>) {
    ^bb0(%in: f32, %in_0: bf16, %out: bf16):
      %0 = arith.extf %in_0 : bf16 to f32
      %1 = arith.addf %in, %0 : f32
      %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %2 : bf16
    }
    memref.dealloc %alloc : memref<17x72xf32>
    return
  }
  func.func @rows17(%x: memref<17x256xbf16>, %gamma: memref<256xbf16>, %beta: memref<256xbf16>, %w: memref<256x72xbf16>, %bias: memref<72xbf16>, %y: memref<17x72xbf16>) {
    %a = memref.alloc() : memref<17x256xbf16>
    call @rows17_ln_row_reduction(%x, %gamma, %beta, %a) : (memref<17x256xbf16>, memref<256xbf16>, memref<256xbf16>, memref<17x256xbf16>) -> ()
    call @rows17_proj_matmul(%a, %w, %bias, %y) : (memref<17x256xbf16>, memref<256x72xbf16>, memref<72xbf16>, memref<17x72xbf16>) -> ()
    memref.dealloc %a : memref<17x256xbf16>
    return
  }
  func.func private @rows32_ln_row_reduction(%arg0: memref<32x384xbf16>, %arg1: memref<384xbf16>, %arg2: memref<384xbf16>, %arg3: memref<32x384xbf16> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 9.99999974E-6 : f32
    %cst_0 = arith.constant 3.840000e+02 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<32x384xf32>
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<32x384xbf16>) outs(%alloc : memref<32x384xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      linalg.yield %0 : f32
    }
    %alloc_2 = memref.alloc() {alignment = 64 : i64} : memref<32xf32>
    %alloc_3 = memref.alloc() {alignment = 64 : i64} : memref<32xf32>
    linalg.fill ins(%cst_1 : f32) outs(%alloc_3 : memref<32xf32>)
    linalg.fill ins(%cst_1 : f32) outs(%alloc_2 : memref<32xf32>)
    linalg.reduce ins(%alloc : memref<32x384xf32>) outs(%alloc_2 : memref<32xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel"]} ins(%arg0, %alloc_2 : memref<32x384xbf16>, memref<32xf32>) outs(%arg3 : memref<32x384xbf16>) {
    ^bb0(%in: bf16, %in_4: f32, %out: bf16):
      %0 = arith.divf %in_4, %cst_0 : f32
      %1 = arith.extf %in : bf16 to f32
      %2 = arith.subf %1, %0 : f32
      %3 = arith.truncf %2 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %3 : bf16
    }
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3 : memref<32x384xbf16>) outs(%alloc : memref<32x384xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.mulf %0, %0 : f32
      linalg.yield %1 : f32
    }
    linalg.reduce ins(%alloc : memref<32x384xf32>) outs(%alloc_3 : memref<32xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map2, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%arg3, %alloc_3, %arg1, %arg2 : memref<32x384xbf16>, memref<32xf32>, memref<384xbf16>, memref<384xbf16>) outs(%arg3 : memref<32x384xbf16>) {
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
    memref.dealloc %alloc : memref<32x384xf32>
    memref.dealloc %alloc_2 : memref<32xf32>
    memref.dealloc %alloc_3 : memref<32xf32>
    return
  }
  func.func private @rows32_proj_matmul(%arg0: memref<32x384xbf16>, %arg1: memref<384x40xbf16>, %arg2: memref<40xbf16>, %arg3: memref<32x40xbf16> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<32x40xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<32x40xf32>)
    linalg.matmul ins(%arg0, %arg1 : memref<32x384xbf16>, memref<384x40xbf16>) outs(%alloc : memref<32x40xf32>)
    linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel"]} ins(%alloc, %arg2 : memref<32x40xf32>, memref<40xbf16>) outs(%arg3 : memref<32x40xbf16>) {
    ^bb0(%in: f32, %in_0: bf16, %out: bf16):
      %0 = arith.extf %in_0 : bf16 to f32
      %1 = arith.addf %in, %0 : f32
      %2 = arith.truncf %1 {mlpipe.storage_rounding} : f32 to bf16
      linalg.yield %2 : bf16
    }
    memref.dealloc %alloc : memref<32x40xf32>
    return
  }
  func.func @rows32(%x: memref<32x384xbf16>, %gamma: memref<384xbf16>, %beta: memref<384xbf16>, %w: memref<384x40xbf16>, %bias: memref<40xbf16>, %y: memref<32x40xbf16>) {
    %a = memref.alloc() : memref<32x384xbf16>
    call @rows32_ln_row_reduction(%x, %gamma, %beta, %a) : (memref<32x384xbf16>, memref<384xbf16>, memref<384xbf16>, memref<32x384xbf16>) -> ()
    call @rows32_proj_matmul(%a, %w, %bias, %y) : (memref<32x384xbf16>, memref<384x40xbf16>, memref<40xbf16>, memref<32x40xbf16>) -> ()
    memref.dealloc %a : memref<32x384xbf16>
    return
  }
}
