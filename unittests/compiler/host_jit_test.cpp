// The host JIT (jit/host_jit.h) registers no unwind frames with the C++
// unwinder. This binary defines __register_frame and __deregister_frame,
// the unwinder's entry points a JIT calls for the frames of the code it
// loads, so the core library's calls reach these, which count them and
// pass them on. Modules are compiled, run on fresh random data (checked
// against float64) and destroyed; then no frame was registered, and a
// throw is still caught where it should be.
#define BOOST_TEST_MODULE host_jit
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "compiler/compiler.h"
#include "frontend/mlir_emitter.h"
#include "jit/executable.h"
#include "models/unit_kernels.h"
#include "support/error.h"
#include "support/host_tensor.h"

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <random>

using namespace mlpipe;

namespace {

std::atomic<int> registeredFrames{0}, deregisteredFrames{0};

template <typename Function> Function unwinderEntry(const char *name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

} // namespace

extern "C" void __register_frame(void *begin) {
  ++registeredFrames;
  static auto next = unwinderEntry<void (*)(void *)>("__register_frame");
  next(begin);
}

extern "C" void __deregister_frame(void *begin) {
  ++deregisteredFrames;
  static auto next = unwinderEntry<void (*)(void *)>("__deregister_frame");
  next(begin);
}

namespace {

// gelu (tanh form) on the CPU, through the tools' stages, on a fresh
// random [rows, 37]; its largest error against float64.
double geluError(int64_t rows) {
  KernelOptions options;
  options.shapes = {{rows, 37}};
  MlirModule module = MlirModule::parse(fe::emitMlir(traceUnitKernel("gelu", options)), "gelu.mlir");
  runStage(StageTool::Fuse, module, {});
  runStage(StageTool::Bufferize, module, {});
  runStage(StageTool::LowerCpu, module, {});
  ExecutionOptions execution;
  execution.target = Target::Cpu;
  Executable executable = Executable::load(std::move(module), execution);
  const EntrySignature &entry = executable.entry("");
  std::uniform_real_distribution<double> value(-3.0, 3.0);
  std::vector<double> x(static_cast<size_t>(rows * 37));
  for (double &v : x)
    v = value(testing::rng());
  HostTensor input = HostTensor::fromDoubles(DType::f32, {rows, 37}, x);
  HostTensor output = HostTensor::fromDoubles(DType::f32, {rows, 37}, std::vector<double>(x.size(), NAN));
  executable.call(entry, {input.data(), output.data()});
  std::vector<double> xs = input.toDoubles(), ys = output.toDoubles();
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double expected = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    worst = std::max(worst, std::abs(ys[i] - expected) / (1 + std::abs(expected)));
  }
  return worst;
}

} // namespace

BOOST_AUTO_TEST_CASE(compiled_modules_register_no_unwind_frames) {
  for (int64_t rows : {1, 5, 130})
    BOOST_TEST(geluError(rows) < 1e-5, "rows " << rows);
  BOOST_TEST(registeredFrames.load() == 0);
  BOOST_TEST(deregisteredFrames.load() == 0);
}

BOOST_AUTO_TEST_CASE(a_throw_after_modules_are_destroyed_is_caught) {
  BOOST_TEST(geluError(3) < 1e-5);
  BOOST_TEST(testing::messageOf([] { fail("thrown after the JIT's modules are gone"); }) ==
             "thrown after the JIT's modules are gone");
}
