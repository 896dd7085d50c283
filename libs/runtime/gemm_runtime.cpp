// mlpipeGemm over cuBLASLt and cuBLAS: row-major problems mapped onto the
// libraries' column-major ones, an algorithm per distinct problem (the
// fastest of cuBLASLt's candidates, timed on its first call; cached with
// its descriptors), one workspace.
#include "runtime/gemm_runtime.h"

#include "runtime/cublas_library.h"
#include "runtime/cuda_driver.h"
#include "runtime/fatal_error.h"
#include "runtime/mgpu_runtime.h"
#include "runtime/runtime_internal.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace mlpipe::gpu {

namespace {

// cuBLAS recommends a 32 MiB workspace on Hopper (cublasSetWorkspace) and
// less on earlier parts, which simply leave the rest unused; one buffer
// serves cuBLASLt and cuBLAS, whose work is ordered on one stream.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
// cuBLASLt assumes 256-byte aligned operands unless told otherwise; views
// (a head's slice of q, k, v) start anywhere, so each pointer's actual
// alignment, up to this, goes into the heuristic query and the cache key.
constexpr uint64_t kMaxAlignment = 256;
// cuBLASLt's heuristic ranks its algorithms by a model of the chip, not by
// timing them. A new problem asks it for this many and, where the call may
// synchronize (its stream is not being captured into a graph), times each
// on the call's own operands, D written to a scratch buffer (C, which may
// be D, is left as it was): kTunedLaunches launches after one untimed, the
// fastest kept for the problem. Opt-in (MLPIPE_GEMM_TUNING=1) until timed
// on the GPU; otherwise the heuristic's first.
constexpr int kTunedCandidates = 8;
constexpr int kTunedLaunches = 3;

// The stream GEMMs from compiled modules go on. Kernel launches from
// compiled code still each create their own blocking stream and synchronize
// it, and blocking streams order with the legacy default stream (nullptr),
// so a GEMM there runs after the kernels before it and before those after.
// The runner's current stream (one stream for a whole forward, capturable
// in a CUDA graph), or the legacy default stream outside a runner.
void *moduleStream() { return currentStream(); }

CublasLibrary &library() { return CublasLibrary::get(); }

void checkCublas(cublasStatus_t status, const char *call, const GemmProblem &problem) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("{} failed for the {}: {}", call, problem.describe(), library().describe(status));
}

uint32_t alignmentOf(const void *pointer) {
  auto address = reinterpret_cast<uintptr_t>(pointer);
  if (address == 0)
    return kMaxAlignment;
  return static_cast<uint32_t>(std::min<uint64_t>(kMaxAlignment, address & (~address + 1)));
}

const char *epilogueName(gemm_abi::Epilogue epilogue) {
  switch (epilogue) {
  case gemm_abi::kNone:
    return "none";
  case gemm_abi::kBias:
    return "bias";
  case gemm_abi::kGelu:
    return "gelu";
  case gemm_abi::kBiasGelu:
    return "bias+gelu";
  }
  return "?";
}

bool hasBias(gemm_abi::Epilogue epilogue) { return epilogue == gemm_abi::kBias || epilogue == gemm_abi::kBiasGelu; }

// Refuses what neither library could do, naming the problem.
void validate(const GemmProblem &p) {
  auto refuse = [&](const std::string &why) { fail("invalid GEMM ({}): {}", p.describe(), why); };
  if (p.element < gemm_abi::kF32 || p.element > gemm_abi::kF16)
    refuse(fmt::format("element type code {} is none of f32 (0), f64 (1), bf16 to f32 (2), f16 to f32 (3), "
                       "bf16 (4), f16 (5)",
                       static_cast<int>(p.element)));
  if (p.compute != gemm_abi::kExact && p.compute != gemm_abi::kTf32)
    refuse(fmt::format("compute code {} is neither exact (0) nor tf32 (1)", static_cast<int>(p.compute)));
  if (p.compute == gemm_abi::kTf32 && p.element != gemm_abi::kF32)
    refuse("tf32 applies to f32 operands only");
  if (p.epilogue < gemm_abi::kNone || p.epilogue > gemm_abi::kBiasGelu)
    refuse(fmt::format("epilogue code {} is unknown", static_cast<int>(p.epilogue)));
  if (p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1)
    refuse("every dimension and the batch must be at least 1");
  if (!p.a || !p.b || !p.d)
    refuse("A, B and D must not be null");
  if (p.beta != 0.0 && !p.c)
    refuse("beta is not 0 but C is null");
  if (hasBias(p.epilogue) && !p.bias)
    refuse("the epilogue adds a bias but the bias pointer is null");
  // Leading dimensions: at least the stored row length.
  if (p.lda < (p.transposeA ? p.m : p.k) || p.ldb < (p.transposeB ? p.k : p.n) || p.ldd < p.n || (p.c && p.ldc < p.n))
    refuse(fmt::format("a leading dimension is shorter than its row (lda {}, ldb {}, ldc {}, ldd {})", p.lda, p.ldb,
                       p.ldc, p.ldd));
  if (p.element == gemm_abi::kF64) {
    if (p.epilogue != gemm_abi::kNone)
      refuse("f64 GEMMs (cublasDgemm) take no epilogue");
    if (p.c && (p.c != p.d || p.ldc != p.ldd || p.strideC != p.strideD))
      refuse("f64 GEMMs (cublasDgemm) accumulate only into D itself");
  }
}

