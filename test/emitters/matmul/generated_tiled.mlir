// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="block-tile=128,128,8 thread-tile=8,8 split-k=1" --cse | FileCheck %s

// The register-tiled kernel: a zero fill of C folds into the kernel (it
// writes C instead of adding to it). Each of 256 threads keeps an 8x8 tile
// of C as 16 vector<4xf32> carried by the K loop; A and B go through two
// shared stages of 8 x (128 + 4) floats, 16-byte aligned. The prologue
// stages tile 0 and waits; each step loads the next tile into registers,
// multiplies from one stage (8 K rows unrolled, 128-bit fragment loads),
// stores the next tile into the other stage, then waits once.
// CHECK-LABEL: func.func @tiled
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.matmul
// CHECK: gpu.launch_func @tiled_matmul_module::@tiled_matmul blocks in (%c2, %c3, %c1) threads in (%c256, %c1, %c1) args(%arg0 : memref<256x64xf32>, %arg1 : memref<64x384xf32>, %arg2 : memref<256x384xf32>)
// CHECK: gpu.module @tiled_matmul_module
// CHECK: gpu.func @tiled_matmul(%[[A:.*]]: memref<256x64xf32>, %[[B:.*]]: memref<64x384xf32>, %[[C:.*]]: memref<256x384xf32>) workgroup(%[[SA:.*]] : memref<2x8x132xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SB:.*]] : memref<2x8x132xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {known_block_size = array<i32: 256, 1, 1>, mlpipe.bytes = 557056 : i64, mlpipe.flops = 12582912 : i64}
// A's rows are contiguous along K: a vector along K, stored transposed.
// CHECK: %[[A0:.*]] = vector.load %[[A]][{{.*}}] {alignment = 16 : i64} : memref<256x64xf32>, vector<4xf32>
// CHECK: %[[B0:.*]] = vector.load %[[B]][{{.*}}] {alignment = 16 : i64} : memref<64x384xf32>, vector<4xf32>
// CHECK: vector.extract %[[A0]][0]
// CHECK: memref.store {{.*}}, %[[SA]][%c0,
// CHECK: vector.store %[[B0]], %[[SB]][%c0, {{.*}}] {alignment = 16 : i64}
// CHECK-NEXT: gpu.barrier
// CHECK: %[[ACC:.*]]:16 = scf.for %[[STEP:.*]] = %c0 to %c8 step %c1 iter_args({{.*}}) -> (vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>, vector<4xf32>) {
// CHECK: vector.load %[[A]]
// CHECK: vector.load %[[B]]
// CHECK: %[[STAGE:.*]] = arith.andi %[[STEP]], %c1
// CHECK: %[[OTHER:.*]] = arith.xori %[[STAGE]], %c1
// CHECK: vector.load %[[SA]][%[[STAGE]], %c0, {{.*}}] {alignment = 16 : i64} : memref<2x8x132xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.load %[[SB]][%[[STAGE]], %c0, {{.*}}] {alignment = 16 : i64}
// CHECK-COUNT-128: vector.fma
// CHECK-NOT: gpu.barrier
// CHECK: memref.store {{.*}}, %[[SA]][%[[OTHER]],
// CHECK-NOT: gpu.barrier
// CHECK: vector.store {{.*}}, %[[SB]][%[[OTHER]],
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.yield
// No edges: every tile is whole, so C takes unguarded 128-bit stores.
// CHECK-NOT: scf.if
// CHECK-COUNT-16: vector.store %[[ACC]]#{{[0-9]+}}, %[[C]][{{.*}}] {alignment = 16 : i64} : memref<256x384xf32>, vector<4xf32>
// CHECK-NOT: vector.store
// CHECK: gpu.return
func.func @tiled(%a: memref<256x64xf32>, %b: memref<64x384xf32>, %c: memref<256x384xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<256x384xf32>)
  linalg.matmul ins(%a, %b : memref<256x64xf32>, memref<64x384xf32>) outs(%c : memref<256x384xf32>)
  return
}

// -----

