// RUN: mlpipe-opt %s -split-input-file --mlpipe-fill-per-use | FileCheck %s

// Two matmuls accumulating into one fill: the second gets its own.
// CHECK-LABEL: func.func @two_matmuls
// CHECK: %[[Z1:.*]] = linalg.fill
// CHECK: %[[Z2:.*]] = linalg.fill
// CHECK: linalg.matmul {{.*}} outs(%[[Z2]]
// CHECK: linalg.matmul {{.*}} outs(%[[Z1]]
func.func @two_matmuls(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8x4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = linalg.matmul ins(%a, %c : tensor<4x8xf32>, tensor<8x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// A fill with one use is left alone.
// CHECK-LABEL: func.func @one_use
// CHECK: linalg.fill
// CHECK-NOT: linalg.fill
// CHECK: return
func.func @one_use(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