// ---- The column-major view of a row-major problem ---------------------------
//
// Row-major D (m x n, ldd) is column-major D^T (n x m, ldd), and
// D^T = op(B)^T op(A)^T: the libraries get B first and A second, with m and
// n swapped; each operand's stored matrix, read column-major, is its
// row-major transpose, so the transpose flags carry over as they are. The
// bias (one per column of D) is one per row of D^T, as cuBLASLt wants.
struct ColumnMajor {
  cublasOperation_t opFirst, opSecond; // of B, then of A
  int64_t rows, cols;                  // of D^T: n, m
  // The stored matrices as column-major rows x cols.
  int64_t firstRows, firstCols, secondRows, secondCols;
};

ColumnMajor columnMajor(const GemmProblem &p) {
  ColumnMajor cm;
  cm.opFirst = p.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cm.opSecond = p.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cm.rows = p.n;
  cm.cols = p.m;
  // B stored k x n row-major is n x k column-major; stored n x k (transposed), k x n.
  cm.firstRows = p.transposeB ? p.k : p.n;
  cm.firstCols = p.transposeB ? p.n : p.k;
  // A stored m x k row-major is k x m column-major; stored k x m (transposed), m x k.
  cm.secondRows = p.transposeA ? p.m : p.k;
  cm.secondCols = p.transposeA ? p.k : p.m;
  return cm;
}

// ---- Sessions, plans and the cache ------------------------------------------

// The descriptors and algorithm of one distinct problem.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
};

using PlanKey = std::array<int64_t, 24>;

PlanKey keyOf(const GemmProblem &p) {
  return {p.element,
          p.compute,
          p.transposeA,
          p.transposeB,
          p.batch,
          p.m,
          p.n,
          p.k,
          p.lda,
          p.strideA,
          p.ldb,
          p.strideB,
          p.c && p.c != p.d,
          p.ldc,
          p.strideC,
          p.ldd,
          p.strideD,
          p.epilogue,
          alignmentOf(p.a),
          alignmentOf(p.b),
          alignmentOf(p.c),
          alignmentOf(p.d),
          alignmentOf(p.bias),
          p.beta != 0.0};
}

struct State {
  std::mutex mutex;
  std::atomic<int> sessions = 0; // read without the mutex by mlpipeGemm
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;
  CUdeviceptr workspace = 0;
  std::map<PlanKey, Plan> plans;
  // The algorithm each problem first took, kept when the sessions end (and
  // their plans go): a problem planned again takes it again, so the process
  // gives it the same bits whenever it runs.
  std::map<PlanKey, cublasLtMatmulAlgo_t> chosen;
};

State &state() {
  // Never destroyed, like the driver: JIT global destructors may still run.
  static State *s = new State();
  return *s;
}

void destroyPlan(Plan &plan) {
  CublasLibrary &lib = library();
  for (cublasLtMatrixLayout_t layout : {plan.first, plan.second, plan.c, plan.d})
    if (layout)
      lib.cublasLtMatrixLayoutDestroy(layout);
  if (plan.desc)
    lib.cublasLtMatmulDescDestroy(plan.desc);
  plan = {};
}

