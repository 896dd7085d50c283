// The generated matmul's warpgroup form (wgmma from shared memory, sm_90a)
// on GPT-2's c_fc at T = 1024: the kernel's structure, the choice
// --debug-only=mlpipe-emitters prints, and PTX that ptxas assembles for
// sm_90a. On sm_90 (code that must also run on later chips) the same
// product stays on mma.sync.
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_90a --cse | FileCheck %s
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_90a --debug-only=mlpipe-emitters -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHOICE
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_90a | lower-nvvm --chip sm_90a | ptx-check --chip sm_90a | FileCheck %s --check-prefix=PTX
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_90a | lower-nvvm --chip sm_90a --format isa | FileCheck %s --check-prefix=ISA
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls=chip=sm_90 | FileCheck %s --check-prefix=SM90
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls="chip=sm_90a staged-epilogue=0" --cse | FileCheck %s --check-prefix=DIRECT

// 1024 x 768 by 768 x 3072: tiles of 128 x 192 (two warpgroups of m64n192,
// 96 accumulators a thread), 128 blocks: one an SM (in 128 x 128, 192
// blocks would put two on some SMs). K in slices of 64, five stages
// (three slices in flight; 201 KiB, and one more KiB to place them at a
// 1024-byte boundary). C goes out through shared memory (its f32 tile,
// 128 rows of 192 + 8 floats, over the stages), four columns a thread.
// CHOICE: c_fc_matmul: generated matmul 1x1024x3072x768 (batch x M x N x K), warpgroups (wgmma m64n192k16, bf16, f32 accumulation), block 128x192x64, 2 warpgroups, B N-major, grid (8, 16, 1), 205824 B shared in 5 stages by cp.async (128-byte swizzle), one barrier a slice, sized for 1 block an SM, B's first slices copied before the wait (kTensorCoreCopiesBBeforeWait), C through shared memory, 4 columns a thread (kWarpgroupStagedEpilogue)

// CHECK-LABEL: func.func @c_fc
// CHECK: gpu.launch_func @c_fc_matmul_module::@c_fc_matmul blocks in (%c8, %c16, %c1) threads in (%c256, %c1, %c1) dynamic_shared_memory_size %c205824_i32
// The stages start at the dynamic shared memory's first 1024-byte
// boundary: A's as [stage][m][64], B's (N-major) as [stage][atom][k][64].
// CHECK: %[[SHARED:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[SHARED]]
// CHECK: %[[MOD:.*]] = arith.remui %[[BASE]], %c1024
// CHECK: %[[UP:.*]] = arith.subi %c1024, %[[MOD]]
// CHECK: %[[PAD:.*]] = arith.remui %[[UP]], %c1024
// CHECK: %[[SA:.*]] = memref.view %[[SHARED]][%[[PAD]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<5x128x64xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[SB:.*]] = memref.view %[[SHARED]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<5x3x64x64xbf16, #gpu.address_space<workgroup>>
// A chunk's place: chunk c of row r at c ^ (r mod 8).
// CHECK: %[[ROW:.*]] = arith.divui %thread_id_x, %c8
// CHECK: %[[CHUNK:.*]] = arith.remui %thread_id_x, %c8
// CHECK: %[[PHASE:.*]] = arith.remui %[[ROW]], %c8
// CHECK: arith.xori %[[CHUNK]], %[[PHASE]]
// B, a weight, has its first three slices copied before the wait; A's
// follow it.
// CHECK: nvgpu.device_async_copy %arg1[{{.*}}], %[[SB]][%c0, {{.*}}], 8 {bypassL1}
// CHECK: nvvm.griddepcontrol wait
// CHECK: nvgpu.device_async_copy %arg0[{{.*}}], %[[SA]][%c0, {{.*}}], 8 {bypassL1}
// CHECK: llvm.mlir.undef : !llvm.struct<(f32,
// Each step: slice t landed and visible to the async proxy, and every
// warpgroup past its wait for slice t-2's products (one barrier); slice
// t+3 copied into the stage those read; four wgmma; slice t-1's products
// waited for.
// CHECK: scf.for
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %{{.*}}, <m = 64, n = 192, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NEXT: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[TILE:.*]] = memref.view %[[SHARED]][%[[PAD]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128x200xf32, #gpu.address_space<workgroup>>
// CHECK: llvm.extractvalue
// CHECK: vector.store %{{.*}}, %[[TILE]][%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<128x200xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK-NOT: %arg2
// CHECK: gpu.barrier
// CHECK: vector.load %[[TILE]][%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<128x200xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK-NEXT: vector.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<1024x3072xf32>, vector<4xf32>

// Each thread's accumulators stored where they lie in C, two columns a
// store (staged-epilogue=0):
// DIRECT: nvvm.wgmma.wait.group.sync.aligned 0
// DIRECT-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// DIRECT-NOT: gpu.barrier
// DIRECT: llvm.extractvalue
// DIRECT: vector.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}] {alignment = 8 : i64} : memref<1024x3072xf32>, vector<2xf32>

// PTX: matmul_module::c_fc_matmul {{.*}} 0 B spill stores {{.*}} [sm_90a]
// PTX: ptx-check: 1 kernel assembled for sm_90a
// ISA: wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16
// SM90-NOT: wgmma
// SM90: nvvm.mma.sync
func.func @c_fc(%a: memref<1024x768xbf16>, %b: memref<768x3072xbf16>, %c: memref<1024x3072xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<1024x3072xf32>)
  linalg.matmul ins(%a, %b : memref<1024x768xbf16>, memref<768x3072xbf16>) outs(%c : memref<1024x3072xf32>)
  return
}
