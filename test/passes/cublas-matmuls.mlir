// skinny-rows=0 keeps every product with cuBLAS; by default a product of
// at most 32 rows (of f32 or 16-bit operands), B read row by row, is left
// to the generated kernel (the DEFAULT run: the first case, and the first
// 16-bit one, of 17 rows); with
// skinny-rows=1 only the one-row case is (SKINNY).
// RUN: mlpipe-opt %s -split-input-file --mlpipe-cublas-matmuls=skinny-rows=0 --canonicalize --cse | FileCheck %s
// RUN: mlpipe-opt %s -split-input-file --mlpipe-cublas-matmuls="skinny-rows=0 precision=tf32" --canonicalize --cse | FileCheck %s --check-prefix=TF32
// RUN: mlpipe-opt %s -split-input-file --mlpipe-cublas-matmuls=skinny-rows=1 --debug-only=mlpipe-emitters 2>&1 >/dev/null | FileCheck %s --check-prefix=SKINNY
// SKINNY-NOT: is left to the generated kernel: {{[0-9]+}} rows, at most
// SKINNY: cublas: the matmul at {{.*}} is left to the generated kernel: 1 row, at most 1: the skinny kernel streams B faster (kGeneratedSkinnyMaxRows, option skinny-rows)
// SKINNY-NOT: is left to the generated kernel: {{[0-9]+}} rows, at most
// RUN: mlpipe-opt %s -split-input-file --mlpipe-cublas-matmuls --debug-only=mlpipe-emitters 2>&1 >/dev/null | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: is left to the generated kernel: 17 rows, at most 32: the skinny kernel streams B faster (kGeneratedSkinnyMaxRows, option skinny-rows)
// DEFAULT: is left to the generated kernel: 17 rows, at most 32 of 16-bit operands: the generated kernels stream B faster (kGeneratedSkinnyMaxRowsSixteenBit, option skinny-rows)
// DEFAULT: is left to the generated kernel: 9 rows, at most 32 of 16-bit operands: the generated kernels stream B faster (kGeneratedSkinnyMaxRowsSixteenBit, option skinny-rows)
// RUN: mlpipe-opt %s -split-input-file --mlpipe-cublas-matmuls=enabled=false | FileCheck %s --check-prefix=DISABLED
// RUN: not mlpipe-opt %s -split-input-file --mlpipe-cublas-matmuls=precision=f16 2>&1 | FileCheck %s --check-prefix=BAD-PRECISION

// The GEMM entry's arguments, in order (runtime/gemm_abi.h):
//   element (0 f32, 1 f64, 2 bf16 in f32 out, 3 f16 in f32 out, 4 bf16, 5 f16), compute (0 exact, 1 tf32),
//   transpose A, transpose B,
//   batch, m, n, k, alpha, A, lda, stride A, B, ldb, stride B,
//   beta, C, ldc, stride C, D, ldd, stride D, epilogue (0 none, 1 bias, 3 bias+gelu), bias

// DISABLED-NOT: mlpipeGemm
// BAD-PRECISION: precision must be f32 or tf32, not 'f16'

// A bare matmul after its zero fill: beta = 0 and no C, the fill goes.
// CHECK-LABEL: func.func @plain
// CHECK-NOT: linalg.
// CHECK-DAG: %[[A:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK-DAG: %[[B:.*]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK-DAG: %[[D:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c17_i64, %c65_i64, %c33_i64, %[[ONE:.*]], %{{.*}}, %c33_i64, %c0_i64, %{{.*}}, %c65_i64, %c0_i64, %[[ZERO:.*]], %[[NULL:.*]], %c0_i64, %c0_i64, %{{.*}}, %c65_i64, %c0_i64, %c0_i32, %[[NULL]])
// CHECK-NOT: linalg.
// TF32-LABEL: func.func @plain
// TF32: call @mlpipeGemm(%c0_i32, %c1_i32, %c0_i32, %c0_i32,
// DISABLED-LABEL: func.func @plain
// DISABLED: linalg.fill
// DISABLED: linalg.matmul
func.func @plain(%a: memref<17x33xf32>, %b: memref<33x65xf32>, %c: memref<17x65xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<17x65xf32>)
  linalg.matmul ins(%a, %b : memref<17x33xf32>, memref<33x65xf32>) outs(%c : memref<17x65xf32>)
  return
}

// -----

// No fill: linalg's C += A B is beta = 1 with C = D.
// CHECK-LABEL: func.func @accumulate
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[DI:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: %[[D64:.*]] = arith.index_cast %[[DI]]
// CHECK: %[[D:.*]] = llvm.inttoptr %[[D64]]
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c4_i64, %c6_i64, %c8_i64, %[[ONE]], %{{.*}}, %c8_i64, %c0_i64, %{{.*}}, %c6_i64, %c0_i64, %[[ONE]], %[[D]], %c6_i64, %c0_i64, %[[D]], %c6_i64, %c0_i64, %c0_i32, %{{.*}})
func.func @accumulate(%a: memref<4x8xf32>, %b: memref<8x6xf32>, %c: memref<4x6xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x6xf32>) outs(%c : memref<4x6xf32>)
  return
}

