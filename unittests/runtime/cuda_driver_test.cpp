// The runtime on whatever machine runs the tests: without a GPU (or without
// libcuda) it must say why in one sentence, throw that sentence from the C++
// API and exit with it from the C ABI; with one, the C++ API must work. The
// exported mgpu* symbols are checked everywhere.
#define BOOST_TEST_MODULE cuda_driver
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "child_process.h"
#include "runtime/mgpu_runtime.h"
#include "support/error.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

using namespace mlpipe;

namespace {

// Asserts that `call` throws mlpipe::Error whose message is exactly `expected`.
template <typename Call> void checkThrowsExactly(Call &&call, const std::string &expected) {
  try {
    call();
    BOOST_ERROR("no mlpipe::Error thrown; expected: " << expected);
  } catch (const Error &e) {
    BOOST_TEST(std::string(e.what()) == expected);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(reason_is_given_exactly_when_unavailable) {
  std::string reason = gpu::unavailableReason();
  BOOST_TEST_MESSAGE("GPU available: " << gpu::available() << "; reason: " << reason);
  if (gpu::available()) {
    BOOST_TEST(reason.empty());
    return;
  }
  BOOST_TEST(!reason.empty());
  BOOST_TEST(reason.find('\n') == std::string::npos);
  BOOST_TEST((reason.starts_with("no NVIDIA GPU driver: libcuda.so.1 could not be loaded (") ||
              reason.starts_with("no usable NVIDIA GPU: ") ||
              reason.starts_with("the NVIDIA GPU driver is too old for mlpipe: ")));
  // Asking again gives the same answer without trying again.
  BOOST_TEST(!gpu::available());
  BOOST_TEST(gpu::unavailableReason() == reason);
}

// A cubin made by the toolkit's ptxas for `chip`, read back as bytes.
std::string assembleCubin(const std::string &chip) {
  std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("mlpipe-cubin-" + std::to_string(getpid()));
  std::filesystem::create_directories(directory);
  std::filesystem::path ptx = directory / "k.ptx", cubin = directory / (chip + ".cubin");
  {
    FILE *out = std::fopen(ptx.c_str(), "w");
    std::fputs(".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n", out);
    std::fclose(out);
  }
  std::string command =
      std::string(MLPIPE_CUDA_TOOLKIT) + "/bin/ptxas -arch=" + chip + " " + ptx.string() + " -o " + cubin.string();
  BOOST_REQUIRE(std::system(command.c_str()) == 0);
  std::string bytes;
  FILE *in = std::fopen(cubin.c_str(), "rb");
  for (int c; (c = std::fgetc(in)) != EOF;)
    bytes += static_cast<char>(c);
  std::fclose(in);
  std::filesystem::remove_all(directory);
  return bytes;
}

BOOST_AUTO_TEST_CASE(the_chip_a_cubin_was_made_for_is_read_from_its_header) {
  for (std::string chip : {"sm_75", "sm_80", "sm_90", "sm_120"}) {
    std::string cubin = assembleCubin(chip);
    BOOST_TEST(gpu::cubinChip(cubin.data(), cubin.size()) == chip);
  }
  // Not a cubin: PTX text, a truncated header, nothing.
  std::string ptx = ".version 7.8\n.target sm_90\n.address_size 64\n" + std::string(100, ' ');
  BOOST_TEST(gpu::cubinChip(ptx.data(), ptx.size()) == "");
  std::string cubin = assembleCubin("sm_90");
  BOOST_TEST(gpu::cubinChip(cubin.data(), 40) == "");
  BOOST_TEST(gpu::cubinChip(nullptr, 0) == "");
}

BOOST_AUTO_TEST_CASE(host_api_throws_the_reason_without_a_gpu) {
  if (gpu::available())
    return;
  std::string reason = gpu::unavailableReason();
  checkThrowsExactly([] { gpu::allocateManaged(1024); }, reason);
  checkThrowsExactly([] { gpu::deviceName(); }, reason);
  checkThrowsExactly([] { gpu::synchronize(); }, reason);
  checkThrowsExactly([] { gpu::allocate(1024, gpu::Memory::Device); }, reason);
  checkThrowsExactly([] { gpu::Stream stream; }, reason);
  checkThrowsExactly([] { gpu::EventTimer timer; }, reason);
  // Nothing to do, so nothing to fail.
  BOOST_CHECK_NO_THROW(gpu::freeManaged(nullptr));
  BOOST_CHECK_NO_THROW(gpu::allocateManaged(0));
  BOOST_CHECK_NO_THROW(gpu::prefetchToDevice(nullptr, 0));
  BOOST_TEST(gpu::liveAllocationCount() == 0u);
  BOOST_TEST(gpu::liveAllocationBytes() == 0u);
}

BOOST_AUTO_TEST_CASE(c_abi_calls_that_need_no_driver_succeed_without_one) {
  // An empty allocation and freeing nullptr touch no driver; choosing a
  // device only records it.
  BOOST_TEST(mgpuMemAlloc(0, nullptr, 1) == nullptr);
  mgpuMemFree(nullptr, nullptr);
  mgpuSetDefaultDevice(0);
  BOOST_TEST(gpu::liveAllocationCount() == 0u);
}

BOOST_AUTO_TEST_CASE(c_abi_exits_with_the_reason_in_one_line_without_a_gpu) {
  if (gpu::available())
    return;
  test::ChildResult child = test::runScenario("alloc");
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(child.stderrText == "mlpipe: " + gpu::unavailableReason() + "\n");
}

BOOST_AUTO_TEST_CASE(c_abi_refuses_to_free_a_foreign_pointer) {
  test::ChildResult child = test::runScenario("free-foreign");
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(child.stderrText.starts_with("mlpipe: mgpuMemFree: 0x"));
  BOOST_TEST(child.stderrText.ends_with(" was not allocated by the mlpipe GPU runtime, or was already freed\n"));
}

// The CUDA toolkit ships a stub libcuda that exports every driver entry
// point but fails cuInit. Loaded in place of the driver, it shows that every
// versioned name the runtime looks up exists in this CUDA version's driver
// (a missing one would read "the NVIDIA GPU driver is too old ...").
BOOST_AUTO_TEST_CASE(every_entry_point_resolves_in_the_toolkit_stub_driver) {
  const char *home = std::getenv("CUDA_HOME");
  std::filesystem::path stub = std::filesystem::path(home ? home : "/usr/local/cuda") / "lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) {
    BOOST_TEST_MESSAGE("no stub driver at " << stub << "; nothing to check");
    return;
  }
  char dir[] = "/tmp/mlpipe-stub-driver-XXXXXX";
  BOOST_REQUIRE(mkdtemp(dir) != nullptr);
  std::filesystem::create_symlink(stub, std::filesystem::path(dir) / "libcuda.so.1");
  test::ChildResult child = test::runScenario("print-reason", "LD_LIBRARY_PATH='" + std::string(dir) + "'");
  std::filesystem::remove_all(dir);
  BOOST_TEST(child.exitCode == 0);
  BOOST_TEST(child.stderrText == "no usable NVIDIA GPU: cuInit failed with CUDA_ERROR_STUB_LIBRARY (libcuda.so.1 is "
                                 "the CUDA toolkit's stub, not a driver)\n");
}

BOOST_AUTO_TEST_CASE(host_api_allocates_and_frees_with_a_gpu) {
  if (!gpu::available())
    return;
  BOOST_TEST(!gpu::deviceName().empty());
  size_t before = gpu::liveAllocationCount();
  size_t bytesBefore = gpu::liveAllocationBytes();
  auto *data = static_cast<float *>(gpu::allocateManaged(1000 * sizeof(float)));
  BOOST_TEST(data != nullptr);
  BOOST_TEST(gpu::liveAllocationCount() == before + 1);
  BOOST_TEST(gpu::liveAllocationBytes() == bytesBefore + 1000 * sizeof(float));
  for (int i = 0; i < 1000; ++i)
    data[i] = float(i) + 0.5f;
  gpu::prefetchToDevice(data, 1000 * sizeof(float));
  gpu::synchronize();
  BOOST_TEST(data[999] == 999.5f);
  gpu::freeManaged(data);
  BOOST_TEST(gpu::liveAllocationCount() == before);
  BOOST_TEST(gpu::liveAllocationBytes() == bytesBefore);
  BOOST_CHECK_THROW(gpu::freeManaged(data), Error);
}

BOOST_AUTO_TEST_CASE(every_runtime_symbol_is_exported_under_its_name) {
  auto symbols = gpu::runtimeSymbols();
  BOOST_TEST(symbols.size() == 21u);
  std::set<std::string> names;
  for (const auto &[name, address] : symbols) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(name.starts_with("mgpu"));
      BOOST_TEST(address != nullptr);
      // What the JIT's own symbol search would find in the process.
      BOOST_TEST(dlsym(RTLD_DEFAULT, name.c_str()) == address);
      names.insert(name);
    }
  }
  BOOST_TEST(names.size() == symbols.size());
}

// Scenarios run in a child process by the tests above; all but print-reason
// should end the process themselves with status 1.
static int runScenario(const std::string &name) {
  if (name == "print-reason") {
    std::fprintf(stderr, "%s\n", gpu::unavailableReason().c_str());
    return 0;
  }
  if (name == "alloc")
    mgpuMemAlloc(64, nullptr, 1);
  else if (name == "free-foreign") {
    static float notFromTheRuntime[4];
    mgpuMemFree(notFromTheRuntime, nullptr);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (std::string scenario = test::scenarioFrom(argc, argv); !scenario.empty())
    return runScenario(scenario);
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
