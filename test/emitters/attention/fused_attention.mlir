// RUN: mlpipe-opt %s -split-input-file --mlpipe-fused-attention --cse --debug-only=mlpipe-emitters 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG < %t.debug

// Causal attention as fuse and bufferize leave it (2 heads of 7 queries x 7 keys x 32, the
// views of Q, K^T and V already made by mlpipe-transposed-operand-views):
// the three calls become one launch, the scores and probabilities buffers
// go, K^T is transposed back to [H, T, D] on the host. In the kernel: the K
// and V tiles (32 keys) in shared memory, two barriers per tile, the
// scores summed over the row's 2 lanes, the traced prologue (mask and
// scale) and exp, and each lane's slice of the output stored with vectors.
// CHECK-LABEL: func.func @attention(
// CHECK-NOT: call @attention_scores_matmul
// CHECK-NOT: memref.alloc
// CHECK: %[[KV:.*]] = memref.transpose %{{.*}} (d0, d1, d2) -> (d0, d2, d1) : memref<2x32x7xf32, strided<[32, 1, 64]>> to memref<2x7x32xf32, strided<[32, 64, 1]>>
// CHECK: gpu.launch_func{{ +}}@attention_attention_module::@attention_attention blocks in (%c2, %c1, %c1) threads in (%c32, %c1, %c1){{ +}}args(%{{.*}} : memref<2x7x32xf32, strided<[32, 64, 1]>>, %[[KV]] : memref<2x7x32xf32, strided<[32, 64, 1]>>, %{{.*}} : memref<2x7x32xf32, strided<[32, 64, 1]>>, %arg3 : memref<2x7x32xf32>)
// CHECK-NOT: call @attention_values_matmul
// CHECK: return
// CHECK-NOT: func.func private @attention_softmax_row_reduction
// CHECK: gpu.func @attention_attention({{.*}}) workgroup(%[[KT:.*]] : memref<32x32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[VT:.*]] : memref<32x32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {known_block_size = array<i32: 32, 1, 1>
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: vector.store {{.*}}, %[[KT]]
// CHECK: vector.store {{.*}}, %[[VT]]
// CHECK: gpu.barrier
// CHECK: vector.load %[[KT]]
// CHECK: vector.fma
// CHECK: gpu.shuffle{{ +}}xor
// CHECK: arith.cmpi sge
// CHECK: arith.mulf {{.*}}, %cst{{.*}} : f32
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: vector.load %[[VT]]
// CHECK: scf.yield
// CHECK: arith.divf {{.*}} : vector<4xf32>
// CHECK: vector.store {{.*}} : memref<2x7x32xf32>, vector<4xf32>
// DEBUG: attention_attention: fused attention, 2 heads of 7 queries x 7 keys x 32, causal (tiles past the diagonal skipped), 16 query rows per block, 2 lanes per row holding 4 chunks of 4, 32-key tiles of K and V in shared memory, vectors q 4 k 4 v 4 out 4, 2 blocks x 32 threads

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func @attention(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %o: memref<2x7x32xf32>) {
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %p) : (memref<2x7x7xf32>, memref<2x7x7xf32>) -> ()
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    return
  }
}

// -----

// The scores are also copied out: the three calls stay.
// CHECK-LABEL: func.func @shared_scores(
// CHECK: call @attention_scores_matmul
// CHECK: call @attention_softmax_row_reduction
// CHECK: call @attention_values_matmul
// CHECK-NOT: gpu.launch_func
// DEBUG: attention_softmax_row_reduction: not fused attention: the scores or probabilities have other users

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func @shared_scores(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %o: memref<2x7x32xf32>, %keep: memref<2x7x7xf32>) {
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    memref.copy %s, %keep : memref<2x7x7xf32> to memref<2x7x7xf32>
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %p) : (memref<2x7x7xf32>, memref<2x7x7xf32>) -> ()
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    return
  }
}

// -----

// Without the causal mask every key tile is visited (the loop runs to a
// constant trip count) and the kernel is fused all the same.
// CHECK-LABEL: func.func @unmasked(
// CHECK: gpu.launch_func{{ +}}@attention_attention_module
// CHECK: gpu.func @attention_attention(
// CHECK: scf.for %{{.*}} = %c0 to %c1 step %c1
// DEBUG: attention_attention: fused attention, 2 heads of 7 queries x 7 keys x 32, not causal (every tile)

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      %x = arith.mulf %in, %scale : f32
      linalg.yield %x : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func @unmasked(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %o: memref<2x7x32xf32>) {
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %p) : (memref<2x7x7xf32>, memref<2x7x7xf32>) -> ()
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    return
  }
}

