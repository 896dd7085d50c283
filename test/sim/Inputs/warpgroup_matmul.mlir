// 16-bit products for the warpgroup form (wgmma, sm_90a), each run alone
// (--function).
// @edges: bf16 A and B, f32 C; M = 130 passes one 128-row tile, K = 72
// is masked in the second 64-deep slice, N = 200 (B N-major, as stored)
// is no multiple of a 64-column atom; C's zero fill folded into the kernel.
func.func @edges(%a: memref<130x72xbf16>, %b: memref<72x200xbf16>, %c: memref<130x200xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<130x200xf32>)
  linalg.matmul ins(%a, %b : memref<130x72xbf16>, memref<72x200xbf16>) outs(%c : memref<130x200xf32>)
  return
}

// @kmajor: f16, B a transposed view read along K (as the tied logits'
// wte^T), odd N = 45; no fill: the kernel adds to C's old f16 value.
func.func @kmajor(%a: memref<70x136xf16>, %bt: memref<45x136xf16>, %c: memref<70x45xf16>) {
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<45x136xf16> to memref<136x45xf16, strided<[1, 136]>>
  linalg.matmul ins(%a, %b : memref<70x136xf16>, memref<136x45xf16, strided<[1, 136]>>) outs(%c : memref<70x45xf16>)
  return
}

// @batched: two bf16 products of 65x48 by 48x64, C in bf16.
func.func @batched(%a: memref<2x65x48xbf16>, %b: memref<2x48x64xbf16>, %c: memref<2x65x64xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<2x65x64xbf16>)
  linalg.batch_matmul ins(%a, %b : memref<2x65x48xbf16>, memref<2x48x64xbf16>) outs(%c : memref<2x65x64xbf16>)
  return
}
