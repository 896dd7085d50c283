// RUN: mlpipe-opt %s --mlpipe-fused-attention --cse --debug-only=mlpipe-emitters 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG < %t.debug

// batched_decode.mlir's step (3 sequences of 2 heads against a 96-key
// cache) with its mask as the fused mode traces it (Graph::positionsMask):
// one loop fusion writes select(key > positions[row floordiv 2], -1e10, 0)
// over [6, 1, 96] for every layer, and the softmax reads it as it is. The
// fused kernel computes the mask's elements from the positions as that
// fusion does, each row reading its own sequence's (the positions are an
// argument of the kernel already), so the mask is not an argument, and its
// fusion, which nothing else reads, goes with its buffer.
// CHECK-LABEL: func.func @batched_decode(
// CHECK-NOT: call @attn_scores_loop
// CHECK-NOT: memref<6x1x96xf32>
// CHECK: gpu.launch_func{{ +}}@attn_attention_module::@attn_attention {{.*}}, %arg3 : memref<6x1x32xf32>, %arg1 : memref<3xi32>, %arg0 : memref<3x192xf32>)
// CHECK-NOT: call @attn_
// CHECK: return

// In the kernel: each row's sequence's position compared with the key and
// the mask's constants selected; no load of a mask.
// CHECK: gpu.func @attn_attention(
// CHECK-NOT: memref<6x1x96xf32>
// CHECK: arith.cmpi sgt
// CHECK: arith.select %{{.*}}, %cst{{.*}}, %cst{{.*}} : f32
// CHECK: gpu.return

// DEBUG: attn_attention: fused attention, 6 heads of 1 queries x 96 keys x 32, masked past each sequence's run-time position (a sequence's 2 rows: tiles after it skipped)
// DEBUG-SAME: writing every sequence's keys and values into the cache at its position first

#map_row_pos = affine_map<(d0, d1, d2) -> (d0 floordiv 2)>
#map_id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map_row = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attn_scores_loop(%arg0: memref<3xi32>, %arg1: memref<6x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    %cst = arith.constant -1.000000e+10 : f32
    %cst_0 = arith.constant 0.000000e+00 : f32
    linalg.generic {indexing_maps = [#map_row_pos, #map_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : memref<3xi32>) outs(%arg1 : memref<6x1x96xf32>) {
    ^bb0(%in: i32, %out: f32):
      %0 = linalg.index 2 : index
      %1 = arith.index_cast %0 : index to i32
      %2 = arith.cmpi sgt, %1, %in : i32
      %3 = arith.select %2, %cst, %cst_0 : f32
      linalg.yield %3 : f32
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
  func.func private @attn_softmax_row_reduction(%arg0: memref<6x1x96xf32>, %arg1: memref<6x1x96xf32>, %arg2: memref<6x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map_id3, #map_id3, #map_id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %arg1 : memref<6x1x96xf32>, memref<6x1x96xf32>) outs(%arg2 : memref<6x1x96xf32>) {
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
    %mask = memref.alloc() : memref<6x1x96xf32>
    call @attn_scores_loop(%arg1, %mask) : (memref<3xi32>, memref<6x1x96xf32>) -> ()
    %scores = memref.alloc() : memref<6x1x96xf32>
    call @attn_scores_matmul(%arg2, %arg0, %scores) : (memref<2x6x96x32xf32>, memref<3x192xf32>, memref<6x1x96xf32>) -> ()
    %probs = memref.alloc() : memref<6x1x96xf32>
    call @attn_softmax_row_reduction(%scores, %mask, %probs) : (memref<6x1x96xf32>, memref<6x1x96xf32>, memref<6x1x96xf32>) -> ()
    call @attn_values_matmul(%probs, %arg2, %arg3) : (memref<6x1x96xf32>, memref<2x6x96x32xf32>, memref<6x1x32xf32>) -> ()
    memref.dealloc %probs : memref<6x1x96xf32>
    memref.dealloc %scores : memref<6x1x96xf32>
    memref.dealloc %mask : memref<6x1x96xf32>
    return
  }
}
