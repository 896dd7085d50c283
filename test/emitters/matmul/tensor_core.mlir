// The generated matmul's tensor-core form on GPT-2's 16-bit products: the
// kernel's structure, the choices --debug-only=mlpipe-emitters prints, and
// PTX that ptxas assembles for sm_80 and sm_90 (bf16 and f16 mma.sync).
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls --cse | FileCheck %s
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls=prefetch-fragments=true --cse | FileCheck %s --check-prefix=PREFETCH
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls=async-copy=false --cse | FileCheck %s --check-prefix=REG
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls=form=tensor_core --cse | FileCheck %s --check-prefix=TC16
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls --debug-only=mlpipe-emitters -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHOICE
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_80 | lower-nvvm --chip sm_80 | ptx-check --chip sm_80 | FileCheck %s --check-prefix=PTX80
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls | lower-nvvm --chip sm_90 | ptx-check --chip sm_90 | FileCheck %s --check-prefix=PTX90
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls | lower-nvvm --chip sm_90 | FileCheck %s --check-prefix=MMA

// c_fc at T = 1024 in bf16, C in f32: 128x128 blocks of 4 warps (2x2, each
// 64x64: 4x8 mma tiles, 128 f32 accumulators a lane), K in slices of 32.
// Both operands are read as 128-bit vectors, so slices go to shared
// memory by cp.async, four stages (74 KiB of dynamic shared memory, its
// size passed at launch; two blocks an SM still fit): A along K into
// [m][k] rows of 32 + 8 (pad), B along N into [k][n] rows of 128 + 8,
// views of the dynamic shared memory from byte 0 and after A's stages.
// Slices 0-2 are issued first, a group each (B's before the wait, below);
// at step t, once slice t has
// landed (at most two groups pending) and a barrier, slice t+3 is issued,
// then slice t is multiplied. Fragments by ldmatrix.x4 (per 16 of K, one for each of the
// warp's 4 m16 tiles, one for each pair of its 8 n8 tiles, B's transposed
// by .trans), bf16 pairs as i32.
// CHECK-LABEL: func.func @c_fc
// CHECK-NOT: linalg.
// CHECK: gpu.launch_func @c_fc_matmul_module::@c_fc_matmul blocks in (%c8, %c24, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c75776_i32 args(%arg0 : memref<1024x768xbf16>, %arg1 : memref<768x3072xbf16>, %arg2 : memref<1024x3072xf32>)
// CHECK: gpu.func @c_fc_matmul(%[[A:.*]]: memref<1024x768xbf16>, %[[B:.*]]: memref<768x3072xbf16>, %[[C:.*]]: memref<1024x3072xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>
// CHECK: %[[SHARED:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[SA:.*]] = memref.view %[[SHARED]][%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x128x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[SB:.*]] = memref.view %[[SHARED]][%c40960][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x32x136xbf16, #gpu.address_space<workgroup>>
// B (an argument no kernel writes: a weight) has its three first slices
// copied before the kernel waits for the one before it
// (kTensorCoreCopiesBBeforeWait); A's follow the wait, and B's copies join
// the first group.
// CHECK-COUNT-4: nvgpu.device_async_copy %[[B]][{{.*}}], %[[SB]][%c0, {{.*}}], 8 {bypassL1} : memref<768x3072xbf16> to memref<4x32x136xbf16, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: nvgpu.device_async_copy %[[B]][{{.*}}], %[[SB]][%c1, {{.*}}]
// CHECK-COUNT-4: nvgpu.device_async_copy %[[B]][{{.*}}], %[[SB]][%c2, {{.*}}]
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-COUNT-4: nvgpu.device_async_copy %[[A]][{{.*}}], %[[SA]][%c0, {{.*}}], 8 {bypassL1} : memref<1024x768xbf16> to memref<4x128x40xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_create_group
// CHECK-COUNT-4: nvgpu.device_async_copy %[[A]][{{.*}}], %[[SA]][%c1, {{.*}}]
// CHECK: nvgpu.device_async_create_group
// CHECK-COUNT-4: nvgpu.device_async_copy %[[A]][{{.*}}], %[[SA]][%c2, {{.*}}]
// CHECK: %[[GROUP:.*]] = nvgpu.device_async_create_group
// CHECK: scf.for %{{.*}} = %c0 to %c24 step %c1 iter_args({{.*}}) -> (f32, f32, f32, f32,
// CHECK-NEXT: nvgpu.device_async_wait %[[GROUP]] {numGroups = 2 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-8: nvgpu.device_async_copy
// CHECK: nvgpu.device_async_create_group
// CHECK-COUNT-4: nvgpu.ldmatrix %[[SA]][{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<4x128x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK-COUNT-4: nvgpu.ldmatrix %[[SB]][{{.*}}] {numTiles = 4 : i32, transpose = true} : memref<4x32x136xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: %[[PAIR:.*]] = vector.extract %{{.*}}[3] : vector<2xbf16> from vector<4x2xbf16>
// CHECK: llvm.bitcast %[[PAIR]] : vector<2xbf16> to i32
// CHECK-COUNT-64: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait %[[GROUP]] {numGroups = 0 : i32}
// CHECK: vector.store %{{.*}}, %[[C]][{{.*}}] {alignment = 8 : i64} : memref<1024x3072xf32>, vector<2xf32>

