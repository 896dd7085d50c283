// RUN: mlpipe-opt %s --mlpipe-persistent-kernels="chip=sm_90" --debug-only=mlpipe-persistent 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG --input-file=%t.debug
// RUN: mlpipe-opt %s --mlpipe-persistent-kernels="chip=sm_90 enabled=false" | FileCheck %s --check-prefix=OFF
// RUN: not mlpipe-opt %s --mlpipe-persistent-kernels="chip=sm_1" 2>&1 | FileCheck %s --check-prefix=BAD

// @chain: scale (2 blocks of 64 threads, a workgroup buffer and a barrier)
// then shift (3 blocks of 32 threads, a barrier) become one kernel of 2
// blocks of 64 threads; shift's 3 virtual blocks run as 2 subgroups of 32
// threads, virtual block subgroup * 2 + block id. The memrefs of static
// layout travel as bare pointers; the one of dynamic size as a descriptor.
// shift's load of w, which no phase writes, moves above the grid barrier.
// CHECK-LABEL: func.func @chain
// CHECK-NOT: gpu.launch_func @scale
// CHECK: memref.subview
// CHECK: %[[TWO:c2_[0-9]+]] = arith.constant 2 : index
// CHECK: %[[SIXTY_FOUR:c64_[0-9]+]] = arith.constant 64 : index
// CHECK: %[[SHARED:.*]] = arith.constant 256 : i32
// CHECK: %[[XP:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[X:.*]] = arith.index_cast %[[XP]] : index to i64
// CHECK: gpu.launch_func @persistent_scale_2_phases_module::@persistent_scale_2_phases blocks in (%[[TWO]], %{{.*}}, %{{.*}}) threads in (%[[SIXTY_FOUR]], %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[SHARED]] args(%[[X]] : i64, %{{.*}} : i64, %{{.*}} : i64, %arg3 : memref<?xf32>)
// CHECK-NEXT: return

// @call_between: a library call between two launches ends the run; each
// stays its own launch.
// CHECK-LABEL: func.func @call_between
// CHECK: gpu.launch_func @scale::@scale
// CHECK: call @library
// CHECK: gpu.launch_func @scale::@scale

// @too_wide: 1000 blocks of 256 threads do not stay resident on 132 SMs;
// the launch before it stays alone, and so does it.
// CHECK-LABEL: func.func @too_wide
// CHECK: gpu.launch_func @scale::@scale
// CHECK: gpu.launch_func @wide::@wide

// @too_many_subgroups: beside a block of 1024 threads, 32-thread blocks
// would run 32 side by side, but a block has 15 named barriers for them;
// each launch stays alone.
// CHECK-LABEL: func.func @too_many_subgroups
// CHECK: gpu.launch_func @wide_block::@wide_block
// CHECK: gpu.launch_func @lanes::@lanes

