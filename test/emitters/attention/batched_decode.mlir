// RUN: mlpipe-opt %s --mlpipe-fused-attention --cse --debug-only=mlpipe-emitters 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG < %t.debug

// A batched decode step as fuse and bufferize leave it (fused mode; the
// views of K^T and V already made by mlpipe-transposed-operand-views, the
// copies made linalg.copy): 3 sequences of 2 heads, the rows b * 2 and
// b * 2 + 1 of the products sequence b's, against a 96-key cache. Each
// sequence's new key and value go into the cache at its own position (a
// copy each), a loop fusion writes the mask select(key > positions[b],
// -1e10, 0) over [3, 2, 1, 96], the scores fusion copies the queries out
// of c_attn's output to read them as [6, 1, 32], and the softmax reads the
// mask as [6, 1, 96]. The three calls and the three copies become the
// split-key kernel (the last of a row's splits combining), given the positions:
// the queries are read in place as [3, 2, 1, 32], row r's key tiles end at
// its sequence's position positions[r / 2], and its block whose split
// holds that key writes the row's new key and value first.
// CHECK-LABEL: func.func @batched_decode(
// CHECK-NOT: linalg.copy
// CHECK: call @attn_scores_loop(%arg1, %[[MASK:[a-z_0-9]+]])
// CHECK: %[[Q:.*]] = memref.expand_shape %{{.*}} {{\[\[}}0], [1, 2, 3]] output_shape [3, 2, 1, 32] : memref<3x64xf32, strided<[192, 1]>> into memref<3x2x1x32xf32, strided<[192, 32, 32, 1]>>
// CHECK-NOT: call @attn_scores_matmul
// CHECK: %[[PART:.*]] = memref.alloc() {alignment = 16 : i64} : memref<6x1x3x36xf32>
// CHECK: gpu.launch_func{{ +}}@attn_attention_module::@attn_attention blocks in (%c18, %c1, %c1) threads in (%c32, %c1, %c1){{ +}}args(%[[Q]] : memref<3x2x1x32xf32, strided<[192, 32, 32, 1]>>, %{{.*}} : memref<6x96x32xf32, strided<[3072, 32, 1]>>, %{{.*}} : memref<6x96x32xf32, strided<[3072, 32, 1], offset: 18432>>, %[[PART]] : memref<6x1x3x36xf32>, %[[MASK]] : memref<3x2x1x96xf32>, %arg3 : memref<6x1x32xf32>, %arg1 : memref<3xi32>, %arg0 : memref<3x192xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: call @attn_values_matmul
// CHECK-NOT: linalg.copy
// CHECK: return
// In the kernel: the row's sequence (row / 2) and its position, clamped,
// for the cache write; the tiles up to the position for the loop. Before
// the wait for the kernel before it, the lines of K and V its split will
// stage go into L2 (the position, a host input, read there too); the
// query, which that kernel writes, only after.
// CHECK: gpu.func @attn_attention(
// CHECK: %[[ROW:.*]] = arith.divui %block_id_x, %c3 : index
// CHECK: %[[SEQ:.*]] = arith.divui %[[ROW]], %c2 : index
// CHECK: memref.load %arg6[%[[SEQ]]] : memref<3xi32>
// CHECK: memref.extract_aligned_pointer_as_index %arg1
// CHECK: nvvm.prefetch level = L2
// CHECK: memref.extract_aligned_pointer_as_index %arg2
// CHECK: nvvm.prefetch level = L2
// CHECK-NOT: memref.load
// CHECK: nvvm.griddepcontrol wait
// CHECK: %[[H:.*]] = arith.remui %[[ROW]], %c2 : index
// CHECK: memref.load %arg0[%[[SEQ]], %[[H]], {{.*}} : memref<3x2x1x32xf32, strided<[192, 32, 32, 1]>>
// CHECK: %[[P:.*]] = memref.load %arg6[%[[SEQ]]] : memref<3xi32>
// CHECK: %[[PI:.*]] = arith.index_cast %[[P]]
// CHECK: %[[LOW:.*]] = arith.maxsi %[[PI]], %c0 : index
// CHECK: %[[KEY:.*]] = arith.minsi %[[LOW]], %c95 : index
// CHECK: scf.if
// CHECK: memref.load %arg7[{{.*}}] : memref<3x192xf32>
// CHECK: memref.store %{{.*}}, %arg1[%[[ROW]], %[[KEY]], %thread_id_x]
// CHECK: memref.load %arg7[{{.*}}] : memref<3x192xf32>
// CHECK: memref.store %{{.*}}, %arg2[%[[ROW]], %[[KEY]], %thread_id_x]
// CHECK: scf.for
// CHECK: gpu.barrier
// The last of a row's splits combines those up to its sequence's
// position: the others' partials are read as zeros.
// CHECK: %[[P2:.*]] = memref.load %arg6[%[[SEQ]]] : memref<3xi32>
// CHECK: memref.atomic_rmw addi
// CHECK: arith.select
// CHECK: memref.store %{{.*}}, %arg5[%[[ROW]], %{{.*}}, %{{.*}}] : memref<6x1x32xf32>

