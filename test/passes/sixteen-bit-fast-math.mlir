// RUN: mlpipe-opt %s --pass-pipeline='builtin.module(gpu.module(mlpipe-sixteen-bit-fast-math{contract=true}))' --debug-only=mlpipe-fast-math 2>%t.debug | FileCheck %s
// RUN: FileCheck %s --check-prefix=DEBUG --input-file=%t.debug
// By default (contract=false) no op is marked contract.
// RUN: mlpipe-opt %s --pass-pipeline='builtin.module(gpu.module(mlpipe-sixteen-bit-fast-math))' | FileCheck %s --check-prefix=NO-CONTRACT
// NO-CONTRACT: gpu.func @gelu_bf16(
// NO-CONTRACT-NOT: contract
// NO-CONTRACT: fastmath<afn>
// NO-CONTRACT-NOT: contract

// Only kernels whose float buffers are all 16-bit are rewritten.
//
// A bf16 GELU kernel: 1 + tanh(u) becomes 2 / (1 + 2^(-2u / ln 2)), the
// division marked afn (a reciprocal and a multiply); the tanh goes.
// CHECK-LABEL: gpu.func @gelu_bf16(
// CHECK-NOT: math.tanh
// With contract=true every f32 multiply and add is marked contract (a
// multiply feeding an add may become one fused multiply-add).
// CHECK: arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK: arith.constant -2.885390e+00 : f32
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK: %[[POWER:.*]] = math.exp2 %[[SCALED]] : f32
// CHECK: %[[DENOMINATOR:.*]] = arith.addf %[[POWER]], %{{.*}} fastmath<contract> : f32
// CHECK: %[[SUM:.*]] = arith.divf %{{.*}}, %[[DENOMINATOR]] fastmath<afn> : f32
// CHECK: arith.mulf %{{.*}}, %[[SUM]] fastmath<contract> : f32
// CHECK-NOT: math.tanh
// CHECK: gpu.return

// An f32 kernel keeps libdevice's tanh (its results are not rounded to 16
// bits), as does a tanh with another use, or an add of something other
// than 1.
// CHECK-LABEL: gpu.func @gelu_f32(
// CHECK-NOT: fastmath
// CHECK: math.tanh
// CHECK-NOT: math.exp2
// CHECK-NOT: fastmath
// CHECK-LABEL: gpu.func @tanh_used_twice(
// CHECK: math.tanh
// CHECK-NOT: math.exp2
// CHECK-LABEL: gpu.func @one_minus_tanh(
// CHECK: math.tanh
// CHECK-NOT: math.exp2

// A softmax step in f16: exp(x) as 2^(x log2 e), its division afn; in
// f32 both stay.
// CHECK-LABEL: gpu.func @softmax_f16(
// CHECK-NOT: math.exp %
// CHECK: arith.constant 1.44269502 : f32
// CHECK-NEXT: %[[SCALED2:.*]] = arith.mulf %{{.*}}, %{{.*}} fastmath<contract> : f32
// CHECK-NEXT: %[[POWER2:.*]] = math.exp2 %[[SCALED2]] : f32
// CHECK-NEXT: arith.divf %[[POWER2]], %{{.*}} fastmath<afn> : f32
// CHECK-LABEL: gpu.func @softmax_f32(
// CHECK: math.exp %
// CHECK-NEXT: arith.divf %{{.*}}, %{{.*}} : f32

// DEBUG: gelu_bf16: 1 1 + tanh as a sigmoid, 0 exp as exp2, 1 divisions approximate, 5 multiplies and adds contractible
// DEBUG: tanh_used_twice: 0 1 + tanh as a sigmoid, 0 exp as exp2, 0 divisions approximate, 1 multiplies and adds contractible
// DEBUG: one_minus_tanh: 0 1 + tanh as a sigmoid
// DEBUG: softmax_f16: 0 1 + tanh as a sigmoid, 1 exp as exp2, 1 divisions approximate, 1 multiplies and adds contractible
// DEBUG-NOT: _f32

gpu.module @kernels {
  gpu.func @gelu_bf16(%x: memref<64xbf16>, %y: memref<64xbf16>) kernel {
    %i = gpu.thread_id x
    %half = arith.constant 5.000000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %scale = arith.constant 0.797884583 : f32
    %v = memref.load %x[%i] : memref<64xbf16>
    %w = arith.extf %v : bf16 to f32
    %u = arith.mulf %w, %scale : f32
    %t = math.tanh %u : f32
    %s = arith.addf %one, %t : f32
    %h = arith.mulf %w, %half : f32
    %g = arith.mulf %h, %s : f32
    %r = arith.truncf %g : f32 to bf16
    memref.store %r, %y[%i] : memref<64xbf16>
    gpu.return
  }
  gpu.func @gelu_f32(%x: memref<64xf32>, %y: memref<64xf32>) kernel {
    %i = gpu.thread_id x
    %one = arith.constant 1.000000e+00 : f32
    %u = memref.load %x[%i] : memref<64xf32>
    %t = math.tanh %u : f32
    %s = arith.addf %t, %one : f32
    %g = arith.mulf %u, %s : f32
    memref.store %g, %y[%i] : memref<64xf32>
    gpu.return
  }
  gpu.func @tanh_used_twice(%x: memref<64xf16>, %y: memref<64xf16>, %z: memref<64xf16>) kernel {
    %i = gpu.thread_id x
    %one = arith.constant 1.000000e+00 : f32
    %v = memref.load %x[%i] : memref<64xf16>
    %u = arith.extf %v : f16 to f32
    %t = math.tanh %u : f32
    %s = arith.addf %t, %one : f32
    %a = arith.truncf %s : f32 to f16
    %b = arith.truncf %t : f32 to f16
    memref.store %a, %y[%i] : memref<64xf16>
    memref.store %b, %z[%i] : memref<64xf16>
    gpu.return
  }
  gpu.func @one_minus_tanh(%x: memref<64xf16>, %y: memref<64xf16>) kernel {
    %i = gpu.thread_id x
    %minus = arith.constant -1.000000e+00 : f32
    %v = memref.load %x[%i] : memref<64xf16>
    %u = arith.extf %v : f16 to f32
    %t = math.tanh %u : f32
    %s = arith.addf %t, %minus : f32
    %a = arith.truncf %s : f32 to f16
    memref.store %a, %y[%i] : memref<64xf16>
    gpu.return
  }
  gpu.func @softmax_f16(%x: memref<64xf16>, %l: memref<1xf16>, %y: memref<64xf16>) kernel {
    %i = gpu.thread_id x
    %c0 = arith.constant 0 : index
    %v = memref.load %x[%i] : memref<64xf16>
    %w = memref.load %l[%c0] : memref<1xf16>
    %u = arith.extf %v : f16 to f32
    %s = arith.extf %w : f16 to f32
    %e = math.exp %u : f32
    %q = arith.divf %e, %s : f32
    %r = arith.truncf %q : f32 to f16
    memref.store %r, %y[%i] : memref<64xf16>
    gpu.return
  }
  gpu.func @softmax_f32(%x: memref<64xf32>, %l: memref<1xf32>, %y: memref<64xf32>) kernel {
    %i = gpu.thread_id x
    %c0 = arith.constant 0 : index
    %u = memref.load %x[%i] : memref<64xf32>
    %s = memref.load %l[%c0] : memref<1xf32>
    %e = math.exp %u : f32
    %q = arith.divf %e, %s : f32
    memref.store %q, %y[%i] : memref<64xf32>
    gpu.return
  }
}
