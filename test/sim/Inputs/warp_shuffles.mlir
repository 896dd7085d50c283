// Each warp of a block runs its own number of rounds of a shuffle (warp w
// runs w + 1): a warp's lanes meet at each shuffle, warps need not. With
// %n from the lane instead, lanes of one warp run different numbers of rounds, which a GPU
// does not allow (simulator.test makes that variant with sed).
module attributes {gpu.container_module} {
  func.func @rounds(%x: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @rounds_kernel::@rounds blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<64xf32>)
    return
  }
  gpu.module @rounds_kernel {
    gpu.func @rounds(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c32 = arith.constant 32 : index
      %one = arith.constant 1 : i32
      %width = arith.constant 32 : i32
      %t = gpu.thread_id x
      %w = arith.divui %t, %c32 : index
      %n = arith.addi %w, %c1 : index
      %v = memref.load %x[%t] : memref<64xf32>
      %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %v) -> (f32) {
        %s, %valid = gpu.shuffle xor %acc, %one, %width : f32
        %a = arith.addf %acc, %s : f32
        scf.yield %a : f32
      }
      gpu.barrier
      memref.store %r, %x[%t] : memref<64xf32>
      gpu.return
    }
  }
}
