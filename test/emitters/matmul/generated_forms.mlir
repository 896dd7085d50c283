// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls --cse | FileCheck %s
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual form=tiled split-k=2" --cse | FileCheck %s --check-prefix=SPLIT
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual form=tiled split-k=1" --cse | FileCheck %s --check-prefix=FUSED
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual" --cse | FileCheck %s --check-prefix=AUTO-EPILOGUE

// GPT-2 decoding's 16x768 @ 768x3072: the skinny form. 8 warps split each
// block's 128-row K-slice; every thread streams its 16 rows of B in chunks
// of 4 (one 128-bit vector each), the next chunk's loads issued before the
// arithmetic on the current one, for 16 rows of C in registers; A's
// slice is staged in shared memory; the warps add their partial sums in
// shared memory. K is split 6 ways across the grid, so C is zeroed first
// (the fill folded into the kernels) and the partial sums are added
// atomically.
// CHECK-LABEL: func.func @mlp
// CHECK-NOT: linalg.
// CHECK: gpu.launch_func @mlp_matmul_zero_module::@mlp_matmul_zero blocks in (%c192, %c1, %c1) threads in (%c256, %c1, %c1) args(%arg4 : memref<16x3072xf32>)
// CHECK: gpu.launch_func @mlp_matmul_module::@mlp_matmul blocks in (%c24, %c6, %c1) threads in (%c256, %c1, %c1) args(%arg0 : memref<16x768xf32>, %arg1 : memref<768x3072xf32>, %arg4 : memref<16x3072xf32>)
// CHECK: gpu.func @mlp_matmul_zero(%[[Z:.*]]: memref<16x3072xf32>) kernel
// CHECK: memref.store %{{.*}}, %[[Z]]
// CHECK: gpu.func @mlp_matmul(%[[A:.*]]: memref<16x768xf32>, %[[B:.*]]: memref<768x3072xf32>, %[[C:.*]]: memref<16x3072xf32>) workgroup(%[[SA:.*]] : memref<128x16xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[RED:.*]] : memref<8x8x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {known_block_size = array<i32: 256, 1, 1>
// CHECK-COUNT-4: vector.load %[[B]][{{.*}}] {alignment = 16 : i64} : memref<768x3072xf32>, vector<4xf32>
// CHECK-COUNT-8: memref.store %{{.*}}, %[[SA]]
// CHECK-NEXT: gpu.barrier
// CHECK: scf.for %{{.*}} = %c0 to %c3 step %c1
// CHECK-COUNT-4: vector.load %[[B]]
// CHECK: vector.load %[[SA]][{{.*}}] {alignment = 16 : i64} : memref<128x16xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: vector.fma
// CHECK: scf.yield
// CHECK-COUNT-8: vector.store %{{.*}}, %[[RED]]
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-8: vector.load %[[RED]]
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[C]]
// CHECK: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}}, %[[RED]]
// CHECK-NEXT: gpu.barrier
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[C]]

// With an epilogue and split-K: zero C, add the partial products, then the
// epilogue (bias, GELU, residual) over C as its own kernel, which alone takes
// the epilogue's operands.
// SPLIT-LABEL: func.func @mlp
// SPLIT: gpu.launch_func @mlp_matmul_zero_module::@mlp_matmul_zero {{.*}} args(%arg4 : memref<16x3072xf32>)
// SPLIT: gpu.launch_func @mlp_matmul_module::@mlp_matmul {{.*}} args(%arg0 : memref<16x768xf32>, %arg1 : memref<768x3072xf32>, %arg4 : memref<16x3072xf32>)
// SPLIT: gpu.launch_func @mlp_matmul_epilogue_module::@mlp_matmul_epilogue {{.*}} args(%arg4 : memref<16x3072xf32>, %arg2 : memref<3072xf32>, %arg3 : memref<16x3072xf32>)
// SPLIT: gpu.func @mlp_matmul(
// SPLIT-NOT: math.tanh
// SPLIT: memref.atomic_rmw addf
// SPLIT-NOT: math.tanh
// SPLIT: gpu.func @mlp_matmul_epilogue(%[[C:.*]]: memref<16x3072xf32>, %[[BIAS:.*]]: memref<3072xf32>, %[[RES:.*]]: memref<16x3072xf32>)
// SPLIT: %[[PRODUCT:.*]] = memref.load %[[C]][%[[ROW:.*]], %[[COL:.*]]]
// SPLIT: memref.load %[[BIAS]][%[[COL]]]
// SPLIT: math.tanh
// SPLIT: memref.load %[[RES]][%[[ROW]], %[[COL]]]
// SPLIT: memref.store %{{.*}}, %[[C]][%[[ROW]], %[[COL]]]

