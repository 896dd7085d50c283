// RUN: mlpipe-opt %s -split-input-file --mlpipe-elide-result-copies | FileCheck %s

// The call writes straight into the out-parameter.
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME: %[[X:.*]]: memref<8xf32>, %[[Y:.*]]: memref<8xf32>
// CHECK-NEXT: call @gelu_loop(%[[X]], %[[Y]])
// CHECK-NEXT: return
func.func private @gelu_loop(memref<8xf32>, memref<8xf32>)
func.func @gelu(%x: memref<8xf32>, %y: memref<8xf32>) {
  %alloc = memref.alloc() : memref<8xf32>
  call @gelu_loop(%x, %alloc) : (memref<8xf32>, memref<8xf32>) -> ()
  memref.copy %alloc, %y : memref<8xf32> to memref<8xf32>
  memref.dealloc %alloc : memref<8xf32>
  return
}

// -----

// The temporary is read after the copy: the copy stays.
// CHECK-LABEL: func.func @read_after(
// CHECK: memref.copy
func.func private @f(memref<8xf32>, memref<8xf32>)
func.func @read_after(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  %alloc = memref.alloc() : memref<8xf32>
  call @f(%x, %alloc) : (memref<8xf32>, memref<8xf32>) -> ()
  memref.copy %alloc, %y : memref<8xf32> to memref<8xf32>
  call @f(%alloc, %z) : (memref<8xf32>, memref<8xf32>) -> ()
  return
}

// -----

// The out-parameter is also read: the copy stays.
// CHECK-LABEL: func.func @target_read(
// CHECK: memref.copy
func.func private @f(memref<8xf32>, memref<8xf32>)
func.func @target_read(%x: memref<8xf32>, %y: memref<8xf32>) {
  %alloc = memref.alloc() : memref<8xf32>
  call @f(%y, %alloc) : (memref<8xf32>, memref<8xf32>) -> ()
  memref.copy %alloc, %y : memref<8xf32> to memref<8xf32>
  return
}

// -----

// A fusion that reshapes its result into a temporary (a transpose written
// through expand_shape) writes into the out-parameter seen through the
// inverse reshape; the copy goes.
// CHECK-LABEL: func.func @reshaped(
// CHECK-SAME: %[[X:arg[0-9]+]]: memref<4x9xf32>, %[[Y:arg[0-9]+]]: memref<3x3x4xf32>
// CHECK-NEXT: %[[FLAT:.*]] = memref.collapse_shape %[[Y]] {{\[}}[0, 1], [2]] : memref<3x3x4xf32> into memref<9x4xf32>
// CHECK-NEXT: %[[VIEW:.*]] = memref.expand_shape %[[FLAT]]
// CHECK-NEXT: linalg.transpose ins(%[[X]] : memref<4x9xf32>) outs(%[[FLAT]] : memref<9x4xf32>)
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.alloc
func.func @reshaped(%x: memref<4x9xf32>, %y: memref<3x3x4xf32>) {
  %alloc = memref.alloc() : memref<9x4xf32>
  %view = memref.expand_shape %alloc [[0, 1], [2]] output_shape [3, 3, 4] : memref<9x4xf32> into memref<3x3x4xf32>
  linalg.transpose ins(%x : memref<4x9xf32>) outs(%alloc : memref<9x4xf32>) permutation = [1, 0]
  memref.copy %view, %y : memref<3x3x4xf32> to memref<3x3x4xf32>
  memref.dealloc %alloc : memref<9x4xf32>
  return
}

// -----

// The same through collapse_shape.
// CHECK-LABEL: func.func @collapsed(
// CHECK-SAME: %[[Y:arg[0-9]+]]: memref<36xf32>
// CHECK-NEXT: %[[SHAPED:.*]] = memref.expand_shape %[[Y]] {{\[}}[0, 1]] output_shape [9, 4] : memref<36xf32> into memref<9x4xf32>
// CHECK-NOT: memref.copy
func.func @collapsed(%x: memref<4x9xf32>, %y: memref<36xf32>) {
  %alloc = memref.alloc() : memref<9x4xf32>
  %view = memref.collapse_shape %alloc [[0, 1]] : memref<9x4xf32> into memref<36xf32>
  linalg.transpose ins(%x : memref<4x9xf32>) outs(%alloc : memref<9x4xf32>) permutation = [1, 0]
  memref.copy %view, %y : memref<36xf32> to memref<36xf32>
  memref.dealloc %alloc : memref<9x4xf32>
  return
}

// -----

// The reshaped temporary is read after the copy: the copy stays.
// CHECK-LABEL: func.func @reshaped_read_after(
// CHECK: memref.copy
func.func private @g(memref<3x3x4xf32>)
func.func @reshaped_read_after(%x: memref<4x9xf32>, %y: memref<3x3x4xf32>) {
  %alloc = memref.alloc() : memref<9x4xf32>
  %view = memref.expand_shape %alloc [[0, 1], [2]] output_shape [3, 3, 4] : memref<9x4xf32> into memref<3x3x4xf32>
  linalg.transpose ins(%x : memref<4x9xf32>) outs(%alloc : memref<9x4xf32>) permutation = [1, 0]
  memref.copy %view, %y : memref<3x3x4xf32> to memref<3x3x4xf32>
  call @g(%view) : (memref<3x3x4xf32>) -> ()
  return
}
