// RUN: mlpipe-opt %s -split-input-file --mlpipe-transposed-operand-views | FileCheck %s

// The transposed copy feeding only a matmul becomes a view.
// CHECK-LABEL: func.func @transposed_rhs
// CHECK-NOT: linalg.transpose
// CHECK: %[[VIEW:.*]] = memref.transpose %{{.*}} (d0, d1) -> (d1, d0)
// CHECK: linalg.matmul ins(%{{.*}}, %[[VIEW]] :
// CHECK-NOT: memref.dealloc
func.func @transposed_rhs(%a: memref<4x8xf32>, %w: memref<6x8xf32>, %c: memref<4x6xf32>) {
  %wT = memref.alloc() : memref<8x6xf32>
  linalg.transpose ins(%w : memref<6x8xf32>) outs(%wT : memref<8x6xf32>) permutation = [1, 0]
  linalg.matmul ins(%a, %wT : memref<4x8xf32>, memref<8x6xf32>) outs(%c : memref<4x6xf32>)
  memref.dealloc %wT : memref<8x6xf32>
  return
}

// -----

// A copy that something else also reads stays a copy.
// CHECK-LABEL: func.func @copy_read_elsewhere
// CHECK: linalg.transpose
// CHECK: linalg.matmul
func.func @copy_read_elsewhere(%a: memref<4x8xf32>, %w: memref<6x8xf32>, %c: memref<4x6xf32>, %d: memref<8x6xf32>) {
  %wT = memref.alloc() : memref<8x6xf32>
  linalg.transpose ins(%w : memref<6x8xf32>) outs(%wT : memref<8x6xf32>) permutation = [1, 0]
  linalg.matmul ins(%a, %wT : memref<4x8xf32>, memref<8x6xf32>) outs(%c : memref<4x6xf32>)
  memref.copy %wT, %d : memref<8x6xf32> to memref<8x6xf32>
  memref.dealloc %wT : memref<8x6xf32>
  return
}

// -----

// The source written between the copy and the matmul: the copy stays.
// CHECK-LABEL: func.func @source_overwritten
// CHECK: linalg.transpose
func.func @source_overwritten(%a: memref<4x8xf32>, %w: memref<6x8xf32>, %c: memref<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %wT = memref.alloc() : memref<8x6xf32>
  linalg.transpose ins(%w : memref<6x8xf32>) outs(%wT : memref<8x6xf32>) permutation = [1, 0]
  linalg.fill ins(%zero : f32) outs(%w : memref<6x8xf32>)
  linalg.matmul ins(%a, %wT : memref<4x8xf32>, memref<8x6xf32>) outs(%c : memref<4x6xf32>)
  memref.dealloc %wT : memref<8x6xf32>
  return
}