// Frees what the sessions share; errors are ignored (nothing is left to
// corrupt, and this runs from destructors).
void tearDown(State &s) {
  CublasLibrary &lib = library();
  for (auto &[key, plan] : s.plans)
    destroyPlan(plan);
  s.plans.clear();
  if (s.lt)
    lib.cublasLtDestroy(s.lt);
  if (s.blas)
    lib.cublasDestroy_v2(s.blas);
  if (s.workspace)
    CudaDriver::get().cuMemFree(s.workspace);
  s.lt = nullptr;
  s.blas = nullptr;
  s.workspace = 0;
}

void checkSetUp(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("setting up cuBLAS ({}): {} failed: {}", library().path(), call, library().describe(status));
}

// Creates the handles and workspace; the caller holds the mutex.
void setUp(State &s) {
  library().requireAvailable();
  CudaDriver &d = driver();
  CublasLibrary &lib = library();
  try {
    checkSetUp(lib.cublasLtCreate(&s.lt), "cublasLtCreate");
    checkSetUp(lib.cublasCreate_v2(&s.blas), "cublasCreate");
    d.check(d.cuMemAlloc(&s.workspace, kWorkspaceBytes), "cuMemAlloc");
    // cuBLAS would otherwise allocate its own workspace on first use, which
    // a CUDA graph capture refuses.
    checkSetUp(lib.cublasSetWorkspace_v2(s.blas, reinterpret_cast<void *>(s.workspace), kWorkspaceBytes),
               "cublasSetWorkspace");
  } catch (...) {
    tearDown(s);
    throw;
  }
}

void setLayoutBatch(cublasLtMatrixLayout_t layout, int64_t batch, int64_t stride, const GemmProblem &p) {
  if (batch <= 1)
    return;
  CublasLibrary &lib = library();
  if (batch > INT32_MAX)
    fail("invalid GEMM ({}): a batch of {} is more than cuBLASLt takes", p.describe(), batch);
  int32_t count = static_cast<int32_t>(batch);
  checkCublas(lib.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
              "cublasLtMatrixLayoutSetAttribute", p);
  checkCublas(lib.cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                   sizeof(stride)),
              "cublasLtMatrixLayoutSetAttribute", p);
}

// The element type of A and B, and of C, D and bias, as cuBLASLt names them.
cudaDataType_t inputType(gemm_abi::Element element) {
  switch (element) {
  case gemm_abi::kBf16F32:
  case gemm_abi::kBf16:
    return CUDA_R_16BF;
  case gemm_abi::kF16F32:
  case gemm_abi::kF16:
    return CUDA_R_16F;
  case gemm_abi::kF64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}
cudaDataType_t outputType(gemm_abi::Element element) {
  switch (element) {
  case gemm_abi::kBf16:
    return CUDA_R_16BF;
  case gemm_abi::kF16:
    return CUDA_R_16F;
  case gemm_abi::kF64:
    return CUDA_R_64F;
  default:
    return CUDA_R_32F;
  }
}

cublasLtMatrixLayout_t makeLayout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                  int64_t stride, const GemmProblem &p) {
  cublasLtMatrixLayout_t layout = nullptr;
  checkCublas(
      library().cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
      "cublasLtMatrixLayoutCreate", p);
  try {
    setLayoutBatch(layout, batch, stride, p);
  } catch (...) {
    library().cublasLtMatrixLayoutDestroy(layout);
    throw;
  }
  return layout;
}

