// A decode step's layer norm and the GEMV that reads its row, as fuse and
// bufferize leave them (f64): y = layernorm(x) @ w + bias, with a row of
// K = 300 (150 two-element chunks over a block of 256 lanes, so the last
// lanes hold none) and N = 45 columns (the last block cut short).
// mlpipe-emit-fusions makes them one launch in which every block computes
// the layer norm itself.
#row = affine_map<(d0, d1) -> (d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
module {
  func.func private @ln_row_reduction(%x: memref<1x300xf64>, %gamma: memref<300xf64>, %beta: memref<300xf64>, %y: memref<1x300xf64> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %eps = arith.constant 1.0e-05 : f64
    %width = arith.constant 3.0e+02 : f64
    %zero = arith.constant 0.0 : f64
    %sum = memref.alloc() : memref<1xf64>
    %squares = memref.alloc() : memref<1xf64>
    linalg.fill ins(%zero : f64) outs(%squares : memref<1xf64>)
    linalg.fill ins(%zero : f64) outs(%sum : memref<1xf64>)
    linalg.reduce ins(%x : memref<1x300xf64>) outs(%sum : memref<1xf64>) dimensions = [1]
      (%in: f64, %init: f64) {
        %0 = arith.addf %in, %init : f64
        linalg.yield %0 : f64
      }
    %centered = memref.alloc() : memref<1x300xf64>
    linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : memref<1x300xf64>, memref<1xf64>) outs(%centered : memref<1x300xf64>) {
    ^bb0(%in: f64, %s: f64, %out: f64):
      %0 = arith.divf %s, %width : f64
      %1 = arith.subf %in, %0 : f64
      linalg.yield %1 : f64
    }
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%centered : memref<1x300xf64>) outs(%y : memref<1x300xf64>) {
    ^bb0(%in: f64, %out: f64):
      %0 = arith.mulf %in, %in : f64
      linalg.yield %0 : f64
    }
    linalg.reduce ins(%y : memref<1x300xf64>) outs(%squares : memref<1xf64>) dimensions = [1]
      (%in: f64, %init: f64) {
        %0 = arith.addf %in, %init : f64
        linalg.yield %0 : f64
      }
    linalg.generic {indexing_maps = [#id, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%centered, %squares, %gamma, %beta : memref<1x300xf64>, memref<1xf64>, memref<300xf64>, memref<300xf64>) outs(%y : memref<1x300xf64>) {
    ^bb0(%in: f64, %q: f64, %g: f64, %b: f64, %out: f64):
      %0 = arith.divf %q, %width : f64
      %1 = arith.addf %0, %eps : f64
      %2 = math.sqrt %1 : f64
      %3 = arith.divf %in, %2 : f64
      %4 = arith.mulf %3, %g : f64
      %5 = arith.addf %4, %b : f64
      linalg.yield %5 : f64
    }
    memref.dealloc %sum : memref<1xf64>
    memref.dealloc %squares : memref<1xf64>
    memref.dealloc %centered : memref<1x300xf64>
    return
  }
  func.func private @proj_matmul(%a: memref<1x300xf64>, %w: memref<300x45xf64>, %bias: memref<45xf64>, %c: memref<1x45xf64> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.0 : f64
    linalg.fill ins(%zero : f64) outs(%c : memref<1x45xf64>)
    linalg.matmul ins(%a, %w : memref<1x300xf64>, memref<300x45xf64>) outs(%c : memref<1x45xf64>)
    linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%c, %bias : memref<1x45xf64>, memref<45xf64>) outs(%c : memref<1x45xf64>) {
    ^bb0(%in: f64, %b: f64, %out: f64):
      %0 = arith.addf %in, %b : f64
      linalg.yield %0 : f64
    }
    return
  }
  func.func @layer(%x: memref<1x300xf64> {mlpipe.name = "x"}, %gamma: memref<300xf64> {mlpipe.name = "gamma"}, %beta: memref<300xf64> {mlpipe.name = "beta"}, %w: memref<300x45xf64> {mlpipe.name = "w"}, %bias: memref<45xf64> {mlpipe.name = "bias"}, %out: memref<1x45xf64> {mlpipe.name = "y"}) {
    %normalized = memref.alloc() : memref<1x300xf64>
    call @ln_row_reduction(%x, %gamma, %beta, %normalized) : (memref<1x300xf64>, memref<300xf64>, memref<300xf64>, memref<1x300xf64>) -> ()
    call @proj_matmul(%normalized, %w, %bias, %out) : (memref<1x300xf64>, memref<300x45xf64>, memref<45xf64>, memref<1x45xf64>) -> ()
    memref.dealloc %normalized : memref<1x300xf64>
    return
  }
}
