// The GEMM entry point that compiled GPU modules call, as both sides see it:
// the compiler (mlpipe-cublas-matmuls) emits calls of it, the runtime
// (gemm_runtime.cpp) implements it over cuBLASLt and cuBLAS. Header only and
// free of CUDA and MLIR, so both layers can include it.
//
//   void mlpipeGemm(i32 element, i32 compute, i32 transposeA, i32 transposeB,
//                   i64 batch, i64 m, i64 n, i64 k, f64 alpha,
//                   ptr a, i64 lda, i64 strideA, ptr b, i64 ldb, i64 strideB,
//                   f64 beta, ptr c, i64 ldc, i64 strideC,
//                   ptr d, i64 ldd, i64 strideD, i32 epilogue, ptr bias)
//
// computes, for each of `batch` matrices (pointers stepping by their
// stride, in elements),
//
//   D = activation(alpha * op(A) op(B) + beta * C + bias)
//
// in row-major terms, as CBLAS does with CblasRowMajor: op(A) is m x k,
// op(B) is k x n, C and D are m x n with rows ld* elements apart. An operand
// with transpose set is stored k x m (A) or n x k (B), read transposed, so a
// transposed view is never copied. C may be null when beta is 0; bias (n
// elements, one per column of D) is read when the epilogue has a bias.
#pragma once

#include <cstdint>

namespace mlpipe::gemm_abi {

// The symbol compiled modules call, and the JIT resolves.
inline constexpr const char *kEntryName = "mlpipeGemm";

// Element types. kF32, kF64: A, B, C, D and bias all of that type.
// kBf16F32, kF16F32: A and B 16-bit floats, read as stored (tensor cores,
// products accumulated in f32), C, D and bias f32.
// kBf16, kF16: A, B, C, D and bias all 16-bit floats; products accumulated,
// and alpha, beta C and the epilogue applied, in f32, D rounded once.
enum Element : int32_t { kF32 = 0, kF64 = 1, kBf16F32 = 2, kF16F32 = 3, kBf16 = 4, kF16 = 5 };

// How f32 products are computed. kExact: in f32 (f64 for kF64; 16-bit
// inputs' products are exact in f32); kTf32: A and B rounded to TF32 on
// tensor cores (opt-in with --precision tf32, kF32 only).
enum Compute : int32_t { kExact = 0, kTf32 = 1 };

// What cuBLASLt applies before storing D. kGelu is the tanh form,
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's gelu_new.
enum Epilogue : int32_t { kNone = 0, kBias = 1, kGelu = 2, kBiasGelu = 3 };

} // namespace mlpipe::gemm_abi
