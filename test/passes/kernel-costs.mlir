// RUN: mlpipe-opt %s -split-input-file --mlpipe-kernel-costs | FileCheck %s

// The emitters' counts are kept; without them the bytes are -1 (counted at
// launch) and each argument's memref rank and element size are listed.
// Two modules' kernels share the name @k: each takes its module's name.
// CHECK: module attributes {gpu.container_module, mlpipe.kernels = {
// CHECK-SAME: gelu_loop = {args = [-1, 0, 2, 4, 2, 4], bytes = 131072 : i64, flops = 0 : i64}
// CHECK-SAME: k_a = {args = [1, 8], bytes = -1 : i64, flops = 0 : i64}
// CHECK-SAME: k_b = {args = [3, 2, -1, 0], bytes = -1 : i64, flops = 0 : i64}
// CHECK-SAME: matmul_tile = {args = [2, 4, 2, 4, 2, 4], bytes = 4096 : i64, flops = 262144 : i64}
// CHECK: gpu.launch_func @k_a::@k_a
// CHECK: gpu.launch_func @k_b::@k_b
// CHECK: gpu.func @k_a(
// CHECK: gpu.func @k_b(
module attributes {gpu.container_module} {
  func.func @f(%a: memref<16xf64>, %b: memref<2x3x4xf16>, %n: index) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k_a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<16xf64>)
    gpu.launch_func @k_b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%b : memref<2x3x4xf16>, %n : index)
    return
  }
  gpu.module @gelu {
    gpu.func @gelu_loop(%n: index, %x: memref<64x256xf32>, %y: memref<64x256xf32>) kernel
        attributes {mlpipe.bytes = 131072 : i64, mlpipe.flops = 0 : i64} {
      gpu.return
    }
  }
  gpu.module @matmul {
    gpu.func @matmul_tile(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>) kernel
        attributes {mlpipe.bytes = 4096 : i64, mlpipe.flops = 262144 : i64} {
      gpu.return
    }
  }
  gpu.module @k_a {
    gpu.func @k(%a: memref<16xf64>) kernel {
      gpu.return
    }
  }
  gpu.module @k_b {
    gpu.func @k(%b: memref<2x3x4xf16>, %n: index) kernel {
      gpu.return
    }
  }
}
