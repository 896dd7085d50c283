// Attention's operands: heads of q, k and v as strided views of one
// [T, 3C] buffer (T = 20, 3 heads of 16), k transposed, the batch first.
func.func @scores(%q: memref<3x20x16xf32, strided<[16, 144, 1]>>, %k: memref<3x16x20xf32, strided<[16, 1, 144], offset: 48>>, %s: memref<3x20x20xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<3x20x20xf32>)
  linalg.batch_matmul ins(%q, %k : memref<3x20x16xf32, strided<[16, 144, 1]>>, memref<3x16x20xf32, strided<[16, 1, 144], offset: 48>>) outs(%s : memref<3x20x20xf32>)
  return
}
