// RUN: mlpipe-opt %s -split-input-file --mlpipe-buffer-plan | FileCheck %s
// RUN: mlpipe-opt %s -split-input-file --mlpipe-buffer-plan=alignment=1024 | FileCheck %s --check-prefix=ALIGN
// RUN: mlpipe-opt %s -split-input-file --mlpipe-buffer-plan --debug-only=mlpipe-buffer-plan 2>&1 >/dev/null | FileCheck %s --check-prefix=DEBUG
// RUN: not mlpipe-opt %s -split-input-file --mlpipe-buffer-plan=alignment=48 2>&1 | FileCheck %s --check-prefix=BAD

// A chain: %a dies before %c is born, so they share bytes; %b lives with
// both and gets its own. The arena is a trailing argument, deallocs go.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: %{{.*}}: memref<64xf32> {mlpipe.name = "y"}, %[[ARENA:.*]]: memref<512xi8> {mlpipe.arena})
// CHECK-SAME: mlpipe.arena = {alignment = 256 : i64, allocated_at_run_time = 0 : i64, buffers = 3 : i64, bytes = 512 : i64, peak_live_bytes = 512 : i64, unplanned_bytes = 768 : i64}
// CHECK: %[[OA:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[OA]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[OB:.*]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[OB]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[OC:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[OC]]][] : memref<512xi8> to memref<64xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: return
// ALIGN-LABEL: func.func @chain
// ALIGN-SAME: memref<2048xi8> {mlpipe.arena}
// DEBUG: @chain: 3 temporaries in an arena of 512 bytes (768 allocated one by one, peak live 512)
// DEBUG-NEXT: memref<64xf32> live 1..4 at offset 0
// DEBUG-NEXT: memref<64xf32> live 3..7 at offset 256
// DEBUG-NEXT: memref<64xf32> live 6..9 at offset 0
// BAD: mlpipe-buffer-plan: alignment must be a positive power of two, not 48
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%in: memref<64xf32>, %out: memref<64xf32>) kernel {
      gpu.return
    }
  }
  func.func @chain(%x: memref<64xf32> {mlpipe.name = "x"}, %y: memref<64xf32> {mlpipe.name = "y"})
      attributes {mlpipe.inputs = [{name = "x", type = tensor<64xf32>}], mlpipe.outputs = [{name = "y", type = tensor<64xf32>}]} {
    %c1 = arith.constant 1 : index
    %a = memref.alloc() : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<64xf32>, %a : memref<64xf32>)
    %b = memref.alloc() : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<64xf32>, %b : memref<64xf32>)
    memref.dealloc %a : memref<64xf32>
    %c = memref.alloc() : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%b : memref<64xf32>, %c : memref<64xf32>)
    memref.dealloc %b : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%c : memref<64xf32>, %y : memref<64xf32>)
    memref.dealloc %c : memref<64xf32>
    return
  }
}

// -----

// A view keeps its buffer alive: %a is read through %v after %b is born,
// so %b may not take %a's bytes, though %a itself is never used again.
// CHECK-LABEL: func.func @alias
// CHECK-SAME: memref<8192xi8> {mlpipe.arena}
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %{{.*}}[%[[C0]]][] : memref<8192xi8> to memref<32x32xf32>
// CHECK: memref.subview
// CHECK: %[[C4096:.*]] = arith.constant 4096 : index
// CHECK: memref.view %{{.*}}[%[[C4096]]][] : memref<8192xi8> to memref<32x32xf32>
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%in: memref<32x32xf32>, %out: memref<32x32xf32>) kernel {
      gpu.return
    }
    gpu.func @row(%in: memref<32xf32, strided<[1], offset: ?>>, %out: memref<32x32xf32>) kernel {
      gpu.return
    }
  }
  func.func @alias(%x: memref<32x32xf32> {mlpipe.name = "x"}, %y: memref<32x32xf32> {mlpipe.name = "y"})
      attributes {mlpipe.inputs = [{name = "x", type = tensor<32x32xf32>}], mlpipe.outputs = [{name = "y", type = tensor<32x32xf32>}]} {
    %c1 = arith.constant 1 : index
    %c3 = arith.constant 3 : index
    %a = memref.alloc() : memref<32x32xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<32x32xf32>, %a : memref<32x32xf32>)
    %v = memref.subview %a[%c3, 0] [1, 32] [1, 1] : memref<32x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    %b = memref.alloc() : memref<32x32xf32>
    gpu.launch_func @k::@row blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%v : memref<32xf32, strided<[1], offset: ?>>, %b : memref<32x32xf32>)
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%b : memref<32x32xf32>, %y : memref<32x32xf32>)
    memref.dealloc %a : memref<32x32xf32>
    memref.dealloc %b : memref<32x32xf32>
    return
  }
}

