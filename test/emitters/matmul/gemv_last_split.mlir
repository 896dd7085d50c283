// RUN: mlpipe-opt %s --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual" --cse | FileCheck %s
// RUN: mlpipe-opt %s --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual" --debug-only=mlpipe-emitters -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEBUG

// A decode step's MLP projection in bf16, one row of 3072 against a weight
// (B no kernel writes): on 24 column tiles a thread would hold 48 rows of
// B, so K is split 4 ways (kSkinnySplitsToHoldB: 12 rows a thread, all
// loaded before the wait), and the last of a tile's splits to finish adds
// the 4 partial sums in their order and applies the epilogue, in the same
// launch: the kernel is given C and the epilogue's operands after the
// partial products.
// CHECK-LABEL: func.func @projection
// CHECK: %[[PARTIALS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x1x768xf32>
// CHECK: gpu.launch_func @projection_matmul_module::@projection_matmul blocks in (%c24, %c4, %c1) threads in (%c256, %c1, %c1) args(%arg0 : memref<1x3072xbf16>, %arg1 : memref<3072x768xbf16>, %[[PARTIALS]] : memref<4x1x768xf32>, %arg4 : memref<1x768xbf16>, %arg2 : memref<768xf32>, %arg3 : memref<1x768xf32>)
// CHECK-NOT: gpu.launch_func
// CHECK: memref.global "private" @finished_splits : memref<24xi32> = dense<0>
// CHECK: gpu.func @projection_matmul
// CHECK: nvvm.griddepcontrol wait
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}, %{{.*}}, %{{.*}}] {{.*}} : memref<4x1x768xf32>, vector<8xf32>
// CHECK: gpu.barrier
// CHECK: llvm.fence syncscope("device") release
// CHECK: memref.atomic_rmw addi %c1_i32, %{{.*}}[%{{.*}}] : (i32, memref<24xi32>) -> i32
// CHECK-COUNT-4: vector.load %arg2[%{{.*}}, %{{.*}}, %{{.*}}] {{.*}} : memref<4x1x768xf32>, vector<8xf32>
// CHECK-NOT: vector.load %arg2
// CHECK: math.tanh
// CHECK: memref.load %arg5[%{{.*}}, %{{.*}}] : memref<1x768xf32>
func.func @projection(%a: memref<1x3072xbf16> {mlpipe.name = "a"}, %b: memref<3072x768xbf16> {mlpipe.name = "b"},
                      %bias: memref<768xf32> {mlpipe.name = "bias"}, %residual: memref<1x768xf32> {mlpipe.name = "residual"},
                      %c: memref<1x768xbf16> {mlpipe.name = "y"}) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<1x768xbf16>)
  linalg.matmul ins(%a, %b : memref<1x3072xbf16>, memref<3072x768xbf16>) outs(%c : memref<1x768xbf16>)
  return
}

// DEBUG: projection_matmul: generated matmul 1x1x768x3072 (batch x M x N x K), skinny form: {{.*}} split-K 4 (768 rows each, 12 in flight per thread; the last split adds them, kSkinnySplitsToHoldB), {{.*}} grid (24, 4, 1)
