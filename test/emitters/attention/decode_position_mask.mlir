// RUN: mlpipe-opt %s --mlpipe-fused-attention --cse --debug-only=mlpipe-emitters 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG < %t.debug

// A decode step's attention as fuse and bufferize leave it (fused mode,
// the view of K^T made by mlpipe-transposed-operand-views): 2 heads of 32
// against a 96-key cache of two layers, one token at a run-time position.
// A loop fusion writes the mask select(key > position, -1e10, 0) over the
// keys (one mask for every layer), and the softmax reads it. The fused
// kernel computes the mask's elements from the position as that fusion
// does (the position is an argument of the kernel already: keys past it
// are skipped), so the mask is not an argument, and the mask's fusion,
// which nothing else reads, goes with its buffer.
// CHECK-LABEL: func.func @decode(
// CHECK-NOT: call @attn_scores_loop
// CHECK-NOT: memref.alloc() : memref<96xf32>
// CHECK: gpu.launch_func{{ +}}@attn_attention_module::@attn_attention {{.*}}args(%{{.*}} : memref<2x1x32xf32>, %{{.*}} : memref<2x96x32xf32, strided<[3072, 32, 1]>>, %{{.*}} : memref<2x96x32xf32, strided<[3072, 32, 1], offset: 6144>>, %{{.*}} : memref<2x1x3x36xf32>, %arg3 : memref<2x1x32xf32>, %arg1 : memref<i32>)
// CHECK-NOT: call @attn_
// CHECK: return

// Where another call reads the mask too, its fusion stays (the kernel,
// the same as the first function's, still computes the elements it needs
// itself).
// CHECK-LABEL: func.func @decode_mask_read_again(
// CHECK: call @attn_scores_loop(%arg1, %[[MASK:.*]]) :
// CHECK: gpu.launch_func{{ +}}@attn_attention_module::@attn_attention {{.*}}, %arg3 : memref<2x1x32xf32>, %arg1 : memref<i32>)
// CHECK: call @mask_copy(%[[MASK]], %arg4)

// In the kernel: the position loaded, each key compared with it and the
// mask's constants selected, as the mask's fusion computes them; no load
// of a mask.
// CHECK: gpu.func @attn_attention(
// CHECK-NOT: memref<96xf32>
// CHECK: arith.cmpi sgt
// CHECK: arith.select %{{.*}}, %cst{{.*}}, %cst{{.*}} : f32
// CHECK: gpu.return

// DEBUG: attn_attention: fused attention, 2 heads of 1 queries x 96 keys x 32, masked past a run-time position (tiles after it skipped)