// -----

// A decode step: one query row per head against 300 keys (a KV cache)
// under a mask read from memory at the key. Two blocks would leave the GPU
// idle, so the keys are split over blocks: each writes its partial max,
// sum and weighted values to a temporary, fences, and counts itself done
// in its head's counter; the last block of a head to count combines the
// partials into the output and sets the counter back to zero. 300 keys
// make 10 tiles of 32 (the last cut short), one per split.
// The one query row of a head gets the whole warp:
// 32 lanes of one element of the head each, a butterfly of 5 shuffles per
// key, where a row of 7 queries gets 2 lanes of 16 elements.
// CHECK-LABEL: func.func @decode(
// CHECK: %[[PARTIALS:.*]] = memref.alloc() {alignment = 16 : i64} : memref<2x1x10x36xf32>
// CHECK: gpu.launch_func{{ +}}@attention_attention_module::@attention_attention blocks in (%c20, %c1, %c1) threads in (%c32, %c1, %c1) args({{.*}}, %[[PARTIALS]] : memref<2x1x10x36xf32>, %{{.*}} : memref<300xf32>, %{{.*}} : memref<2x1x32xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: memref.dealloc %[[PARTIALS]]
// CHECK-NOT: call @
// CHECK: memref.global "private" @finished_splits : memref<2xi32> = dense<0>
// CHECK: gpu.func @attention_attention(
// CHECK-SAME: workgroup({{.*}}, %[[FLAG:[a-z0-9]+]] : memref<1x1xi32, #gpu.address_space<workgroup>> {{.*}}, %{{.*}} : memref<1x10xf32, #gpu.address_space<workgroup>>
// The split's tiles: from split to min(split + 1, 10).
// CHECK: %[[SPLIT:.*]] = arith.remui %{{.*}}, %c10 : index
// CHECK: scf.for %{{.*}} = %[[SPLIT]] to %{{.*}} step %c1
// The staged tile's 32 keys in 4 groups of 8 (kLoneRowKeysPerGroup), an
// online-softmax step each: a key's dot product, summed over the warp from
// 16 lanes apart down, 8 times a group.
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} = %{{.*}} to %c4 step %c1 iter_args(
// CHECK-COUNT-8: gpu.shuffle{{ +}}xor %{{.*}}, %c16_i32
// CHECK-NOT: gpu.shuffle{{ +}}xor %{{.*}}, %c16_i32
// CHECK: scf.yield
// CHECK: scf.yield
// The max and the sum go after the values, by lane 0 of the row.
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c32] : memref<2x1x10x36xf32>
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %c33] : memref<2x1x10x36xf32>
// Counted by thread 0 after the block's writes (released), the last of
// the head's 10 splits told so (acquired; the counter set back to zero).
// CHECK: gpu.barrier
// CHECK: llvm.fence syncscope("device") release
// CHECK-NEXT: %[[BEFORE:.*]] = memref.atomic_rmw addi %c1_i32, %[[COUNTERS:.*]][%[[TILE:.*]]] : (i32, memref<2xi32>) -> i32
// CHECK: %[[COUNT:.*]] = arith.addi %[[BEFORE]], %c1_i32 : i32
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[COUNT]], %c10_i32 : i32
// CHECK: scf.if %[[LAST]] {
// CHECK-NEXT: llvm.fence syncscope("device") acquire
// CHECK-NEXT: memref.atomic_rmw assign %c0_i32{{.*}}, %[[COUNTERS]][%[[TILE]]]
// CHECK: memref.store %{{.*}}, %[[FLAG]][%c0, %c0]
// CHECK: gpu.barrier
// CHECK: %[[READ:.*]] = memref.load %[[FLAG]][%c0, %c0]
// CHECK: %[[IS_LAST:.*]] = arith.cmpi ne, %[[READ]], %c0_i32 : i32
// CHECK: scf.if %[[IS_LAST]] {
// The combine: lane s of the row takes split s (10 of the 32 lanes), its
// max and sum; the row's max over the lanes; its scale exp(m_s - M) once,
// into shared memory; the row's sum over the lanes. Then each lane adds its
// element of the head over the 10 splits and divides by that sum.
// CHECK: %[[M:.*]] = memref.load %arg3[%{{.*}}, %{{.*}}, %[[S:.*]], %c32] : memref<2x1x10x36xf32>
// CHECK: memref.load %arg3[%{{.*}}, %{{.*}}, %[[S]], %c33] : memref<2x1x10x36xf32>
// CHECK-COUNT-5: gpu.shuffle{{ +}}xor
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[SCALES:.*]][%{{.*}}, %[[S]]] : memref<1x10xf32, #gpu.address_space<workgroup>>
// CHECK-COUNT-5: gpu.shuffle{{ +}}xor
// CHECK: gpu.barrier
// CHECK-COUNT-10: vector.fma
// CHECK: arith.divf
// CHECK: memref.store %{{.*}}, %arg5[%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x1x32xf32>
// DEBUG: attention_attention: fused attention, 2 heads of 1 queries x 300 keys x 32, not causal (every tile), 1 query rows per block, 32 lanes per row holding 1 chunks of 1, {{.*}}, 20 blocks x 32 threads, keys split 10 ways (1 tiles each

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#key = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @attention_scores_matmul(%q: memref<1x64xf32>, %k: memref<300x64xf32>, %s: memref<2x1x300xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [1, 2, 32] : memref<1x64xf32> into memref<1x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<1x2x32xf32> to memref<2x1x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [300, 2, 32] : memref<300x64xf32> into memref<300x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<300x2x32xf32> to memref<2x32x300xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x1x300xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x1x32xf32, strided<[32, 64, 1]>>, memref<2x32x300xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x1x300xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x1x300xf32>, %mask: memref<300xf32>, %p: memref<2x1x300xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #key, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : memref<2x1x300xf32>, memref<300xf32>) outs(%p : memref<2x1x300xf32>) {
    ^bb0(%in: f32, %pen: f32, %out: f32):
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x1xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x1xf32>)
    linalg.reduce ins(%p : memref<2x1x300xf32>) outs(%r : memref<2x1xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x1x300xf32>, memref<2x1xf32>) outs(%p : memref<2x1x300xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x1xf32>)
    linalg.reduce ins(%p : memref<2x1x300xf32>) outs(%r : memref<2x1xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x1x300xf32>, memref<2x1xf32>) outs(%p : memref<2x1x300xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x1xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<300x64xf32>, %p: memref<2x1x300xf32>, %o: memref<2x1x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [300, 2, 32] : memref<300x64xf32> into memref<300x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<300x2x32xf32> to memref<2x300x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x1x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x1x300xf32>, memref<2x300x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x1x32xf32>)
    return
  }
  func.func @decode(%q: memref<1x64xf32>, %k: memref<300x64xf32>, %v: memref<300x64xf32>, %mask: memref<300xf32>, %o: memref<2x1x32xf32>) {
    %s = memref.alloc() : memref<2x1x300xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<1x64xf32>, memref<300x64xf32>, memref<2x1x300xf32>) -> ()
    %p = memref.alloc() : memref<2x1x300xf32>
    call @attention_softmax_row_reduction(%s, %mask, %p) : (memref<2x1x300xf32>, memref<300xf32>, memref<2x1x300xf32>) -> ()
    call @attention_values_matmul(%v, %p, %o) : (memref<300x64xf32>, memref<2x1x300xf32>, memref<2x1x32xf32>) -> ()
    memref.dealloc %s : memref<2x1x300xf32>
    memref.dealloc %p : memref<2x1x300xf32>
    return
  }
}

