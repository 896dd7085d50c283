// Loading cuBLAS, on whatever machine runs the tests (no GPU needed): where
// it is not, one sentence says why, naming what was tried; MLPIPE_CUBLAS
// names another file; the GEMM entry is exported under its ABI name, and it
// refuses a malformed problem in one line. Each environment is tried in a
// child process, since the library is looked for once per process.
#define BOOST_TEST_MODULE cublas_library
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "child_process.h"
#include "runtime/gemm_runtime.h"
#include "support/error.h"
#include "test_support.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace mlpipe;

namespace {

std::filesystem::path toolkit() {
  const char *home = std::getenv("CUDA_HOME");
  return home && *home ? home : "/usr/local/cuda";
}

} // namespace

BOOST_AUTO_TEST_CASE(a_reason_is_given_exactly_when_cublas_does_not_load) {
  std::string reason = gpu::cublasUnavailableReason();
  BOOST_TEST_MESSAGE("cuBLAS available: " << gpu::cublasAvailable() << " (" << gpu::cublasPath()
                                          << "); reason: " << reason);
  if (gpu::cublasAvailable()) {
    BOOST_TEST(reason.empty());
    BOOST_TEST(gpu::cublasPath().find("libcublas.so") != std::string::npos);
    return;
  }
  BOOST_TEST(reason.starts_with("cuBLAS "));
  BOOST_TEST(reason.find('\n') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_file_named_by_mlpipe_cublas_is_the_reason) {
  test::ChildResult child = test::runScenario("print-reason", "MLPIPE_CUBLAS=/nonexistent/libcublas.so.13");
  BOOST_TEST(child.exitCode == 0);
  BOOST_TEST(child.stderrText == "cuBLAS could not be loaded: /nonexistent/libcublas.so.13: cannot open shared "
                                 "object file: No such file or directory\n");
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_library_is_refused) {
  std::filesystem::path notALibrary =
      std::filesystem::temp_directory_path() / ("mlpipe-not-a-library-" + std::to_string(testing::rng()()) + ".so");
  std::ofstream(notALibrary) << "not an ELF file\n";
  test::ChildResult child = test::runScenario("print-reason", "MLPIPE_CUBLAS='" + notALibrary.string() + "'");
  std::filesystem::remove(notALibrary);
  BOOST_TEST(child.exitCode == 0);
  BOOST_TEST(child.stderrText.starts_with("cuBLAS could not be loaded: " + notALibrary.string() + ": "));
  BOOST_TEST(child.stderrText.find('\n') == child.stderrText.size() - 1);
}

// cuBLASLt alone lacks cuBLAS's entry points: the reason says which file to name.
BOOST_AUTO_TEST_CASE(cublaslt_alone_is_not_enough) {
  std::string soname = gpu::cublasSoname(); // libcublas.so.N
  std::filesystem::path lt = toolkit() / "lib64" / ("libcublasLt" + soname.substr(std::string("libcublas").size()));
  if (!std::filesystem::exists(lt)) {
    BOOST_TEST_MESSAGE("no " << lt << "; nothing to check");
    return;
  }
  test::ChildResult child = test::runScenario("print-reason", "MLPIPE_CUBLAS='" + lt.string() + "'");
  BOOST_TEST(child.exitCode == 0);
  BOOST_TEST(child.stderrText == "cuBLAS at " + lt.string() +
                                     " is unusable: it has no cublasCreate_v2 (MLPIPE_CUBLAS must name libcublas.so, "
                                     "which loads libcublasLt.so)\n");
}

// The toolkit's own library, named explicitly, loads (no GPU needed).
BOOST_AUTO_TEST_CASE(the_toolkits_cublas_loads_without_a_gpu) {
  std::filesystem::path library = toolkit() / "lib64" / gpu::cublasSoname();
  if (!std::filesystem::exists(library)) {
    BOOST_TEST_MESSAGE("no " << library << "; nothing to check");
    return;
  }
  test::ChildResult child = test::runScenario("print-reason", "MLPIPE_CUBLAS='" + library.string() + "'");
  BOOST_TEST(child.exitCode == 0);
  BOOST_TEST(child.stderrText == "\n");
}

BOOST_AUTO_TEST_CASE(the_gemm_entry_is_exported_under_its_abi_name) {
  auto symbols = gpu::gemmSymbols();
  BOOST_REQUIRE(symbols.size() == 1u);
  BOOST_TEST(symbols[0].first == gemm_abi::kEntryName);
  void *self = dlopen(nullptr, RTLD_NOW);
  BOOST_TEST(dlsym(self, gemm_abi::kEntryName) == symbols[0].second);
}

// A malformed problem is refused before any GPU work, naming it.
BOOST_AUTO_TEST_CASE(a_malformed_problem_is_refused_naming_it) {
  gpu::GemmProblem problem;
  problem.m = 4;
  problem.n = 0;
  problem.k = 8;
  BOOST_TEST(testing::messageOf([&] { gpu::gemm(problem, nullptr); }) ==
             "invalid GEMM (f32 GEMM m=4 n=0 k=8): every dimension and the batch must be at least 1");
  test::ChildResult child = test::runScenario("malformed-entry");
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(child.stderrText == "mlpipe: invalid GEMM (f32 GEMM m=2 n=3 k=4, B transposed): a leading dimension is "
                                 "shorter than its row (lda 4, ldb 3, ldc 0, ldd 3)\n");
}

// Without a GPU (or without cuBLAS), a session says which is missing.
BOOST_AUTO_TEST_CASE(a_session_needs_cublas_and_a_gpu) {
  if (gpu::available() && gpu::cublasAvailable())
    return;
  std::string message = testing::messageOf([] { gpu::GemmSession session; });
  BOOST_TEST((message == gpu::unavailableReason() || message == gpu::cublasUnavailableReason()));
}

namespace {

int runScenario(const std::string &name) {
  if (name == "print-reason") {
    std::fprintf(stderr, "%s\n", gpu::cublasUnavailableReason().c_str());
  } else if (name == "malformed-entry") {
    float a[8] = {}, b[12] = {}, d[6] = {};
    // B stored transposed (3 x 4) needs ldb >= 4.
    mlpipeGemm(gemm_abi::kF32, gemm_abi::kExact, 0, 1, 1, 2, 3, 4, 1.0, a, 4, 0, b, 3, 0, 0.0, nullptr, 0, 0, d, 3, 0,
               gemm_abi::kNone, nullptr);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (std::string scenario = test::scenarioFrom(argc, argv); !scenario.empty())
    return runScenario(scenario);
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
