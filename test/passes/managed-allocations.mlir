// RUN: mlpipe-opt %s -split-input-file --mlpipe-managed-allocations | FileCheck %s

// CHECK-LABEL: func.func @temporary
// CHECK: %[[BUF:.*]] = gpu.alloc host_shared () : memref<64xf32>
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[T1:.*]] = gpu.dealloc async [%[[T0]]] %[[BUF]] : memref<64xf32>
// CHECK: gpu.wait [%[[T1]]]
// CHECK-NOT: memref.alloc
func.func @temporary(%x: memref<64xf32>) {
  %buf = memref.alloc() : memref<64xf32>
  memref.copy %x, %buf : memref<64xf32> to memref<64xf32>
  memref.dealloc %buf : memref<64xf32>
  return
}

// -----

// Kernels inside gpu.module are left alone.
// CHECK-LABEL: gpu.module @kernels
// CHECK: memref.alloca
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k() kernel {
      %a = memref.alloca() : memref<4xf32>
      gpu.return
    }
  }
}