// -----

// A transposed view of the weight is a transpose flag and its leading
// dimension, not a copy.
// CHECK-LABEL: func.func @transposed_b
// CHECK-NOT: memref.alloc
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c0_i32, %c1_i32, %c1_i64, %c4_i64, %c6_i64, %c8_i64, %{{.*}}, %{{.*}}, %c8_i64, %c0_i64, %{{.*}}, %c8_i64, %c0_i64,
func.func @transposed_b(%a: memref<4x8xf32>, %w: memref<6x8xf32>, %c: memref<4x6xf32>) {
  %wT = memref.transpose %w (d0, d1) -> (d1, d0) : memref<6x8xf32> to memref<8x6xf32, strided<[1, 8]>>
  linalg.matmul ins(%a, %wT : memref<4x8xf32>, memref<8x6xf32, strided<[1, 8]>>) outs(%c : memref<4x6xf32>)
  return
}

// -----

// A transposed A: lda is its stored row length (m).
// CHECK-LABEL: func.func @transposed_a
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c1_i32, %c0_i32, %c1_i64, %c4_i64, %c6_i64, %c8_i64, %{{.*}}, %{{.*}}, %c4_i64, %c0_i64,
func.func @transposed_a(%aT: memref<8x4xf32>, %b: memref<8x6xf32>, %c: memref<4x6xf32>) {
  %a = memref.transpose %aT (d0, d1) -> (d1, d0) : memref<8x4xf32> to memref<4x8xf32, strided<[1, 4]>>
  linalg.matmul ins(%a, %b : memref<4x8xf32, strided<[1, 4]>>, memref<8x6xf32>) outs(%c : memref<4x6xf32>)
  return
}

// -----

// Attention's heads: q's heads are a slice of qkv, split and transposed
// (lda 192, batch stride 32, offset 64 elements); the keys are read
// transposed (ldb 192); D is contiguous (batch stride 64).
// CHECK-LABEL: func.func @heads
// CHECK: %[[QH:.*]] = memref.transpose
// CHECK: %[[KH:.*]] = memref.transpose
// CHECK: %[[QI:.*]] = memref.extract_aligned_pointer_as_index %[[QH]]
// CHECK: %[[Q64:.*]] = arith.index_cast %[[QI]] : index to i64
// CHECK: %[[QBASE:.*]] = llvm.inttoptr %[[Q64]]
// CHECK: %[[Q:.*]] = llvm.getelementptr %[[QBASE]][64] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK: %[[KI:.*]] = memref.extract_aligned_pointer_as_index %[[KH]]
// CHECK: %[[K64:.*]] = arith.index_cast %[[KI]] : index to i64
// CHECK: %[[KBASE:.*]] = llvm.inttoptr %[[K64]]
// CHECK: %[[K:.*]] = llvm.getelementptr %[[KBASE]][128] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c0_i32, %c1_i32, %c2_i64, %c8_i64, %c8_i64, %c32_i64, %{{.*}}, %[[Q]], %c192_i64, %c32_i64, %[[K]], %c192_i64, %c32_i64, %{{.*}}, %{{.*}}, %c0_i64, %c0_i64, %{{.*}}, %c8_i64, %c64_i64, %c0_i32,
func.func @heads(%qkv: memref<8x192xf32>, %s: memref<2x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %q = memref.subview %qkv[0, 64] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1], offset: 64>>
  %q3 = memref.expand_shape %q [[0], [1, 2]] output_shape [8, 2, 32]
      : memref<8x64xf32, strided<[192, 1], offset: 64>> into memref<8x2x32xf32, strided<[192, 32, 1], offset: 64>>
  %qh = memref.transpose %q3 (d0, d1, d2) -> (d1, d0, d2)
      : memref<8x2x32xf32, strided<[192, 32, 1], offset: 64>> to memref<2x8x32xf32, strided<[32, 192, 1], offset: 64>>
  %k = memref.subview %qkv[0, 128] [8, 64] [1, 1] : memref<8x192xf32> to memref<8x64xf32, strided<[192, 1], offset: 128>>
  %k3 = memref.expand_shape %k [[0], [1, 2]] output_shape [8, 2, 32]
      : memref<8x64xf32, strided<[192, 1], offset: 128>> into memref<8x2x32xf32, strided<[192, 32, 1], offset: 128>>
  %kh = memref.transpose %k3 (d0, d1, d2) -> (d1, d2, d0)
      : memref<8x2x32xf32, strided<[192, 32, 1], offset: 128>> to memref<2x32x8xf32, strided<[32, 1, 192], offset: 128>>
  linalg.fill ins(%zero : f32) outs(%s : memref<2x8x8xf32>)
  linalg.batch_matmul ins(%qh, %kh : memref<2x8x32xf32, strided<[32, 192, 1], offset: 64>>, memref<2x32x8xf32, strided<[32, 1, 192], offset: 128>>)
      outs(%s : memref<2x8x8xf32>)
  return
}