cublasLtEpilogue_t ltEpilogue(gemm_abi::Epilogue epilogue) {
  switch (epilogue) {
  case gemm_abi::kBias:
    return CUBLASLT_EPILOGUE_BIAS;
  case gemm_abi::kGelu:
    return CUBLASLT_EPILOGUE_GELU;
  case gemm_abi::kBiasGelu:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  default:
    return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

void launchLt(State &s, Plan &plan, const cublasLtMatmulAlgo_t &algo, const GemmProblem &p, const void *c, void *d,
              void *stream) {
  float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  checkCublas(library().cublasLtMatmul(s.lt, plan.desc, &alpha, p.b, plan.first, p.a, plan.second, &beta, c,
                                       plan.c ? plan.c : plan.d, d, plan.d, &algo,
                                       reinterpret_cast<void *>(s.workspace), kWorkspaceBytes,
                                       static_cast<cudaStream_t>(stream)),
              "cublasLtMatmul", p);
}

// Whether a new problem's candidates are timed: not while `stream` is
// being captured (nothing there may synchronize), nor without the driver's
// capture query, nor unless MLPIPE_GEMM_TUNING=1.
bool tuningWanted(void *stream) {
  static const bool enabled = [] {
    const char *value = std::getenv("MLPIPE_GEMM_TUNING");
    return value && std::string(value) == "1";
  }();
  CudaDriver &d = driver();
  if (!enabled || !d.cuStreamIsCapturing)
    return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return d.cuStreamIsCapturing(static_cast<CUstream>(stream), &status) == CUDA_SUCCESS &&
         status == CU_STREAM_CAPTURE_STATUS_NONE;
}

// The fastest of cuBLASLt's candidates for `p`, each timed on the call's
// operands with D redirected to a scratch buffer (kTunedLaunches launches
// after one untimed); a candidate that fails to launch is passed over.
cublasLtMatmulAlgo_t fastestAlgorithm(State &s, Plan &plan, const GemmProblem &p,
                                      const cublasLtMatmulHeuristicResult_t *results, int count, void *stream) {
  CudaDriver &d = driver();
  int64_t outputBytes = p.element == gemm_abi::kBf16 || p.element == gemm_abi::kF16 ? 2 : 4;
  int64_t elements = (p.batch - 1) * p.strideD + (p.m - 1) * p.ldd + p.n;
  CUdeviceptr scratch = 0;
  CUevent start = nullptr, stop = nullptr;
  int best = 0;
  float bestMs = -1;
  std::string timings;
  try {
    d.check(d.cuMemAlloc(&scratch, static_cast<size_t>(elements * outputBytes)), "cuMemAlloc");
    d.check(d.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
    d.check(d.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
    const void *c = p.c ? p.c : p.d;
    for (int i = 0; i < count; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS)
        continue;
      float ms = 0;
      try {
        launchLt(s, plan, results[i].algo, p, c, reinterpret_cast<void *>(scratch), stream);
        d.check(d.cuEventRecord(start, static_cast<CUstream>(stream)), "cuEventRecord");
        for (int launch = 0; launch < kTunedLaunches; ++launch)
          launchLt(s, plan, results[i].algo, p, c, reinterpret_cast<void *>(scratch), stream);
        d.check(d.cuEventRecord(stop, static_cast<CUstream>(stream)), "cuEventRecord");
        d.check(d.cuEventSynchronize(stop), "cuEventSynchronize");
        d.check(d.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
      } catch (const std::exception &) {
        continue;
      }
      timings += fmt::format(" {:.1f}", 1000 * ms / kTunedLaunches);
      if (bestMs < 0 || ms < bestMs) {
        best = i;
        bestMs = ms;
      }
    }
  } catch (...) {
    if (scratch)
      (void)d.cuMemFree(scratch);
    for (CUevent event : {start, stop})
      if (event)
        (void)d.cuEventDestroy(event);
    throw;
  }
  (void)d.cuMemFree(scratch);
  (void)d.cuEventDestroy(start);
  (void)d.cuEventDestroy(stop);
  if (const char *debug = std::getenv("MLPIPE_GEMM_TUNING_DEBUG"); debug && *debug)
    std::fprintf(stderr, "gemm tuning: %s: candidate %d of %d (us:%s)\n", p.describe().c_str(), best, count,
                 timings.c_str());
  return results[best].algo;
}

// Builds the descriptors of a new f32 or 16-bit problem (computed in f32)
// and asks the heuristic for its algorithm.
Plan makePlan(State &s, const GemmProblem &p, const PlanKey &key, void *stream) {
  CublasLibrary &lib = library();
  ColumnMajor cm = columnMajor(p);
  Plan plan;
  cublasLtMatmulPreference_t preference = nullptr;
  try {
    cublasComputeType_t compute = p.compute == gemm_abi::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    checkCublas(lib.cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate", p);
    auto setDesc = [&](cublasLtMatmulDescAttributes_t attribute, const void *value, size_t size) {
      checkCublas(lib.cublasLtMatmulDescSetAttribute(plan.desc, attribute, value, size),
                  "cublasLtMatmulDescSetAttribute", p);
    };
    setDesc(CUBLASLT_MATMUL_DESC_TRANSA, &cm.opFirst, sizeof(cm.opFirst));
    setDesc(CUBLASLT_MATMUL_DESC_TRANSB, &cm.opSecond, sizeof(cm.opSecond));
    cublasLtEpilogue_t epilogue = ltEpilogue(p.epilogue);
    setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
    if (hasBias(p.epilogue)) {
      // The heuristic reads the bias pointer's alignment from here; each call
      // sets its own pointer.
      setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias));
      int64_t biasBatchStride = 0; // one bias for every matrix of the batch
      setDesc(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &biasBatchStride, sizeof(biasBatchStride));
      // The bias is stored as D is (the ABI's promise), said outright.
      cudaDataType_t biasType = outputType(p.element);
      setDesc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof(biasType));
    }
    cudaDataType_t in = inputType(p.element), out = outputType(p.element);
    plan.first = makeLayout(in, cm.firstRows, cm.firstCols, p.ldb, p.batch, p.strideB, p);
    plan.second = makeLayout(in, cm.secondRows, cm.secondCols, p.lda, p.batch, p.strideA, p);
    plan.d = makeLayout(out, cm.rows, cm.cols, p.ldd, p.batch, p.strideD, p);
    if (p.c && p.c != p.d)
      plan.c = makeLayout(out, cm.rows, cm.cols, p.ldc, p.batch, p.strideC, p);

    checkCublas(lib.cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate", p);
    auto setPreference = [&](cublasLtMatmulPreferenceAttributes_t attribute, const void *value, size_t size) {
      checkCublas(lib.cublasLtMatmulPreferenceSetAttribute(preference, attribute, value, size),
                  "cublasLtMatmulPreferenceSetAttribute", p);
    };
    uint64_t workspace = kWorkspaceBytes;
    setPreference(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
    // cuBLASLt's A and B are our B and A.
    uint32_t alignFirst = alignmentOf(p.b), alignSecond = alignmentOf(p.a), alignD = alignmentOf(p.d);
    uint32_t alignC = p.c ? alignmentOf(p.c) : alignD;
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignFirst, sizeof(alignFirst));
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignSecond, sizeof(alignSecond));
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof(alignC));
    setPreference(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, sizeof(alignD));

    std::array<cublasLtMatmulHeuristicResult_t, kTunedCandidates> results = {};
    int returned = 0;
    auto chosen = s.chosen.find(key);
    int asked = chosen == s.chosen.end() && tuningWanted(stream) ? kTunedCandidates : 1;
    checkCublas(lib.cublasLtMatmulAlgoGetHeuristic(s.lt, plan.desc, plan.first, plan.second, plan.c ? plan.c : plan.d,
                                                   plan.d, preference, asked, results.data(), &returned),
                "cublasLtMatmulAlgoGetHeuristic", p);
    if (returned == 0)
      fail("cuBLASLt has no algorithm for the {} (alignments A {} B {} C {} D {} bytes)", p.describe(),
           alignmentOf(p.a), alignmentOf(p.b), alignC, alignD);
    if (chosen != s.chosen.end())
      plan.algo = chosen->second;
    else
      plan.algo = s.chosen[key] =
          returned > 1 ? fastestAlgorithm(s, plan, p, results.data(), returned, stream) : results[0].algo;
    lib.cublasLtMatmulPreferenceDestroy(preference);
  } catch (...) {
    if (preference)
      lib.cublasLtMatmulPreferenceDestroy(preference);
    destroyPlan(plan);
    throw;
  }
  return plan;
}

void runLt(State &s, const GemmProblem &p, void *stream) {
  CublasLibrary &lib = library();
  PlanKey key = keyOf(p);
  auto found = s.plans.find(key);
  if (found == s.plans.end())
    found = s.plans.emplace(key, makePlan(s, p, key, stream)).first;
  Plan &plan = found->second;
  if (hasBias(p.epilogue))
    checkCublas(
        lib.cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias)),
        "cublasLtMatmulDescSetAttribute", p);
  launchLt(s, plan, plan.algo, p, p.c ? p.c : p.d, p.d, stream);
}

