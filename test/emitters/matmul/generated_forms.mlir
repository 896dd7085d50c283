// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls --cse | FileCheck %s
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual form=tiled split-k=2" --cse | FileCheck %s --check-prefix=SPLIT
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual form=tiled split-k=1" --cse | FileCheck %s --check-prefix=FUSED
// RUN: mlpipe-opt %s -split-input-file --mlpipe-generated-matmuls="test-epilogue=bias-gelu-residual" --cse | FileCheck %s --check-prefix=AUTO-EPILOGUE

// GPT-2 decoding's 16x768 @ 768x3072: the skinny form. 8 warps split each
// block's 128-row K-slice; every thread streams its 16 rows of B in chunks
// of 4 (one 128-bit vector each), the next chunk's loads issued before the
// arithmetic on the current one, for 16 rows of C in registers; A's
// slice is staged in shared memory; the warps add their partial sums in
// shared memory. K is split 6 ways across the grid: each split stores its
// partial product to its slab of a temporary, and a second kernel adds the
// six in order into C (the fill folded away: C is only written).
// CHECK-LABEL: func.func @mlp
// CHECK-NOT: linalg.
// CHECK: %[[PARTIALS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<6x16x3072xf32>
// CHECK: gpu.launch_func @mlp_matmul_module::@mlp_matmul blocks in (%c24, %c6, %c1) threads in (%c256, %c1, %c1) args(%arg0 : memref<16x768xf32>, %arg1 : memref<768x3072xf32>, %[[PARTIALS]] : memref<6x16x3072xf32>)
// CHECK: gpu.launch_func @mlp_matmul_split_sum_module::@mlp_matmul_split_sum blocks in (%c192, %c1, %c1) threads in (%c256, %c1, %c1) args(%[[PARTIALS]] : memref<6x16x3072xf32>, %arg4 : memref<16x3072xf32>)
// CHECK: memref.dealloc %[[PARTIALS]]
// CHECK: gpu.func @mlp_matmul(%[[A:.*]]: memref<16x768xf32>, %[[B:.*]]: memref<768x3072xf32>, %[[C:.*]]: memref<6x16x3072xf32>) workgroup(%[[SA:.*]] : memref<128x16xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[RED:.*]] : memref<8x8x128xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel attributes {known_block_size = array<i32: 256, 1, 1>
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
// CHECK: vector.store %{{.*}}, %[[C]][%{{.*}}, %{{.*}}, %{{.*}}] {alignment = 16 : i64} : memref<6x16x3072xf32>, vector<4xf32>
// CHECK: gpu.barrier
// CHECK-COUNT-8: vector.store %{{.*}}, %[[RED]]
// CHECK-NEXT: gpu.barrier
// CHECK: vector.store %{{.*}}, %[[C]]
// CHECK-NOT: atomic
// CHECK: gpu.func @mlp_matmul_split_sum(%[[P:.*]]: memref<6x16x3072xf32>, %[[Y:.*]]: memref<16x3072xf32>) kernel
// CHECK-COUNT-6: memref.load %[[P]]
// CHECK: memref.store %{{.*}}, %[[Y]]

// With an epilogue and split-K: the partial products to a temporary, then
// their sum in split order and the epilogue (bias, GELU, residual) as one
// kernel, which alone takes the epilogue's operands.
// SPLIT-LABEL: func.func @mlp
// SPLIT: %[[PARTIALS:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x16x3072xf32>
// SPLIT: gpu.launch_func @mlp_matmul_module::@mlp_matmul {{.*}} args(%arg0 : memref<16x768xf32>, %arg1 : memref<768x3072xf32>, %[[PARTIALS]] : memref<2x16x3072xf32>)
// SPLIT: gpu.launch_func @mlp_matmul_split_sum_module::@mlp_matmul_split_sum {{.*}} args(%[[PARTIALS]] : memref<2x16x3072xf32>, %arg4 : memref<16x3072xf32>, %arg2 : memref<3072xf32>, %arg3 : memref<16x3072xf32>)
// SPLIT: gpu.func @mlp_matmul(
// SPLIT-NOT: math.tanh
// SPLIT-NOT: atomic
// SPLIT: memref.store
// SPLIT-NOT: math.tanh
// SPLIT: gpu.func @mlp_matmul_split_sum(%[[P:.*]]: memref<2x16x3072xf32>, %[[C:.*]]: memref<16x3072xf32>, %[[BIAS:.*]]: memref<3072xf32>, %[[RES:.*]]: memref<16x3072xf32>)
// SPLIT: %[[FIRST:.*]] = memref.load %[[P]][%[[BATCH:.*]], %[[ROW:.*]], %[[COL:.*]]]
// SPLIT: %[[SECOND:.*]] = memref.load %[[P]][%{{.*}}, %[[ROW]], %[[COL]]]
// SPLIT: arith.addf %[[FIRST]], %[[SECOND]]
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