// -----

// f64 goes to cublasDgemm: element 1, and no epilogue folds.
// CHECK-LABEL: func.func @f64_bias
// CHECK: call @mlpipeGemm(%c1_i32, %c0_i32, %c0_i32, %c0_i32,
// CHECK-SAME: %c0_i32, %{{[0-9]+}})
// CHECK: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @f64_bias(%a: memref<4x8xf64>, %b: memref<8x6xf64>, %bias: memref<6xf64>, %c: memref<4x6xf64>) {
  %zero = arith.constant 0.0 : f64
  linalg.fill ins(%zero : f64) outs(%c : memref<4x6xf64>)
  linalg.matmul ins(%a, %b : memref<4x8xf64>, memref<8x6xf64>) outs(%c : memref<4x6xf64>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<4x6xf64>, memref<6xf64>) outs(%c : memref<4x6xf64>) {
  ^bb0(%p: f64, %b0: f64, %out: f64):
    %s = arith.addf %p, %b0 : f64
    linalg.yield %s : f64
  }
  return
}

// -----

// Integer matmuls and layouts with no unit stride stay for the generated kernel.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: call @mlpipeGemm
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK-NOT: call @mlpipeGemm
func.func @left_alone(%a: memref<4x8xi32>, %b: memref<8x6xi32>, %c: memref<4x6xi32>,
                      %x: memref<4x16xf32>, %y: memref<8x6xf32>, %z: memref<4x6xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xi32>, memref<8x6xi32>) outs(%c : memref<4x6xi32>)
  %every2 = memref.subview %x[0, 0] [4, 8] [1, 2] : memref<4x16xf32> to memref<4x8xf32, strided<[16, 2]>>
  linalg.matmul ins(%every2, %y : memref<4x8xf32, strided<[16, 2]>>, memref<8x6xf32>) outs(%z : memref<4x6xf32>)
  return
}

// -----

// Around a bare matmul, GPT-2's c_fc epilogue (bias, then GELU's tanh form)
// folds: epilogue 3 with the bias pointer; nothing elementwise is left.
// CHECK-LABEL: func.func @bare_bias_gelu
// CHECK: %[[BIAS:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: %[[BIAS64:.*]] = arith.index_cast %[[BIAS]]
// CHECK: %[[BIASPTR:.*]] = llvm.inttoptr %[[BIAS64]]
// CHECK: call @mlpipeGemm({{.*}}, %c3_i32, %[[BIASPTR]])
// CHECK-NOT: linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bare_bias_gelu(%x: memref<8x64xf32>, %w: memref<64x256xf32>, %b: memref<256xf32>, %y: memref<8x256xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %k = arith.constant 0.797884583 : f32
  %c = arith.constant 0.044715 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x256xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x256xf32>) outs(%y : memref<8x256xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : memref<8x256xf32>, memref<256xf32>) outs(%y : memref<8x256xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %0 = arith.addf %in, %in_0 : f32
    %1 = arith.mulf %0, %c : f32
    %2 = arith.mulf %1, %0 : f32
    %3 = arith.mulf %2, %0 : f32
    %4 = arith.addf %0, %3 : f32
    %5 = arith.mulf %4, %k : f32
    %6 = math.tanh %5 : f32
    %7 = arith.addf %6, %one : f32
    %8 = arith.mulf %0, %half : f32
    %9 = arith.mulf %8, %7 : f32
    linalg.yield %9 : f32
  }
  return
}

// -----

