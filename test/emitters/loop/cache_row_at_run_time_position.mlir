// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

// A KV-cache row written at a run-time position: the position is read in
// the kernel, and the slice's offset comes from the view's metadata.
// CHECK-LABEL: gpu.func @write_row_loop(
// CHECK: memref.load %{{.*}}[] : memref<i32>
// CHECK: memref.extract_strided_metadata
// CHECK: memref.store
module {
  func.func private @write_row_loop(%row: memref<2x1x4xf32>, %cache: memref<2x8x4xf32>, %pos: memref<i32>)
      attributes {mlpipe.fusion = "loop"} {
    %p = memref.load %pos[] : memref<i32>
    %i = arith.index_cast %p : i32 to index
    %view = memref.subview %cache[0, %i, 0] [2, 1, 4] [1, 1, 1] : memref<2x8x4xf32> to memref<2x1x4xf32, strided<[32, 4, 1], offset: ?>>
    linalg.copy ins(%row : memref<2x1x4xf32>) outs(%view : memref<2x1x4xf32, strided<[32, 4, 1], offset: ?>>)
    return
  }
  func.func @write_row(%row: memref<2x1x4xf32>, %cache: memref<2x8x4xf32>, %pos: memref<i32>) {
    call @write_row_loop(%row, %cache, %pos) : (memref<2x1x4xf32>, memref<2x8x4xf32>, memref<i32>) -> ()
    return
  }
}
