// RUN: mlpipe-opt %s -split-input-file --mlpipe-host-loops | FileCheck %s

// A loop's condition, written by a kernel into device memory, is read on
// the host through a one-element copy into host memory (allocated once, at
// the function's start); the function is marked as running a loop. Each
// region of the loop, which launches kernels (whose arguments go on the
// stack), gives back its stack before its terminator.
// CHECK-LABEL: func.func @halve_until_small
// CHECK-SAME: mlpipe.host_loops = 1 : i64
// CHECK: %[[HOST:.*]] = memref.alloca() : memref<i1>
// CHECK: scf.while
// CHECK-NEXT: %[[SP:.*]] = llvm.intr.stacksave : !llvm.ptr
// CHECK: %[[FLAG:.*]] = memref.alloc() : memref<i1>
// CHECK: gpu.launch_func @k::@cond
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[T1:.*]] = gpu.memcpy async [%[[T0]]] %[[HOST]], %[[FLAG]] : memref<i1>, memref<i1>
// CHECK: gpu.wait [%[[T1]]]
// CHECK: %[[C:.*]] = memref.load %[[HOST]][] : memref<i1>
// CHECK: llvm.intr.stackrestore %[[SP]] : !llvm.ptr
// CHECK-NEXT: scf.condition(%[[C]])
// CHECK: ^bb0(
// CHECK-NEXT: %[[SP2:.*]] = llvm.intr.stacksave : !llvm.ptr
// CHECK: gpu.launch_func @k::@body
// CHECK-NEXT: llvm.intr.stackrestore %[[SP2]] : !llvm.ptr
// CHECK-NEXT: scf.yield
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @cond(%x: memref<16xf32>, %flag: memref<i1>) kernel {
      gpu.return
    }
    gpu.func @body(%x: memref<16xf32>, %y: memref<16xf32>) kernel {
      gpu.return
    }
  }
  func.func @halve_until_small(%x: memref<16xf32>, %y: memref<16xf32>)
      attributes {mlpipe.inputs = [{name = "x", type = tensor<16xf32>}], mlpipe.outputs = [{name = "y", type = tensor<16xf32>}]} {
    %c1 = arith.constant 1 : index
    %w = scf.while (%a = %x) : (memref<16xf32>) -> memref<16xf32> {
      %flag = memref.alloc() : memref<i1>
      gpu.launch_func @k::@cond blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<16xf32>, %flag : memref<i1>)
      %c = memref.load %flag[] : memref<i1>
      memref.dealloc %flag : memref<i1>
      scf.condition(%c) %a : memref<16xf32>
    } do {
    ^bb0(%a: memref<16xf32>):
      %next = memref.alloc() : memref<16xf32>
      gpu.launch_func @k::@body blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<16xf32>, %next : memref<16xf32>)
      scf.yield %next : memref<16xf32>
    }
    gpu.launch_func @k::@body blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%w : memref<16xf32>, %y : memref<16xf32>)
    return
  }
}

// -----

// The pointer and flag lists ownership-based deallocation writes on the
// host and hands its dealloc helper become host buffers at the function's
// start, their deallocs gone; the helper's own loads (of host buffers) and
// loads of those lists stay as they are.
// CHECK-LABEL: func.func @frees_after_checking
// CHECK-DAG: %[[FLAGS:.*]] = memref.alloca() : memref<2xi1>
// CHECK-DAG: %[[POINTERS:.*]] = memref.alloca() : memref<2xindex>
// CHECK-NOT: memref.alloc()
// CHECK: memref.store %{{.*}}, %[[POINTERS]][%{{.*}}] : memref<2xindex>
// CHECK: call @dealloc_helper
// CHECK: memref.load %[[FLAGS]][%{{.*}}] : memref<2xi1>
// CHECK-NOT: gpu.memcpy
// CHECK-NOT: memref.dealloc %[[POINTERS]]
// CHECK: return
// CHECK-LABEL: func.func private @dealloc_helper
// CHECK-SAME: mlpipe.host_loops = 1 : i64
// CHECK-NOT: llvm.intr.stacksave
// CHECK: memref.load %arg0
// CHECK-NOT: gpu.memcpy
// CHECK-NOT: llvm.intr.stacksave
func.func @frees_after_checking(%p: index, %q: index, %own: i1)
    attributes {mlpipe.inputs = [], mlpipe.outputs = []} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %pointers = memref.alloc() : memref<2xindex>
  %flags = memref.alloc() : memref<2xi1>
  memref.store %p, %pointers[%c0] : memref<2xindex>
  memref.store %q, %pointers[%c1] : memref<2xindex>
  %cast = memref.cast %pointers : memref<2xindex> to memref<?xindex>
  %flagsCast = memref.cast %flags : memref<2xi1> to memref<?xi1>
  func.call @dealloc_helper(%cast, %flagsCast) : (memref<?xindex>, memref<?xi1>) -> ()
  %f = memref.load %flags[%c0] : memref<2xi1>
  memref.dealloc %pointers : memref<2xindex>
  memref.dealloc %flags : memref<2xi1>
  return
}
func.func private @dealloc_helper(%pointers: memref<?xindex>, %flags: memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %true = arith.constant true
  %n = memref.dim %pointers, %c0 : memref<?xindex>
  scf.for %i = %c0 to %n step %c1 {
    %p = memref.load %pointers[%i] : memref<?xindex>
    memref.store %true, %flags[%i] : memref<?xi1>
  }
  return
}