// With prefetch-fragments=true, each K-step's
// fragments are loaded a step ahead and carried through the loop beside
// the accumulators (128 f32, then 16 A and 16 B registers as i32): the first
// K-step's before the loop, after the first slice has landed; in the loop,
// slice t+3 issued, K-step 1's fragments loaded before K-step 0's 32
// mma.sync, then the wait for slice t+1, a barrier and the next stage's
// first fragments before K-step 1's 32.
// PREFETCH-LABEL: func.func @c_fc
// PREFETCH: %[[SA:.*]] = memref.view {{.*}} to memref<4x128x40xbf16, #gpu.address_space<workgroup>>
// PREFETCH-COUNT-3: nvgpu.device_async_create_group
// PREFETCH-NEXT: nvgpu.device_async_wait %[[GROUP:[0-9]+]] {numGroups = 2 : i32}
// PREFETCH-NEXT: gpu.barrier
// PREFETCH-COUNT-4: nvgpu.ldmatrix %[[SA]]
// PREFETCH: scf.for %{{.*}} = %c0 to %c24 step %c1 iter_args({{.*}}) -> ({{(f32, )+(i32, )+}}i32) {
// PREFETCH-COUNT-8: nvgpu.device_async_copy
// PREFETCH: %[[ISSUED:.*]] = nvgpu.device_async_create_group
// PREFETCH-COUNT-8: nvgpu.ldmatrix
// PREFETCH-COUNT-32: nvvm.mma.sync
// PREFETCH-NOT: nvvm.mma.sync
// PREFETCH: nvgpu.device_async_wait %[[ISSUED]] {numGroups = 2 : i32}
// PREFETCH-NEXT: gpu.barrier
// PREFETCH-COUNT-8: nvgpu.ldmatrix
// PREFETCH-COUNT-32: nvvm.mma.sync
// PREFETCH-NOT: nvvm.mma.sync
// PREFETCH: scf.yield
// PREFETCH: nvgpu.device_async_wait %[[GROUP]] {numGroups = 0 : i32}

// Through registers instead (async-copy=false): two stages of [outer][k]
// rows for both operands (B's K rows paired into 32-bit stores), the next
// slice loaded into registers before the products and stored after them.
// REG-LABEL: func.func @c_fc
// REG-NOT: linalg.
// REG: gpu.launch_func @c_fc_matmul_module::@c_fc_matmul blocks in (%c8, %c24, %c1) threads in (%c128, %c1, %c1) dynamic_shared_memory_size %c40960_i32 args(%arg0 : memref<1024x768xbf16>, %arg1 : memref<768x3072xbf16>, %arg2 : memref<1024x3072xf32>)
// REG: gpu.func @c_fc_matmul(%[[A:.*]]: memref<1024x768xbf16>, %[[B:.*]]: memref<768x3072xbf16>, %[[C:.*]]: memref<1024x3072xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>
// REG: %[[SHARED:.*]] = gpu.dynamic_shared_memory
// REG: %[[SA:.*]] = memref.view %[[SHARED]][%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x128x40xbf16, #gpu.address_space<workgroup>>
// REG: %[[SB:.*]] = memref.view %[[SHARED]][%c20480][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x128x40xbf16, #gpu.address_space<workgroup>>
// REG: vector.load %[[B]][{{.*}}] {alignment = 16 : i64} : memref<768x3072xbf16>, vector<8xbf16>
// REG: vector.load %[[A]][{{.*}}] {alignment = 16 : i64} : memref<1024x768xbf16>, vector<8xbf16>
// REG: vector.store %{{.*}}, %[[SA]][{{.*}}] {alignment = 16 : i64} : memref<2x128x40xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
// REG: vector.store %{{.*}}, %[[SB]][{{.*}}] {alignment = 4 : i64} : memref<2x128x40xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// REG: gpu.barrier
// REG: scf.for %{{.*}} = %c0 to %c24 step %c1 iter_args({{.*}}) -> (f32, f32, f32, f32,
// REG: vector.load %[[B]]
// REG-COUNT-4: nvgpu.ldmatrix %[[SA]][{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<2x128x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// REG-COUNT-4: nvgpu.ldmatrix %[[SB]][{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<2x128x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// REG: %[[PAIR:.*]] = vector.extract %{{.*}}[3] : vector<2xbf16> from vector<4x2xbf16>
// REG: llvm.bitcast %[[PAIR]] : vector<2xbf16> to i32
// REG-COUNT-64: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// REG-NOT: nvvm.mma.sync
// REG: vector.store %{{.*}}, %[[SA]]
// REG: gpu.barrier
// REG: scf.yield
// REG: vector.store %{{.*}}, %[[C]][{{.*}}] {alignment = 8 : i64} : memref<1024x3072xf32>, vector<2xf32>
func.func @c_fc(%a: memref<1024x768xbf16>, %b: memref<768x3072xbf16>, %c: memref<1024x3072xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<1024x3072xf32>)
  linalg.matmul ins(%a, %b : memref<1024x768xbf16>, memref<768x3072xbf16>) outs(%c : memref<1024x3072xf32>)
  return
}