// The tied logits: B is the transposed view of wte, read along K (its
// contiguous axis) through a transposed view inside the kernel, so the
// loads stay 128-bit and coalesced. N = 50 is not a multiple of the tile:
// columns past it are clamped on load and guarded on store (2-wide vectors,
// as 50 is even), and so are rows past M = 64 in the 128-row tile. Without
// a fill, C is read and added to.
// CHECK-LABEL: func.func @logits
// CHECK: %[[WTET:.*]] = memref.transpose %arg1
// CHECK: gpu.launch_func @logits_matmul_module::@logits_matmul {{.*}} args(%arg0 : memref<64x32xf32>, %[[WTET]] : memref<32x50xf32, strided<[1, 32]>>, %arg2 : memref<64x50xf32>)
// CHECK: gpu.func @logits_matmul(%{{.*}}: memref<64x32xf32>, %[[B:.*]]: memref<32x50xf32, strided<[1, 32]>>, %[[C:.*]]: memref<64x50xf32>)
// CHECK: %[[BT:.*]] = memref.transpose %[[B]] (d0, d1) -> (d1, d0) : memref<32x50xf32, strided<[1, 32]>> to memref<50x32xf32, strided<[32, 1]>>
// CHECK: %[[COL:.*]] = arith.minsi %{{.*}}, %c49
// CHECK: vector.load %[[BT]][%[[COL]], %{{.*}}] {alignment = 16 : i64} : memref<50x32xf32, strided<[32, 1]>>, vector<4xf32>
// CHECK: scf.for
// CHECK: vector.load %[[BT]]
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK: arith.cmpi slt, %{{.*}}, %c50 : index
// CHECK: scf.if
// CHECK: %[[OLD:.*]] = vector.load %[[C]][{{.*}}] {alignment = 8 : i64} : memref<64x50xf32>, vector<2xf32>
// CHECK: %[[NEW:.*]] = arith.addf %{{.*}}, %[[OLD]] : vector<2xf32>
// CHECK: vector.store %[[NEW]], %[[C]][{{.*}}] {alignment = 8 : i64} : memref<64x50xf32>, vector<2xf32>
func.func @logits(%x: memref<64x32xf32>, %wte: memref<50x32xf32>, %y: memref<64x50xf32>) {
  %wteT = memref.transpose %wte (d0, d1) -> (d1, d0) : memref<50x32xf32> to memref<32x50xf32, strided<[1, 32]>>
  linalg.matmul ins(%x, %wteT : memref<64x32xf32>, memref<32x50xf32, strided<[1, 32]>>) outs(%y : memref<64x50xf32>)
  return
}

// -----

// Batched, f64, odd sizes: the batch is grid z; K = 5 is shorter than a
// slice, so K past the edge reads as zero (select); scalar loads of A (its
// K axis is odd) along K; f64 shared rows are padded by 2 (16 bytes).
// CHECK-LABEL: func.func @batched
// CHECK: gpu.launch_func @batched_batch_matmul_module::@batched_batch_matmul blocks in (%c1, %c1, %c3) threads in (%c256, %c1, %c1)
// CHECK: gpu.func @batched_batch_matmul({{.*}}) workgroup(%{{.*}} : memref<2x8x130xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<2x8x130xf64, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK: %[[BATCH:.*]] = gpu.block_id z
// CHECK: %[[KIN:.*]] = arith.cmpi slt, %{{.*}}, %c5 : index
// CHECK: memref.load %arg0[%[[BATCH]], %{{.*}}, %{{.*}}] : memref<3x7x5xf64>
// CHECK: arith.select %[[KIN]], %{{.*}}, %{{.*}} : vector<1xf64>
// CHECK: scf.for
// CHECK-COUNT-8: vector.load %{{.*}} : memref<2x8x130xf64, #gpu.address_space<workgroup>>, vector<2xf64>
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %arg2[%[[BATCH]], %{{.*}}, %{{.*}}] : memref<3x7x9xf64>
func.func @batched(%a: memref<3x7x5xf64>, %b: memref<3x5x9xf64>, %c: memref<3x7x9xf64>) {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%c : memref<3x7x9xf64>)
  linalg.batch_matmul ins(%a, %b : memref<3x7x5xf64>, memref<3x5x9xf64>) outs(%c : memref<3x7x9xf64>)
  return
}

