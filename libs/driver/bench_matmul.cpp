#include "driver/bench_matmul.h"

#include "codegen/device_description.h"
#include "driver/compile.h"
#include "driver/matmul_choice.h"
#include "jit/executable.h"
#include "models/unit_kernels.h"
#include "runtime/gemm_runtime.h"
#include "runtime/mgpu_runtime.h"
#include "support/compare.h"
#include "support/error.h"
#include "support/statistics.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <random>

namespace mlpipe {

namespace {

// Copies of the operands to rotate over: at least twice the L2 cache, so
// every call reads its operands from memory; at most this many.
constexpr int64_t kColdCacheFactor = 2;
constexpr int64_t kMaxOperandSets = 64;

// One set of operands and result, in managed memory the GPU reads.
struct OperandSet {
  TargetBuffer a, b, y;
};

int64_t batchOf(const MatmulShape &shape) { return std::max<int64_t>(1, shape.batch); }

// Median microseconds per call of `call(i)` (i counting calls), timed as
// described in bench_matmul.h.
double timeCalls(const MatmulBenchRequest &request, const std::function<void(int64_t)> &call) {
  int64_t calls = 0;
  for (int batch = 0; batch < request.warmup; ++batch)
    for (int i = 0; i < request.launches; ++i)
      call(calls++);
  gpu::synchronize();
  std::vector<double> perCall;
  for (int batch = 0; batch < request.repeat; ++batch) {
    gpu::EventTimer timer;
    timer.start();
    for (int i = 0; i < request.launches; ++i)
      call(calls++);
    timer.stop();
    perCall.push_back(1000.0 * timer.milliseconds() / request.launches);
  }
  return median(perCall);
}

HostTensor resultOf(const OperandSet &set, const MatmulShape &shape, DType dtype) {
  Shape dims = shape.batch > 0 ? Shape{shape.batch, shape.m, shape.n} : Shape{shape.m, shape.n};
  HostTensor tensor(dtype, dims);
  set.y.download(tensor.data(), tensor.byteSize());
  return tensor;
}

void printRow(const std::string &shape, const std::string &path, double microseconds, double flops,
              double cublasMicroseconds, const std::string &difference) {
  std::cout << fmt::format("{:<26} {:<18} {:>10.1f} {:>9.2f} {:>9.2f}x {:>10}\n", shape, path, microseconds,
                           flops / (microseconds * 1e6), cublasMicroseconds / microseconds, difference);
}

} // namespace

MatmulShape parseMatmulShape(const std::string &text) {
  bool transposed = !text.empty() && text.back() == 't';
  Shape dims = parseShape(transposed ? text.substr(0, text.size() - 1) : text);
  MatmulShape shape;
  if (dims.size() == 3)
    shape = {0, dims[0], dims[1], dims[2]};
  else if (dims.size() == 4)
    shape = {dims[0], dims[1], dims[2], dims[3]};
  else
    fail("matmul shape '{}' must be MxKxN or BATCHxMxKxN, with a trailing t for B stored [N, K]", text);
  shape.bTransposed = transposed;
  return shape;
}

std::string formatMatmulShape(const MatmulShape &shape) {
  const char *t = shape.bTransposed ? "t" : "";
  if (shape.batch > 0)
    return fmt::format("{}x({}x{} @ {}x{}{})", shape.batch, shape.m, shape.k, shape.k, shape.n, t);
  return fmt::format("{}x{}x{}{}", shape.m, shape.k, shape.n, t);
}

void benchMatmul(const MatmulBenchRequest &request) {
  if (request.repeat <= 0 || request.warmup < 0 || request.launches <= 0)
    fail("--repeat and --launches must be positive and --warmup not negative");
  checkPrecision(request.precision);
  std::optional<DType> parsed = parseDType(request.dtype);
  if (!parsed || (*parsed != DType::f32 && *parsed != DType::bf16 && *parsed != DType::f16))
    fail("bench matmul times f32, bf16 or f16, not '{}'", request.dtype);
  const DType dtype = *parsed;
  const bool sixteenBit = dtype != DType::f32;
  const int64_t elementBytes = sixteenBit ? 2 : 4;
  if (sixteenBit && request.precision != "f32")
    fail("--precision {} is for f32 matmuls; bf16 and f16 always run on tensor cores", request.precision);
  for (const std::string &matmul : request.matmuls)
    if (matmul != "cublas" && matmul != "generated")
      fail("--matmul must list cublas and/or generated, not '{}'", matmul);
  if (!gpu::available())
    fail("bench matmul runs on the GPU, but {}", gpu::unavailableReason());
  std::unique_ptr<gpu::GemmSession> session;
  try {
    session = std::make_unique<gpu::GemmSession>();
  } catch (const Error &error) {
    fail("bench matmul compares with cuBLAS, but {}", error.what());
  }
  const DeviceDescription &device = deviceDescription(request.chip);
  int64_t coldBytes = kColdCacheFactor * device.l2CacheBytes;
  bool tf32 = request.precision == "tf32";
  std::cout << fmt::format("bench matmul: {} ({}), {}{}, median of {} timings of {} back-to-back calls after {} "
                           "warm-up rounds; operands rotate over at least {} MB\n",
                           gpu::deviceName(), request.chip, dtypeName(dtype), tf32 ? " with TF32 allowed" : "",
                           request.repeat, request.launches, request.warmup, coldBytes >> 20);
  std::cout << "x cuBLAS: cuBLAS's time over this one (1.00 = as fast); diff: ||y - y_cuBLAS|| / ||y_cuBLAS||\n";
  std::cout << fmt::format("{:<26} {:<18} {:>10} {:>9} {:>10} {:>10}\n", "shape", "path", "us", "TFLOP/s", "x cuBLAS",
                           "diff");

  std::mt19937 generator(20261130);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const MatmulShape &shape : request.shapes) {
    if (shape.m < 1 || shape.k < 1 || shape.n < 1 || shape.batch < 0)
      fail("matmul shape {} has an empty dimension", formatMatmulShape(shape));
    int64_t batch = batchOf(shape);
    int64_t aElements = batch * shape.m * shape.k, bElements = batch * shape.k * shape.n,
            yElements = batch * shape.m * shape.n;
    int64_t setBytes = elementBytes * (aElements + bElements + yElements);
    int64_t sets = std::clamp<int64_t>((coldBytes + setBytes - 1) / setBytes, 1, kMaxOperandSets);
    std::vector<OperandSet> operands;
    std::vector<float> random(static_cast<size_t>(std::max(aElements, bElements)));
    for (float &value : random)
      value = uniform(generator);
    for (int64_t s = 0; s < sets; ++s) {
      OperandSet set{TargetBuffer(Target::Gpu, elementBytes * aElements),
                     TargetBuffer(Target::Gpu, elementBytes * bElements),
                     TargetBuffer(Target::Gpu, elementBytes * yElements)};
      // Each set differs (the random block, shifted), so no result repeats.
      std::rotate(random.begin(), random.begin() + (s * 7919) % random.size(), random.end());
      if (sixteenBit) {
        // The same values rounded to the 16-bit type (A and B read the
        // first aElements and bElements of them).
        HostTensor wide(DType::f32, Shape{static_cast<int64_t>(random.size())});
        std::memcpy(wide.data(), random.data(), wide.byteSize());
        HostTensor narrow = wide.convertedTo(dtype);
        set.a.upload(narrow.data(), elementBytes * aElements);
        set.b.upload(narrow.data(), elementBytes * bElements);
      } else {
        set.a.upload(random.data(), 4 * aElements);
        set.b.upload(random.data(), 4 * bElements);
      }
      operands.push_back(std::move(set));
    }
    double flops = 2.0 * batch * shape.m * shape.n * shape.k;
    std::string name = formatMatmulShape(shape);

    // cuBLAS, called directly (cuBLASLt for 16-bit operands).
    auto problemFor = [&](const OperandSet &set) {
      gpu::GemmProblem p;
      if (sixteenBit)
        p.element = dtype == DType::bf16 ? gemm_abi::kBf16 : gemm_abi::kF16;
      p.compute = tf32 ? gemm_abi::kTf32 : gemm_abi::kExact;
      p.batch = batch;
      p.m = shape.m;
      p.n = shape.n;
      p.k = shape.k;
      p.a = set.a.data();
      p.lda = shape.k;
      p.strideA = shape.m * shape.k;
      p.b = set.b.data();
      p.transposeB = shape.bTransposed;
      p.ldb = shape.bTransposed ? shape.k : shape.n;
      p.strideB = shape.k * shape.n;
      p.d = set.y.data();
      p.ldd = shape.n;
      p.strideD = shape.m * shape.n;
      return p;
    };
    auto cublas = [&](const OperandSet &set) {
      if (sixteenBit)
        gpu::gemm(problemFor(set), nullptr);
      else
        gpu::classicGemm(problemFor(set), nullptr);
    };
    double cublasMicroseconds = timeCalls(request, [&](int64_t i) { cublas(operands[i % sets]); });
    cublas(operands[0]);
    gpu::synchronize();
    HostTensor expected = resultOf(operands[0], shape, dtype);
    printRow(name, "cuBLAS", cublasMicroseconds, flops, cublasMicroseconds, "-");

    // mlpipe's compiled unit matmul, per path.
    for (const std::string &matmul : request.matmuls) {
      KernelOptions options;
      options.shapes = {{shape.m, shape.k}, shape.bTransposed ? Shape{shape.n, shape.k} : Shape{shape.k, shape.n}};
      options.transposeB = shape.bTransposed;
      options.batch = shape.batch;
      options.dtype = dtype;
      CompileOptions compile;
      compile.target = Target::Gpu;
      compile.chip = request.chip;
      compile.matmul = matmul;
      compile.precision = request.precision;
      Executable executable = Executable::load(compileProgram(traceUnitKernel("matmul", options), "matmul", compile));
      const EntrySignature &entry = executable.entry("matmul");
      // On a stream of its own, as a runner calls it: the module's launches
      // are queued, not each waited for (outside a stream's scope every
      // launch from compiled code waits for its kernel, about 15 us).
      TargetStream stream(Target::Gpu);
      TargetStream::Scope onStream(stream);
      auto call = [&](const OperandSet &set) { executable.enqueue(entry, {set.a.data(), set.b.data(), set.y.data()}); };
      double microseconds = timeCalls(request, [&](int64_t i) { call(operands[i % sets]); });
      // NaN: a result left unwritten shows.
      std::vector<unsigned char> nan(operands[0].y.size(), 0xff);
      operands[0].y.upload(nan.data(), nan.size());
      call(operands[0]);
      gpu::synchronize();
      Comparison comparison = compareTensors(resultOf(operands[0], shape, dtype), expected, 0.0, 0.0);
      printRow("", "mlpipe " + matmul, microseconds, flops, cublasMicroseconds,
               fmt::format("{:.1e}", comparison.relativeL2));
    }
  }
}

} // namespace mlpipe
