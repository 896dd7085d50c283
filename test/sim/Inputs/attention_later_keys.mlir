// Attention over later keys only (key j visible to query i when j >= i),
// masked with -inf as JAX's where() does: for queries 32..39 every key of
// the first 32-key tile is -inf, so the online softmax must not take
// exp(-inf - -inf). Made from `trace attention --shape 40x64 --heads 2`
// after fuse, bufferize and outline's view passes, its prologue rewritten.
#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1) -> (d1 floordiv 32, d0, d1 mod 32)>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%arg0: memref<40x64xf32>, %arg1: memref<40x64xf32>, %arg2: memref<2x40x40xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %expand_shape = memref.expand_shape %arg0 [[0], [1, 2]] output_shape [40, 2, 32] : memref<40x64xf32> into memref<40x2x32xf32>
    %transpose = memref.transpose %expand_shape (d0, d1, d2) -> (d1, d0, d2) : memref<40x2x32xf32> to memref<2x40x32xf32, strided<[32, 64, 1]>>
    %expand_shape_0 = memref.expand_shape %arg1 [[0], [1, 2]] output_shape [40, 2, 32] : memref<40x64xf32> into memref<40x2x32xf32>
    %transpose_1 = memref.transpose %expand_shape_0 (d0, d1, d2) -> (d1, d2, d0) : memref<40x2x32xf32> to memref<2x32x40xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<2x40x40xf32>)
    linalg.batch_matmul ins(%transpose, %transpose_1 : memref<2x40x32xf32, strided<[32, 64, 1]>>, memref<2x32x40xf32, strided<[32, 1, 64]>>) outs(%arg2 : memref<2x40x40xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%arg0: memref<2x40x40xf32>, %arg1: memref<2x40x40xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %cst = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %cst_0 = arith.constant 1.000000e+00 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %cst_2 = arith.constant -1.000000e+10 : f32
    %cst_3 = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : memref<2x40x40xf32>) outs(%arg1 : memref<2x40x40xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = linalg.index 1 : index
      %1 = linalg.index 2 : index
      %2 = arith.cmpi slt, %1, %0 : index
      %3 = arith.mulf %in, %cst_3 : f32
      %4 = arith.select %2, %cst, %3 : f32
      linalg.yield %4 : f32
    }
    %alloc = memref.alloc() {alignment = 64 : i64} : memref<2x40xf32>
    linalg.fill ins(%cst : f32) outs(%alloc : memref<2x40xf32>)
    linalg.reduce ins(%arg1 : memref<2x40x40xf32>) outs(%alloc : memref<2x40xf32>) dimensions = [2] 
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg1, %alloc : memref<2x40x40xf32>, memref<2x40xf32>) outs(%arg1 : memref<2x40x40xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %0 = arith.subf %in, %in_4 : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%cst_1 : f32) outs(%alloc : memref<2x40xf32>)
    linalg.reduce ins(%arg1 : memref<2x40x40xf32>) outs(%alloc : memref<2x40xf32>) dimensions = [2] 
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg1, %alloc : memref<2x40x40xf32>, memref<2x40xf32>) outs(%arg1 : memref<2x40x40xf32>) {
    ^bb0(%in: f32, %in_4: f32, %out: f32):
      %0 = arith.divf %in, %in_4 : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %alloc : memref<2x40xf32>
    return
  }
  func.func private @attention_values_matmul(%arg0: memref<40x64xf32>, %arg1: memref<2x40x40xf32>, %arg2: memref<2x40x32xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
    %cst = arith.constant 0.000000e+00 : f32
    %expand_shape = memref.expand_shape %arg0 [[0], [1, 2]] output_shape [40, 2, 32] : memref<40x64xf32> into memref<40x2x32xf32>
    %transpose = memref.transpose %expand_shape (d0, d1, d2) -> (d1, d0, d2) : memref<40x2x32xf32> to memref<2x40x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%cst : f32) outs(%arg2 : memref<2x40x32xf32>)
    linalg.batch_matmul ins(%arg1, %transpose : memref<2x40x40xf32>, memref<2x40x32xf32, strided<[32, 64, 1]>>) outs(%arg2 : memref<2x40x32xf32>)
    return
  }
  func.func private @attention_merge_heads_loop(%arg0: memref<2x40x32xf32>, %arg1: memref<40x64xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#map2, #map3], iterator_types = ["parallel", "parallel"]} ins(%arg0 : memref<2x40x32xf32>) outs(%arg1 : memref<40x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @attention(%arg0: memref<40x64xf32> {mlpipe.name = "q"}, %arg1: memref<40x64xf32> {mlpipe.name = "k"}, %arg2: memref<40x64xf32> {mlpipe.name = "v"}, %arg3: memref<40x64xf32> {bufferize.result, mlpipe.name = "y"}) attributes {llvm.emit_c_interface, mlpipe.inputs = [{name = "q", type = tensor<40x64xf32>}, {name = "k", type = tensor<40x64xf32>}, {name = "v", type = tensor<40x64xf32>}], mlpipe.outputs = [{name = "y", type = tensor<40x64xf32>}]} {
    %alloc = memref.alloc() : memref<2x40x40xf32>
    call @attention_scores_matmul(%arg0, %arg1, %alloc) : (memref<40x64xf32>, memref<40x64xf32>, memref<2x40x40xf32>) -> ()
    %alloc_0 = memref.alloc() : memref<2x40x40xf32>
    call @attention_softmax_row_reduction(%alloc, %alloc_0) : (memref<2x40x40xf32>, memref<2x40x40xf32>) -> ()
    %alloc_1 = memref.alloc() : memref<2x40x32xf32>
    call @attention_values_matmul(%arg2, %alloc_0, %alloc_1) : (memref<40x64xf32>, memref<2x40x40xf32>, memref<2x40x32xf32>) -> ()
    call @attention_merge_heads_loop(%alloc_1, %arg3) : (memref<2x40x32xf32>, memref<40x64xf32>) -> ()
    memref.dealloc %alloc : memref<2x40x40xf32>
    memref.dealloc %alloc_0 : memref<2x40x40xf32>
    memref.dealloc %alloc_1 : memref<2x40x32xf32>
    return
  }
}