// The modules of merged launches that nothing else launches go; scale is
// still launched elsewhere.
// CHECK: gpu.module @scale
// CHECK-NOT: gpu.module @shift
// CHECK: gpu.module @wide_block
// CHECK: gpu.module @lanes
// CHECK: gpu.module @wide
// CHECK-LABEL: gpu.module @persistent_scale_2_phases_module
// CHECK: llvm.mlir.global external @mlpipe_grid_barrier(0 : i64) {addr_space = 1 : i32
// CHECK: gpu.func @persistent_scale_2_phases(%[[XA:.*]]: i64, %[[YA:.*]]: i64, %[[WA:.*]]: i64, %[[ZA:.*]]: memref<?xf32>)
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// CHECK-SAME: mlpipe.bytes = 224 : i64
// CHECK-SAME: mlpipe.phases = ["scale", "shift"]
// CHECK-SAME: nvvm.minctasm = 1 : i32
// The descriptor of x, rebuilt from its pointer and its type.
// CHECK: %[[XPTR:.*]] = llvm.inttoptr %[[XA]] : i64 to !llvm.ptr
// CHECK: llvm.insertvalue %[[XPTR]], %{{.*}}[0]
// CHECK: %[[XM:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<128xf32>
// CHECK: %[[WM:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<32xf32>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[BID:.*]] = gpu.block_id x
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// Thread 0 reads the barrier's count once, rounded down to the grid's size.
// CHECK: %[[START:.*]] = scf.if
// CHECK: llvm.load %{{.*}} atomic syncscope("device") monotonic
// CHECK: arith.divui
// Phase 1, scale: a block is a virtual block; its buffer a view of the
// shared memory; its barrier the whole block's; x is written, so its load
// stays in the phase.
// CHECK: %[[ACTIVE1:.*]] = arith.cmpi ult, %[[BID]], %c2
// CHECK: %[[CLAMPED1:.*]] = arith.minui %[[BID]], %c1
// CHECK: scf.if %[[ACTIVE1]] {
// CHECK: memref.view %[[SMEM]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: arith.muli %[[CLAMPED1]], %c64
// CHECK: memref.load %[[XM]][
// CHECK: gpu.barrier
// CHECK: }
// Phase 2, shift: 32-thread virtual blocks side by side, 2 a block.
// CHECK: %[[SUBGROUP:.*]] = arith.divui %[[TID]], %c32
// CHECK: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// CHECK: %[[FIRST:.*]] = arith.muli %[[SUBGROUP]], %c2
// CHECK: %[[VBID:.*]] = arith.addi %[[FIRST]], %[[BID]]
// CHECK: %[[ACTIVE2:.*]] = arith.cmpi ult, %[[VBID]], %c3
// CHECK: %[[CLAMPED2:.*]] = arith.minui %[[VBID]], %c2
// w is written by no phase: its load is issued before the grid barrier.
// CHECK: memref.load %[[WM]][%[[LANE]]] : memref<32xf32>
// The grid barrier: count in without waiting, then wait for the count of
// this barrier (the first: 2 blocks past the start).
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: llvm.atomicrmw add %{{.*}}, %{{.*}} syncscope("device") release
// CHECK: %[[TARGET:.*]] = arith.addi %[[START]], %c2_i64
// CHECK: scf.while
// CHECK: %[[NOW:.*]] = llvm.load %{{.*}} atomic syncscope("device") acquire
// CHECK: arith.cmpi ult, %[[NOW]], %[[TARGET]]
// CHECK: gpu.barrier
// CHECK: scf.if %[[ACTIVE2]] {
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[LANE]]]
// CHECK: %[[ID:.*]] = arith.addi %[[SUBGROUP]], %c1
// CHECK: %[[ID32:.*]] = arith.index_cast %[[ID]] : index to i32
// CHECK: nvvm.barrier id = %[[ID32]] number_of_threads = %c32_i32
// CHECK: arith.muli %[[CLAMPED2]], %c32
// CHECK-NOT: gpu.block_id
// CHECK-NOT: gpu.thread_id
// CHECK: gpu.return

// DEBUG: [mlpipe-persistent] persistent_scale_2_phases: 2 launches as phases of one kernel, 2 blocks of 64 threads (1 an SM of 132), 256 bytes of shared memory, 1 read-only loads issued ahead of their phase's barrier
// DEBUG: [mlpipe-persistent] wide: ends a run: 1000 blocks are needed, more than the 264 that stay resident
// DEBUG: [mlpipe-persistent] lanes: ends a run: 32 blocks of 32 threads side by side need more named barriers than the 15 there are

// OFF-NOT: persistent
// OFF: gpu.launch_func @scale::@scale
// OFF: gpu.launch_func @shift::@shift

// BAD: no device description for chip 'sm_1'
module attributes {gpu.container_module} {
  func.func private @library(memref<128xf32>)

