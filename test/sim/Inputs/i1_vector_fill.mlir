// The same eight predicates set by two stores of vector<4xi1>: LLVM packs
// each vector's bits into one byte, so y[0] and y[4] become 0b1111 and the
// bytes after them are not written.
module attributes {gpu.container_module} {
  func.func @fill(%y: memref<8xi1> {mlpipe.name = "y"}) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    gpu.launch_func @fill_kernel::@fill blocks in (%c1, %c1, %c1) threads in (%c2, %c1, %c1) args(%y : memref<8xi1>)
    return
  }
  gpu.module @fill_kernel {
    gpu.func @fill(%y: memref<8xi1>) kernel {
      %c4 = arith.constant 4 : index
      %true = arith.constant dense<true> : vector<4xi1>
      %t = gpu.thread_id x
      %at = arith.muli %t, %c4 : index
      vector.store %true, %y[%at] : memref<8xi1>, vector<4xi1>
      gpu.return
    }
  }
}
