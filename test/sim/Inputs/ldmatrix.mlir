// nvgpu.ldmatrix in the simulator: one warp stages a 16x16 f16 matrix in
// shared memory (rows padded to 24), loads it as four 8x8 matrices with
// ldmatrix.x4 (lanes 8j..8j+7 addressing the rows of matrix j: rows 0-7
// and 8-15 at columns 0-7, then at columns 8-15), and stores each lane's
// elements where PTX says they come from: row l/4, columns 2(l%4) and the
// next of each matrix; with .trans, column l/4 at rows 2(l%4) and the
// next, stored transposed. `out` is then `in`, or its transpose.
module attributes {gpu.container_module} {
  func.func @copy(%in: memref<16x16xf16>, %out: memref<16x16xf16>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    gpu.launch_func @copy_module::@copy blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%in : memref<16x16xf16>, %out : memref<16x16xf16>)
    return
  }
  func.func @transposed(%in: memref<16x16xf16>, %out: memref<16x16xf16>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    gpu.launch_func @transposed_module::@transposed blocks in (%c1, %c1, %c1) threads in (%c32, %c1, %c1) args(%in : memref<16x16xf16>, %out : memref<16x16xf16>)
    return
  }
  gpu.module @copy_module {
    gpu.func @copy(%in: memref<16x16xf16>, %out: memref<16x16xf16>) workgroup(%s : memref<16x24xf16, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %t = gpu.thread_id x
      %r = arith.divui %t, %c2 : index
      %tm2 = arith.remui %t, %c2 : index
      %c = arith.muli %tm2, %c8 : index
      %v = vector.load %in[%r, %c] {alignment = 16 : i64} : memref<16x16xf16>, vector<8xf16>
      vector.store %v, %s[%r, %c] {alignment = 16 : i64} : memref<16x24xf16, #gpu.address_space<workgroup>>, vector<8xf16>
      gpu.barrier
      %m = arith.divui %t, %c8 : index
      %mr = arith.remui %m, %c2 : index
      %mc = arith.divui %m, %c2 : index
      %tr = arith.remui %t, %c8 : index
      %rb = arith.muli %mr, %c8 : index
      %row = arith.addi %rb, %tr : index
      %col = arith.muli %mc, %c8 : index
      %x = nvgpu.ldmatrix %s[%row, %col] {numTiles = 4 : i32, transpose = false} : memref<16x24xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
      %g = arith.divui %t, %c4 : index
      %q = arith.remui %t, %c4 : index
      %q2 = arith.muli %q, %c2 : index
      %x00 = vector.extract %x[0, 0] : f16 from vector<4x2xf16>
      %rbase00 = arith.constant 0 : index
      %cbase00 = arith.constant 0 : index
      %e00 = arith.constant 0 : index
      %gr00 = arith.addi %rbase00, %g : index
      %qc00 = arith.addi %q2, %e00 : index
      %gc00 = arith.addi %cbase00, %qc00 : index
      memref.store %x00, %out[%gr00, %gc00] : memref<16x16xf16>
      %x01 = vector.extract %x[0, 1] : f16 from vector<4x2xf16>
      %rbase01 = arith.constant 0 : index
      %cbase01 = arith.constant 0 : index
      %e01 = arith.constant 1 : index
      %gr01 = arith.addi %rbase01, %g : index
      %qc01 = arith.addi %q2, %e01 : index
      %gc01 = arith.addi %cbase01, %qc01 : index
      memref.store %x01, %out[%gr01, %gc01] : memref<16x16xf16>
      %x10 = vector.extract %x[1, 0] : f16 from vector<4x2xf16>
      %rbase10 = arith.constant 8 : index
      %cbase10 = arith.constant 0 : index
      %e10 = arith.constant 0 : index
      %gr10 = arith.addi %rbase10, %g : index
      %qc10 = arith.addi %q2, %e10 : index
      %gc10 = arith.addi %cbase10, %qc10 : index
      memref.store %x10, %out[%gr10, %gc10] : memref<16x16xf16>
      %x11 = vector.extract %x[1, 1] : f16 from vector<4x2xf16>
      %rbase11 = arith.constant 8 : index
      %cbase11 = arith.constant 0 : index
      %e11 = arith.constant 1 : index
      %gr11 = arith.addi %rbase11, %g : index
      %qc11 = arith.addi %q2, %e11 : index
      %gc11 = arith.addi %cbase11, %qc11 : index
      memref.store %x11, %out[%gr11, %gc11] : memref<16x16xf16>
      %x20 = vector.extract %x[2, 0] : f16 from vector<4x2xf16>
      %rbase20 = arith.constant 0 : index
      %cbase20 = arith.constant 8 : index
      %e20 = arith.constant 0 : index
      %gr20 = arith.addi %rbase20, %g : index
      %qc20 = arith.addi %q2, %e20 : index
      %gc20 = arith.addi %cbase20, %qc20 : index
      memref.store %x20, %out[%gr20, %gc20] : memref<16x16xf16>
      %x21 = vector.extract %x[2, 1] : f16 from vector<4x2xf16>
      %rbase21 = arith.constant 0 : index
      %cbase21 = arith.constant 8 : index
      %e21 = arith.constant 1 : index
      %gr21 = arith.addi %rbase21, %g : index
      %qc21 = arith.addi %q2, %e21 : index
      %gc21 = arith.addi %cbase21, %qc21 : index
      memref.store %x21, %out[%gr21, %gc21] : memref<16x16xf16>
      %x30 = vector.extract %x[3, 0] : f16 from vector<4x2xf16>
      %rbase30 = arith.constant 8 : index
      %cbase30 = arith.constant 8 : index
      %e30 = arith.constant 0 : index
      %gr30 = arith.addi %rbase30, %g : index
      %qc30 = arith.addi %q2, %e30 : index
      %gc30 = arith.addi %cbase30, %qc30 : index
      memref.store %x30, %out[%gr30, %gc30] : memref<16x16xf16>
      %x31 = vector.extract %x[3, 1] : f16 from vector<4x2xf16>
      %rbase31 = arith.constant 8 : index
      %cbase31 = arith.constant 8 : index
      %e31 = arith.constant 1 : index
      %gr31 = arith.addi %rbase31, %g : index
      %qc31 = arith.addi %q2, %e31 : index
      %gc31 = arith.addi %cbase31, %qc31 : index
      memref.store %x31, %out[%gr31, %gc31] : memref<16x16xf16>
      gpu.return
    }
  }
  gpu.module @transposed_module {
    gpu.func @transposed(%in: memref<16x16xf16>, %out: memref<16x16xf16>) workgroup(%s : memref<16x24xf16, #gpu.address_space<workgroup>>) kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %t = gpu.thread_id x
      %r = arith.divui %t, %c2 : index
      %tm2 = arith.remui %t, %c2 : index
      %c = arith.muli %tm2, %c8 : index
      %v = vector.load %in[%r, %c] {alignment = 16 : i64} : memref<16x16xf16>, vector<8xf16>
      vector.store %v, %s[%r, %c] {alignment = 16 : i64} : memref<16x24xf16, #gpu.address_space<workgroup>>, vector<8xf16>
      gpu.barrier
      %m = arith.divui %t, %c8 : index
      %mr = arith.remui %m, %c2 : index
      %mc = arith.divui %m, %c2 : index
      %tr = arith.remui %t, %c8 : index
      %rb = arith.muli %mr, %c8 : index
      %row = arith.addi %rb, %tr : index
      %col = arith.muli %mc, %c8 : index
      %x = nvgpu.ldmatrix %s[%row, %col] {numTiles = 4 : i32, transpose = true} : memref<16x24xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
      %g = arith.divui %t, %c4 : index
      %q = arith.remui %t, %c4 : index
      %q2 = arith.muli %q, %c2 : index
      %x00 = vector.extract %x[0, 0] : f16 from vector<4x2xf16>
      %rbase00 = arith.constant 0 : index
      %cbase00 = arith.constant 0 : index
      %e00 = arith.constant 0 : index
      %qr00 = arith.addi %q2, %e00 : index
      %gr00 = arith.addi %rbase00, %qr00 : index
      %gc00 = arith.addi %cbase00, %g : index
      memref.store %x00, %out[%gc00, %gr00] : memref<16x16xf16>
      %x01 = vector.extract %x[0, 1] : f16 from vector<4x2xf16>
      %rbase01 = arith.constant 0 : index
      %cbase01 = arith.constant 0 : index
      %e01 = arith.constant 1 : index
      %qr01 = arith.addi %q2, %e01 : index
      %gr01 = arith.addi %rbase01, %qr01 : index
      %gc01 = arith.addi %cbase01, %g : index
      memref.store %x01, %out[%gc01, %gr01] : memref<16x16xf16>
      %x10 = vector.extract %x[1, 0] : f16 from vector<4x2xf16>
      %rbase10 = arith.constant 8 : index
      %cbase10 = arith.constant 0 : index
      %e10 = arith.constant 0 : index
      %qr10 = arith.addi %q2, %e10 : index
      %gr10 = arith.addi %rbase10, %qr10 : index
      %gc10 = arith.addi %cbase10, %g : index
      memref.store %x10, %out[%gc10, %gr10] : memref<16x16xf16>
      %x11 = vector.extract %x[1, 1] : f16 from vector<4x2xf16>
      %rbase11 = arith.constant 8 : index
      %cbase11 = arith.constant 0 : index
      %e11 = arith.constant 1 : index
      %qr11 = arith.addi %q2, %e11 : index
      %gr11 = arith.addi %rbase11, %qr11 : index
      %gc11 = arith.addi %cbase11, %g : index
      memref.store %x11, %out[%gc11, %gr11] : memref<16x16xf16>
      %x20 = vector.extract %x[2, 0] : f16 from vector<4x2xf16>
      %rbase20 = arith.constant 0 : index
      %cbase20 = arith.constant 8 : index
      %e20 = arith.constant 0 : index
      %qr20 = arith.addi %q2, %e20 : index
      %gr20 = arith.addi %rbase20, %qr20 : index
      %gc20 = arith.addi %cbase20, %g : index
      memref.store %x20, %out[%gc20, %gr20] : memref<16x16xf16>
      %x21 = vector.extract %x[2, 1] : f16 from vector<4x2xf16>
      %rbase21 = arith.constant 0 : index
      %cbase21 = arith.constant 8 : index
      %e21 = arith.constant 1 : index
      %qr21 = arith.addi %q2, %e21 : index
      %gr21 = arith.addi %rbase21, %qr21 : index
      %gc21 = arith.addi %cbase21, %g : index
      memref.store %x21, %out[%gc21, %gr21] : memref<16x16xf16>
      %x30 = vector.extract %x[3, 0] : f16 from vector<4x2xf16>
      %rbase30 = arith.constant 8 : index
      %cbase30 = arith.constant 8 : index
      %e30 = arith.constant 0 : index
      %qr30 = arith.addi %q2, %e30 : index
      %gr30 = arith.addi %rbase30, %qr30 : index
      %gc30 = arith.addi %cbase30, %g : index
      memref.store %x30, %out[%gc30, %gr30] : memref<16x16xf16>
      %x31 = vector.extract %x[3, 1] : f16 from vector<4x2xf16>
      %rbase31 = arith.constant 8 : index
      %cbase31 = arith.constant 8 : index
      %e31 = arith.constant 1 : index
      %qr31 = arith.addi %q2, %e31 : index
      %gr31 = arith.addi %rbase31, %qr31 : index
      %gc31 = arith.addi %cbase31, %g : index
      memref.store %x31, %out[%gc31, %gr31] : memref<16x16xf16>
      gpu.return
    }
  }
}
