// CublasLibrary: cuBLAS and cuBLASLt from the CUDA toolkit, loaded at run
// time with dlopen, like the driver (cuda_driver.h).
//
// mlpipe never links cuBLAS: every tool must start where it is absent. The
// library is looked for, in order, as
//
//   $MLPIPE_CUBLAS                         (another file; then only that one)
//   $CUDA_HOME/lib64/libcublas.so.<major>
//   libcublas.so.<major>                   (the loader's own search path)
//   <the toolkit found at configure time>/lib64/libcublas.so.<major>
//
// where <major> is the cuBLAS major version of the headers mlpipe was built
// with. libcublas.so pulls in its libcublasLt.so, and both APIs' entry
// points are resolved through it. Loading needs no GPU, so `outline` can
// ask whether cuBLAS is there; using it (gemm_runtime.h) needs one.
//
// This header is internal to libs/runtime (it includes cublasLt.h, which
// only the runtime's own sources see); other layers use gemm_runtime.h.
#pragma once

#include <cublasLt.h>

#include <mutex>
#include <string>

namespace mlpipe::gpu {

// Entry points of cuBLASLt (the GEMMs of compiled modules) and of cuBLAS
// (f64's DGEMM, and the classic SGEMM that `bench matmul` compares with).
#define MLPIPE_CUBLAS_ENTRY_POINTS(X)                                                                                  \
  X(cublasLtGetVersion)                                                                                                \
  X(cublasLtCreate)                                                                                                    \
  X(cublasLtDestroy)                                                                                                   \
  X(cublasLtMatmulDescCreate)                                                                                          \
  X(cublasLtMatmulDescDestroy)                                                                                         \
  X(cublasLtMatmulDescSetAttribute)                                                                                    \
  X(cublasLtMatrixLayoutCreate)                                                                                        \
  X(cublasLtMatrixLayoutDestroy)                                                                                       \
  X(cublasLtMatrixLayoutSetAttribute)                                                                                  \
  X(cublasLtMatmulPreferenceCreate)                                                                                    \
  X(cublasLtMatmulPreferenceDestroy)                                                                                   \
  X(cublasLtMatmulPreferenceSetAttribute)                                                                              \
  X(cublasLtMatmulAlgoGetHeuristic)                                                                                    \
  X(cublasLtMatmul)                                                                                                    \
  X(cublasCreate_v2)                                                                                                   \
  X(cublasDestroy_v2)                                                                                                  \
  X(cublasSetStream_v2)                                                                                                \
  X(cublasSetWorkspace_v2)                                                                                             \
  X(cublasSetMathMode)                                                                                                 \
  X(cublasSgemm_v2)                                                                                                    \
  X(cublasSgemmStridedBatched)                                                                                         \
  X(cublasDgemm_v2)                                                                                                    \
  X(cublasDgemmStridedBatched)                                                                                         \
  X(cublasGetStatusName)                                                                                               \
  X(cublasGetStatusString)

class CublasLibrary {
public:
  // The process-wide library. Loading happens on the first call of
  // available(), never at start-up.
  static CublasLibrary &get();

  // Loads the library and resolves every entry point, once; false when
  // that failed. Needs no GPU.
  bool available();
  // One sentence saying why available() is false; empty when it is true.
  // It starts "cuBLAS could not be loaded: " (no such file, or not a
  // library) or "cuBLAS at PATH is unusable: " (wrong version, missing
  // entry point).
  std::string unavailableReason();
  // Throws mlpipe::Error(unavailableReason()) when it is not available.
  void requireAvailable();
  // The file that was loaded, e.g. "/usr/local/cuda/lib64/libcublas.so.13".
  std::string path();
  // The soname looked for: the major version of the headers mlpipe was built
  // with, whose enum values it uses ("libcublas.so.13").
  static std::string soname();

  // "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
  std::string describe(cublasStatus_t status);

#define MLPIPE_CUBLAS_DECLARE(name) decltype(&::name) name = nullptr;
  MLPIPE_CUBLAS_ENTRY_POINTS(MLPIPE_CUBLAS_DECLARE)
#undef MLPIPE_CUBLAS_DECLARE

private:
  CublasLibrary() = default;
  void load();

  std::once_flag loadOnce_;
  void *library_ = nullptr;
  bool available_ = false;
  std::string path_;
  std::string reason_;
};

} // namespace mlpipe::gpu
