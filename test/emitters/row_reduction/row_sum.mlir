// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

// Rows of 5000 need a block each: the warps' sums meet in workgroup memory
// behind a barrier.
// CHECK-LABEL: gpu.func @rowsum_row_reduction(
// CHECK-SAME: workgroup(%[[SLOTS:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[SLOTS]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SLOTS]]
module {
  func.func private @rowsum_row_reduction(%x: memref<3x5000xf32>, %y: memref<3xf32>)
      attributes {mlpipe.fusion = "row_reduction"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%y : memref<3xf32>)
    linalg.reduce ins(%x : memref<3x5000xf32>) outs(%y : memref<3xf32>) dimensions = [1]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    return
  }
  func.func @rowsum(%x: memref<3x5000xf32>, %y: memref<3xf32>) {
    call @rowsum_row_reduction(%x, %y) : (memref<3x5000xf32>, memref<3xf32>) -> ()
    return
  }
}