// -----

// exp(x + max) is not a softmax: the three calls stay.
// CHECK-LABEL: func.func @no_max(
// CHECK: call @attention_scores_matmul
// DEBUG: attention_softmax_row_reduction: not fused attention: the softmax's exponential is not exp(x - max)

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.addf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func @no_max(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %o: memref<2x7x32xf32>) {
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %p) : (memref<2x7x7xf32>, memref<2x7x7xf32>) -> ()
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    return
  }
}

// -----

// Fused mode traces the causal mask once, into a buffer every layer's
// softmax reads. Its one writer computes the causal penalty from the
// indices: the kernel computes each element it needs with that fusion's
// own op instead of reading it (so tiles past the diagonal are skipped all
// the same), and the mask's fusion, read by nobody any more, goes.
// CHECK-LABEL: func.func @mask_in_memory(
// CHECK-NOT: memref.alloc
// CHECK-NOT: call @mask_loop
// CHECK: gpu.launch_func{{ +}}@attention_attention_module::@attention_attention {{.*}}, %arg3 : memref<2x7x32xf32>)
// CHECK-NOT: memref.dealloc
// CHECK: return
// CHECK-NOT: func.func private @mask_loop
// CHECK: gpu.func @attention_attention({{.*}}, %{{.*}}: memref<2x7x32xf32>) workgroup
// CHECK: arith.cmpi sge
// CHECK: arith.select
// CHECK: math.exp
// DEBUG: attention_attention: fused attention, 2 heads of 7 queries x 7 keys x 32, causal (tiles past the diagonal skipped)

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map2 = affine_map<(d0, d1, d2) -> (d1, d2)>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @mask_loop(%mask: memref<7x7xf32>) attributes {mlpipe.fusion = "loop"} {
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    linalg.generic {indexing_maps = [#map3], iterator_types = ["parallel", "parallel"]} outs(%mask : memref<7x7xf32>) {
    ^bb0(%out: f32):
      %i = linalg.index 0 : index
      %j = linalg.index 1 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      linalg.yield %pen : f32
    }
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %mask: memref<7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map2, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : memref<2x7x7xf32>, memref<7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %pen: f32, %out: f32):
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func @mask_in_memory(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %o: memref<2x7x32xf32>) {
    %mask = memref.alloc() : memref<7x7xf32>
    call @mask_loop(%mask) : (memref<7x7xf32>) -> ()
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %mask, %p) : (memref<2x7x7xf32>, memref<7x7xf32>, memref<2x7x7xf32>) -> ()
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    memref.dealloc %mask : memref<7x7xf32>
    return
  }
}