// GPT-2's residual add (the fused form: the sum goes to another buffer, and
// the product's buffer is refilled for the next matmul): the residual is C
// with beta = 1, the bias the epilogue, the sum's buffer D. The second
// matmul writes the product's buffer, which is then copied.
// CHECK-LABEL: func.func @bare_residual
// CHECK: %[[P:.*]] = memref.alloc()
// CHECK: %[[R:.*]] = memref.extract_aligned_pointer_as_index %arg3
// CHECK: %[[R64:.*]] = arith.index_cast %[[R]]
// CHECK: %[[RPTR:.*]] = llvm.inttoptr %[[R64]]
// CHECK: %[[OUT:.*]] = memref.extract_aligned_pointer_as_index %arg4
// CHECK: %[[OUT64:.*]] = arith.index_cast %[[OUT]]
// CHECK: %[[OUTPTR:.*]] = llvm.inttoptr %[[OUT64]]
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c8_i64, %c64_i64, %c256_i64, %[[ONE:.*]], %{{.*}}, %c256_i64, %c0_i64, %{{.*}}, %c64_i64, %c0_i64, %[[ONE]], %[[RPTR]], %c64_i64, %c0_i64, %[[OUTPTR]], %c64_i64, %c0_i64, %c1_i32, %{{.*}})
// CHECK: memref.extract_aligned_pointer_as_index %[[P]]
// CHECK: call @mlpipeGemm({{.*}}, %c0_i32, %{{[0-9]+}})
// CHECK-NOT: linalg.
// CHECK: memref.copy %[[P]], %arg6
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bare_residual(%h: memref<8x256xf32>, %w: memref<256x64xf32>, %b: memref<64xf32>, %r: memref<8x64xf32>,
                         %out: memref<8x64xf32>, %w2: memref<256x64xf32>, %out2: memref<8x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<8x64xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<8x64xf32>)
  linalg.matmul ins(%h, %w : memref<8x256xf32>, memref<256x64xf32>) outs(%p : memref<8x64xf32>)
  linalg.generic {indexing_maps = [#id, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %p, %b : memref<8x64xf32>, memref<8x64xf32>, memref<64xf32>) outs(%out : memref<8x64xf32>) {
  ^bb0(%in: f32, %in_0: f32, %in_1: f32, %o: f32):
    %0 = arith.addf %in_0, %in_1 : f32
    %1 = arith.addf %in, %0 : f32
    linalg.yield %1 : f32
  }
  linalg.fill ins(%zero : f32) outs(%p : memref<8x64xf32>)
  linalg.matmul ins(%h, %w2 : memref<8x256xf32>, memref<256x64xf32>) outs(%p : memref<8x64xf32>)
  memref.copy %p, %out2 : memref<8x64xf32> to memref<8x64xf32>
  memref.dealloc %p : memref<8x64xf32>
  return
}

// -----

// The product is read again after the epilogue: it is not folded away.
// CHECK-LABEL: func.func @product_read_later
// CHECK: call @mlpipeGemm({{.*}}, %c0_i32, %{{[0-9]+}})
// CHECK: linalg.generic
// CHECK: memref.copy
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @product_read_later(%x: memref<4x8xf32>, %w: memref<8x6xf32>, %b: memref<6xf32>, %y: memref<4x6xf32>,
                              %keep: memref<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<4x6xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<4x6xf32>)
  linalg.matmul ins(%x, %w : memref<4x8xf32>, memref<8x6xf32>) outs(%p : memref<4x6xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %b : memref<4x6xf32>, memref<6xf32>) outs(%y : memref<4x6xf32>) {
  ^bb0(%in: f32, %in_0: f32, %o: f32):
    %0 = arith.addf %in, %in_0 : f32
    linalg.yield %0 : f32
  }
  memref.copy %p, %keep : memref<4x6xf32> to memref<4x6xf32>
  memref.dealloc %p : memref<4x6xf32>
  return
}

// -----

// An elementwise op that reads a per-row vector ((d0, d1) -> (d0)) is no
// cuBLASLt epilogue: the GEMM takes the matmul alone.
// CHECK-LABEL: func.func @row_vector
// CHECK: call @mlpipeGemm({{.*}}, %c0_i32, %{{[0-9]+}})
// CHECK: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_vector(%x: memref<4x8xf32>, %w: memref<8x6xf32>, %v: memref<4xf32>, %y: memref<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<4x6xf32>)
  linalg.matmul ins(%x, %w : memref<4x8xf32>, memref<8x6xf32>) outs(%y : memref<4x6xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %v : memref<4x6xf32>, memref<4xf32>) outs(%y : memref<4x6xf32>) {
  ^bb0(%in: f32, %in_0: f32, %o: f32):
    %0 = arith.addf %in, %in_0 : f32
    linalg.yield %0 : f32
  }
  return
}

// -----

// A matmul fusion (the partitioner's form) is replaced at its call site: the
// bias folds (epilogue 1), and the fusion goes once nothing calls it.
// CHECK-NOT: func.func private @c_attn_matmul
// CHECK-LABEL: func.func @fusion_bias
// CHECK: %[[B:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: %[[B64:.*]] = arith.index_cast %[[B]]
// CHECK: %[[BPTR:.*]] = llvm.inttoptr %[[B64]]
// CHECK: call @mlpipeGemm(%c0_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c16_i64, %c2304_i64, %c768_i64, %{{.*}}, %{{.*}}, %c768_i64, %c0_i64, %{{.*}}, %c2304_i64, %c0_i64, %{{.*}}, %{{.*}}, %c0_i64, %c0_i64, %{{.*}}, %c2304_i64, %c0_i64, %c1_i32, %[[BPTR]])
// CHECK-NOT: call @c_attn_matmul
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func private @c_attn_matmul(%arg0: memref<16x768xf32>, %arg1: memref<768x2304xf32>, %arg2: memref<2304xf32>,
                                 %arg3: memref<16x2304xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %cst = arith.constant 0.000000e+00 : f32
  linalg.fill ins(%cst : f32) outs(%arg3 : memref<16x2304xf32>)
  linalg.matmul ins(%arg0, %arg1 : memref<16x768xf32>, memref<768x2304xf32>) outs(%arg3 : memref<16x2304xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%arg3, %arg2 : memref<16x2304xf32>, memref<2304xf32>) outs(%arg3 : memref<16x2304xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %0 = arith.addf %in, %in_0 : f32
    linalg.yield %0 : f32
  }
  return
}
func.func @fusion_bias(%x: memref<16x768xf32>, %w: memref<768x2304xf32>, %b: memref<2304xf32>, %y: memref<16x2304xf32>) {
  call @c_attn_matmul(%x, %w, %b, %y) : (memref<16x768xf32>, memref<768x2304xf32>, memref<2304xf32>, memref<16x2304xf32>) -> ()
  return
}