int narrow(int64_t value, const char *what, const GemmProblem &p) {
  if (value > INT_MAX || value < INT_MIN)
    fail("invalid GEMM ({}): {} {} does not fit cuBLAS's int arguments", p.describe(), what, value);
  return static_cast<int>(value);
}

// cuBLAS's classic column-major API on the mapped problem: DGEMM for the
// compiled f64 path, S/DGEMM for the baseline.
void runClassic(State &s, const GemmProblem &p, void *stream) {
  CublasLibrary &lib = library();
  ColumnMajor cm = columnMajor(p);
  checkCublas(lib.cublasSetStream_v2(s.blas, static_cast<cudaStream_t>(stream)), "cublasSetStream", p);
  cublasMath_t math = p.compute == gemm_abi::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  checkCublas(lib.cublasSetMathMode(s.blas, math), "cublasSetMathMode", p);
  int rows = narrow(cm.rows, "n", p), cols = narrow(cm.cols, "m", p), k = narrow(p.k, "k", p);
  int lda = narrow(p.lda, "lda", p), ldb = narrow(p.ldb, "ldb", p), ldd = narrow(p.ldd, "ldd", p);
  int batch = narrow(p.batch, "the batch", p);
  // C is D (validated), so beta scales D's old value.
  if (p.element == gemm_abi::kF64) {
    double alpha = p.alpha, beta = p.beta;
    auto *a = static_cast<const double *>(p.a), *b = static_cast<const double *>(p.b);
    auto *d = static_cast<double *>(p.d);
    if (batch == 1)
      checkCublas(
          lib.cublasDgemm_v2(s.blas, cm.opFirst, cm.opSecond, rows, cols, k, &alpha, b, ldb, a, lda, &beta, d, ldd),
          "cublasDgemm", p);
    else
      checkCublas(lib.cublasDgemmStridedBatched(s.blas, cm.opFirst, cm.opSecond, rows, cols, k, &alpha, b, ldb,
                                                p.strideB, a, lda, p.strideA, &beta, d, ldd, p.strideD, batch),
                  "cublasDgemmStridedBatched", p);
    return;
  }
  float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
  auto *a = static_cast<const float *>(p.a), *b = static_cast<const float *>(p.b);
  auto *d = static_cast<float *>(p.d);
  if (batch == 1)
    checkCublas(
        lib.cublasSgemm_v2(s.blas, cm.opFirst, cm.opSecond, rows, cols, k, &alpha, b, ldb, a, lda, &beta, d, ldd),
        "cublasSgemm", p);
  else
    checkCublas(lib.cublasSgemmStridedBatched(s.blas, cm.opFirst, cm.opSecond, rows, cols, k, &alpha, b, ldb, p.strideB,
                                              a, lda, p.strideA, &beta, d, ldd, p.strideD, batch),
                "cublasSgemmStridedBatched", p);
}

