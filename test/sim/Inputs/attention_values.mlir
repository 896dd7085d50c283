func.func @values(%p: memref<3x20x20xf64>, %v: memref<3x20x16xf64, strided<[16, 144, 1], offset: 96>>, %y: memref<3x20x16xf64>) {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%y : memref<3x20x16xf64>)
  linalg.batch_matmul ins(%p, %v : memref<3x20x20xf64>, memref<3x20x16xf64, strided<[16, 144, 1], offset: 96>>) outs(%y : memref<3x20x16xf64>)
  return
}
