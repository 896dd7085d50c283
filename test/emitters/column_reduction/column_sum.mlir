// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

// Column sums: 32-column tiles, 8 rows at once, the partials meeting in an
// 8x33 workgroup tile; the rows are split over blocks that write their
// partials to a workspace the host allocates, and the last block of each
// column tile to finish combines them, in the same launch.
// CHECK-LABEL: func.func @colsum(
// CHECK: %[[WS:.*]] = memref.alloc() : memref<1x[[CHUNKS:[0-9]+]]x96xf32>
// CHECK: gpu.launch_func @colsum_column_reduction_module::@colsum_column_reduction {{.*}} threads in (%c32, %c8, %c1)
// CHECK-NOT: gpu.launch_func
// CHECK: memref.dealloc %[[WS]]
// One counter a column tile (96 columns: three).
// CHECK: memref.global "private" @finished_splits : memref<3xi32> = dense<0>
// CHECK-LABEL: gpu.func @colsum_column_reduction(
// CHECK-SAME: workgroup(%[[TILE:.*]] : memref<8x33xf32, #gpu.address_space<workgroup>>, %[[FLAG:.*]] : memref<1x1xi32, #gpu.address_space<workgroup>>)
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %[[TILE]]
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<1x[[CHUNKS]]x96xf32>
// The block's partials released, then counted; the last of a tile's
// blocks acquires the others' and combines them.
// CHECK: gpu.barrier
// CHECK: llvm.fence syncscope("device") release
// CHECK: memref.atomic_rmw addi
// CHECK: llvm.fence syncscope("device") acquire
// CHECK: memref.store %{{.*}}, %[[FLAG]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[FLAG]]
// The combine is a column reduction of the tile's partials: thread (x, y)
// adds chunks y, y + 8, ... of column x, the eight sums then meet in shared
// memory and are added in order.
// CHECK: scf.for
// CHECK: memref.load %{{.*}} : memref<1x[[CHUNKS]]x96xf32>
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %[[TILE]]
// CHECK: memref.store %{{.*}} : memref<96xf32>
module {
  func.func private @colsum_column_reduction(%x: memref<20000x96xf32>, %y: memref<96xf32>)
      attributes {mlpipe.fusion = "column_reduction"} {
    %zero = arith.constant 0.0 : f32
    linalg.fill ins(%zero : f32) outs(%y : memref<96xf32>)
    linalg.reduce ins(%x : memref<20000x96xf32>) outs(%y : memref<96xf32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %r = arith.addf %in, %acc : f32
        linalg.yield %r : f32
      }
    return
  }
  func.func @colsum(%x: memref<20000x96xf32>, %y: memref<96xf32>) {
    call @colsum_column_reduction(%x, %y) : (memref<20000x96xf32>, memref<96xf32>) -> ()
    return
  }
}
