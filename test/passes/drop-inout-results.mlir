// RUN: mlpipe-opt %s -split-input-file -verify-diagnostics --mlpipe-drop-inout-results | FileCheck %s

// The cache was written in place: the result carrying it goes.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME: -> memref<1x4xf32>
// CHECK: return %{{.*}} : memref<1x4xf32>
func.func @decode(%cache: memref<2x8x4xf32> {mlpipe.name = "kv_cache"}, %row: memref<2x1x4xf32>)
    -> (memref<1x4xf32>, memref<2x8x4xf32> {mlpipe.updates = "kv_cache"}) {
  %view = memref.subview %cache[0, 3, 0] [2, 1, 4] [1, 1, 1] : memref<2x8x4xf32> to memref<2x1x4xf32, strided<[32, 4, 1], offset: 12>>
  memref.copy %row, %view : memref<2x1x4xf32> to memref<2x1x4xf32, strided<[32, 4, 1], offset: 12>>
  %logits = memref.alloc() : memref<1x4xf32>
  return %logits, %cache : memref<1x4xf32>, memref<2x8x4xf32>
}

// -----

// Bufferization copied the cache instead: the update would be lost.
// expected-error @+1 {{the in-out input 'kv_cache' was not updated in place}}
func.func @copied(%cache: memref<2x8x4xf32> {mlpipe.name = "kv_cache"}) -> (memref<2x8x4xf32> {mlpipe.updates = "kv_cache"}) {
  %copy = memref.alloc() : memref<2x8x4xf32>
  memref.copy %cache, %copy : memref<2x8x4xf32> to memref<2x8x4xf32>
  return %copy : memref<2x8x4xf32>
}
