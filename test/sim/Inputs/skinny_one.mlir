// One row, odd N (scalar B and C), K = 77 not a multiple of the 8 warps.
func.func @one(%a: memref<1x77xf32>, %b: memref<77x45xf32>, %c: memref<1x45xf32>) {
  linalg.matmul ins(%a, %b : memref<1x77xf32>, memref<77x45xf32>) outs(%c : memref<1x45xf32>)
  return
}
