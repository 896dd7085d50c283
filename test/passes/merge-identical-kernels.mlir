// RUN: mlpipe-opt %s -split-input-file --mlpipe-merge-identical-kernels | FileCheck %s

// @scale_0 is @scale under another name: its launch goes to @scale, and it
// goes. @shift differs in one constant and stays.
// CHECK-LABEL: func.func @blocks
// CHECK: gpu.launch_func @scale::@scale
// CHECK: gpu.launch_func @scale::@scale
// CHECK: gpu.launch_func @shift::@scale
// CHECK: gpu.module @scale
// CHECK-NOT: gpu.module @scale_0
// CHECK: gpu.module @shift
module attributes {gpu.container_module} {
  func.func @blocks(%x: memref<64xf32>, %y: memref<64xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @scale::@scale blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<64xf32>)
    gpu.launch_func @scale_0::@scale blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%y : memref<64xf32>)
    gpu.launch_func @shift::@scale blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%y : memref<64xf32>)
    return
  }
  gpu.module @scale {
    gpu.func @scale(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%c0] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @scale_0 {
    gpu.func @scale(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %two = arith.constant 2.0 : f32
      %v = memref.load %x[%c0] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
  gpu.module @shift {
    gpu.func @scale(%x: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %two = arith.constant 3.0 : f32
      %v = memref.load %x[%c0] : memref<64xf32>
      %w = arith.mulf %v, %two : f32
      memref.store %w, %x[%c0] : memref<64xf32>
      gpu.return
    }
  }
}

// -----

// Modules with an atomic load of a global (a counter in global memory) are
// compared too: the detached copy printed for the comparison
// is not verified (the atomic load's verifier looks for the data layout in
// a parent module, and crashed).
// CHECK-LABEL: func.func @atomics
// CHECK: gpu.launch_func @counted::@counted
// CHECK: gpu.launch_func @counted::@counted
// CHECK-NOT: gpu.module @counted_0
module attributes {gpu.container_module} {
  func.func @atomics() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @counted::@counted blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @counted_0::@counted blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  gpu.module @counted {
    llvm.mlir.global external @count(0 : i64) {addr_space = 1 : i32} : i64
    gpu.func @counted() kernel {
      %p = llvm.mlir.addressof @count : !llvm.ptr<1>
      %v = llvm.load %p atomic syncscope("device") acquire {alignment = 8 : i64} : !llvm.ptr<1> -> i64
      gpu.return
    }
  }
  gpu.module @counted_0 {
    llvm.mlir.global external @count(0 : i64) {addr_space = 1 : i32} : i64
    gpu.func @counted() kernel {
      %p = llvm.mlir.addressof @count : !llvm.ptr<1>
      %v = llvm.load %p atomic syncscope("device") acquire {alignment = 8 : i64} : !llvm.ptr<1> -> i64
      gpu.return
    }
  }
}
