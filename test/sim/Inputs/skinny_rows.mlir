// 19 rows: two row groups of the skinny form (16 + 3); N = 72 is one
// partial block of 128 columns; K = 40 is 5 rows per warp.
func.func @rows(%a: memref<19x40xf32>, %b: memref<40x72xf32>, %c: memref<19x72xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<19x72xf32>)
  linalg.matmul ins(%a, %b : memref<19x40xf32>, memref<40x72xf32>) outs(%c : memref<19x72xf32>)
  return
}
