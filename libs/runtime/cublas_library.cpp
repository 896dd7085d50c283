// CublasLibrary: dlopen of libcublas.so (which brings libcublasLt.so), dlsym
// of each entry point, and a version check, all on first use.
#include "runtime/cublas_library.h"

#include "support/error.h"

#include <cstdlib>
#include <dlfcn.h>
#include <vector>

namespace mlpipe::gpu {

namespace {

// Where to look, in order (see cublas_library.h).
std::vector<std::string> candidatePaths() {
  if (const char *named = std::getenv("MLPIPE_CUBLAS"); named && *named)
    return {named};
  std::vector<std::string> paths;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    paths.push_back(std::string(home) + "/lib64/" + CublasLibrary::soname());
  paths.push_back(CublasLibrary::soname());
  paths.push_back(std::string(MLPIPE_DEFAULT_CUDA_TOOLKIT) + "/lib64/" + CublasLibrary::soname());
  return paths;
}

} // namespace

// Entry points keep their names across major versions, but not always their
// enum values.
std::string CublasLibrary::soname() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

CublasLibrary &CublasLibrary::get() {
  // Never destroyed: JIT code may still run GEMMs from global destructors.
  static CublasLibrary *library = new CublasLibrary();
  return *library;
}

void CublasLibrary::load() {
  std::string failures;
  for (const std::string &candidate : candidatePaths()) {
    // Lazy binding: the library is large, and `outline` only asks whether it
    // loads.
    library_ = dlopen(candidate.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (library_) {
      path_ = candidate;
      break;
    }
    const char *why = dlerror();
    failures += (failures.empty() ? "" : "; ") + std::string(why ? why : candidate + ": unknown reason");
  }
  if (!library_) {
    reason_ = "cuBLAS could not be loaded: " + failures;
    return;
  }
  void *slot = nullptr;
#define MLPIPE_CUBLAS_RESOLVE(name)                                                                                    \
  slot = dlsym(library_, #name);                                                                                       \
  if (!slot) {                                                                                                         \
    reason_ = "cuBLAS at " + path_ +                                                                                   \
              " is unusable: it has no " #name " (MLPIPE_CUBLAS must name libcublas.so, which loads libcublasLt.so)";  \
    return;                                                                                                            \
  }                                                                                                                    \
  name = reinterpret_cast<decltype(name)>(slot);
  MLPIPE_CUBLAS_ENTRY_POINTS(MLPIPE_CUBLAS_RESOLVE)
#undef MLPIPE_CUBLAS_RESOLVE

  size_t version = cublasLtGetVersion();
  if (version / 10000 != CUBLAS_VER_MAJOR) {
    reason_ = "cuBLAS at " + path_ + " is unusable: it is version " + std::to_string(version / 10000) + "." +
              std::to_string(version / 100 % 100) + ", but mlpipe was built with the headers of cuBLAS " +
              std::to_string(CUBLAS_VER_MAJOR);
    return;
  }
  available_ = true;
}

bool CublasLibrary::available() {
  std::call_once(loadOnce_, [this] { load(); });
  return available_;
}

std::string CublasLibrary::unavailableReason() { return available() ? std::string() : reason_; }

void CublasLibrary::requireAvailable() {
  if (!available())
    throw Error(reason_);
}

std::string CublasLibrary::path() {
  available();
  return path_;
}

std::string CublasLibrary::describe(cublasStatus_t status) {
  const char *name = cublasGetStatusName ? cublasGetStatusName(status) : nullptr;
  const char *text = cublasGetStatusString ? cublasGetStatusString(status) : nullptr;
  std::string described = name ? name : "cublasStatus_t " + std::to_string(static_cast<int>(status));
  if (text && *text)
    described += std::string(" (") + text + ")";
  return described;
}

} // namespace mlpipe::gpu