// -----

// The heads' merge after the attention ([2, 7, 32] to [7, 64], a fresh
// buffer allocated after the values call) reads its output and nothing
// else does: the merged buffer's allocation moves up, the kernel writes it
// through a view [2, 7, 32] (strides 32, 64, 1), and the merge and the
// [2, 7, 32] buffer go.
// CHECK-LABEL: func.func @merged(
// CHECK: %[[M:.*]] = memref.alloc() : memref<7x64xf32>
// CHECK: %[[E:.*]] = memref.expand_shape %[[M]] {{\[}}[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
// CHECK: %[[VIEW:.*]] = memref.transpose %[[E]] (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
// CHECK: gpu.launch_func{{ +}}@attention_attention_module::@attention_attention {{.*}}, %[[VIEW]] : memref<2x7x32xf32, strided<[32, 64, 1]>>)
// CHECK-NOT: call @attention_merge_heads_loop
// CHECK-NOT: memref<2x7x32xf32>)
// CHECK: memref.copy %[[M]]
// DEBUG: attention_attention: writes the heads merged, through a view of @attention_merge_heads_loop's output, which goes (fold-heads-merge)

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#merge = affine_map<(d0, d1) -> (d1 floordiv 32, d0, d1 mod 32)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func private @attention_merge_heads_loop(%o: memref<2x7x32xf32>, %y: memref<7x64xf32>) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#merge, #id2], iterator_types = ["parallel", "parallel"]} ins(%o : memref<2x7x32xf32>) outs(%y : memref<7x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @merged(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %y: memref<7x64xf32>) {
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %p) : (memref<2x7x7xf32>, memref<2x7x7xf32>) -> ()
    %o = memref.alloc() : memref<2x7x32xf32>
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    %m = memref.alloc() : memref<7x64xf32>
    call @attention_merge_heads_loop(%o, %m) : (memref<2x7x32xf32>, memref<7x64xf32>) -> ()
    memref.copy %m, %y : memref<7x64xf32> to memref<7x64xf32>
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    memref.dealloc %o : memref<2x7x32xf32>
    memref.dealloc %m : memref<7x64xf32>
    return
  }
}

// -----

