// RUN: mlpipe-opt %s --mlpipe-emit-fusions=chip=sm_90 --cse | FileCheck %s

// XLA's example exp -> transpose -> abs: one kernel. exp is computed as the
// tile is read (along the input's rows), abs as it is written (along the
// output's rows), through a 32x33 workgroup tile behind one barrier.
// CHECK-LABEL: func.func @exp_transpose_abs(
// CHECK-COUNT-1: gpu.launch_func
// CHECK-LABEL: gpu.func @exp_transpose_abs_transpose(
// CHECK-SAME: workgroup(%[[TILE:.*]] : memref<32x33xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: known_block_size = array<i32: 32, 8, 1>
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[TILE]]
// CHECK-COUNT-1: gpu.barrier
// CHECK: memref.load %[[TILE]]
// CHECK: math.absf
// CHECK: memref.store
#id = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @exp_transpose_abs_transpose(%x: memref<100x70xf32>, %y: memref<70x100xf32>)
      attributes {mlpipe.fusion = "transpose"} {
    %e = memref.alloc() : memref<100x70xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : memref<100x70xf32>) outs(%e : memref<100x70xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.exp %a : f32
      linalg.yield %v : f32
    }
    %t = memref.alloc() : memref<70x100xf32>
    linalg.transpose ins(%e : memref<100x70xf32>) outs(%t : memref<70x100xf32>) permutation = [1, 0]
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%t : memref<70x100xf32>) outs(%y : memref<70x100xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = math.absf %a : f32
      linalg.yield %v : f32
    }
    memref.dealloc %e : memref<100x70xf32>
    memref.dealloc %t : memref<70x100xf32>
    return
  }
  func.func @exp_transpose_abs(%x: memref<100x70xf32>, %y: memref<70x100xf32>) {
    call @exp_transpose_abs_transpose(%x, %y) : (memref<100x70xf32>, memref<70x100xf32>) -> ()
    return
  }
}