State &sessionState(const GemmProblem &p) {
  State &s = state();
  if (s.sessions == 0)
    fail("the {} was asked for outside a GemmSession", p.describe());
  return s;
}

} // namespace

std::string GemmProblem::describe() const {
  const char *type = element == gemm_abi::kF64       ? "f64"
                     : element == gemm_abi::kBf16F32 ? "bf16 (f32 out)"
                     : element == gemm_abi::kF16F32  ? "f16 (f32 out)"
                     : element == gemm_abi::kBf16    ? "bf16"
                     : element == gemm_abi::kF16     ? "f16"
                                                     : "f32";
  std::string text = fmt::format("{} GEMM m={} n={} k={}", type, m, n, k);
  if (batch > 1)
    text += fmt::format(" batch={}", batch);
  if (transposeA)
    text += ", A transposed";
  if (transposeB)
    text += ", B transposed";
  if (compute == gemm_abi::kTf32)
    text += ", tf32";
  if (epilogue != gemm_abi::kNone)
    text += fmt::format(", epilogue {}", epilogueName(epilogue));
  if (c && c != d)
    text += ", C apart from D";
  return text;
}

bool cublasAvailable() { return library().available(); }
std::string cublasUnavailableReason() { return library().unavailableReason(); }
std::string cublasPath() { return library().path(); }
std::string cublasSoname() { return CublasLibrary::soname(); }

GemmSession::GemmSession() {
  State &s = state();
  std::lock_guard lock(s.mutex);
  if (s.sessions == 0)
    setUp(s);
  ++s.sessions;
}

GemmSession::~GemmSession() {
  State &s = state();
  std::lock_guard lock(s.mutex);
  if (--s.sessions > 0)
    return;
  // Work still queued may use the workspace and descriptors; errors (a
  // fault left by a kernel) are reported by whoever synchronizes next.
  CudaDriver &d = CudaDriver::get();
  if (d.available())
    (void)d.cuCtxSynchronize();
  tearDown(s);
}

