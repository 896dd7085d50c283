// CBLAS gemm, found at run time.
//
// The CPU target's matmuls call cblas_sgemm / cblas_dgemm, and the float64
// reference multiplies with dgemm. The library is loaded with dlopen
// (libopenblas.so.0, then libcblas.so.3, then libblas.so.3), so no tool
// needs one to start; where none is found, mlpipe's own row-major loops
// stand in (correct, slower). MLPIPE_BLAS=builtin picks those loops, and
// MLPIPE_BLAS=LIBRARY tries that library first.
#pragma once

#include <string>

namespace mlpipe::blas {

// CBLAS enum values (cblas.h).
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

using Sgemm = void (*)(int order, int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc);
using Dgemm = void (*)(int order, int transA, int transB, int m, int n, int k, double alpha, const double *a, int lda,
                       const double *b, int ldb, double beta, double *c, int ldc);

Sgemm sgemm();
Dgemm dgemm();
// Which library is in use, e.g. "libopenblas.so.0" or "mlpipe's own loops".
std::string implementation();

} // namespace mlpipe::blas