// -----

// What cuBLASLt does not compute (tanh) is left as a new loop fusion, called
// right after the GEMM with the GEMM's output; the bias still folds. The
// weight it no longer reads is not passed.
// CHECK-LABEL: func.func private @fc_matmul_epilogue(%arg0: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "loop"}
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.matmul
// CHECK: linalg.generic
// CHECK: math.tanh
// CHECK: return
// CHECK-LABEL: func.func @fusion_leftover
// CHECK: call @mlpipeGemm({{.*}}, %c1_i32, %{{[0-9]+}})
// CHECK-NEXT: call @fc_matmul_epilogue(%arg3) : (memref<8x96xf32>) -> ()
// CHECK-NOT: func.func private @fc_matmul(
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func private @fc_matmul(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>,
                             %y: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<8x96xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x96xf32>) outs(%y : memref<8x96xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : memref<8x96xf32>, memref<96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%p: f32, %bias: f32, %out: f32):
    %s = arith.addf %p, %bias : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<8x96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%v: f32, %out: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  }
  return
}
func.func @fusion_leftover(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>, %y: memref<8x96xf32>) {
  call @fc_matmul(%x, %w, %b, %y) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  return
}

// -----

// The fusion's product lives in a temporary of its own and nothing of the
// epilogue folds (a subtraction): the caller allocates the temporary, the
// GEMM writes it, the loop fusion reads it, the caller frees it.
// CHECK-LABEL: func.func private @sub_matmul_epilogue(%arg0: memref<96xf32>, %arg1: memref<8x96xf32> {bufferize.result}, %arg2: memref<8x96xf32>) attributes {mlpipe.fusion = "loop"}
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic {{.*}} ins(%arg2, %arg0 : memref<8x96xf32>, memref<96xf32>) outs(%arg1 : memref<8x96xf32>)
// CHECK-NOT: memref.dealloc
// CHECK-LABEL: func.func @fusion_temporary
// CHECK: %[[T:.*]] = memref.alloc() : memref<8x96xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[T]]
// CHECK: call @mlpipeGemm({{.*}}, %c0_i32, %{{[0-9]+}})
// CHECK-NEXT: call @sub_matmul_epilogue(%arg2, %arg3, %[[T]])
// CHECK-NEXT: memref.dealloc %[[T]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func private @sub_matmul(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>,
                              %y: memref<8x96xf32> {bufferize.result}) attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<8x96xf32>
  linalg.fill ins(%zero : f32) outs(%t : memref<8x96xf32>)
  linalg.matmul ins(%x, %w : memref<8x64xf32>, memref<64x96xf32>) outs(%t : memref<8x96xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %b : memref<8x96xf32>, memref<96xf32>) outs(%y : memref<8x96xf32>) {
  ^bb0(%p: f32, %bias: f32, %out: f32):
    %s = arith.subf %p, %bias : f32
    linalg.yield %s : f32
  }
  memref.dealloc %t : memref<8x96xf32>
  return
}
func.func @fusion_temporary(%x: memref<8x64xf32>, %w: memref<64x96xf32>, %b: memref<96xf32>, %y: memref<8x96xf32>) {
  call @sub_matmul(%x, %w, %b, %y) : (memref<8x64xf32>, memref<64x96xf32>, memref<96xf32>, memref<8x96xf32>) -> ()
  return
}

// -----

// A fusion whose matmul reads what an op inside it computes first cannot
// hand its matmul to a GEMM that runs before that op: it is left alone.
// CHECK-LABEL: func.func private @copy_first
// CHECK: linalg.copy
// CHECK: linalg.matmul
// CHECK-LABEL: func.func @fusion_left_alone
// CHECK-NOT: mlpipeGemm
// CHECK: call @copy_first
func.func private @copy_first(%x: memref<4x8xf32>, %w: memref<8x6xf32>, %y: memref<4x6xf32> {bufferize.result})
    attributes {mlpipe.fusion = "matmul"} {
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() : memref<4x8xf32>
  linalg.copy ins(%x : memref<4x8xf32>) outs(%t : memref<4x8xf32>)
  linalg.fill ins(%zero : f32) outs(%y : memref<4x6xf32>)
  linalg.matmul ins(%t, %w : memref<4x8xf32>, memref<8x6xf32>) outs(%y : memref<4x6xf32>)
  memref.dealloc %t : memref<4x8xf32>
  return
}
func.func @fusion_left_alone(%x: memref<4x8xf32>, %w: memref<8x6xf32>, %y: memref<4x6xf32>) {
  call @copy_first(%x, %w, %y) : (memref<4x8xf32>, memref<8x6xf32>, memref<4x6xf32>) -> ()
  return
}

