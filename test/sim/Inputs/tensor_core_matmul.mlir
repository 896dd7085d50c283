// 16-bit products for the tensor-core form, each run alone (--function).
// @edges: bf16 A and B, f32 C; M = 33, K = 40 and N = 45 are multiples of
// no tile (K masked past 40 in the second 32-deep slice, odd N: C stored
// one column at a time); C's zero fill folded into the kernel.
func.func @edges(%a: memref<33x40xbf16>, %b: memref<40x45xbf16>, %c: memref<33x45xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<33x45xf32>)
  linalg.matmul ins(%a, %b : memref<33x40xbf16>, memref<40x45xbf16>) outs(%c : memref<33x45xf32>)
  return
}

// @views: f16 A and B both transposed views (A read along M, pairs of K
// rows stored as 32-bit pairs; B read along K, as the tied logits' wte^T),
// no fill: the kernel adds to C's old value, stored in f16.
func.func @views(%at: memref<72x36xf16>, %bt: memref<40x72xf16>, %c: memref<36x40xf16>) {
  %a = memref.transpose %at (d0, d1) -> (d1, d0) : memref<72x36xf16> to memref<36x72xf16, strided<[1, 36]>>
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<40x72xf16> to memref<72x40xf16, strided<[1, 72]>>
  linalg.matmul ins(%a, %b : memref<36x72xf16, strided<[1, 36]>>, memref<72x40xf16, strided<[1, 72]>>) outs(%c : memref<36x40xf16>)
  return
}

// @batched: two bf16 products of 17x24 by 24x40, C in bf16.
func.func @batched(%a: memref<2x17x24xbf16>, %b: memref<2x24x40xbf16>, %c: memref<2x17x40xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<2x17x40xbf16>)
  linalg.batch_matmul ins(%a, %b : memref<2x17x24xbf16>, memref<2x24x40xbf16>) outs(%c : memref<2x17x40xbf16>)
  return
}