// -----

// c_proj at T = 1024 in f16, C in f16: 48 blocks of 128x128 would leave
// most of 132 SMs idle, 96 of 64x128 too: 64x64 blocks of 4 warps, four
// cp.async stages (three slices in flight while one is multiplied). f16
// pairs go to mma.sync as vector<2xf16>; C is rounded to f16 once.
// CHECK-LABEL: func.func @c_proj
// CHECK: gpu.launch_func @c_proj_matmul_module::@c_proj_matmul blocks in (%c12, %c16, %c1) threads in (%c128, %c1, %c1)
// CHECK: gpu.func @c_proj_matmul(
// CHECK: memref.view %{{.*}}[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x64x40xf16, #gpu.address_space<workgroup>>
// CHECK: memref.view %{{.*}}[%c20480][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<4x32x72xf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK: nvvm.mma.sync {{.*}} shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: vector.store %{{.*}} : memref<1024x768xf16>, vector<2xf16>
func.func @c_proj(%a: memref<1024x3072xf16>, %b: memref<3072x768xf16>, %c: memref<1024x768xf16>) {
  %zero = arith.constant 0.0 : f16
  linalg.fill ins(%zero : f16) outs(%c : memref<1024x768xf16>)
  linalg.matmul ins(%a, %b : memref<1024x3072xf16>, memref<3072x768xf16>) outs(%c : memref<1024x768xf16>)
  return
}

// -----

// The tied logits in bf16: B is wte^T, copied along K into [n][k] rows
// (through the transposed view of the kernel's argument, wte as stored);
// odd N = 50257: C stored a column at a time, each tested against N.
// CHECK-LABEL: func.func @logits
// CHECK: gpu.func @logits_matmul(
// CHECK: %[[WTE:.*]] = memref.transpose %{{.*}} : memref<768x50257xbf16, strided<[1, 768]>> to memref<50257x768xbf16, strided<[768, 1]>>
// CHECK: nvgpu.device_async_copy %[[WTE]][{{.*}}], %{{.*}}[%c0, {{.*}}], 8 {bypassL1} : memref<50257x768xbf16, strided<[768, 1]>> to memref<4x128x40xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.mma.sync
// CHECK: memref.store %{{.*}} : memref<1024x50257xf32>
func.func @logits(%h: memref<1024x768xbf16>, %wte: memref<50257x768xbf16>, %c: memref<1024x50257xf32>) {
  %zero = arith.constant 0.0 : f32
  %wteT = memref.transpose %wte (d0, d1) -> (d1, d0) : memref<50257x768xbf16> to memref<768x50257xbf16, strided<[1, 768]>>
  linalg.fill ins(%zero : f32) outs(%c : memref<1024x50257xf32>)
  linalg.matmul ins(%h, %wteT : memref<1024x768xbf16>, memref<768x50257xbf16, strided<[1, 768]>>) outs(%c : memref<1024x50257xf32>)
  return
}

// -----

// Attention's scores, 12 heads batched in bf16 (K^T read along K).
// CHECK-LABEL: func.func @scores
// CHECK: gpu.launch_func @scores_batch_matmul_module::@scores_batch_matmul blocks in (%c8, %c8, %c12) threads in (%c128, %c1, %c1)
func.func @scores(%q: memref<12x1024x64xbf16>, %k: memref<12x1024x64xbf16>, %s: memref<12x1024x1024xf32>) {
  %zero = arith.constant 0.0 : f32
  %kT = memref.transpose %k (d0, d1, d2) -> (d0, d2, d1) : memref<12x1024x64xbf16> to memref<12x64x1024xbf16, strided<[65536, 1, 64]>>
  linalg.fill ins(%zero : f32) outs(%s : memref<12x1024x1024xf32>)
  linalg.batch_matmul ins(%q, %kT : memref<12x1024x64xbf16>, memref<12x64x1024xbf16, strided<[65536, 1, 64]>>) outs(%s : memref<12x1024x1024xf32>)
  return
}

