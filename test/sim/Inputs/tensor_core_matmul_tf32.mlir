// f32 products for the tensor-core form under precision=tf32 (mma.sync
// m16n8k8 .tf32), each run alone (--function).
// @edges: M = 33, K = 40 and N = 45 are multiples of no tile (K masked
// past 40 in the third 16-deep slice, odd N: B read one element at a time,
// through registers; C stored one column at a time); C's zero fill folded
// into the kernel.
func.func @edges(%a: memref<33x40xf32>, %b: memref<40x45xf32>, %c: memref<33x45xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<33x45xf32>)
  linalg.matmul ins(%a, %b : memref<33x40xf32>, memref<40x45xf32>) outs(%c : memref<33x45xf32>)
  return
}

// @rows: A read along K, B along N (B as a weight is stored, [K, N]):
// by cp.async, B N-major, its fragments one 32-bit word each; 70 rows
// (past the skinny form's), K = 56 (a last slice cut short).
func.func @rows(%a: memref<70x56xf32>, %b: memref<56x48xf32>, %c: memref<70x48xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<70x48xf32>)
  linalg.matmul ins(%a, %b : memref<70x56xf32>, memref<56x48xf32>) outs(%c : memref<70x48xf32>)
  return
}

// @views: A and B both transposed views (A read along M: an M-major tile
// of 32-bit words; B read along K: K-major, by ldmatrix as A's K-major
// tiles are), no fill: the kernel adds to C's old value.
func.func @views(%at: memref<72x36xf32>, %bt: memref<40x72xf32>, %c: memref<36x40xf32>) {
  %a = memref.transpose %at (d0, d1) -> (d1, d0) : memref<72x36xf32> to memref<36x72xf32, strided<[1, 36]>>
  %b = memref.transpose %bt (d0, d1) -> (d1, d0) : memref<40x72xf32> to memref<72x40xf32, strided<[1, 72]>>
  linalg.matmul ins(%a, %b : memref<36x72xf32, strided<[1, 36]>>, memref<72x40xf32, strided<[1, 72]>>) outs(%c : memref<36x40xf32>)
  return
}

// @batched: two products of 17x24 by 24x40.
func.func @batched(%a: memref<2x17x24xf32>, %b: memref<2x24x40xf32>, %c: memref<2x17x40xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<2x17x40xf32>)
  linalg.batch_matmul ins(%a, %b : memref<2x17x24xf32>, memref<2x24x40xf32>) outs(%c : memref<2x17x40xf32>)
  return
}