// -----

// One row, B read row by row (a decode step's GEMV): a GEMM with
// skinny-rows=0, left to the generated skinny kernel by default (SKINNY
// above); the transposed B of the logits stays with cuBLAS either way.
// CHECK-LABEL: func.func @one_row
// CHECK: call @mlpipeGemm
// CHECK: call @mlpipeGemm
// CHECK-NOT: linalg.matmul
func.func @one_row(%x: memref<1x64xf32>, %w: memref<64x48xf32>, %y: memref<1x48xf32>, %wte: memref<80x48xf32>, %logits: memref<1x80xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%y : memref<1x48xf32>)
  linalg.matmul ins(%x, %w : memref<1x64xf32>, memref<64x48xf32>) outs(%y : memref<1x48xf32>)
  %t = memref.transpose %wte (d0, d1) -> (d1, d0) : memref<80x48xf32> to memref<48x80xf32, strided<[1, 48]>>
  linalg.fill ins(%zero : f32) outs(%logits : memref<1x80xf32>)
  linalg.matmul ins(%y, %t : memref<1x48xf32>, memref<48x80xf32, strided<[1, 48]>>) outs(%logits : memref<1x80xf32>)
  return
}

// -----

// bf16 operands read as stored (element 2), accumulated into f32; tf32 is
// for f32 operands only, so the compute stays exact.
// CHECK-LABEL: func.func @bf16_inputs
// CHECK: call @mlpipeGemm(%c2_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c17_i64, %c65_i64, %c33_i64,
// TF32-LABEL: func.func @bf16_inputs
// TF32: call @mlpipeGemm(%c2_i32, %c0_i32,
func.func @bf16_inputs(%a: memref<17x33xbf16>, %b: memref<33x65xbf16>, %c: memref<17x65xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<17x65xf32>)
  linalg.matmul ins(%a, %b : memref<17x33xbf16>, memref<33x65xbf16>) outs(%c : memref<17x65xf32>)
  return
}

// -----

// f16 operands, batched, B transposed: element 3.
// CHECK-LABEL: func.func @f16_batched
// CHECK: call @mlpipeGemm(%c3_i32, %c0_i32, %c0_i32, %c1_i32, %c3_i64, %c5_i64, %c65_i64, %c17_i64,
func.func @f16_batched(%a: memref<3x5x17xf16>, %bt: memref<3x65x17xf16>, %c: memref<3x5x65xf32>) {
  %zero = arith.constant 0.0 : f32
  %b = memref.transpose %bt (d0, d1, d2) -> (d0, d2, d1) : memref<3x65x17xf16> to memref<3x17x65xf16, strided<[1105, 1, 17]>>
  linalg.fill ins(%zero : f32) outs(%c : memref<3x5x65xf32>)
  linalg.batch_matmul ins(%a, %b : memref<3x5x17xf16>, memref<3x17x65xf16, strided<[1105, 1, 17]>>) outs(%c : memref<3x5x65xf32>)
  return
}

// -----

// Mixed 16-bit operands (bf16 by f16) are no GEMM cuBLASLt is asked for.
// CHECK-LABEL: func.func @mixed_inputs
// CHECK: linalg.matmul
func.func @mixed_inputs(%a: memref<17x33xbf16>, %b: memref<33x65xf16>, %c: memref<17x65xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<17x65xf32>)
  linalg.matmul ins(%a, %b : memref<17x33xbf16>, memref<33x65xf16>) outs(%c : memref<17x65xf32>)
  return
}

// -----

