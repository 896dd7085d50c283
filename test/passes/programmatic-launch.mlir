// RUN: mlpipe-opt %s --mlpipe-programmatic-launch="chip=sm_90" --debug-only=mlpipe-launch 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG --input-file=%t.debug
// RUN: mlpipe-opt %s --mlpipe-programmatic-launch="chip=sm_100" | FileCheck %s
// RUN: mlpipe-opt %s --mlpipe-programmatic-launch="chip=sm_80" --debug-only=mlpipe-launch 2>%t.old | FileCheck %s --check-prefix=OLD
// RUN: FileCheck %s --check-prefix=OLD-DEBUG --input-file=%t.old
// RUN: not mlpipe-opt %s --mlpipe-programmatic-launch="chip=sm_1" 2>&1 | FileCheck %s --check-prefix=BAD

// On sm_90 and later each kernel first waits for the one before it, before
// its first load, then lets the next one be scheduled; its module gets the
// marker the runtime looks for. A function that is not a kernel is left as
// it is.
// OLD-LABEL: gpu.func @scale(
// OLD-NOT: griddepcontrol
// CHECK-LABEL: gpu.module @scale
// CHECK: llvm.mlir.global external constant @mlpipe_programmatic_launch(1 : i8)
// CHECK: gpu.func @scale(
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: arith.constant
// CHECK: memref.load
// CHECK: gpu.func @helper(
// CHECK-NOT: griddepcontrol
// CHECK: gpu.return
// CHECK-LABEL: gpu.module @shift
// CHECK: llvm.mlir.global external constant @mlpipe_programmatic_launch
// CHECK: gpu.func @shift(
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// A kernel that already waits, after prefetches, keeps its wait where it
// is and lets the next kernel go right after it; nothing is added before.
// CHECK-LABEL: gpu.module @prefetching
// CHECK: gpu.func @prefetching(
// CHECK-NEXT: memref.extract_aligned_pointer_as_index
// CHECK: nvvm.prefetch level = L2
// CHECK-NEXT: nvvm.griddepcontrol wait
// CHECK-NEXT: nvvm.griddepcontrol launch_dependents
// CHECK-NEXT: arith.constant
// CHECK-NOT: griddepcontrol
// CHECK: gpu.return
// A kernel marked to launch only after its predecessor (blocks of unequal
// work, longest first) is left alone, and so is its module: no marker, no
// wait, nothing to let go.
// CHECK-LABEL: gpu.module @causal_tiles
// CHECK-NOT: mlpipe_programmatic_launch
// CHECK: gpu.func @causal_tiles(
// CHECK-NOT: griddepcontrol
// CHECK: gpu.return
// DEBUG: [mlpipe-launch] sm_90: 3 kernels launch programmatically, 1 modules after their predecessor

// Before sm_90 nothing is added, and a kernel's own wait (from a module
// outlined for a later chip) goes with the prefetches before it: LLVM
// selects neither for these chips.
// OLD-NOT: mlpipe_programmatic_launch
// OLD-LABEL: gpu.module @prefetching
// OLD-NOT: mlpipe_programmatic_launch
// OLD: llvm.inttoptr
// OLD-NOT: nvvm.
// OLD: memref.load
// OLD-DEBUG: [mlpipe-launch] sm_80: no programmatic dependent launch on this chip

// BAD: no device description for chip 'sm_1'
module attributes {gpu.container_module} {
  gpu.module @scale {
    gpu.func @scale(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%c0] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%c0] : memref<64xf32>
      gpu.return
    }
    gpu.func @helper(%x: memref<64xf32>) {
      gpu.return
    }
  }
  gpu.module @shift {
    gpu.func @shift(%x: memref<64xf32>) kernel {
      gpu.return
    }
  }
  gpu.module @prefetching {
    gpu.func @prefetching(%x: memref<64xf32>) kernel {
      %address = memref.extract_aligned_pointer_as_index %x : memref<64xf32> -> index
      %word = arith.index_cast %address : index to i64
      %pointer = llvm.inttoptr %word : i64 to !llvm.ptr
      nvvm.prefetch level = L2, %pointer : !llvm.ptr
      nvvm.griddepcontrol wait
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<64xf32>
      memref.store %v, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @causal_tiles {
    gpu.func @causal_tiles(%x: memref<64xf32>) kernel attributes {mlpipe.launch_after_predecessor} {
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%c0] : memref<64xf32>
      memref.store %v, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
}