// DEBUG: attn_attention: fused attention, 6 heads of 1 queries x 96 keys x 32, masked past each sequence's run-time position (a sequence's 2 rows: tiles after it skipped)
// DEBUG-SAME: keys split 3 ways
// DEBUG-SAME: the split's first 1 tiles of the cache prefetched into L2 before the wait
// DEBUG-SAME: writing every sequence's keys and values into the cache at its position first

#map_pos = affine_map<(d0, d1, d2, d3) -> (d0)>
#map_id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map_id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map_row = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attn_scores_loop(%arg0: memref<3xi32>, %arg1: memref<3x2x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    %cst = arith.constant -1.000000e+10 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    linalg.generic {indexing_maps = [#map_pos, #map_id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : memref<3xi32>) outs(%arg1 : memref<3x2x1x96xf32>) {
    ^bb0(%in: i32, %out: f32):
      %0 = linalg.index 3 : index
      %1 = arith.index_cast %0 : index to i64
      %2 = arith.trunci %1 : i64 to i32
      %3 = arith.cmpi sgt, %2, %in : i32
      %4 = arith.select %3, %cst, %cst_0 : f32
      linalg.yield %4 : f32
    }
    return
  }
  func.func private @attn_scores_matmul(%arg0: memref<2x6x96x32xf32>, %arg1: memref<3x192xf32>, %arg2: memref<6x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %subview = memref.subview %arg0[0, 0, 0, 0] [1, 6, 96, 32] [1, 1, 1, 1] : memref<2x6x96x32xf32> to memref<6x96x32xf32, strided<[3072, 32, 1]>>
    %transpose = memref.transpose %subview (d0, d1, d2) -> (d0, d2, d1) : memref<6x96x32xf32, strided<[3072, 32, 1]>> to memref<6x32x96xf32, strided<[3072, 1, 32]>>
    %subview_0 = memref.subview %arg1[0, 0] [3, 64] [1, 1] : memref<3x192xf32> to memref<3x64xf32, strided<[192, 1]>>
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<3x64xf32>
    linalg.copy ins(%subview_0 : memref<3x64xf32, strided<[192, 1]>>) outs(%alloc : memref<3x64xf32>)
    %collapse_shape = memref.collapse_shape %alloc [[0, 1]] : memref<3x64xf32> into memref<192xf32>
    %expand_shape = memref.expand_shape %collapse_shape [[0, 1, 2]] output_shape [6, 1, 32] : memref<192xf32> into memref<6x1x32xf32>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<6x1x96xf32>)
    linalg.batch_matmul ins(%expand_shape, %transpose : memref<6x1x32xf32>, memref<6x32x96xf32, strided<[3072, 1, 32]>>) outs(%arg2 : memref<6x1x96xf32>)
    memref.dealloc %alloc : memref<3x64xf32>
    return
  }
  func.func private @attn_softmax_row_reduction(%arg0: memref<6x1x96xf32>, %arg1: memref<3x2x1x96xf32>, %arg2: memref<6x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 0.176776692 : f32
    %collapse_shape = memref.collapse_shape %arg1 [[0, 1], [2], [3]] : memref<3x2x1x96xf32> into memref<6x1x96xf32>
    linalg.generic {indexing_maps = [#map_id3, #map_id3, #map_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %collapse_shape : memref<6x1x96xf32>, memref<6x1x96xf32>) outs(%arg2 : memref<6x1x96xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %0 = arith.mulf %in, %cst_1 : f32
      %1 = arith.addf %0, %in_2 : f32
      linalg.yield %1 : f32
    }
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<6x1xf32>
    linalg.fill ins(%cst_0 : f32) outs(%alloc : memref<6x1xf32>)
    linalg.reduce ins(%arg2 : memref<6x1x96xf32>) outs(%alloc : memref<6x1xf32>) dimensions = [2]
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map_id3, #map_row, #map_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg2, %alloc : memref<6x1x96xf32>, memref<6x1xf32>) outs(%arg2 : memref<6x1x96xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %0 = arith.subf %in, %in_2 : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%cst : f32) outs(%alloc : memref<6x1xf32>)
    linalg.reduce ins(%arg2 : memref<6x1x96xf32>) outs(%alloc : memref<6x1xf32>) dimensions = [2]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map_id3, #map_row, #map_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg2, %alloc : memref<6x1x96xf32>, memref<6x1xf32>) outs(%arg2 : memref<6x1x96xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %0 = arith.divf %in, %in_2 : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %alloc : memref<6x1xf32>
    return
  }
  func.func private @attn_values_matmul(%arg0: memref<6x1x96xf32>, %arg1: memref<2x6x96x32xf32>, %arg2: memref<6x1x32xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %subview = memref.subview %arg1[1, 0, 0, 0] [1, 6, 96, 32] [1, 1, 1, 1] : memref<2x6x96x32xf32> to memref<6x96x32xf32, strided<[3072, 32, 1], offset: 18432>>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<6x1x32xf32>)
    linalg.batch_matmul ins(%arg0, %subview : memref<6x1x96xf32>, memref<6x96x32xf32, strided<[3072, 32, 1], offset: 18432>>) outs(%arg2 : memref<6x1x32xf32>)
    return
  }
  func.func @batched_decode(%arg0: memref<3x192xf32> {mlpipe.name = "qkv"}, %arg1: memref<3xi32> {mlpipe.name = "positions"}, %arg2: memref<2x6x96x32xf32> {mlpipe.name = "kv_cache"}, %arg3: memref<6x1x32xf32> {bufferize.result, mlpipe.name = "out"}) attributes {mlpipe.inputs = [{name = "qkv", type = tensor<3x192xf32>}, {name = "positions", type = tensor<3xi32>}, {inout = true, name = "kv_cache", type = tensor<2x6x96x32xf32>}], mlpipe.outputs = [{name = "out", type = tensor<6x1x32xf32>}]} {
    %c0 = arith.constant 0 : index
    %c95 = arith.constant 95 : index
    %subview = memref.subview %arg0[0, 64] [3, 128] [1, 1] : memref<3x192xf32> to memref<3x128xf32, strided<[192, 1], offset: 64>>
    %kv = memref.expand_shape %subview [[0], [1, 2, 3]] output_shape [3, 2, 2, 32] : memref<3x128xf32, strided<[192, 1], offset: 64>> into memref<3x2x2x32xf32, strided<[192, 64, 32, 1], offset: 64>>
    %s0 = memref.subview %kv[0, 0, 0, 0] [1, 2, 2, 32] [1, 1, 1, 1] : memref<3x2x2x32xf32, strided<[192, 64, 32, 1], offset: 64>> to memref<1x2x2x32xf32, strided<[192, 64, 32, 1], offset: 64>>
    %f0 = memref.collapse_shape %s0 [[0, 1, 2, 3]] : memref<1x2x2x32xf32, strided<[192, 64, 32, 1], offset: 64>> into memref<128xf32, strided<[1], offset: 64>>
    %e0 = memref.expand_shape %f0 [[0, 1, 2, 3]] output_shape [2, 2, 1, 32] : memref<128xf32, strided<[1], offset: 64>> into memref<2x2x1x32xf32, strided<[64, 32, 32, 1], offset: 64>>
    %ps0 = memref.subview %arg1[0] [1] [1] : memref<3xi32> to memref<1xi32, strided<[1]>>
    %pc0 = memref.collapse_shape %ps0 [] : memref<1xi32, strided<[1]>> into memref<i32>
    %p0 = memref.load %pc0[] : memref<i32>
    %i0 = arith.index_cast %p0 : i32 to index
    %lo0 = arith.maxsi %i0, %c0 : index
    %key0 = arith.minsi %lo0, %c95 : index
    %row0 = memref.subview %arg2[0, 0, %key0, 0] [2, 2, 1, 32] [1, 1, 1, 1] : memref<2x6x96x32xf32> to memref<2x2x1x32xf32, strided<[18432, 3072, 32, 1], offset: ?>>
    linalg.copy ins(%e0 : memref<2x2x1x32xf32, strided<[64, 32, 32, 1], offset: 64>>) outs(%row0 : memref<2x2x1x32xf32, strided<[18432, 3072, 32, 1], offset: ?>>)
    %s1 = memref.subview %kv[1, 0, 0, 0] [1, 2, 2, 32] [1, 1, 1, 1] : memref<3x2x2x32xf32, strided<[192, 64, 32, 1], offset: 64>> to memref<1x2x2x32xf32, strided<[192, 64, 32, 1], offset: 256>>
    %f1 = memref.collapse_shape %s1 [[0, 1, 2, 3]] : memref<1x2x2x32xf32, strided<[192, 64, 32, 1], offset: 256>> into memref<128xf32, strided<[1], offset: 256>>
    %e1 = memref.expand_shape %f1 [[0, 1, 2, 3]] output_shape [2, 2, 1, 32] : memref<128xf32, strided<[1], offset: 256>> into memref<2x2x1x32xf32, strided<[64, 32, 32, 1], offset: 256>>
    %ps1 = memref.subview %arg1[1] [1] [1] : memref<3xi32> to memref<1xi32, strided<[1], offset: 1>>
    %pc1 = memref.collapse_shape %ps1 [] : memref<1xi32, strided<[1], offset: 1>> into memref<i32, strided<[], offset: 1>>
    %p1 = memref.load %pc1[] : memref<i32, strided<[], offset: 1>>
    %i1 = arith.index_cast %p1 : i32 to index
    %lo1 = arith.maxsi %i1, %c0 : index
    %key1 = arith.minsi %lo1, %c95 : index
    %row1 = memref.subview %arg2[0, 2, %key1, 0] [2, 2, 1, 32] [1, 1, 1, 1] : memref<2x6x96x32xf32> to memref<2x2x1x32xf32, strided<[18432, 3072, 32, 1], offset: ?>>
    linalg.copy ins(%e1 : memref<2x2x1x32xf32, strided<[64, 32, 32, 1], offset: 256>>) outs(%row1 : memref<2x2x1x32xf32, strided<[18432, 3072, 32, 1], offset: ?>>)
    %s2 = memref.subview %kv[2, 0, 0, 0] [1, 2, 2, 32] [1, 1, 1, 1] : memref<3x2x2x32xf32, strided<[192, 64, 32, 1], offset: 64>> to memref<1x2x2x32xf32, strided<[192, 64, 32, 1], offset: 448>>
    %f2 = memref.collapse_shape %s2 [[0, 1, 2, 3]] : memref<1x2x2x32xf32, strided<[192, 64, 32, 1], offset: 448>> into memref<128xf32, strided<[1], offset: 448>>
    %e2 = memref.expand_shape %f2 [[0, 1, 2, 3]] output_shape [2, 2, 1, 32] : memref<128xf32, strided<[1], offset: 448>> into memref<2x2x1x32xf32, strided<[64, 32, 32, 1], offset: 448>>
    %ps2 = memref.subview %arg1[2] [1] [1] : memref<3xi32> to memref<1xi32, strided<[1], offset: 2>>
    %pc2 = memref.collapse_shape %ps2 [] : memref<1xi32, strided<[1], offset: 2>> into memref<i32, strided<[], offset: 2>>
    %p2 = memref.load %pc2[] : memref<i32, strided<[], offset: 2>>
    %i2 = arith.index_cast %p2 : i32 to index
    %lo2 = arith.maxsi %i2, %c0 : index
    %key2 = arith.minsi %lo2, %c95 : index
    %row2 = memref.subview %arg2[0, 4, %key2, 0] [2, 2, 1, 32] [1, 1, 1, 1] : memref<2x6x96x32xf32> to memref<2x2x1x32xf32, strided<[18432, 3072, 32, 1], offset: ?>>
    linalg.copy ins(%e2 : memref<2x2x1x32xf32, strided<[64, 32, 32, 1], offset: 448>>) outs(%row2 : memref<2x2x1x32xf32, strided<[18432, 3072, 32, 1], offset: ?>>)
    %mask = memref.alloc() : memref<3x2x1x96xf32>
    call @attn_scores_loop(%arg1, %mask) : (memref<3xi32>, memref<3x2x1x96xf32>) -> ()
    %scores = memref.alloc() : memref<6x1x96xf32>
    call @attn_scores_matmul(%arg2, %arg0, %scores) : (memref<2x6x96x32xf32>, memref<3x192xf32>, memref<6x1x96xf32>) -> ()
    %probs = memref.alloc() : memref<6x1x96xf32>
    call @attn_softmax_row_reduction(%scores, %mask, %probs) : (memref<6x1x96xf32>, memref<3x2x1x96xf32>, memref<6x1x96xf32>) -> ()
    call @attn_values_matmul(%probs, %arg2, %arg3) : (memref<6x1x96xf32>, memref<2x6x96x32xf32>, memref<6x1x32xf32>) -> ()
    memref.dealloc %probs : memref<6x1x96xf32>
    memref.dealloc %scores : memref<6x1x96xf32>
    memref.dealloc %mask : memref<3x2x1x96xf32>
    return
  }
}
