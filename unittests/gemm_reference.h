// What mlpipeGemm computes (runtime/gemm_abi.h), on the host in float64 and
// stored in the problem's element type: the reference the GPU test holds
// cuBLAS to, and the stand-in the CPU test runs compiled GEMM calls with.
#pragma once

#include "runtime/gemm_runtime.h"

#include <cmath>
#include <cstdint>

namespace mlpipe::testing {

inline double geluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

template <typename T> void referenceGemmAs(const gpu::GemmProblem &p) {
  auto *a = static_cast<const T *>(p.a);
  auto *b = static_cast<const T *>(p.b);
  auto *c = static_cast<const T *>(p.c);
  auto *d = static_cast<T *>(p.d);
  auto *bias = static_cast<const T *>(p.bias);
  bool addBias = p.epilogue == gemm_abi::kBias || p.epilogue == gemm_abi::kBiasGelu;
  bool gelu = p.epilogue == gemm_abi::kGelu || p.epilogue == gemm_abi::kBiasGelu;
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < p.k; ++l) {
          double x = p.transposeA ? a[batch * p.strideA + l * p.lda + i] : a[batch * p.strideA + i * p.lda + l];
          double y = p.transposeB ? b[batch * p.strideB + j * p.ldb + l] : b[batch * p.strideB + l * p.ldb + j];
          sum += x * y;
        }
        double value = p.alpha * sum;
        if (p.beta != 0.0)
          value += p.beta * c[batch * p.strideC + i * p.ldc + j];
        if (addBias)
          value += bias[j];
        if (gelu)
          value = geluTanh(value);
        d[batch * p.strideD + i * p.ldd + j] = static_cast<T>(value);
      }
    }
  }
}

inline void referenceGemm(const gpu::GemmProblem &p) {
  if (p.element == gemm_abi::kF64)
    referenceGemmAs<double>(p);
  else
    referenceGemmAs<float>(p);
}

} // namespace mlpipe::testing
