// A kernel that reverses 64 values through shared memory, with its barrier
// missing: thread t reads what thread 63 - t wrote, before the same barrier.
module attributes {gpu.container_module} {
  func.func @reverse(%x: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @reverse_kernel::@reverse blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<64xf32>)
    return
  }
  gpu.module @reverse_kernel {
    gpu.func @reverse(%x: memref<64xf32>) workgroup(%s : memref<64xf32, #gpu.address_space<workgroup>>) kernel {
      %c63 = arith.constant 63 : index
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<64xf32>
      memref.store %v, %s[%t] : memref<64xf32, #gpu.address_space<workgroup>>
      %r = arith.subi %c63, %t : index
      %w = memref.load %s[%r] : memref<64xf32, #gpu.address_space<workgroup>>
      memref.store %w, %x[%t] : memref<64xf32>
      gpu.return
    }
  }
}
