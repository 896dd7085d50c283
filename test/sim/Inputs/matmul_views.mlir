// Both operands transposed views (A read along M, B along K, 128-bit), a
// zero fill of C folded into the kernel.
func.func @views(%at: memref<24x36xf32>, %bt: memref<72x24xf32>, %c: memref<36x72xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.transpose %at (d0, d1) -> (d1, d0) : memref<24x36xf32> to memref<36x24xf32, strided<[1, 36]>>
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<72x24xf32> to memref<24x72xf32, strided<[1, 24]>>
  linalg.fill ins(%zero : f32) outs(%c : memref<36x72xf32>)
  linalg.matmul ins(%a, %b : memref<36x24xf32, strided<[1, 36]>>, memref<24x72xf32, strided<[1, 24]>>) outs(%c : memref<36x72xf32>)
  return
}
