// RUN: mlpipe-opt %s -split-input-file --mlpipe-copies-as-linalg | FileCheck %s

// CHECK-LABEL: func.func @copy
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<4x8xf32>) outs(%{{.*}} : memref<4x8xf32>)
func.func @copy(%src: memref<4x8xf32>, %dst: memref<4x8xf32>) {
  memref.copy %src, %dst : memref<4x8xf32> to memref<4x8xf32>
  return
}

// -----

// Strided views are copied too.
// CHECK-LABEL: func.func @strided
// CHECK: linalg.copy ins(%{{.*}} : memref<4x4xf32, strided<[8, 1]>>) outs
func.func @strided(%src: memref<4x8xf32>, %dst: memref<4x4xf32>) {
  %view = memref.subview %src[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  memref.copy %view, %dst : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32>
  return
}
