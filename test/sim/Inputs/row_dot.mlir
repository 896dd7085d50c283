// Products whose B is stored [N, K] (a transposed view, K contiguous), as
// the row-dot form reads them. @few: 5 rows (four columns a group of
// lanes), N = 37 inside one block of 128 columns, K = 40 in two steps of
// 32 (the second masked past K). @odd: 9 rows (three columns a group),
// N = 300 over four blocks of 96 (the last cut short), K = 36, and C's old
// value added (no zero fill). @wide16: below.
func.func @few(%a: memref<5x40xf32>, %bt: memref<37x40xf32>, %c: memref<5x37xf32>) {
  %zero = arith.constant 0.0 : f32
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<37x40xf32> to memref<40x37xf32, strided<[1, 40]>>
  linalg.fill ins(%zero : f32) outs(%c : memref<5x37xf32>)
  linalg.matmul ins(%a, %b : memref<5x40xf32>, memref<40x37xf32, strided<[1, 40]>>) outs(%c : memref<5x37xf32>)
  return
}
func.func @odd(%a: memref<9x36xf32>, %bt: memref<300x36xf32>, %c: memref<9x300xf32>) {
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<300x36xf32> to memref<36x300xf32, strided<[1, 36]>>
  linalg.matmul ins(%a, %b : memref<9x36xf32>, memref<36x300xf32, strided<[1, 36]>>) outs(%c : memref<9x300xf32>)
  return
}
// @wide16: bf16 A and B (vectors of 8 along K = 48: one step of 64, masked),
// f32 C; 3 rows, N = 130 over two blocks.
func.func @wide16(%a: memref<3x48xbf16>, %bt: memref<130x48xbf16>, %c: memref<3x130xf32>) {
  %zero = arith.constant 0.0 : f32
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<130x48xbf16> to memref<48x130xbf16, strided<[1, 48]>>
  linalg.fill ins(%zero : f32) outs(%c : memref<3x130xf32>)
  linalg.matmul ins(%a, %b : memref<3x48xbf16>, memref<48x130xbf16, strided<[1, 48]>>) outs(%c : memref<3x130xf32>)
  return
}