// Where the merged buffer (the function's argument) is read between the
// values call and the merge, the kernel writes [2, 7, 32] and the merge
// stays.
// CHECK-LABEL: func.func @merged_read_between(
// CHECK: gpu.launch_func{{ +}}@attention_attention_module::@attention_attention {{.*}}, %{{.*}} : memref<2x7x32xf32>)
// CHECK: memref.copy %arg3, %arg4
// CHECK: call @attention_merge_heads_loop(

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1)>
#merge = affine_map<(d0, d1) -> (d1 floordiv 32, d0, d1 mod 32)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
module {
  func.func private @attention_scores_matmul(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %s: memref<2x7x7xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %qe = memref.expand_shape %q [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %qh = memref.transpose %qe (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    %ke = memref.expand_shape %k [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %kt = memref.transpose %ke (d0, d1, d2) -> (d1, d2, d0) : memref<7x2x32xf32> to memref<2x32x7xf32, strided<[32, 1, 64]>>
    linalg.fill ins(%zero : f32) outs(%s : memref<2x7x7xf32>)
    linalg.batch_matmul ins(%qh, %kt : memref<2x7x32xf32, strided<[32, 64, 1]>>, memref<2x32x7xf32, strided<[32, 1, 64]>>) outs(%s : memref<2x7x7xf32>)
    return
  }
  func.func private @attention_softmax_row_reduction(%s: memref<2x7x7xf32>, %p: memref<2x7x7xf32>) attributes {mlpipe.fusion = "row_reduction"} {
    %ninf = arith.constant 0xFF800000 : f32
    %c1 = arith.constant 1 : index
    %one = arith.constant 1.000000e+00 : f32
    %zero = arith.constant 0.000000e+00 : f32
    %big = arith.constant -1.000000e+10 : f32
    %scale = arith.constant 0.176776692 : f32
    linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : memref<2x7x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %out: f32):
      %i = linalg.index 1 : index
      %j = linalg.index 2 : index
      %d = arith.subi %j, %i : index
      %after = arith.cmpi sge, %d, %c1 : index
      %m = arith.select %after, %one, %zero : f32
      %pen = arith.mulf %m, %big : f32
      %x = arith.mulf %in, %scale : f32
      %y = arith.addf %x, %pen : f32
      linalg.yield %y : f32
    }
    %r = memref.alloc() : memref<2x7xf32>
    linalg.fill ins(%ninf : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.maximumf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %mx: f32, %out: f32):
      %0 = arith.subf %in, %mx : f32
      %1 = math.exp %0 : f32
      linalg.yield %1 : f32
    }
    linalg.fill ins(%zero : f32) outs(%r : memref<2x7xf32>)
    linalg.reduce ins(%p : memref<2x7x7xf32>) outs(%r : memref<2x7xf32>) dimensions = [2]
      (%in: f32, %acc: f32) {
        %0 = arith.addf %in, %acc : f32
        linalg.yield %0 : f32
      }
    linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%p, %r : memref<2x7x7xf32>, memref<2x7xf32>) outs(%p : memref<2x7x7xf32>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %0 = arith.divf %in, %sum : f32
      linalg.yield %0 : f32
    }
    memref.dealloc %r : memref<2x7xf32>
    return
  }
  func.func private @attention_values_matmul(%v: memref<7x64xf32>, %p: memref<2x7x7xf32>, %o: memref<2x7x32xf32>) attributes {mlpipe.fusion = "matmul"} {
    %zero = arith.constant 0.000000e+00 : f32
    %ve = memref.expand_shape %v [[0], [1, 2]] output_shape [7, 2, 32] : memref<7x64xf32> into memref<7x2x32xf32>
    %vh = memref.transpose %ve (d0, d1, d2) -> (d1, d0, d2) : memref<7x2x32xf32> to memref<2x7x32xf32, strided<[32, 64, 1]>>
    linalg.fill ins(%zero : f32) outs(%o : memref<2x7x32xf32>)
    linalg.batch_matmul ins(%p, %vh : memref<2x7x7xf32>, memref<2x7x32xf32, strided<[32, 64, 1]>>) outs(%o : memref<2x7x32xf32>)
    return
  }
  func.func private @attention_merge_heads_loop(%o: memref<2x7x32xf32>, %y: memref<7x64xf32>) attributes {mlpipe.fusion = "loop"} {
    linalg.generic {indexing_maps = [#merge, #id2], iterator_types = ["parallel", "parallel"]} ins(%o : memref<2x7x32xf32>) outs(%y : memref<7x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @merged_read_between(%q: memref<7x64xf32>, %k: memref<7x64xf32>, %v: memref<7x64xf32>, %y: memref<7x64xf32>, %before: memref<7x64xf32>) {
    %s = memref.alloc() : memref<2x7x7xf32>
    call @attention_scores_matmul(%q, %k, %s) : (memref<7x64xf32>, memref<7x64xf32>, memref<2x7x7xf32>) -> ()
    %p = memref.alloc() : memref<2x7x7xf32>
    call @attention_softmax_row_reduction(%s, %p) : (memref<2x7x7xf32>, memref<2x7x7xf32>) -> ()
    %o = memref.alloc() : memref<2x7x32xf32>
    call @attention_values_matmul(%v, %p, %o) : (memref<7x64xf32>, memref<2x7x7xf32>, memref<2x7x32xf32>) -> ()
    memref.copy %y, %before : memref<7x64xf32> to memref<7x64xf32>
    call @attention_merge_heads_loop(%o, %y) : (memref<2x7x32xf32>, memref<7x64xf32>) -> ()
    memref.dealloc %s : memref<2x7x7xf32>
    memref.dealloc %p : memref<2x7x7xf32>
    memref.dealloc %o : memref<2x7x32xf32>
    return
  }
}
