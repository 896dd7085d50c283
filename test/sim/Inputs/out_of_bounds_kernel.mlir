// A kernel whose last thread reads one element past its row: the index is
// inside the buffer but outside the view's bounds.
module attributes {gpu.container_module} {
  func.func @shift(%x: memref<4x16xf32>, %y: memref<4x16xf32>) {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    gpu.launch_func @shift_kernel::@shift blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%x : memref<4x16xf32>, %y : memref<4x16xf32>)
    return
  }
  gpu.module @shift_kernel {
    gpu.func @shift(%x: memref<4x16xf32>, %y: memref<4x16xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %t = gpu.thread_id x
      %n = arith.addi %t, %c1 : index
      %v = memref.load %x[%c0, %n] : memref<4x16xf32>
      memref.store %v, %y[%c0, %t] : memref<4x16xf32>
      gpu.return
    }
  }
}
