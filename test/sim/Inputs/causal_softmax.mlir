// Attention's softmax as fused mode leaves it (f32): the scaled scores
// plus a causal mask that another fusion computes into memory once. The
// row reduction emitter reads only the keys up to each row's query.
// T = 40: ten 4-element chunks per row, 16 lanes a row, and the chunk
// holding the diagonal read with its mask.
// @given_mask adds a mask the caller passes in instead: nothing says what
// it holds, so every key is read.
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#mask = affine_map<(d0, d1, d2) -> (d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @causal_mask_loop(%mask: memref<40x40xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"} {
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]} outs(%mask : memref<40x40xf32>) {
    ^bb0(%out: f32):
      %query = linalg.index 0 : index
      %key = linalg.index 1 : index
      %after = arith.subi %key, %query : index
      %masked = arith.cmpi sge, %after, %c1 : index
      %0 = arith.select %masked, %one, %zero : f32
      %1 = arith.mulf %0, %big : f32
      linalg.yield %1 : f32
    }
    return
  }
  func.func private @softmax_row_reduction(%scores: memref<3x40x40xf32>, %mask: memref<40x40xf32>, %probs: memref<3x40x40xf32> {bufferize.result}) attributes {mlpipe.fusion = "row_reduction"} {
    %zero = arith.constant 0.000000e+00 : f32
    %negInf = arith.constant 0xFF800000 : f32
    %scale = arith.constant 1.250000e-01 : f32
    linalg.generic {indexing_maps = [#id3, #mask, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %mask : memref<3x40x40xf32>, memref<40x40xf32>) outs(%probs : memref<3x40x40xf32>) {
    ^bb0(%s: f32, %m: f32, %out: f32):
      %0 = arith.mulf %s, %scale : f32
      %1 = arith.addf %0, %m : f32
      linalg.yield %1 : f32
    }
    %acc = memref.alloc() : memref<3x40xf32>
    linalg.fill ins(%negInf : f32) outs(%acc : memref<3x40xf32>)
    linalg.reduce ins(%probs : memref<3x40x40xf32>) outs(%acc : memref<3x40xf32>) dimensions = [2]
      (%in: f32, %init: f32) {
        %0 = arith.maximumf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#id3, #row, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %acc : memref<3x40x40xf32>, memref<3x40xf32>) outs(%probs : memref<3x40x40xf32>) {
    ^bb0(%x: f32, %max: f32, %out: f32):
      %0 = arith.subf %x, %max : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%acc : memref<3x40xf32>)
    linalg.reduce ins(%probs : memref<3x40x40xf32>) outs(%acc : memref<3x40xf32>) dimensions = [2]
      (%in: f32, %init: f32) {
        %0 = arith.addf %in, %init : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#id3, #row, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %acc : memref<3x40x40xf32>, memref<3x40xf32>) outs(%probs : memref<3x40x40xf32>) {
    ^bb0(%e: f32, %sum: f32, %out: f32):
      %0 = arith.divf %e, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %acc : memref<3x40xf32>
    return
  }
  func.func @fused_mask(%scores: memref<3x40x40xf32> {mlpipe.name = "scores"}, %probs: memref<3x40x40xf32> {mlpipe.name = "probs"}) {
    %mask = memref.alloc() : memref<40x40xf32>
    call @causal_mask_loop(%mask) : (memref<40x40xf32>) -> ()
    call @softmax_row_reduction(%scores, %mask, %probs) : (memref<3x40x40xf32>, memref<40x40xf32>, memref<3x40x40xf32>) -> ()
    memref.dealloc %mask : memref<40x40xf32>
    return
  }
  func.func @given_mask(%scores: memref<3x40x40xf32> {mlpipe.name = "scores"}, %mask: memref<40x40xf32> {mlpipe.name = "mask"}, %probs: memref<3x40x40xf32> {mlpipe.name = "probs"}) {
    call @softmax_row_reduction(%scores, %mask, %probs) : (memref<3x40x40xf32>, memref<40x40xf32>, memref<3x40x40xf32>) -> ()
    return
  }
}
