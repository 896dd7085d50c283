// RUN: mlpipe-opt %s -split-input-file --mlpipe-tiled-matmuls | FileCheck %s

// CHECK-LABEL: func.func @plain
// CHECK-NOT: linalg.matmul
// CHECK: gpu.launch_func @mlpipe_tiled_matmul_2d_f32::@tiled_matmul_2d_f32
// CHECK-LABEL: gpu.module @mlpipe_tiled_matmul_2d_f32
// CHECK: gpu.func @tiled_matmul_2d_f32({{.*}}) workgroup({{.*}}memref<16x16xf32, #gpu.address_space<workgroup>>{{.*}}) kernel
// CHECK: gpu.barrier
func.func @plain(%a: memref<33x17xf32>, %b: memref<17x65xf32>, %c: memref<33x65xf32>) {
  linalg.matmul ins(%a, %b : memref<33x17xf32>, memref<17x65xf32>) outs(%c : memref<33x65xf32>)
  return
}

// -----

// The batch comes from grid z.
// CHECK-LABEL: func.func @batched
// CHECK: gpu.launch_func @mlpipe_tiled_matmul_3d_f64::@tiled_matmul_3d_f64
// CHECK-LABEL: gpu.module @mlpipe_tiled_matmul_3d_f64
// CHECK: gpu.block_id z
func.func @batched(%a: memref<2x4x8xf64>, %b: memref<2x8x6xf64>, %c: memref<2x4x6xf64>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf64>, memref<2x8x6xf64>) outs(%c : memref<2x4x6xf64>)
  return
}
