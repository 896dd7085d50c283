#include "support/blas.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace mlpipe::blas {
namespace {

// C = alpha op(A) op(B) + beta C for rows [begin, end) of C, row-major.
// Loop order i-k-j keeps the innermost loop on contiguous rows of B and C.
template <typename T>
void gemmRows(int begin, int end, int transA, int transB, int n, int k, T alpha, const T *a, int lda, const T *b,
              int ldb, T beta, T *c, int ldc) {
  for (int i = begin; i < end; ++i) {
    T *row = c + static_cast<long>(i) * ldc;
    for (int j = 0; j < n; ++j)
      row[j] = beta == T(0) ? T(0) : beta * row[j];
    for (int p = 0; p < k; ++p) {
      T aip = alpha * (transA == kTrans ? a[static_cast<long>(p) * lda + i] : a[static_cast<long>(i) * lda + p]);
      if (transB == kTrans)
        for (int j = 0; j < n; ++j)
          row[j] += aip * b[static_cast<long>(j) * ldb + p];
      else
        for (int j = 0; j < n; ++j)
          row[j] += aip * b[static_cast<long>(p) * ldb + j];
    }
  }
}

// Below this many multiply-adds one thread is quicker than starting more.
constexpr double kWorkPerThread = 4e6;

template <typename T>
void portableGemm(int order, int transA, int transB, int m, int n, int k, T alpha, const T *a, int lda, const T *b,
                  int ldb, T beta, T *c, int ldc) {
  if (order != kRowMajor) {
    std::fprintf(stderr, "mlpipe: the built-in gemm handles row-major matrices only\n");
    return;
  }
  double work = static_cast<double>(m) * n * k;
  int threads = static_cast<int>(std::min<double>(
      {static_cast<double>(std::thread::hardware_concurrency()), static_cast<double>(m), work / kWorkPerThread}));
  if (threads <= 1)
    return gemmRows(0, m, transA, transB, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back(gemmRows<T>, m * t / threads, m * (t + 1) / threads, transA, transB, n, k, alpha, a, lda, b,
                         ldb, beta, c, ldc);
  for (auto &worker : workers)
    worker.join();
}

struct Library {
  Sgemm sgemm = &portableGemm<float>;
  Dgemm dgemm = &portableGemm<double>;
  std::string name = "mlpipe's own loops";
};

const Library &library() {
  static Library loaded = [] {
    Library found;
    // MLPIPE_BLAS=builtin keeps the built-in loops; MLPIPE_BLAS=LIB tries LIB first.
    const char *chosen = std::getenv("MLPIPE_BLAS");
    if (chosen && std::string(chosen) == "builtin")
      return found;
    for (const char *candidate : {chosen ? chosen : "", "libopenblas.so.0", "libcblas.so.3", "libblas.so.3"}) {
      if (!*candidate)
        continue;
      void *handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);
      if (!handle)
        continue;
      auto s = reinterpret_cast<Sgemm>(dlsym(handle, "cblas_sgemm"));
      auto d = reinterpret_cast<Dgemm>(dlsym(handle, "cblas_dgemm"));
      if (s && d) {
        found = {s, d, candidate};
        break;
      }
      dlclose(handle);
    }
    return found;
  }();
  return loaded;
}

} // namespace

Sgemm sgemm() { return library().sgemm; }
Dgemm dgemm() { return library().dgemm; }
std::string implementation() { return library().name; }

} // namespace mlpipe::blas
