// Greedy tokens as `trace gpt2 --batch N` computes them after the logits
// (one row_reduction fusion: the maximum of each row, then the least
// position holding it, or holding a NaN), each run alone (--function):
// @ties: 3 rows of 4100 f32 values floored to 1024ths of their range, so
// that a few positions far apart hold a row's maximum (a block a row);
// @nans: 3 rows of 4100 whose values over 0.999 are NaN; @bf16_rows: 5
// rows of 300 bf16 (a warp a row).
#map = affine_map<(d0, d1) -> (d0)>
#map1 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @ties_row_reduction(%arg0: memref<3x4100xf32>, %arg1: memref<3xi32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %c2147483647_i32 = arith.constant 2147483647 : i32
    %cst = arith.constant 0xFF800000 : f32
    %values = memref.alloc() {alignment = 64 : i64} : memref<3x4100xf32>
    linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<3x4100xf32>) outs(%values : memref<3x4100xf32>) {
    ^bb0(%in: f32, %out: f32):
      %zero = arith.constant 0.000000e+00 : f32
      %x = arith.addf %in, %zero : f32
      %four = arith.constant 5.120000e+02 : f32
      %scaled = arith.mulf %x, %four : f32
      %v = math.floor %scaled : f32
      linalg.yield %v : f32
    }
    %best = memref.alloc() {alignment = 64 : i64} : memref<3xf32>
    linalg.fill ins(%cst : f32) outs(%best : memref<3xf32>)
    linalg.reduce ins(%values : memref<3x4100xf32>) outs(%best : memref<3xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    %holders = memref.alloc() {alignment = 64 : i64} : memref<3x4100xi32>
    linalg.generic {indexing_maps = [#map1, #map, #map1], iterator_types = ["parallel", "parallel"]} ins(%values, %best : memref<3x4100xf32>, memref<3xf32>) outs(%holders : memref<3x4100xi32>) {
    ^bb0(%in: f32, %in_2: f32, %out: i32):
      %0 = linalg.index 1 : index
      %1 = arith.index_cast %0 : index to i64
      %2 = arith.trunci %1 : i64 to i32
      %4 = arith.cmpf une, %in, %in : f32
      %5 = arith.cmpf oeq, %in, %in_2 : f32
      %6 = arith.ori %5, %4 : i1
      %7 = arith.select %6, %2, %c2147483647_i32 : i32
      linalg.yield %7 : i32
    }
    linalg.fill ins(%c2147483647_i32 : i32) outs(%arg1 : memref<3xi32>)
    linalg.reduce ins(%holders : memref<3x4100xi32>) outs(%arg1 : memref<3xi32>) dimensions = [1]
      (%in: i32, %init: i32) {
        %0 = arith.minsi %in, %init : i32
        linalg.yield %0 : i32
      }
    memref.dealloc %values : memref<3x4100xf32>
    memref.dealloc %best : memref<3xf32>
    memref.dealloc %holders : memref<3x4100xi32>
    return
  }
  func.func @ties(%x: memref<3x4100xf32>, %y: memref<3xi32>) {
    call @ties_row_reduction(%x, %y) : (memref<3x4100xf32>, memref<3xi32>) -> ()
    return
  }
  func.func private @nans_row_reduction(%arg0: memref<3x4100xf32>, %arg1: memref<3xi32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %c2147483647_i32 = arith.constant 2147483647 : i32
    %cst = arith.constant 0xFF800000 : f32
    %values = memref.alloc() {alignment = 64 : i64} : memref<3x4100xf32>
    linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<3x4100xf32>) outs(%values : memref<3x4100xf32>) {
    ^bb0(%in: f32, %out: f32):
      %zero = arith.constant 0.000000e+00 : f32
      %x = arith.addf %in, %zero : f32
      %limit = arith.constant 9.990000e-01 : f32
      %nan = arith.constant 0x7FC00000 : f32
      %far = arith.cmpf ogt, %x, %limit : f32
      %v = arith.select %far, %nan, %x : f32
      linalg.yield %v : f32
    }
    %best = memref.alloc() {alignment = 64 : i64} : memref<3xf32>
    linalg.fill ins(%cst : f32) outs(%best : memref<3xf32>)
    linalg.reduce ins(%values : memref<3x4100xf32>) outs(%best : memref<3xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    %holders = memref.alloc() {alignment = 64 : i64} : memref<3x4100xi32>
    linalg.generic {indexing_maps = [#map1, #map, #map1], iterator_types = ["parallel", "parallel"]} ins(%values, %best : memref<3x4100xf32>, memref<3xf32>) outs(%holders : memref<3x4100xi32>) {
    ^bb0(%in: f32, %in_2: f32, %out: i32):
      %0 = linalg.index 1 : index
      %1 = arith.index_cast %0 : index to i64
      %2 = arith.trunci %1 : i64 to i32
      %4 = arith.cmpf une, %in, %in : f32
      %5 = arith.cmpf oeq, %in, %in_2 : f32
      %6 = arith.ori %5, %4 : i1
      %7 = arith.select %6, %2, %c2147483647_i32 : i32
      linalg.yield %7 : i32
    }
    linalg.fill ins(%c2147483647_i32 : i32) outs(%arg1 : memref<3xi32>)
    linalg.reduce ins(%holders : memref<3x4100xi32>) outs(%arg1 : memref<3xi32>) dimensions = [1]
      (%in: i32, %init: i32) {
        %0 = arith.minsi %in, %init : i32
        linalg.yield %0 : i32
      }
    memref.dealloc %values : memref<3x4100xf32>
    memref.dealloc %best : memref<3xf32>
    memref.dealloc %holders : memref<3x4100xi32>
    return
  }
  func.func @nans(%x: memref<3x4100xf32>, %y: memref<3xi32>) {
    call @nans_row_reduction(%x, %y) : (memref<3x4100xf32>, memref<3xi32>) -> ()
    return
  }
  func.func private @bf16_rows_row_reduction(%arg0: memref<5x300xbf16>, %arg1: memref<5xi32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %c2147483647_i32 = arith.constant 2147483647 : i32
    %cst = arith.constant 0xFF800000 : f32
    %values = memref.alloc() {alignment = 64 : i64} : memref<5x300xf32>
    linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<5x300xbf16>) outs(%values : memref<5x300xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %zero = arith.constant 0.000000e+00 : f32
      %x = arith.extf %in : bf16 to f32
      %v = arith.addf %x, %zero : f32
      linalg.yield %v : f32
    }
    %best = memref.alloc() {alignment = 64 : i64} : memref<5xf32>
    linalg.fill ins(%cst : f32) outs(%best : memref<5xf32>)
    linalg.reduce ins(%values : memref<5x300xf32>) outs(%best : memref<5xf32>) dimensions = [1]
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    %holders = memref.alloc() {alignment = 64 : i64} : memref<5x300xi32>
    linalg.generic {indexing_maps = [#map1, #map, #map1], iterator_types = ["parallel", "parallel"]} ins(%values, %best : memref<5x300xf32>, memref<5xf32>) outs(%holders : memref<5x300xi32>) {
    ^bb0(%in: f32, %in_2: f32, %out: i32):
      %0 = linalg.index 1 : index
      %1 = arith.index_cast %0 : index to i64
      %2 = arith.trunci %1 : i64 to i32
      %4 = arith.cmpf une, %in, %in : f32
      %5 = arith.cmpf oeq, %in, %in_2 : f32
      %6 = arith.ori %5, %4 : i1
      %7 = arith.select %6, %2, %c2147483647_i32 : i32
      linalg.yield %7 : i32
    }
    linalg.fill ins(%c2147483647_i32 : i32) outs(%arg1 : memref<5xi32>)
    linalg.reduce ins(%holders : memref<5x300xi32>) outs(%arg1 : memref<5xi32>) dimensions = [1]
      (%in: i32, %init: i32) {
        %0 = arith.minsi %in, %init : i32
        linalg.yield %0 : i32
      }
    memref.dealloc %values : memref<5x300xf32>
    memref.dealloc %best : memref<5xf32>
    memref.dealloc %holders : memref<5x300xi32>
    return
  }
  func.func @bf16_rows(%x: memref<5x300xbf16>, %y: memref<5xi32>) {
    call @bf16_rows_row_reduction(%x, %y) : (memref<5x300xbf16>, memref<5xi32>) -> ()
    return
  }
}
