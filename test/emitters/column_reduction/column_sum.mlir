// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

// Column sums: 32-column tiles, 8 rows at once, the partials meeting in an
// 8x33 workgroup tile; the rows are split over blocks, so a second kernel
// combines each column's partials from a workspace the host allocates, a
// block per 32 columns.
// CHECK-LABEL: func.func @colsum(
// CHECK: %[[WS:.*]] = memref.alloc() : memref<1x{{[0-9]+}}x96xf32>
// CHECK: gpu.launch_func @colsum_column_reduction_partials_module::@colsum_column_reduction_partials {{.*}} threads in (%c32, %c8, %c1)
// CHECK: gpu.launch_func @colsum_column_reduction_module::@colsum_column_reduction blocks in (%c3, %c1, %c1) threads in (%c32, %c32, %c1)
// CHECK: memref.dealloc %[[WS]]
// CHECK-LABEL: gpu.func @colsum_column_reduction_partials(
// CHECK-SAME: workgroup(%[[TILE:.*]] : memref<8x33xf32, #gpu.address_space<workgroup>>)
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK: gpu.barrier
// CHECK-COUNT-8: memref.load %[[TILE]]
// The combining kernel is a column reduction of the partials: thread (x, y)
// adds chunks y, y + 32, ... of column x (10 of the 308, all loaded before
// the first add: kCombineLoadsAtOnce), the 32 sums then meet in shared
// memory and are added in order.
// CHECK-LABEL: gpu.func @colsum_column_reduction(
// CHECK-SAME: workgroup(%[[SUMS:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT: scf.for
// CHECK-COUNT-10: memref.load %{{.*}} : memref<1x308x96xf32>
// CHECK: arith.addf
// CHECK: memref.store %{{.*}}, %[[SUMS]]
// CHECK: gpu.barrier
// CHECK-COUNT-32: memref.load %[[SUMS]]
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