  func.func @chain(%x: memref<128xf32>, %y: memref<96xf32>, %w: memref<32xf32>, %z: memref<?xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @scale::@scale blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<128xf32>)
    %view = memref.subview %y[0] [96] [1] : memref<96xf32> to memref<96xf32, strided<[1]>>
    gpu.launch_func @shift::@shift blocks in (%c3, %c1, %c1) threads in (%c32, %c1, %c1) args(%view : memref<96xf32, strided<[1]>>, %w : memref<32xf32>, %z : memref<?xf32>)
    return
  }

  func.func @call_between(%x: memref<128xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    gpu.launch_func @scale::@scale blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<128xf32>)
    call @library(%x) : (memref<128xf32>) -> ()
    gpu.launch_func @scale::@scale blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<128xf32>)
    return
  }

  func.func @too_wide(%x: memref<128xf32>, %w: memref<256000xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c64 = arith.constant 64 : index
    %c256 = arith.constant 256 : index
    %c1000 = arith.constant 1000 : index
    gpu.launch_func @scale::@scale blocks in (%c2, %c1, %c1) threads in (%c64, %c1, %c1) args(%x : memref<128xf32>)
    gpu.launch_func @wide::@wide blocks in (%c1000, %c1, %c1) threads in (%c256, %c1, %c1) args(%w : memref<256000xf32>)
    return
  }

  func.func @too_many_subgroups(%y: memref<96xf32>, %w: memref<32xf32>) {
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %c32 = arith.constant 32 : index
    %c1024 = arith.constant 1024 : index
    gpu.launch_func @wide_block::@wide_block blocks in (%c1, %c1, %c1) threads in (%c1024, %c1, %c1) args(%w : memref<32xf32>)
    gpu.launch_func @lanes::@lanes blocks in (%c3, %c1, %c1) threads in (%c32, %c1, %c1) args(%y : memref<96xf32>)
    return
  }

  // Each of the 2 blocks doubles its 64 elements through a shared buffer.
  gpu.module @scale {
    gpu.func @scale(%x: memref<128xf32>) workgroup(%tile : memref<64xf32, #gpu.address_space<workgroup>>) kernel
        attributes {known_block_size = array<i32: 64, 1, 1>, mlpipe.bytes = 64 : i64, mlpipe.flops = 128 : i64} {
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %base = arith.muli %bid, %bdim : index
      %i = arith.addi %base, %tid : index
      %v = memref.load %x[%i] : memref<128xf32>
      memref.store %v, %tile[%tid] : memref<64xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %c63 = arith.constant 63 : index
      %mirror = arith.subi %c63, %tid : index
      %w = memref.load %tile[%mirror] : memref<64xf32, #gpu.address_space<workgroup>>
      %s = arith.addf %w, %w : f32
      memref.store %s, %x[%i] : memref<128xf32>
      gpu.return
    }
  }

  // Each of the 3 blocks of 32 threads writes its lane plus a weight.
  gpu.module @shift {
    gpu.func @shift(%y: memref<96xf32, strided<[1]>>, %w: memref<32xf32>, %z: memref<?xf32>) workgroup(%lanes : memref<32xf32, #gpu.address_space<workgroup>>) kernel
        attributes {mlpipe.bytes = 160 : i64, mlpipe.flops = 32 : i64} {
      %tid = gpu.thread_id x
      %f = arith.index_cast %tid : index to i32
      %g = arith.sitofp %f : i32 to f32
      %weight = memref.load %w[%tid] : memref<32xf32>
      %h = arith.addf %g, %weight : f32
      memref.store %h, %lanes[%tid] : memref<32xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %bid = gpu.block_id x
      %c32 = arith.constant 32 : index
      %base = arith.muli %bid, %c32 : index
      %i = arith.addi %base, %tid : index
      %v = memref.load %lanes[%tid] : memref<32xf32, #gpu.address_space<workgroup>>
      memref.store %v, %y[%i] : memref<96xf32, strided<[1]>>
      gpu.return
    }
  }

  gpu.module @wide_block {
    gpu.func @wide_block(%w: memref<32xf32>) kernel {
      gpu.return
    }
  }

  // Each of the 3 blocks of 32 threads writes its lanes after a barrier.
  gpu.module @lanes {
    gpu.func @lanes(%y: memref<96xf32>) kernel {
      gpu.barrier
      %tid = gpu.thread_id x
      %bid = gpu.block_id x
      %c32 = arith.constant 32 : index
      %base = arith.muli %bid, %c32 : index
      %i = arith.addi %base, %tid : index
      %one = arith.constant 1.0 : f32
      memref.store %one, %y[%i] : memref<96xf32>
      gpu.return
    }
  }

  gpu.module @wide {
    gpu.func @wide(%w: memref<256000xf32>) kernel {
      gpu.return
    }
  }
}
