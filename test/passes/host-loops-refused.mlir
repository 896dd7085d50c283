// RUN: not mlpipe-opt %s --mlpipe-host-loops 2>&1 >/dev/null | FileCheck %s

// The host reads back one element, never a whole array.
// CHECK: error: mlpipe-host-loops: the host reads an element of 'memref<4xf32>'; it reads back one-element buffers only (a loop's condition)
func.func @reads_an_array(%x: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<4xf32>
  return %v : f32
}
