// RUN: mlpipe-opt %s -split-input-file --mlpipe-blas-matmuls | FileCheck %s

// Row-major operands: no transposes, leading dimensions are the row lengths.
// CHECK-LABEL: func.func @plain
// CHECK-NOT: linalg.matmul
// CHECK: call @cblas_sgemm(%c101_i32, %c111_i32{{[_0-9]*}}, %c111_i32{{[_0-9]*}}, %c4_i32, %c6_i32, %c8_i32,
func.func @plain(%a: memref<4x8xf32>, %b: memref<8x6xf32>, %c: memref<4x6xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x6xf32>) outs(%c : memref<4x6xf32>)
  return
}

// -----

// A transposed view is read with CblasTrans (112), no copy; f64 uses dgemm.
// CHECK-LABEL: func.func @transposed_f64
// CHECK-DAG: arith.constant 112 : i32
// CHECK: call @cblas_dgemm
func.func @transposed_f64(%a: memref<4x8xf64>, %w: memref<6x8xf64>, %c: memref<4x6xf64>) {
  %wT = memref.transpose %w (d0, d1) -> (d1, d0) : memref<6x8xf64> to memref<8x6xf64, strided<[1, 8]>>
  linalg.matmul ins(%a, %wT : memref<4x8xf64>, memref<8x6xf64, strided<[1, 8]>>) outs(%c : memref<4x6xf64>)
  return
}

// -----

// A batched matmul is a loop of calls.
// CHECK-LABEL: func.func @batched
// CHECK: scf.for
// CHECK: call @cblas_sgemm
func.func @batched(%a: memref<3x4x8xf32>, %b: memref<3x8x6xf32>, %c: memref<3x4x6xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<3x4x8xf32>, memref<3x8x6xf32>) outs(%c : memref<3x4x6xf32>)
  return
}

// -----

// An integer matmul stays linalg (it becomes loops).
// CHECK-LABEL: func.func @integer
// CHECK: linalg.matmul
func.func @integer(%a: memref<4x8xi32>, %b: memref<8x6xi32>, %c: memref<4x6xi32>) {
  linalg.matmul ins(%a, %b : memref<4x8xi32>, memref<8x6xi32>) outs(%c : memref<4x6xi32>)
  return
}