// In 16 bits: GPT-2's c_fc in bf16, the product rounded once after bias and
// GELU. cuBLASLt computes it with C, D and bias in bf16 (element 4):
// nothing elementwise is left, and the f32 product's buffer is gone.
// CHECK-LABEL: func.func @bf16_bias_gelu_rounded
// CHECK-NOT: memref.alloc
// CHECK: %[[OUT:.*]] = memref.extract_aligned_pointer_as_index %arg3
// CHECK: %[[OUT64:.*]] = arith.index_cast %[[OUT]]
// CHECK: %[[OUTPTR:.*]] = llvm.inttoptr %[[OUT64]]
// CHECK: %[[BIAS:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: %[[BIAS64:.*]] = arith.index_cast %[[BIAS]]
// CHECK: %[[BIASPTR:.*]] = llvm.inttoptr %[[BIAS64]]
// CHECK: call @mlpipeGemm(%c4_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c9_i64, %c256_i64, %c64_i64, {{.*}}, %[[OUTPTR]], %c256_i64, %c0_i64, %c3_i32, %[[BIASPTR]])
// CHECK-NOT: linalg.
// CHECK-NOT: memref.dealloc
// TF32-LABEL: func.func @bf16_bias_gelu_rounded
// TF32: call @mlpipeGemm(%c4_i32, %c0_i32,
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bf16_bias_gelu_rounded(%x: memref<9x64xbf16>, %w: memref<64x256xbf16>, %b: memref<256xbf16>, %y: memref<9x256xbf16>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %k = arith.constant 0.797884583 : f32
  %c = arith.constant 0.044715 : f32
  %p = memref.alloc() : memref<9x256xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<9x256xf32>)
  linalg.matmul ins(%x, %w : memref<9x64xbf16>, memref<64x256xbf16>) outs(%p : memref<9x256xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %b : memref<9x256xf32>, memref<256xbf16>) outs(%y : memref<9x256xbf16>) {
  ^bb0(%in: f32, %in_0: bf16, %out: bf16):
    %wide = arith.extf %in_0 : bf16 to f32
    %0 = arith.addf %in, %wide : f32
    %1 = arith.mulf %0, %c : f32
    %2 = arith.mulf %1, %0 : f32
    %3 = arith.mulf %2, %0 : f32
    %4 = arith.addf %0, %3 : f32
    %5 = arith.mulf %4, %k : f32
    %6 = math.tanh %5 : f32
    %7 = arith.addf %6, %one : f32
    %8 = arith.mulf %0, %half : f32
    %9 = arith.mulf %8, %7 : f32
    %10 = arith.truncf %9 {mlpipe.storage_rounding} : f32 to bf16
    linalg.yield %10 : bf16
  }
  memref.dealloc %p : memref<9x256xf32>
  return
}

// -----

// The residual add in f16 (element 5): the f16 residual is C (beta = 1),
// the f16 bias the epilogue's, D the f16 sum.
// CHECK-LABEL: func.func @f16_residual_rounded
// CHECK: %[[R:.*]] = memref.extract_aligned_pointer_as_index %arg3
// CHECK: %[[R64:.*]] = arith.index_cast %[[R]]
// CHECK: %[[RPTR:.*]] = llvm.inttoptr %[[R64]]
// CHECK: call @mlpipeGemm(%c5_i32, %c0_i32, %c0_i32, %c0_i32, %c1_i64, %c7_i64, %c48_i64, %c96_i64, %[[ONE:.*]], %{{.*}}, %c96_i64, %c0_i64, %{{.*}}, %c48_i64, %c0_i64, %[[ONE]], %[[RPTR]], %c48_i64, %c0_i64, %{{.*}}, %c48_i64, %c0_i64, %c1_i32, %{{.*}})
// CHECK-NOT: linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @f16_residual_rounded(%h: memref<7x96xf16>, %w: memref<96x48xf16>, %b: memref<48xf16>, %r: memref<7x48xf16>,
                                %out: memref<7x48xf16>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<7x48xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<7x48xf32>)
  linalg.matmul ins(%h, %w : memref<7x96xf16>, memref<96x48xf16>) outs(%p : memref<7x48xf32>)
  linalg.generic {indexing_maps = [#id, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r, %p, %b : memref<7x48xf16>, memref<7x48xf32>, memref<48xf16>) outs(%out : memref<7x48xf16>) {
  ^bb0(%in: f16, %in_0: f32, %in_1: f16, %o: f16):
    %wb = arith.extf %in_1 : f16 to f32
    %wr = arith.extf %in : f16 to f32
    %0 = arith.addf %in_0, %wb : f32
    %1 = arith.addf %wr, %0 : f32
    %2 = arith.truncf %1 : f32 to f16
    linalg.yield %2 : f16
  }
  memref.dealloc %p : memref<7x48xf32>
  return
}

// -----

// What stays elementwise in 16 bits: a bias stored in f32 under a bf16
// result (cuBLASLt's bias takes D's type), and an f32 product rounded to
// bf16 (A and B are f32: a 16-bit D needs 16-bit operands). Each GEMM
// writes its f32 product; the generic is left.
// CHECK-LABEL: func.func @sixteen_bit_folds_refused
// CHECK: call @mlpipeGemm(%c2_i32,
// CHECK: linalg.generic
// CHECK: call @mlpipeGemm(%c0_i32,
// CHECK: linalg.generic
// SKINNY: cublas: the epilogue stops at the linalg.generic at {{.*}}: it adds a vector or matrix stored in another type than its output
// SKINNY: cublas: the epilogue stops at the linalg.generic at {{.*}}: it rounds to another type than the matmul's operands' (a 16-bit GEMM's A, B and D share one)
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @sixteen_bit_folds_refused(%x: memref<9x64xbf16>, %w: memref<64x32xbf16>, %b: memref<32xf32>, %y: memref<9x32xbf16>,
                                     %xf: memref<9x64xf32>, %wf: memref<64x32xf32>, %yf: memref<9x32xbf16>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<9x32xf32>
  linalg.fill ins(%zero : f32) outs(%p : memref<9x32xf32>)
  linalg.matmul ins(%x, %w : memref<9x64xbf16>, memref<64x32xbf16>) outs(%p : memref<9x32xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %b : memref<9x32xf32>, memref<32xf32>) outs(%y : memref<9x32xbf16>) {
  ^bb0(%in: f32, %in_0: f32, %out: bf16):
    %0 = arith.addf %in, %in_0 : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  }
  linalg.fill ins(%zero : f32) outs(%p : memref<9x32xf32>)
  linalg.matmul ins(%xf, %wf : memref<9x64xf32>, memref<64x32xf32>) outs(%p : memref<9x32xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p : memref<9x32xf32>) outs(%yf : memref<9x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %1 = arith.truncf %in : f32 to bf16
    linalg.yield %1 : bf16
  }
  memref.dealloc %p : memref<9x32xf32>
  return
}

