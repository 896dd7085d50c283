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