// -----

// Integer matmuls and matmuls on tensors are left alone.
// CHECK-LABEL: func.func @untouched
// CHECK: linalg.matmul ins(%arg0, %arg1 : memref<4x4xi32>, memref<4x4xi32>)
// CHECK: linalg.matmul ins(%arg3, %arg4 : tensor<4x4xf32>, tensor<4x4xf32>)
// CHECK-NOT: gpu.launch_func
func.func @untouched(%a: memref<4x4xi32>, %b: memref<4x4xi32>, %c: memref<4x4xi32>, %x: tensor<4x4xf32>, %y: tensor<4x4xf32>, %z: tensor<4x4xf32>) -> tensor<4x4xf32> {
  linalg.matmul ins(%a, %b : memref<4x4xi32>, memref<4x4xi32>) outs(%c : memref<4x4xi32>)
  %r = linalg.matmul ins(%x, %y : tensor<4x4xf32>, tensor<4x4xf32>) outs(%z : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// -----

// A zero fill of C further up folds too when nothing in between uses C's
// buffer; a use of it in between keeps the fill, and the kernel adds to C.
// Where C is an argument, which another argument may alias, only fresh
// allocations may be used in between.
// CHECK-LABEL: func.func @fill_earlier
// CHECK: %[[C:.*]] = memref.alloc() : memref<64x64xf32>
// CHECK: %[[D:.*]] = memref.alloc() : memref<64x64xf32>
// CHECK-NOT: linalg.fill {{.*}} outs(%[[C]]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[D]] : memref<64x64xf32>)
// CHECK-NEXT: linalg.copy ins(%arg0 : memref<64x64xf32>) outs(%[[D]] : memref<64x64xf32>)
// CHECK: gpu.launch_func @fill_earlier_matmul_module::@fill_earlier_matmul {{.*}} args(%arg0 : memref<64x64xf32>, %arg1 : memref<64x64xf32>, %[[C]] : memref<64x64xf32>)
// CHECK: gpu.launch_func @fill_earlier_matmul_1_module::@fill_earlier_matmul_1 {{.*}} args(%arg0 : memref<64x64xf32>, %arg1 : memref<64x64xf32>, %[[D]] : memref<64x64xf32>)
// CHECK: gpu.func @fill_earlier_matmul(
// CHECK-NOT: arith.addf
// CHECK: gpu.return
// CHECK: gpu.func @fill_earlier_matmul_1(
// CHECK: arith.addf
// CHECK: gpu.return
func.func @fill_earlier(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %x: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<64x64xf32>
  %d = memref.alloc() : memref<64x64xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
  linalg.fill ins(%zero : f32) outs(%d : memref<64x64xf32>)
  linalg.copy ins(%a : memref<64x64xf32>) outs(%d : memref<64x64xf32>)
  linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%d : memref<64x64xf32>)
  linalg.add ins(%c, %d : memref<64x64xf32>, memref<64x64xf32>) outs(%x : memref<64x64xf32>)
  memref.dealloc %c : memref<64x64xf32>
  memref.dealloc %d : memref<64x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @argument_c
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg2 : memref<64x64xf32>)
// CHECK: linalg.copy
// CHECK: gpu.launch_func
// CHECK: gpu.func @argument_c_matmul(
// CHECK: arith.addf
func.func @argument_c(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>, %x: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
  linalg.copy ins(%a : memref<64x64xf32>) outs(%x : memref<64x64xf32>)
  linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}

// -----

// A kernel is named for the front end's scope of its matmul (the op's
// location), where there is one.
// CHECK-LABEL: func.func @scoped
// CHECK: gpu.launch_func @h_0_mlp_c_fc_matmul_module::@h_0_mlp_c_fc_matmul
func.func @scoped(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>) loc("h.0.mlp.c_fc")
  return
}