// -----

// A 16-bit product whose width is not a multiple of 8 (77 bf16, as GPT-2's
// 50257-wide logits) is two GEMMs, of its first 72 columns and its last 5,
// each writing into a temporary of 80-element rows, then compacted by a
// copy; the bias is split with it. A product of one row (fewer than
// kSplitWidthMinRows) is one GEMM writing D in place.
// CHECK-LABEL: func.func @bf16_unaligned_rows
// CHECK: %[[PADDED:.*]] = memref.alloc() {alignment = 64 : i64} : memref<64x80xbf16>
// CHECK: call @mlpipeGemm(%c4_i32, %c0_i32, %c0_i32, %c1_i32, %c1_i64, %c64_i64, %c72_i64, %c32_i64, {{.*}}, %c80_i64, %c0_i64, %c1_i32,
// CHECK: call @mlpipeGemm(%c4_i32, %c0_i32, %c0_i32, %c1_i32, %c1_i64, %c64_i64, %c5_i64, %c32_i64, {{.*}}, %c80_i64, %c0_i64, %c1_i32,
// CHECK: %[[ROWS:.*]] = memref.subview %[[PADDED]][0, 0] [64, 77] [1, 1]
// CHECK: linalg.copy ins(%[[ROWS]] : memref<64x77xbf16, strided<[80, 1]>>) outs(%arg3 : memref<64x77xbf16>)
// CHECK: memref.dealloc %[[PADDED]]
// CHECK: call @mlpipeGemm(%c4_i32, %c0_i32, %c0_i32, %c1_i32, %c1_i64, %c1_i64, %c77_i64, %c32_i64, {{.*}}, %c77_i64, %c0_i64, %c0_i32,
// CHECK-NOT: linalg.copy
// SKINNY: cublas: the product is 77 wide, not a multiple of 8 (kGemmWidthAlignmentBytes): GEMMs of 72 and 5 columns write rows of 80 into a temporary, and a copy compacts them
// SKINNY: cublas: the product is 77 wide, not a multiple of 8, but its 1 rows (under kSplitWidthMinRows 2) are one GEMM
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @bf16_unaligned_rows(%x: memref<64x32xbf16>, %wte: memref<77x32xbf16>, %b: memref<77xbf16>, %logits: memref<64x77xbf16>,
                               %x8: memref<1x32xbf16>, %logits8: memref<1x77xbf16>) {
  %zero = arith.constant 0.0 : f32
  %p = memref.alloc() : memref<64x77xf32>
  %t = memref.transpose %wte (d0, d1) -> (d1, d0) : memref<77x32xbf16> to memref<32x77xbf16, strided<[1, 32]>>
  linalg.fill ins(%zero : f32) outs(%p : memref<64x77xf32>)
  linalg.matmul ins(%x, %t : memref<64x32xbf16>, memref<32x77xbf16, strided<[1, 32]>>) outs(%p : memref<64x77xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p, %b : memref<64x77xf32>, memref<77xbf16>) outs(%logits : memref<64x77xbf16>) {
  ^bb0(%in: f32, %bias: bf16, %out: bf16):
    %wide = arith.extf %bias : bf16 to f32
    %0 = arith.addf %in, %wide : f32
    %1 = arith.truncf %0 : f32 to bf16
    linalg.yield %1 : bf16
  }
  memref.dealloc %p : memref<64x77xf32>
  %q = memref.alloc() : memref<1x77xf32>
  linalg.fill ins(%zero : f32) outs(%q : memref<1x77xf32>)
  linalg.matmul ins(%x8, %t : memref<1x32xbf16>, memref<32x77xbf16, strided<[1, 32]>>) outs(%q : memref<1x77xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%q : memref<1x77xf32>) outs(%logits8 : memref<1x77xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %1 = arith.truncf %in : f32 to bf16
    linalg.yield %1 : bf16
  }
  memref.dealloc %q : memref<1x77xf32>
  return
}