// The skinny form splits K too, with the same two kernels.
// AUTO-EPILOGUE-LABEL: func.func @mlp
// AUTO-EPILOGUE-NOT: _zero
// AUTO-EPILOGUE: gpu.launch_func @mlp_matmul_module::@mlp_matmul blocks in (%c24, %c6, %c1)
// AUTO-EPILOGUE: gpu.launch_func @mlp_matmul_split_sum_module::@mlp_matmul_split_sum {{.*}} args(%{{.*}} : memref<6x16x3072xf32>, %arg4 : memref<16x3072xf32>, %arg2 : memref<3072xf32>, %arg3 : memref<16x3072xf32>)
func.func @mlp(%a: memref<16x768xf32> {mlpipe.name = "a"}, %b: memref<768x3072xf32> {mlpipe.name = "b"},
               %bias: memref<3072xf32> {mlpipe.name = "bias"}, %residual: memref<16x3072xf32> {mlpipe.name = "residual"},
               %c: memref<16x3072xf32> {mlpipe.name = "y"}) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<16x3072xf32>)
  linalg.matmul ins(%a, %b : memref<16x768xf32>, memref<768x3072xf32>) outs(%c : memref<16x3072xf32>)
  return
}

// -----

// An epilogue operand that is C itself (here: the residual, and C is
// accumulated into): the split-sum kernel reads it element by element, as
// C's old value, before it writes that element, as the unsplit kernels do;
// so K is split here as for any other product, the epilogue in the second
// kernel.
// AUTO-EPILOGUE-LABEL: func.func @aliased
// AUTO-EPILOGUE: gpu.launch_func @aliased_matmul_module::@aliased_matmul blocks in (%c24, %c6, %c1)
// AUTO-EPILOGUE: gpu.launch_func @aliased_matmul_split_sum_module::@aliased_matmul_split_sum {{.*}} args(%{{.*}} : memref<6x16x3072xf32>, %arg3 : memref<16x3072xf32>, %arg2 : memref<3072xf32>, %arg3 : memref<16x3072xf32>)
// AUTO-EPILOGUE: gpu.func @aliased_matmul_split_sum(%[[P:.*]]: memref<6x16x3072xf32>, %[[C:.*]]: memref<16x3072xf32>, %{{.*}}: memref<3072xf32>, %[[RES:.*]]: memref<16x3072xf32>)
// AUTO-EPILOGUE: memref.load %[[C]][%[[ROW:.*]], %[[COL:.*]]]
// AUTO-EPILOGUE: math.tanh
// AUTO-EPILOGUE: memref.load %[[RES]][%[[ROW]], %[[COL]]]
// AUTO-EPILOGUE: memref.store %{{.*}}, %[[C]][%[[ROW]], %[[COL]]]
// SPLIT-LABEL: func.func @aliased
// SPLIT: gpu.launch_func @aliased_matmul_module::@aliased_matmul blocks in (%{{.*}}, %{{.*}}, %c2)
// SPLIT: gpu.launch_func @aliased_matmul_split_sum_module::@aliased_matmul_split_sum
// SPLIT-NOT: atomic_rmw
func.func @aliased(%a: memref<16x768xf32> {mlpipe.name = "a"}, %b: memref<768x3072xf32> {mlpipe.name = "b"},
                   %bias: memref<3072xf32> {mlpipe.name = "bias"}, %c: memref<16x3072xf32> {mlpipe.name = "residual"}) {
  linalg.matmul ins(%a, %b : memref<16x768xf32>, memref<768x3072xf32>) outs(%c : memref<16x3072xf32>)
  return
}