// Without split-K the epilogue runs in the product kernel, on each vector
// before it is stored; its operands are extra kernel arguments.
// FUSED-LABEL: func.func @mlp
// FUSED-NOT: _zero
// FUSED: gpu.launch_func @mlp_matmul_module::@mlp_matmul {{.*}} args(%arg0 : memref<16x768xf32>, %arg1 : memref<768x3072xf32>, %arg4 : memref<16x3072xf32>, %arg2 : memref<3072xf32>, %arg3 : memref<16x3072xf32>)
// FUSED-NOT: gpu.launch_func
// FUSED: gpu.func @mlp_matmul(%{{.*}}: memref<16x768xf32>, %{{.*}}: memref<768x3072xf32>, %[[C:.*]]: memref<16x3072xf32>, %[[BIAS:.*]]: memref<3072xf32>, %[[RES:.*]]: memref<16x3072xf32>)
// FUSED: scf.yield
// FUSED: memref.load %[[BIAS]]
// FUSED: math.tanh
// FUSED: memref.load %[[RES]]
// FUSED: vector.insert
// FUSED: vector.store %{{.*}}, %[[C]]

// The skinny form splits K too, with the same three kernels.
// AUTO-EPILOGUE-LABEL: func.func @mlp
// AUTO-EPILOGUE: gpu.launch_func @mlp_matmul_zero
// AUTO-EPILOGUE: gpu.launch_func @mlp_matmul_module::@mlp_matmul blocks in (%c24, %c6, %c1)
// AUTO-EPILOGUE: gpu.launch_func @mlp_matmul_epilogue_module::@mlp_matmul_epilogue
func.func @mlp(%a: memref<16x768xf32> {mlpipe.name = "a"}, %b: memref<768x3072xf32> {mlpipe.name = "b"},
               %bias: memref<3072xf32> {mlpipe.name = "bias"}, %residual: memref<16x3072xf32> {mlpipe.name = "residual"},
               %c: memref<16x3072xf32> {mlpipe.name = "y"}) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<16x3072xf32>)
  linalg.matmul ins(%a, %b : memref<16x768xf32>, memref<768x3072xf32>) outs(%c : memref<16x3072xf32>)
  return
}

// -----

// An epilogue operand that is C itself (here: the residual) rules split-K
// out, since the epilogue kernel would read the product as the operand. The
// skinny form, which needs split-K here (K does not fit one staged slice),
// gives way to the tiled kernel.
// AUTO-EPILOGUE-LABEL: func.func @aliased
// AUTO-EPILOGUE-NOT: _zero
// AUTO-EPILOGUE: gpu.launch_func @aliased_matmul_module::@aliased_matmul
// AUTO-EPILOGUE-NOT: gpu.launch_func
// AUTO-EPILOGUE: gpu.func @aliased_matmul({{.*}}) workgroup(%{{.*}} : memref<2x8x{{[0-9]+}}xf32
// AUTO-EPILOGUE-NOT: atomic_rmw
// AUTO-EPILOGUE: math.tanh
// SPLIT-LABEL: func.func @aliased
// SPLIT-NOT: _zero
// SPLIT: gpu.launch_func @aliased_matmul_module::@aliased_matmul blocks in (%{{.*}}, %{{.*}}, %c1)
// SPLIT-NOT: gpu.launch_func
// SPLIT: gpu.func @aliased_matmul(
// SPLIT-NOT: atomic_rmw
// SPLIT: math.tanh
// SPLIT-NOT: atomic_rmw
// SPLIT: gpu.return
func.func @aliased(%a: memref<16x768xf32> {mlpipe.name = "a"}, %b: memref<768x3072xf32> {mlpipe.name = "b"},
                   %bias: memref<3072xf32> {mlpipe.name = "bias"}, %c: memref<16x3072xf32> {mlpipe.name = "residual"}) {
  linalg.matmul ins(%a, %b : memref<16x768xf32>, memref<768x3072xf32>) outs(%c : memref<16x3072xf32>)
  return
}
