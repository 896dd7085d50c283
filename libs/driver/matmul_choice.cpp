#include "driver/matmul_choice.h"

#include "runtime/gemm_runtime.h"
#include "support/error.h"

#include <iostream>
#include <mutex>

namespace mlpipe {

const char *const kMatmulFlagHelp =
    "GPU matmuls: cublas (calls of cuBLAS(Lt), with bias/GELU/residual epilogues folded in) or generated "
    "(kernels) (default: cublas where it loads, else generated with a notice; MLPIPE_CUBLAS names another "
    "libcublas.so)";
const char *const kPrecisionFlagHelp =
    "f32 GPU matmuls: f32 (no TF32) or tf32 (opt-in: inputs rounded to TF32 on tensor cores, by cuBLAS or the "
    "generated kernel from sm_80; looser tolerance)";

std::string resolveMatmulChoice(const std::string &requested) {
  if (requested == "cublas" || requested == "generated")
    return requested;
  if (!requested.empty())
    fail("--matmul must be cublas or generated, not '{}'", requested);
  if (gpu::cublasAvailable())
    return "cublas";
  static std::once_flag noticeOnce;
  std::call_once(noticeOnce, [] {
    std::cerr << "outline: notice: " << gpu::cublasUnavailableReason() << "; matmuls use the generated kernel"
              << std::endl;
  });
  return "generated";
}

void checkPrecision(const std::string &precision) {
  if (precision != "f32" && precision != "tf32")
    fail("--precision must be f32 or tf32, not '{}'", precision);
}

std::string describeMatmuls(const std::string &matmul, const std::string &precision) {
  return (matmul.empty() ? std::string("default") : matmul) + " matmuls" + (precision == "tf32" ? ", tf32" : "");
}

} // namespace mlpipe
