// The GEMM runtime: mlpipeGemm, the entry point that modules compiled with
// `--matmul cublas` call (runtime/gemm_abi.h describes its arguments), over
// cuBLASLt for f32 (with its fused epilogues) and cuBLAS's DGEMM for f64;
// and the C++ API the JIT, the tests and `bench matmul` use.
//
//   gpu::GemmSession session;             // cuBLAS handles and workspace, once
//   gpu::GemmProblem problem = ...;       // row-major, as in gemm_abi.h
//   gpu::gemm(problem, stream);           // cuBLASLt, algorithm cached per shape
//
// Per distinct problem (shape, layouts, epilogue, pointer alignments) the
// algorithm comes from cuBLASLt's heuristic once (with
// MLPIPE_GEMM_TUNING=1, the fastest of its first candidates, timed where the
// first call's stream is not being captured) and is cached with its
// descriptors for the process. The workspace is allocated once per session. Nothing on the
// call path allocates or synchronizes, so GEMMs can be captured in a CUDA
// graph (once a problem has been seen: the first call also creates its
// descriptors, which is host work only, and queries the heuristic).
//
// f32 is computed in f32 (CUBLAS_COMPUTE_32F: no TF32) unless the compute
// is gemm_abi::kTf32.
#pragma once

#include "runtime/gemm_abi.h"
#include "runtime/mgpu_runtime.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

extern "C" {
// See gemm_abi.h. On any error it prints one line ("mlpipe: cuBLASLt ...")
// and ends the process, like the mgpu* functions. It runs on the stream
// compiled modules' work goes on.
MLPIPE_RUNTIME_EXPORT void mlpipeGemm(int32_t element, int32_t compute, int32_t transposeA, int32_t transposeB,
                                      int64_t batch, int64_t m, int64_t n, int64_t k, double alpha, const void *a,
                                      int64_t lda, int64_t strideA, const void *b, int64_t ldb, int64_t strideB,
                                      double beta, const void *c, int64_t ldc, int64_t strideC, void *d, int64_t ldd,
                                      int64_t strideD, int32_t epilogue, const void *bias);
}

namespace mlpipe::gpu {

// Whether cuBLAS loads here (no GPU needed), and if not one sentence why,
// e.g. "cuBLAS could not be loaded: /x/libcublas.so.13: cannot open shared
// object file: No such file or directory".
bool cublasAvailable();
std::string cublasUnavailableReason();
// The file loaded, e.g. "/usr/local/cuda/lib64/libcublas.so.13".
std::string cublasPath();
// The library's name for the headers mlpipe was built with: "libcublas.so.13".
std::string cublasSoname();

// One GEMM, as mlpipeGemm takes it: row-major, strides and leading
// dimensions in elements, strides used when batch > 1.
struct GemmProblem {
  gemm_abi::Element element = gemm_abi::kF32;
  gemm_abi::Compute compute = gemm_abi::kExact;
  bool transposeA = false, transposeB = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  const void *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const void *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  const void *c = nullptr; // null when beta is 0
  int64_t ldc = 0, strideC = 0;
  void *d = nullptr;
  int64_t ldd = 0, strideD = 0;
  gemm_abi::Epilogue epilogue = gemm_abi::kNone;
  const void *bias = nullptr;

  // "f32 GEMM m=1024 n=3072 k=768, B transposed, epilogue bias+gelu".
  std::string describe() const;
};

// cuBLAS's handles and workspace live while at least one session does (the
// JIT holds one per module that calls mlpipeGemm). Creating the first one
// loads cuBLAS and needs the GPU; both throw mlpipe::Error saying what is
// missing.
class GemmSession {
public:
  GemmSession();
  ~GemmSession();
  GemmSession(const GemmSession &) = delete;
  GemmSession &operator=(const GemmSession &) = delete;
};

// Enqueues the GEMM on `stream` (nullptr: the legacy default stream) through
// cuBLASLt (f32) or cublasDgemm (f64, which takes no epilogue and no C other
// than D). Throws mlpipe::Error for a malformed problem or a cuBLAS error.
// Needs a session (mlpipeGemm opens one that lasts for the process when it
// is called without).
void gemm(const GemmProblem &problem, void *stream);
// The same problem through cuBLAS's classic API (cublasSgemm / cublasDgemm,
// strided batched when batch > 1; TF32 tensor-op math for kTf32): the
// library called directly, as `bench matmul` compares with. No epilogue;
// C must be null or D.
void classicGemm(const GemmProblem &problem, void *stream);
// Distinct problems whose algorithm is cached (tests check reuse).
size_t gemmPlansCached();

// mlpipeGemm with its address, to hand to the host JIT (jit/host_jit.h).
std::vector<std::pair<std::string, void *>> gemmSymbols();

} // namespace mlpipe::gpu