#map3 = affine_map<(d0) -> (d0)>
#map4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map5 = affine_map<(d0, d1, d2) -> (d2)>
#map6 = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attn_scores_loop(%arg0: memref<i32>, %arg1: memref<96xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant -1.000000e+10 : f32
    %0 = memref.load %arg0[] : memref<i32>
    %1 = arith.index_cast %0 : i32 to index
    linalg.generic {indexing_maps = [#map3], iterator_types = ["parallel"]} outs(%arg1 : memref<96xf32>) {
    ^bb0(%out: f32):
      %2 = linalg.index 0 : index
      %3 = arith.cmpi sgt, %2, %1 : index
      %4 = arith.select %3, %cst_0, %cst : f32
      linalg.yield %4 : f32
    }
    return
  }
  func.func private @attn_scores_matmul(%arg0: memref<2x2x2x96x32xf32>, %arg1: memref<1x192xf32>, %arg2: memref<2x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %subview = memref.subview %arg0[0, 0, 0, 0, 0] [1, 2, 2, 96, 32] [1, 1, 1, 1, 1] : memref<2x2x2x96x32xf32> to memref<2x2x96x32xf32, strided<[6144, 3072, 32, 1]>>
    %subview_0 = memref.subview %subview[0, 0, 0, 0] [1, 2, 96, 32] [1, 1, 1, 1] : memref<2x2x96x32xf32, strided<[6144, 3072, 32, 1]>> to memref<2x96x32xf32, strided<[3072, 32, 1]>>
    %transpose = memref.transpose %subview_0 (d0, d1, d2) -> (d0, d2, d1) : memref<2x96x32xf32, strided<[3072, 32, 1]>> to memref<2x32x96xf32, strided<[3072, 1, 32]>>
    %subview_1 = memref.subview %arg1[0, 0] [1, 64] [1, 1] : memref<1x192xf32> to memref<1x64xf32, strided<[192, 1]>>
    %collapse_shape = memref.collapse_shape %subview_1 [[0, 1]] : memref<1x64xf32, strided<[192, 1]>> into memref<64xf32, strided<[1]>>
    %expand_shape = memref.expand_shape %collapse_shape [[0, 1, 2]] output_shape [2, 1, 32] : memref<64xf32, strided<[1]>> into memref<2x1x32xf32>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<2x1x96xf32>)
    linalg.batch_matmul ins(%expand_shape, %transpose : memref<2x1x32xf32>, memref<2x32x96xf32, strided<[3072, 1, 32]>>) outs(%arg2 : memref<2x1x96xf32>)
    return
  }
  func.func private @attn_softmax_row_reduction(%arg0: memref<2x1x96xf32>, %arg1: memref<96xf32>, %arg2: memref<2x1x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map4, #map5, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %arg1 : memref<2x1x96xf32>, memref<96xf32>) outs(%arg2 : memref<2x1x96xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %0 = arith.mulf %in, %cst_1 : f32
      %1 = arith.addf %0, %in_2 : f32
      linalg.yield %1 : f32
    }
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x1xf32>
    linalg.fill ins(%cst_0 : f32) outs(%alloc : memref<2x1xf32>)
    linalg.reduce ins(%arg2 : memref<2x1x96xf32>) outs(%alloc : memref<2x1xf32>) dimensions = [2] 
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map4, #map6, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg2, %alloc : memref<2x1x96xf32>, memref<2x1xf32>) outs(%arg2 : memref<2x1x96xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %0 = arith.subf %in, %in_2 : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%cst : f32) outs(%alloc : memref<2x1xf32>)
    linalg.reduce ins(%arg2 : memref<2x1x96xf32>) outs(%alloc : memref<2x1xf32>) dimensions = [2] 
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map4, #map6, #map4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg2, %alloc : memref<2x1x96xf32>, memref<2x1xf32>) outs(%arg2 : memref<2x1x96xf32>) {
    ^bb0(%in: f32, %in_2: f32, %out: f32):
      %0 = arith.divf %in, %in_2 : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %alloc : memref<2x1xf32>
    return
  }
  func.func private @attn_values_matmul(%arg0: memref<2x1x96xf32>, %arg1: memref<2x2x2x96x32xf32>, %arg2: memref<2x1x32xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %subview = memref.subview %arg1[0, 0, 0, 0, 0] [1, 2, 2, 96, 32] [1, 1, 1, 1, 1] : memref<2x2x2x96x32xf32> to memref<2x2x96x32xf32, strided<[6144, 3072, 32, 1]>>
    %subview_0 = memref.subview %subview[1, 0, 0, 0] [1, 2, 96, 32] [1, 1, 1, 1] : memref<2x2x96x32xf32, strided<[6144, 3072, 32, 1]>> to memref<2x96x32xf32, strided<[3072, 32, 1], offset: 6144>>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<2x1x32xf32>)
    linalg.batch_matmul ins(%arg0, %subview_0 : memref<2x1x96xf32>, memref<2x96x32xf32, strided<[3072, 32, 1], offset: 6144>>) outs(%arg2 : memref<2x1x32xf32>)
    return
  }
  func.func private @mask_copy(%arg0: memref<96xf32>, %arg1: memref<96xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel"]} ins(%arg0 : memref<96xf32>) outs(%arg1 : memref<96xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @decode(%arg0: memref<1x192xf32> {mlpipe.name = "qkv"}, %arg1: memref<i32> {mlpipe.name = "position"}, %arg2: memref<2x2x2x96x32xf32> {mlpipe.name = "kv_cache"}, %arg3: memref<2x1x32xf32> {bufferize.result, mlpipe.name = "out"}) attributes {mlpipe.inputs = [{name = "qkv", type = tensor<1x192xf32>}, {name = "position", type = tensor<i32>}, {inout = true, name = "kv_cache", type = tensor<2x2x2x96x32xf32>}], mlpipe.outputs = [{name = "out", type = tensor<2x1x32xf32>}]} {
    %mask = memref.alloc() : memref<96xf32>
    call @attn_scores_loop(%arg1, %mask) : (memref<i32>, memref<96xf32>) -> ()
    %scores = memref.alloc() : memref<2x1x96xf32>
    call @attn_scores_matmul(%arg2, %arg0, %scores) : (memref<2x2x2x96x32xf32>, memref<1x192xf32>, memref<2x1x96xf32>) -> ()
    %probs = memref.alloc() : memref<2x1x96xf32>
    call @attn_softmax_row_reduction(%scores, %mask, %probs) : (memref<2x1x96xf32>, memref<96xf32>, memref<2x1x96xf32>) -> ()
    call @attn_values_matmul(%probs, %arg2, %arg3) : (memref<2x1x96xf32>, memref<2x2x2x96x32xf32>, memref<2x1x32xf32>) -> ()
    memref.dealloc %mask : memref<96xf32>
    memref.dealloc %scores : memref<2x1x96xf32>
    memref.dealloc %probs : memref<2x1x96xf32>
    return
  }
  func.func @decode_mask_read_again(%arg0: memref<1x192xf32> {mlpipe.name = "qkv"}, %arg1: memref<i32> {mlpipe.name = "position"}, %arg2: memref<2x2x2x96x32xf32> {mlpipe.name = "kv_cache"}, %arg3: memref<2x1x32xf32> {bufferize.result, mlpipe.name = "out"}, %arg4: memref<96xf32> {bufferize.result, mlpipe.name = "mask"}) attributes {mlpipe.inputs = [{name = "qkv", type = tensor<1x192xf32>}, {name = "position", type = tensor<i32>}, {inout = true, name = "kv_cache", type = tensor<2x2x2x96x32xf32>}], mlpipe.outputs = [{name = "out", type = tensor<2x1x32xf32>}, {name = "mask", type = tensor<96xf32>}]} {
    %mask = memref.alloc() : memref<96xf32>
    call @attn_scores_loop(%arg1, %mask) : (memref<i32>, memref<96xf32>) -> ()
    %scores = memref.alloc() : memref<2x1x96xf32>
    call @attn_scores_matmul(%arg2, %arg0, %scores) : (memref<2x2x2x96x32xf32>, memref<1x192xf32>, memref<2x1x96xf32>) -> ()
    %probs = memref.alloc() : memref<2x1x96xf32>
    call @attn_softmax_row_reduction(%scores, %mask, %probs) : (memref<2x1x96xf32>, memref<96xf32>, memref<2x1x96xf32>) -> ()
    call @attn_values_matmul(%probs, %arg2, %arg3) : (memref<2x1x96xf32>, memref<2x2x2x96x32xf32>, memref<2x1x32xf32>) -> ()
    call @mask_copy(%mask, %arg4) : (memref<96xf32>, memref<96xf32>) -> ()
    memref.dealloc %mask : memref<96xf32>
    memref.dealloc %scores : memref<2x1x96xf32>
    memref.dealloc %probs : memref<2x1x96xf32>
    return
  }
}