// -----

// A short prompt's 16 rows take tensor cores (kFewRowTensorCoreMinRows),
// in tiles of one m16 row, 16x64 blocks of four warps of 16x16, K split
// three ways (kFewRowsSplitsK: 48 tiles for 132 SMs), 128 of K a step: 16
// mma.sync a step; the splits are added by a second kernel that rounds to
// bf16 once. Forcing the form (form=tensor_core) makes the same choice.
// CHECK-LABEL: func.func @prefill
// CHECK: gpu.launch_func @prefill_matmul_module::@prefill_matmul blocks in (%c1, %c48, %c3) threads in (%c128, %c1, %c1) {{.*}} args(%arg0 : memref<16x768xbf16>, %arg1 : memref<768x3072xbf16>, %{{.*}} : memref<3x16x3072xf32>)
// CHECK: gpu.launch_func @prefill_matmul_split_sum_module::@prefill_matmul_split_sum
// CHECK: gpu.func @prefill_matmul(
// CHECK-COUNT-16: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: scf.yield
// CHECK: gpu.func @prefill_matmul_split_sum(
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// TC16-LABEL: func.func @prefill
// TC16: gpu.launch_func @prefill_matmul_module::@prefill_matmul blocks in (%c1, %c48, %c3) threads in (%c128, %c1, %c1)
// TC16: gpu.func @prefill_matmul(
// TC16-COUNT-16: nvvm.mma.sync
// TC16-NOT: nvvm.mma.sync
// TC16: scf.yield
func.func @prefill(%a: memref<16x768xbf16>, %b: memref<768x3072xbf16>, %c: memref<16x3072xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<16x3072xbf16>)
  linalg.matmul ins(%a, %b : memref<16x768xbf16>, memref<768x3072xbf16>) outs(%c : memref<16x3072xbf16>)
  return
}

// -----

// A decode step's one row: the skinny form in one launch (narrow row
// segments, K not split).
// CHECK-LABEL: func.func @step
// CHECK: gpu.func @step_matmul(
// CHECK-NOT: nvvm.mma.sync
func.func @step(%a: memref<1x768xbf16>, %b: memref<768x3072xbf16>, %c: memref<1x3072xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<1x3072xf32>)
  linalg.matmul ins(%a, %b : memref<1x768xbf16>, memref<768x3072xbf16>) outs(%c : memref<1x3072xf32>)
  return
}

// CHOICE: c_fc_matmul: generated matmul 1x1024x3072x768 (batch x M x N x K), tensor cores (mma.sync m16n8k16, bf16, f32 accumulation), block 128x128x32, 4 warps 2x2 of 64x64, A vectors 8 along K, B vectors 8 along N, C vectors 2, grid (8, 24, 1) with M tiles fastest, 75776 B shared in 4 stages by cp.async (A K-major, B N-major), dynamic, sized for 2 blocks an SM
// CHOICE: c_proj_matmul: generated matmul 1x1024x768x3072 (batch x M x N x K), tensor cores (mma.sync m16n8k16, f16, f32 accumulation), block 64x64x32, 4 warps 2x2 of 32x32, A vectors 8 along K, B vectors 8 along N, C vectors 2, grid (12, 16, 1) with N tiles fastest, 38912 B shared in 4 stages by cp.async (A K-major, B N-major), dynamic, sized for 2 blocks an SM
// CHOICE: logits_matmul: generated matmul 1x1024x50257x768 (batch x M x N x K), tensor cores (mma.sync m16n8k16, bf16, f32 accumulation), block 128x128x32, {{.*}} B vectors 8 along K, C vectors 1, grid (8, 393, 1)
// CHOICE: scores_batch_matmul: generated matmul 12x1024x1024x64 (batch x M x N x K), tensor cores {{.*}} block 128x128x32, {{.*}} B vectors 8 along K
// CHOICE: prefill_matmul: generated matmul 1x16x3072x768 (batch x M x N x K), tensor cores {{.*}} block 16x64x128, 4 warps 1x4 of 16x16, split-K 3 (256 rows each, kFewRowsSplitsK)
// CHOICE: step_matmul: generated matmul 1x1x3072x768 (batch x M x N x K), skinny form

// Two blocks of 4 warps an SM (what the stages leave shared memory for)
// need at most 255 registers a thread, without spills.
// PTX80: c_fc_matmul_module::c_fc_matmul {{ *}}{{[0-9]+}} registers {{.*}} 0 B spill stores
// PTX80: ptx-check: 7 kernels assembled for sm_80
// PTX90: c_fc_matmul_module::c_fc_matmul {{ *}}{{[0-9]+}} registers {{.*}} 0 B spill stores
// PTX90: ptx-check: 7 kernels assembled for sm_90
// MMA: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// MMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// MMA: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