// The GEMM as the profiler shows it: "cublas_gemm_1024x3072x768_bias_gelu".
std::string profileName(const GemmProblem &p) {
  static const char *epilogues[] = {"", "_bias", "_gelu", "_bias_gelu"};
  int epilogue = static_cast<int>(p.epilogue);
  std::string name =
      fmt::format("cublas_gemm_{}{}x{}x{}", p.batch > 1 ? std::to_string(p.batch) + "x" : "", p.m, p.n, p.k);
  if (epilogue > 0 && epilogue < 4)
    name += epilogues[epilogue];
  return p.c ? name + "_plus_c" : name;
}

void gemm(const GemmProblem &problem, void *stream) {
  validate(problem);
  State &s = state();
  std::lock_guard lock(s.mutex);
  sessionState(problem);
  driver();
  int64_t input = problem.element == gemm_abi::kF64 ? 8 : problem.element == gemm_abi::kF32 ? 4 : 2;
  int64_t output = problem.element == gemm_abi::kF64                                         ? 8
                   : problem.element == gemm_abi::kBf16 || problem.element == gemm_abi::kF16 ? 2
                                                                                             : 4;
  int64_t bytes = problem.batch * (input * (problem.m * problem.k + problem.k * problem.n) +
                                   output * problem.m * problem.n * (problem.c ? 2 : 1));
  LibraryWork timed(profileName(problem), bytes, 2 * problem.batch * problem.m * problem.n * problem.k, stream);
  if (problem.element == gemm_abi::kF64)
    runClassic(s, problem, stream);
  else
    runLt(s, problem, stream);
}

void classicGemm(const GemmProblem &problem, void *stream) {
  validate(problem);
  if (problem.epilogue != gemm_abi::kNone ||
      (problem.c && (problem.c != problem.d || problem.ldc != problem.ldd || problem.strideC != problem.strideD)))
    fail("classicGemm takes no epilogue and no C apart from D ({})", problem.describe());
  if (problem.element != gemm_abi::kF32 && problem.element != gemm_abi::kF64)
    fail("classicGemm takes f32 or f64 operands ({})", problem.describe());
  State &s = state();
  std::lock_guard lock(s.mutex);
  sessionState(problem);
  driver();
  runClassic(s, problem, stream);
}

size_t gemmPlansCached() {
  State &s = state();
  std::lock_guard lock(s.mutex);
  return s.plans.size();
}

std::vector<std::pair<std::string, void *>> gemmSymbols() {
  return {{gemm_abi::kEntryName, reinterpret_cast<void *>(&::mlpipeGemm)}};
}

} // namespace mlpipe::gpu

using namespace mlpipe::gpu;

extern "C" void mlpipeGemm(int32_t element, int32_t compute, int32_t transposeA, int32_t transposeB, int64_t batch,
                           int64_t m, int64_t n, int64_t k, double alpha, const void *a, int64_t lda, int64_t strideA,
                           const void *b, int64_t ldb, int64_t strideB, double beta, const void *c, int64_t ldc,
                           int64_t strideC, void *d, int64_t ldd, int64_t strideD, int32_t epilogue, const void *bias) {
  orDie([&] {
    GemmProblem p;
    p.element = static_cast<mlpipe::gemm_abi::Element>(element);
    p.compute = static_cast<mlpipe::gemm_abi::Compute>(compute);
    p.transposeA = transposeA != 0;
    p.transposeB = transposeB != 0;
    p.batch = batch;
    p.m = m;
    p.n = n;
    p.k = k;
    p.alpha = alpha;
    p.a = a;
    p.lda = lda;
    p.strideA = strideA;
    p.b = b;
    p.ldb = ldb;
    p.strideB = strideB;
    p.beta = beta;
    p.c = c;
    p.ldc = ldc;
    p.strideC = strideC;
    p.d = d;
    p.ldd = ldd;
    p.strideD = strideD;
    p.epilogue = static_cast<mlpipe::gemm_abi::Epilogue>(epilogue);
    p.bias = bias;
    validate(p);
    // A module loaded by the JIT holds a session; anything else calling in
    // gets one that lasts for the process.
    static std::once_flag fallbackSession;
    if (state().sessions == 0)
      std::call_once(fallbackSession, [] { new GemmSession(); });
    gemm(p, moduleStream());
  });
}