// -----

// What cannot be planned is allocated in device memory at run time (never
// managed): temporaries of a function that is not an entry, and those of
// dynamic shape. An entry with no temporaries gets no arena argument.
// CHECK-LABEL: func.func private @helper(%{{[^,]*}}: memref<16xf32>)
// CHECK-NOT: mlpipe.arena
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[BUF:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<16xf32>
// CHECK: gpu.wait [%[[T1]]]
// CHECK: %[[T2:.*]] = gpu.wait async
// CHECK: %[[T3:.*]] = gpu.dealloc async [%[[T2]]] %[[BUF]] : memref<16xf32>
// CHECK: gpu.wait [%[[T3]]]
// CHECK-LABEL: func.func @dynamic(%{{[^,]*}}: index)
// CHECK-SAME: mlpipe.arena = {alignment = 256 : i64, allocated_at_run_time = 1 : i64, buffers = 0 : i64, bytes = 0 : i64
// CHECK: gpu.alloc async [%{{.*}}] (%{{.*}}) : memref<?xf32>
// CHECK-NOT: memref.alloc
module attributes {gpu.container_module} {
  func.func private @helper(%x: memref<16xf32>) {
    %a = memref.alloc() : memref<16xf32>
    memref.copy %x, %a : memref<16xf32> to memref<16xf32>
    memref.dealloc %a : memref<16xf32>
    return
  }
  func.func @dynamic(%n: index) attributes {mlpipe.inputs = [], mlpipe.outputs = []} {
    %a = memref.alloc(%n) : memref<?xf32>
    memref.dealloc %a : memref<?xf32>
    return
  }
}

// -----

// A loop: %init is planned, and lives until the loop's result is last read
// (the result may be %init itself); the buffers a trip allocates are
// allocated at run time, and what frees them through the loop's values
// (ownership-based deallocation frees a carried value's base buffer)
// frees them in device memory, while %init's own dealloc goes.
// CHECK-LABEL: func.func @loop
// CHECK-SAME: allocated_at_run_time = 1 : i64, buffers = 2 : i64, bytes = 512 : i64
// CHECK: %[[INIT:.*]] = memref.view
// CHECK: scf.while (%{{.*}} = %[[INIT]]
// CHECK: gpu.alloc async
// CHECK: scf.yield
// CHECK: %[[LAST:.*]] = memref.view
// CHECK: gpu.launch_func @k::@k {{.*}} args(%{{.*}} : memref<64xf32>, %[[LAST]] : memref<64xf32>)
// CHECK: %[[BASE:.*]], %{{.*}}, %{{.*}}, %{{.*}} = memref.extract_strided_metadata
// CHECK: %[[T:.*]] = gpu.wait async
// CHECK: gpu.dealloc async [%[[T]]] %[[BASE]] : memref<f32>
// CHECK-NOT: memref.dealloc
// CHECK: return
// DEBUG: @loop: 2 temporaries in an arena of 512 bytes
// DEBUG-NEXT: memref<64xf32> live 1..7 at offset 0
// DEBUG-NEXT: memref<64xf32> live 4..6 at offset 256
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k(%in: memref<64xf32>, %out: memref<64xf32>) kernel {
      gpu.return
    }
  }
  func.func @loop(%x: memref<64xf32> {mlpipe.name = "x"}, %y: memref<64xf32> {mlpipe.name = "y"}, %go: i1)
      attributes {mlpipe.inputs = [{name = "x", type = tensor<64xf32>}], mlpipe.outputs = [{name = "y", type = tensor<64xf32>}]} {
    %c1 = arith.constant 1 : index
    %init = memref.alloc() : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<64xf32>, %init : memref<64xf32>)
    %w = scf.while (%a = %init) : (memref<64xf32>) -> memref<64xf32> {
      scf.condition(%go) %a : memref<64xf32>
    } do {
    ^bb0(%a: memref<64xf32>):
      %next = memref.alloc() : memref<64xf32>
      gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<64xf32>, %next : memref<64xf32>)
      scf.yield %next : memref<64xf32>
    }
    %last = memref.alloc() : memref<64xf32>
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%w : memref<64xf32>, %last : memref<64xf32>)
    gpu.launch_func @k::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%last : memref<64xf32>, %y : memref<64xf32>)
    %base, %offset, %size, %stride = memref.extract_strided_metadata %w : memref<64xf32> -> memref<f32>, index, index, index
    memref.dealloc %init : memref<64xf32>
    memref.dealloc %last : memref<64xf32>
    memref.dealloc %base : memref<f32>
    return
  }
}
