// The mgpu* C ABI on a real GPU, driven the way JIT-compiled code drives it:
// hand-written PTX kernels loaded with mgpuModuleLoadJIT, launched on runtime
// streams over runtime memory, and checked against the host on fresh random
// data. Fatal errors are checked in child processes. Without a GPU the suite
// prints why and exits 77, which ctest shows as Skipped.
#define BOOST_TEST_MODULE mgpu_gpu
#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "child_process.h"
#include "runtime/mgpu_runtime.h"
#include "support/error.h"
#include "test_support.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mlpipe;

namespace {

// PTX for sm_75 (it assembles for every later chip too), checked with ptxas
// -arch=sm_75 and -arch=sm_90.
const char *const kKernelsPtx = R"PTX(
.version 7.8
.target sm_75
.address_size 64

// y[i] = a * x[i] + y[i] for i < n, one element per thread.
.visible .entry saxpy(
    .param .u64 saxpy_x,
    .param .u64 saxpy_y,
    .param .f32 saxpy_a,
    .param .u32 saxpy_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [saxpy_x];
    ld.param.u64 %rd2, [saxpy_y];
    ld.param.f32 %f1, [saxpy_a];
    ld.param.u32 %r1, [saxpy_n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}

// Reverses each block's slice of x into y through dynamic shared memory,
// staged from float index `base` on, so that the top of a large dynamic
// allocation is written and read.
.extern .shared .align 16 .b8 dynamic_shared[];

.visible .entry reverse_in_shared(
    .param .u64 reverse_in_shared_x,
    .param .u64 reverse_in_shared_y,
    .param .u32 reverse_in_shared_base)
{
    .reg .b32 %r<12>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<9>;

    ld.param.u64 %rd1, [reverse_in_shared_x];
    ld.param.u64 %rd2, [reverse_in_shared_y];
    ld.param.u32 %r1, [reverse_in_shared_base];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.f32 %f1, [%rd6];
    mov.u32 %r6, dynamic_shared;
    add.s32 %r7, %r1, %r4;
    shl.b32 %r8, %r7, 2;
    add.s32 %r9, %r6, %r8;
    st.shared.f32 [%r9], %f1;
    bar.sync 0;
    sub.s32 %r10, %r3, %r4;
    add.s32 %r10, %r10, -1;
    add.s32 %r10, %r10, %r1;
    shl.b32 %r10, %r10, 2;
    add.s32 %r11, %r6, %r10;
    ld.shared.f32 %f2, [%r11];
    add.s64 %rd7, %rd4, %rd5;
    st.global.f32 [%rd7], %f2;
    ret;
}

// Stores 1.0 at a raw address: given a bad one, the kernel faults.
.visible .entry store_to(
    .param .u64 store_to_address)
{
    .reg .f32 %f<2>;
    .reg .b64 %rd<2>;

    ld.param.u64 %rd1, [store_to_address];
    mov.f32 %f1, 0f3F800000;
    st.global.f32 [%rd1], %f1;
    ret;
}
)PTX";

// Fails to assemble: an instruction PTX does not have.
const char *const kBrokenPtx = R"PTX(
.version 7.8
.target sm_75
.address_size 64

.visible .entry broken()
{
    .reg .f32 %f<2>;
    frobnicate.f32 %f1;
    ret;
}
)PTX";

constexpr int kBlock = 256;

// Fresh data on every run, never zero: values in ±[0.5, 2).
std::mt19937 &generator() {
  static std::mt19937 g = [] {
    unsigned seed = std::random_device{}();
    BOOST_TEST_MESSAGE("random seed " << seed);
    return std::mt19937(seed);
  }();
  return g;
}

float randomNonZero() {
  std::uniform_real_distribution<float> magnitude(0.5f, 2.0f);
  std::bernoulli_distribution negative(0.5);
  float v = magnitude(generator());
  return negative(generator()) ? -v : v;
}

void fillRandom(float *data, size_t n) {
  for (size_t i = 0; i < n; ++i)
    data[i] = randomNonZero();
}

std::vector<float> randomVector(size_t n) {
  std::vector<float> v(n);
  fillRandom(v.data(), n);
  return v;
}

// The test module and its kernels, unloaded at the end of each test.
struct Kernels {
  void *module = nullptr;
  void *saxpy = nullptr;
  void *reverseInShared = nullptr;
  void *storeTo = nullptr;

  explicit Kernels(bool viaModuleLoad = false) {
    module = viaModuleLoad ? mgpuModuleLoad(const_cast<char *>(kKernelsPtx), std::strlen(kKernelsPtx) + 1)
                           : mgpuModuleLoadJIT(const_cast<char *>(kKernelsPtx), 2);
    saxpy = mgpuModuleGetFunction(module, "saxpy");
    reverseInShared = mgpuModuleGetFunction(module, "reverse_in_shared");
    storeTo = mgpuModuleGetFunction(module, "store_to");
  }
  ~Kernels() { mgpuModuleUnload(module); }
  Kernels(const Kernels &) = delete;
  Kernels &operator=(const Kernels &) = delete;
};

// y = a * x + y on `stream`, as gpu-to-llvm would launch it: params[i]
// points at the i-th argument's value.
void launchSaxpy(const Kernels &k, float *x, float *y, float a, uint32_t n, void *stream) {
  void *xArg = x, *yArg = y;
  float aArg = a;
  uint32_t nArg = n;
  void *params[] = {&xArg, &yArg, &aArg, &nArg};
  mgpuLaunchKernel(k.saxpy, (n + kBlock - 1) / kBlock, 1, 1, kBlock, 1, 1, 0, stream, params, nullptr, 4);
}

// Elements where y differs from fma(a, x, y0), which fma.rn.f32 computes
// exactly (both round once, to nearest even).
size_t saxpyMismatches(const float *y, const std::vector<float> &x, const std::vector<float> &y0, float a) {
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    bad += y[i] != std::fma(a, x[i], y0[i]);
  return bad;
}

float *managedFloats(size_t n, void *stream) {
  return static_cast<float *>(mgpuMemAlloc(n * sizeof(float), stream, /*isHostShared=*/1));
}

// A child's stderr must be exactly one line.
bool isOneLine(const std::string &text) { return !text.empty() && text.find('\n') == text.size() - 1; }

} // namespace

BOOST_AUTO_TEST_CASE(saxpy_in_managed_memory_matches_the_host) {
  const size_t before = gpu::liveAllocationCount();
  const uint32_t n = 100003; // not a multiple of the block: the tail is guarded
  Kernels k;
  void *stream = mgpuStreamCreate();
  float *x = managedFloats(n, stream);
  float *y = managedFloats(n, stream);
  BOOST_TEST(gpu::liveAllocationCount() == before + 2);
  BOOST_TEST(gpu::liveAllocationBytes() >= 2 * n * sizeof(float));
  fillRandom(x, n);
  fillRandom(y, n);
  std::vector<float> x0(x, x + n), y0(y, y + n);
  const float a = randomNonZero();

  launchSaxpy(k, x, y, a, n, stream);
  mgpuStreamSynchronize(stream);

  BOOST_TEST(saxpyMismatches(y, x0, y0, a) == 0u);
  BOOST_TEST(std::memcmp(x, x0.data(), n * sizeof(float)) == 0); // x only read
  mgpuMemFree(x, stream);
  mgpuMemFree(y, stream);
  mgpuStreamDestroy(stream);
  BOOST_TEST(gpu::liveAllocationCount() == before);
}

BOOST_AUTO_TEST_CASE(module_load_takes_nul_terminated_ptx_too) {
  const uint32_t n = 4096;
  Kernels k(/*viaModuleLoad=*/true);
  void *stream = mgpuStreamCreate();
  float *x = managedFloats(n, stream);
  float *y = managedFloats(n, stream);
  fillRandom(x, n);
  fillRandom(y, n);
  std::vector<float> x0(x, x + n), y0(y, y + n);
  const float a = randomNonZero();
  launchSaxpy(k, x, y, a, n, stream);
  mgpuStreamSynchronize(stream);
  BOOST_TEST(saxpyMismatches(y, x0, y0, a) == 0u);
  mgpuMemFree(x, stream);
  mgpuMemFree(y, stream);
  mgpuStreamDestroy(stream);
}

BOOST_AUTO_TEST_CASE(saxpy_in_device_memory_through_memcpy) {
  const size_t before = gpu::liveAllocationCount();
  const uint32_t n = 65537;
  const size_t bytes = n * sizeof(float);
  Kernels k;
  void *stream = mgpuStreamCreate();
  std::vector<float> x0 = randomVector(n), y0 = randomVector(n);
  auto *x = static_cast<float *>(mgpuMemAlloc(bytes, stream, /*isHostShared=*/0));
  auto *y = static_cast<float *>(mgpuMemAlloc(bytes, stream, /*isHostShared=*/0));
  const float a = randomNonZero();

  mgpuMemcpy(x, x0.data(), bytes, stream);
  mgpuMemcpy(y, y0.data(), bytes, stream);
  launchSaxpy(k, x, y, a, n, stream);
  std::vector<float> result(n, std::numeric_limits<float>::quiet_NaN());
  mgpuMemcpy(result.data(), y, bytes, stream);
  mgpuStreamSynchronize(stream);

  BOOST_TEST(saxpyMismatches(result.data(), x0, y0, a) == 0u);
  mgpuMemFree(x, stream);
  mgpuMemFree(y, stream);
  mgpuStreamDestroy(stream);
  BOOST_TEST(gpu::liveAllocationCount() == before);
}

BOOST_AUTO_TEST_CASE(memcpy_between_managed_and_device_buffers) {
  const size_t n = 12345;
  const size_t bytes = n * sizeof(float);
  void *stream = mgpuStreamCreate();
  float *source = managedFloats(n, stream);
  float *target = managedFloats(n, stream);
  auto *device = static_cast<float *>(mgpuMemAlloc(bytes, stream, 0));
  fillRandom(source, n);
  for (size_t i = 0; i < n; ++i)
    target[i] = std::numeric_limits<float>::quiet_NaN();

  mgpuMemcpy(device, source, bytes, stream); // managed -> device
  mgpuMemcpy(target, device, bytes, stream); // device -> managed
  mgpuStreamSynchronize(stream);
  BOOST_TEST(std::memcmp(target, source, bytes) == 0);

  mgpuMemcpy(target, source, 0, stream); // nothing to copy
  mgpuMemFree(device, stream);
  mgpuMemFree(source, stream);
  mgpuMemFree(target, stream);
  mgpuStreamDestroy(stream);
}

BOOST_AUTO_TEST_CASE(memset32_and_memset16_set_exactly_count_words) {
  const size_t n = 10007;
  void *stream = mgpuStreamCreate();
  auto *words = static_cast<uint32_t *>(mgpuMemAlloc(n * 4, stream, 1));
  auto *halves = static_cast<uint16_t *>(mgpuMemAlloc(n * 2, stream, 1));
  for (size_t i = 0; i < n; ++i) {
    words[i] = 0x01010101u;
    halves[i] = 0x0202u;
  }
  // The last three of each stay as they were.
  mgpuMemset32(words, 0xDEADBEEFu, n - 3, stream);
  mgpuMemset16(halves, 0xBEEF, n - 3, stream);
  mgpuStreamSynchronize(stream);

  size_t badWords = 0, badHalves = 0;
  for (size_t i = 0; i < n; ++i) {
    badWords += words[i] != (i < n - 3 ? 0xDEADBEEFu : 0x01010101u);
    badHalves += halves[i] != (i < n - 3 ? uint16_t(0xBEEF) : uint16_t(0x0202));
  }
  BOOST_TEST(badWords == 0u);
  BOOST_TEST(badHalves == 0u);
  mgpuMemFree(words, stream);
  mgpuMemFree(halves, stream);
  mgpuStreamDestroy(stream);
}

BOOST_AUTO_TEST_CASE(dynamic_shared_memory_above_48_kib) {
  const int blocks = 64;
  const uint32_t n = blocks * kBlock;
  const int32_t sharedBytes = 64 * 1024; // past the 48 KiB default: needs the opt-in
  Kernels k;
  void *stream = mgpuStreamCreate();
  float *x = managedFloats(n, stream);
  float *y = managedFloats(n, stream);
  fillRandom(x, n);
  for (uint32_t i = 0; i < n; ++i)
    y[i] = std::numeric_limits<float>::quiet_NaN();

  void *xArg = x, *yArg = y;
  uint32_t base = sharedBytes / 4 - kBlock; // the top kBlock floats
  void *params[] = {&xArg, &yArg, &base};
  mgpuLaunchKernel(k.reverseInShared, blocks, 1, 1, kBlock, 1, 1, sharedBytes, stream, params, nullptr, 3);
  // Again, now that the limit has been raised once for this function.
  mgpuLaunchKernel(k.reverseInShared, blocks, 1, 1, kBlock, 1, 1, sharedBytes, stream, params, nullptr, 3);
  mgpuStreamSynchronize(stream);

  size_t bad = 0;
  for (uint32_t b = 0; b < uint32_t(blocks); ++b)
    for (uint32_t t = 0; t < uint32_t(kBlock); ++t)
      bad += y[b * kBlock + t] != x[b * kBlock + (kBlock - 1 - t)];
  BOOST_TEST(bad == 0u);
  mgpuMemFree(x, stream);
  mgpuMemFree(y, stream);
  mgpuStreamDestroy(stream);
}

BOOST_AUTO_TEST_CASE(an_event_orders_two_streams) {
  const uint32_t n = 1u << 22;
  Kernels k;
  void *first = mgpuStreamCreate();
  void *second = mgpuStreamCreate();
  float *x = managedFloats(n, first);
  float *y = managedFloats(n, first);
  fillRandom(x, n);
  fillRandom(y, n);
  std::vector<float> x0(x, x + n), y0(y, y + n);
  const float a = randomNonZero();

  // y = a*x + y on the first stream, then again on the second, which must
  // wait for the first through the event.
  launchSaxpy(k, x, y, a, n, first);
  void *event = mgpuEventCreate();
  mgpuEventRecord(event, first);
  mgpuStreamWaitEvent(second, event);
  launchSaxpy(k, x, y, a, n, second);
  mgpuEventSynchronize(event);
  mgpuStreamSynchronize(second);

  std::vector<float> once(n);
  for (uint32_t i = 0; i < n; ++i)
    once[i] = std::fma(a, x0[i], y0[i]);
  BOOST_TEST(saxpyMismatches(y, x0, once, a) == 0u);
  mgpuEventDestroy(event);
  mgpuMemFree(x, second);
  mgpuMemFree(y, second);
  mgpuStreamDestroy(first);
  mgpuStreamDestroy(second);
}

BOOST_AUTO_TEST_CASE(event_timer_measures_a_positive_time) {
  const uint32_t n = 1u << 24; // 64 MiB per buffer: more than L2
  Kernels k;
  void *stream = mgpuStreamCreate();
  float *x = managedFloats(n, stream);
  float *y = managedFloats(n, stream);
  fillRandom(x, n);
  fillRandom(y, n);
  gpu::prefetchToDevice(x, n * sizeof(float));
  gpu::prefetchToDevice(y, n * sizeof(float));
  gpu::synchronize();

  gpu::EventTimer timer;
  timer.start();
  for (int i = 0; i < 5; ++i)
    launchSaxpy(k, x, y, 0.5f, n, stream);
  timer.stop();
  float ms = timer.milliseconds();
  BOOST_TEST_MESSAGE("5 saxpy launches over 2 x 64 MiB: " << ms << " ms");
  BOOST_TEST(ms > 0.0f);
  BOOST_TEST(ms < 10000.0f);
  gpu::synchronize();
  mgpuMemFree(x, stream);
  mgpuMemFree(y, stream);
  mgpuStreamDestroy(stream);
}

BOOST_AUTO_TEST_CASE(host_memref_registers_and_unregisters) {
  // A 2x3x4 f32 memref in page-aligned host memory, so the registered pages
  // hold nothing else.
  const size_t n = 2 * 3 * 4, bytes = n * sizeof(float);
  auto *host = static_cast<float *>(std::aligned_alloc(4096, 4096));
  BOOST_REQUIRE(host != nullptr);
  fillRandom(host, n);
  struct {
    void *allocated, *aligned;
    int64_t offset, sizes[3], strides[3];
  } descriptor = {host, host, 0, {2, 3, 4}, {12, 4, 1}};
  mgpuMemHostRegisterMemRef(3, &descriptor, sizeof(float));

  void *stream = mgpuStreamCreate();
  auto *device = static_cast<float *>(mgpuMemAlloc(bytes, stream, 0));
  std::vector<float> back(n, std::numeric_limits<float>::quiet_NaN());
  mgpuMemcpy(device, host, bytes, stream);
  mgpuMemcpy(back.data(), device, bytes, stream);
  mgpuStreamSynchronize(stream);
  BOOST_TEST(std::memcmp(back.data(), host, bytes) == 0);

  mgpuMemHostUnregisterMemRef(3, &descriptor, sizeof(float));
  // Registered again and released again: the first release was complete.
  mgpuMemHostRegisterMemRef(3, &descriptor, sizeof(float));
  mgpuMemHostUnregisterMemRef(3, &descriptor, sizeof(float));
  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  std::free(host);
}

BOOST_AUTO_TEST_CASE(host_api_reports_errors_by_throwing) {
  const size_t before = gpu::liveAllocationCount();
  BOOST_TEST(!gpu::deviceName().empty());
  BOOST_TEST_MESSAGE("device: " << gpu::deviceName());
  try {
    gpu::allocateManaged(size_t(1) << 60); // an exbibyte
    BOOST_ERROR("allocating 1 EiB did not fail");
  } catch (const Error &e) {
    BOOST_TEST_MESSAGE(e.what());
    // Out of memory names the bytes asked for and the bytes free.
    BOOST_TEST(std::string(e.what()).starts_with("out of GPU memory: cuMemAllocManaged asked for 1.00 EiB "
                                                 "(1152921504606846976 bytes), but only "));
    BOOST_TEST(std::string(e.what()).find(" are free (CUDA_ERROR_") != std::string::npos);
  }
  float onTheStack = 1.0f;
  BOOST_CHECK_THROW(gpu::freeManaged(&onTheStack), Error);
  BOOST_TEST(gpu::liveAllocationCount() == before);
  // Choosing the device already in use is allowed at any time.
  mgpuSetDefaultDevice(0);
}

// ---- One stream per runner, graphs, device memory -------------------------------

BOOST_AUTO_TEST_CASE(in_a_stream_scope_the_abi_uses_the_runners_stream_and_defers_waits) {
  const uint32_t n = 1u << 20;
  const size_t bytes = n * sizeof(float);
  Kernels k;
  gpu::Stream stream;
  std::vector<float> x0 = randomVector(n), y0 = randomVector(n);
  const float a = randomNonZero();
  std::vector<float> result(n, std::numeric_limits<float>::quiet_NaN());
  {
    gpu::StreamScope scope(stream);
    BOOST_TEST(gpu::currentStream() == stream.handle());
    // What gpu-to-llvm emits for a synchronous launch: create, launch,
    // synchronize, destroy. All of it lands on the runner's stream.
    void *created = mgpuStreamCreate();
    BOOST_TEST(created == stream.handle());
    auto *x = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
    auto *y = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
    gpu::copyToDevice(x, x0.data(), bytes);
    gpu::copyToDevice(y, y0.data(), bytes);
    uint64_t launches = gpu::counters().launches;
    launchSaxpy(k, x, y, a, n, created);
    mgpuStreamSynchronize(created); // deferred
    mgpuStreamDestroy(created);     // the runner's stream lives on
    BOOST_TEST(gpu::counters().launches == launches + 1);
    gpu::copyToHost(result.data(), y, bytes); // waits for the saxpy
    gpu::release(x);
    gpu::release(y);
  }
  BOOST_TEST(gpu::currentStream() == nullptr);
  BOOST_TEST(saxpyMismatches(result.data(), x0, y0, a) == 0u);
  stream.synchronize(); // the stream was not destroyed
}

BOOST_AUTO_TEST_CASE(a_replayed_graph_gives_the_bits_of_direct_launches) {
  const uint32_t n = 300007;
  const size_t bytes = n * sizeof(float);
  Kernels k;
  gpu::Stream stream;
  gpu::StreamScope scope(stream);
  std::vector<float> x0 = randomVector(n), y0 = randomVector(n);
  const float a = randomNonZero(), b = randomNonZero();
  auto *x = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto *y = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto chain = [&] { // three dependent launches
    launchSaxpy(k, x, y, a, n, mgpuStreamCreate());
    launchSaxpy(k, y, x, b, n, mgpuStreamCreate());
    launchSaxpy(k, x, y, a, n, mgpuStreamCreate());
  };
  std::vector<float> direct(n), replayed(n);
  gpu::copyToDevice(x, x0.data(), bytes);
  gpu::copyToDevice(y, y0.data(), bytes);
  chain();
  gpu::copyToHost(direct.data(), y, bytes);

  gpu::Graph graph;
  uint64_t allocations = gpu::counters().allocations;
  graph.capture(stream, chain); // nothing runs
  BOOST_TEST(graph.kernelCount() == 3u);
  gpu::copyToDevice(x, x0.data(), bytes);
  gpu::copyToDevice(y, y0.data(), bytes);
  graph.launch(stream);
  gpu::copyToHost(replayed.data(), y, bytes);
  BOOST_TEST(std::memcmp(direct.data(), replayed.data(), bytes) == 0);
  // Replayed again on the same inputs: the same bits again.
  gpu::copyToDevice(x, x0.data(), bytes);
  gpu::copyToDevice(y, y0.data(), bytes);
  graph.launch(stream);
  gpu::copyToHost(replayed.data(), y, bytes);
  BOOST_TEST(std::memcmp(direct.data(), replayed.data(), bytes) == 0);
  BOOST_TEST(gpu::counters().allocations == allocations);
  gpu::release(x);
  gpu::release(y);
}

// Page-locked host memory as a decode step uses it: a captured graph copies
// its inputs up from it, runs a kernel, and copies the result back down to
// it; replayed after the host wrote new inputs there, it computes with them.
BOOST_AUTO_TEST_CASE(a_graph_copies_through_pinned_host_memory) {
  const uint32_t n = 1000003; // not a multiple of a block or a page
  const size_t bytes = n * sizeof(float);
  Kernels k;
  gpu::Stream stream;
  gpu::StreamScope scope(stream);
  auto *hostX = static_cast<float *>(gpu::allocatePinned(bytes));
  auto *hostY = static_cast<float *>(gpu::allocatePinned(bytes));
  BOOST_TEST(gpu::allocatePinned(0) == nullptr);
  auto *x = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto *y = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  const float a = randomNonZero();
  auto pass = [&] {
    gpu::copyOnDevice(x, hostX, bytes);
    gpu::copyOnDevice(y, hostY, bytes);
    launchSaxpy(k, x, y, a, n, mgpuStreamCreate());
    gpu::copyOnDevice(hostY, y, bytes);
  };
  gpu::Graph graph;
  graph.capture(stream, pass); // nothing runs
  for (int round = 0; round < 2; ++round) {
    std::vector<float> x0 = randomVector(n), y0 = randomVector(n);
    std::memcpy(hostX, x0.data(), bytes);
    std::memcpy(hostY, y0.data(), bytes);
    graph.launch(stream);
    gpu::waitForCurrentStream();
    BOOST_TEST(saxpyMismatches(hostY, x0, y0, a) == 0u);
  }
  gpu::release(x);
  gpu::release(y);
  gpu::releasePinned(hostX);
  gpu::releasePinned(hostY);
  gpu::releasePinned(nullptr);
}

// saxpy again, for sm_90, as mlpipe-programmatic-launch compiles kernels: it
// first waits for the kernel before it, then lets the next launch be
// scheduled, and its module carries the runtime's marker.
std::string programmaticSaxpyPtx() {
  std::string all = kKernelsPtx;
  size_t begin = all.find(".visible .entry saxpy(");
  size_t end = all.find("\n}\n", begin) + 3;
  std::string saxpy = all.substr(begin, end - begin);
  const std::string declarations = ".reg .b64 %rd<8>;\n";
  saxpy.insert(saxpy.find(declarations) + declarations.size(),
               "    griddepcontrol.wait;\n    griddepcontrol.launch_dependents;\n");
  return ".version 7.8\n.target sm_90\n.address_size 64\n"
         ".visible .global .align 1 .u8 mlpipe_programmatic_launch = 1;\n" +
         saxpy;
}

// A chain of dependent launches that each overlap the end of the one before
// (programmatic dependent launch) computes what launching them one after
// another does, directly and replayed in a graph: every kernel waits for
// its predecessor's writes.
BOOST_AUTO_TEST_CASE(programmatic_launches_wait_for_the_kernel_before_them) {
  if (std::string chip = gpu::deviceChip(); std::atoi(chip.c_str() + 3) < 90) {
    BOOST_TEST_MESSAGE("skipped: " << chip << " has no programmatic dependent launch");
    return;
  }
  const uint32_t n = 1000003; // not a multiple of the block
  const size_t bytes = n * sizeof(float);
  const int links = 32;
  std::string ptx = programmaticSaxpyPtx();
  void *module = mgpuModuleLoadJIT(ptx.data(), 2);
  void *saxpy = mgpuModuleGetFunction(module, "saxpy");
  Kernels plain;
  BOOST_TEST(gpu::launchesProgrammatically(saxpy) == (std::getenv("MLPIPE_PROGRAMMATIC_LAUNCH") == nullptr));
  BOOST_TEST(!gpu::launchesProgrammatically(plain.saxpy));
  gpu::Stream stream;
  gpu::StreamScope scope(stream);
  std::vector<float> x0 = randomVector(n), y0 = randomVector(n);
  std::vector<float> coefficients(links);
  for (float &c : coefficients)
    c = randomNonZero() / 2; // |c| < 1: the chain stays finite
  // The host's chain: link i adds c_i times one vector to the other, in turn.
  std::vector<float> x = x0, y = y0;
  for (int i = 0; i < links; ++i)
    for (uint32_t e = 0; e < n; ++e)
      (i % 2 ? x[e] : y[e]) = std::fma(coefficients[i], i % 2 ? y[e] : x[e], i % 2 ? x[e] : y[e]);
  auto *dx = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto *dy = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto chain = [&] {
    for (int i = 0; i < links; ++i) {
      void *from = i % 2 ? dy : dx, *to = i % 2 ? dx : dy;
      float c = coefficients[i];
      uint32_t count = n;
      void *params[] = {&from, &to, &c, &count};
      mgpuLaunchKernel(saxpy, (n + kBlock - 1) / kBlock, 1, 1, kBlock, 1, 1, 0, mgpuStreamCreate(), params, nullptr, 4);
    }
  };
  auto mismatches = [&] {
    std::vector<float> gotX(n), gotY(n);
    gpu::copyToHost(gotX.data(), dx, bytes);
    gpu::copyToHost(gotY.data(), dy, bytes);
    return std::memcmp(gotX.data(), x.data(), bytes) != 0 || std::memcmp(gotY.data(), y.data(), bytes) != 0;
  };
  gpu::copyToDevice(dx, x0.data(), bytes);
  gpu::copyToDevice(dy, y0.data(), bytes);
  chain();
  BOOST_TEST(!mismatches());
  gpu::Graph graph;
  graph.capture(stream, chain);
  BOOST_TEST(graph.kernelCount() == size_t(links));
  for (int replay = 0; replay < 2; ++replay) {
    gpu::copyToDevice(dx, x0.data(), bytes);
    gpu::copyToDevice(dy, y0.data(), bytes);
    graph.launch(stream);
    BOOST_TEST(!mismatches());
  }
  gpu::release(dx);
  gpu::release(dy);
  mgpuModuleUnload(module);
}

BOOST_AUTO_TEST_CASE(a_capture_that_allocates_is_refused_and_the_stream_stays_usable) {
  gpu::Stream stream;
  gpu::Graph graph;
  std::string message =
      testing::messageOf([&] { graph.capture(stream, [] { gpu::allocate(4096, gpu::Memory::Device); }); });
  BOOST_TEST(message == "GPU memory was allocated (4096 bytes) while a CUDA graph was being captured: a captured "
                        "forward must use only memory allocated before it");
  BOOST_TEST(graph.empty());
  gpu::StreamScope scope(stream);
  float value = 3.0f, back = 0;
  void *device = gpu::allocate(sizeof(float), gpu::Memory::Device);
  gpu::copyToDevice(device, &value, sizeof(float));
  gpu::copyToHost(&back, device, sizeof(float));
  BOOST_TEST(back == value);
  gpu::release(device);
}

BOOST_AUTO_TEST_CASE(out_of_device_memory_names_the_bytes_asked_for_and_free) {
  std::string message = testing::messageOf([] { gpu::allocate(size_t(1) << 50, gpu::Memory::Device); });
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(
      message.starts_with("out of GPU memory: cuMemAlloc asked for 1.00 PiB (1125899906842624 bytes), but only "));
  auto [free, total] = gpu::deviceMemoryInfo();
  BOOST_TEST(free > 0u);
  BOOST_TEST(total >= free);
}

BOOST_AUTO_TEST_CASE(the_profiler_times_each_launch_and_counts_its_bytes) {
  const uint32_t n = 1u << 22;
  const size_t bytes = n * sizeof(float);
  Kernels k;
  // saxpy(x, y, a, n) takes raw pointers: the kernel's own count is used.
  gpu::describeKernel("saxpy", {3 * int64_t(bytes), 2 * int64_t(n), {}});
  gpu::Stream stream;
  gpu::StreamScope scope(stream);
  auto *x = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto *y = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  std::vector<gpu::KernelTime> launches;
  {
    gpu::LaunchProfiler profiler;
    launchSaxpy(k, x, y, 2.0f, n, mgpuStreamCreate());
    launchSaxpy(k, x, y, 2.0f, n, mgpuStreamCreate());
    launches = profiler.take();
  }
  BOOST_REQUIRE(launches.size() == 2u);
  for (const gpu::KernelTime &launch : launches) {
    BOOST_TEST(launch.kernel == "saxpy");
    BOOST_TEST(launch.microseconds > 0.0);
    BOOST_TEST(launch.bytes == 3 * int64_t(bytes));
    BOOST_TEST(launch.flops == 2 * int64_t(n));
  }
  gpu::release(x);
  gpu::release(y);
}

BOOST_AUTO_TEST_CASE(a_profiler_with_replays_times_a_graph_of_the_launch) {
  // saxpy updates y in place, so y tells how often it ran: the launch
  // itself, then the graph of 20 launches replayed twice (warm-up, timed).
  const uint32_t n = 1u << 20;
  const size_t bytes = n * sizeof(float);
  const int replays = 20;
  Kernels k;
  gpu::describeKernel("saxpy", {3 * int64_t(bytes), 2 * int64_t(n), {}});
  gpu::Stream stream;
  gpu::StreamScope scope(stream);
  std::mt19937 random(7);
  std::uniform_real_distribution<float> value(0.5f, 1.5f);
  std::vector<float> hostX(n), hostY(n);
  for (uint32_t i = 0; i < n; ++i) {
    hostX[i] = value(random);
    hostY[i] = value(random);
  }
  auto *x = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  auto *y = static_cast<float *>(gpu::allocate(bytes, gpu::Memory::Device));
  gpu::copyToDevice(x, hostX.data(), bytes);
  gpu::copyToDevice(y, hostY.data(), bytes);
  std::vector<gpu::KernelTime> launches;
  {
    gpu::LaunchProfiler profiler(replays);
    launchSaxpy(k, x, y, 0.25f, n, stream.handle());
    launches = profiler.take();
  }
  BOOST_REQUIRE(launches.size() == 1u);
  BOOST_TEST(launches[0].kernel == "saxpy");
  BOOST_TEST(launches[0].microseconds > 0.0);
  BOOST_TEST(launches[0].bytes == 3 * int64_t(bytes));
  std::vector<float> result(n);
  gpu::copyToHost(result.data(), y, bytes);
  for (uint32_t i : {0u, 1u, n / 3, n - 1}) {
    float expected = hostY[i] + float(1 + 2 * replays) * 0.25f * hostX[i];
    BOOST_TEST(std::abs(result[i] - expected) <= 1e-5f * expected);
  }
  BOOST_CHECK_THROW(gpu::LaunchProfiler(-1), mlpipe::Error);
  gpu::release(x);
  gpu::release(y);
}

BOOST_AUTO_TEST_CASE(the_device_is_described) {
  BOOST_TEST(gpu::deviceChip().starts_with("sm_"));
  BOOST_TEST(gpu::deviceL2Bytes() > 0u);
  BOOST_TEST_MESSAGE(gpu::deviceName() << ", " << gpu::deviceChip() << ", L2 " << gpu::deviceL2Bytes());
}

BOOST_AUTO_TEST_CASE(a_cubin_for_another_chip_is_refused_with_a_sentence) {
  test::ChildResult child = test::runScenario("wrong-chip");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(isOneLine(child.stderrText));
  BOOST_TEST(child.stderrText.starts_with("mlpipe: the GPU module is a cubin made for sm_"));
  BOOST_TEST(child.stderrText.find(", which this GPU (" + gpu::deviceName() + ", " + gpu::deviceChip() +
                                   ") cannot run: compile it with --chip " + gpu::deviceChip()) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(an_asynchronous_fault_names_the_kernel_when_the_host_reads) {
  test::ChildResult child = test::runScenario("fault-async");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(isOneLine(child.stderrText));
  BOOST_TEST(child.stderrText.starts_with("CUDA error in cuStreamSynchronize for kernel 'store_to': CUDA_ERROR_"));
  BOOST_TEST(child.stderrText.find("MLPIPE_SYNC_LAUNCHES=1") != std::string::npos);
  // With every launch waited for, the launch itself names the kernel.
  test::ChildResult synced = test::runScenario("fault-async", "MLPIPE_SYNC_LAUNCHES=1");
  BOOST_TEST_MESSAGE(synced.stderrText);
  BOOST_TEST(synced.stderrText.starts_with("mlpipe: CUDA error in cuStreamSynchronize for kernel 'store_to': "));
}

// Each scenario runs in a child process and must end it with status 1 and
// one line on stderr.
BOOST_AUTO_TEST_CASE(broken_ptx_exits_with_the_jit_log) {
  test::ChildResult child = test::runScenario("broken-ptx");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(isOneLine(child.stderrText));
  BOOST_TEST(child.stderrText.starts_with("mlpipe: CUDA error in cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX ("));
  BOOST_TEST(child.stderrText.find("; JIT log: ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_kernel_exits_naming_it) {
  test::ChildResult child = test::runScenario("missing-kernel");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(isOneLine(child.stderrText));
  BOOST_TEST(child.stderrText.starts_with("mlpipe: CUDA error in cuModuleGetFunction for kernel "
                                          "'no_such_kernel': CUDA_ERROR_NOT_FOUND ("));
}

BOOST_AUTO_TEST_CASE(a_faulting_kernel_is_named_at_stream_synchronize) {
  test::ChildResult child = test::runScenario("fault");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(isOneLine(child.stderrText));
  BOOST_TEST(
      child.stderrText.starts_with("mlpipe: CUDA error in cuStreamSynchronize for kernel 'store_to': CUDA_ERROR_"));
}

BOOST_AUTO_TEST_CASE(an_empty_grid_exits_naming_the_kernel) {
  test::ChildResult child = test::runScenario("empty-grid");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(child.stderrText == "mlpipe: invalid launch of kernel 'saxpy': grid 0x1x1, block 256x1x1, 0 bytes of "
                                 "dynamic shared memory (each dimension must be 1 to 4294967295)\n");
}

BOOST_AUTO_TEST_CASE(switching_device_after_gpu_work_exits) {
  test::ChildResult child = test::runScenario("switch-device");
  BOOST_TEST_MESSAGE(child.stderrText);
  BOOST_TEST(child.exitCode == 1);
  BOOST_TEST(isOneLine(child.stderrText));
  BOOST_TEST(
      child.stderrText.starts_with("mlpipe: cannot switch the GPU runtime to device 1: it already runs on device 0"));
}

// The child-process side of the scenarios above. Returning at all is a
// failure: the runtime should have ended the process.
static int runScenario(const std::string &name) {
  if (name == "broken-ptx") {
    mgpuModuleLoadJIT(const_cast<char *>(kBrokenPtx), 2);
  } else if (name == "missing-kernel") {
    void *module = mgpuModuleLoadJIT(const_cast<char *>(kKernelsPtx), 2);
    mgpuModuleGetFunction(module, "no_such_kernel");
  } else if (name == "fault") {
    Kernels k;
    void *stream = mgpuStreamCreate();
    void *address = reinterpret_cast<void *>(uintptr_t(8)); // in the never-mapped first page
    void *params[] = {&address};
    mgpuLaunchKernel(k.storeTo, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr, 1);
    mgpuStreamSynchronize(stream);
  } else if (name == "empty-grid") {
    Kernels k;
    void *x = nullptr, *y = nullptr;
    float a = 1;
    uint32_t n = 0;
    void *params[] = {&x, &y, &a, &n};
    mgpuLaunchKernel(k.saxpy, 0, 1, 1, kBlock, 1, 1, 0, nullptr, params, nullptr, 4);
  } else if (name == "wrong-chip") {
    // A cubin for a chip of another major version than this GPU's.
    std::string chip = gpu::deviceChip() == "sm_75" ? "sm_90" : "sm_75";
    std::string directory = "/tmp/mlpipe-wrong-chip-" + std::to_string(getpid());
    std::string command = "mkdir -p " + directory +
                          " && printf '.version 7.8\\n.target sm_75\\n.address_size "
                          "64\\n.visible .entry k()\\n{\\nret;\\n}\\n' > " +
                          directory + "/k.ptx && " + MLPIPE_CUDA_TOOLKIT + "/bin/ptxas -arch=" + chip + " " +
                          directory + "/k.ptx -o " + directory + "/k.cubin";
    if (std::system(command.c_str()) != 0)
      return 2;
    std::string cubin;
    FILE *in = std::fopen((directory + "/k.cubin").c_str(), "rb");
    for (int c; in && (c = std::fgetc(in)) != EOF;)
      cubin += static_cast<char>(c);
    if (in)
      std::fclose(in);
    std::system(("rm -rf " + directory).c_str());
    mgpuModuleLoad(cubin.data(), cubin.size());
  } else if (name == "fault-async") {
    // The C++ API throws where the host reads, and the error is printed as
    // the tools print it. Unwinding unloads the module and destroys the
    // stream on the faulted context: that must stay quiet, so the one line
    // on stderr is the fault's.
    try {
      Kernels kernels;
      Kernels *k = &kernels;
      gpu::Stream stream;
      gpu::StreamScope scope(stream);
      void *address = reinterpret_cast<void *>(uintptr_t(8));
      void *params[] = {&address};
      mgpuLaunchKernel(k->storeTo, 1, 1, 1, 1, 1, 1, 0, mgpuStreamCreate(), params, nullptr, 1);
      float back = 0;
      gpu::copyToHost(&back, &back, 0);
    } catch (const Error &e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::fflush(stderr);
      std::_Exit(1);
    }
  } else if (name == "switch-device") {
    mgpuMemFree(mgpuMemAlloc(64, nullptr, 1), nullptr); // starts the runtime on device 0
    mgpuSetDefaultDevice(1);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (std::string scenario = test::scenarioFrom(argc, argv); !scenario.empty())
    return runScenario(scenario);
  if (!gpu::available()) {
    std::printf("SKIPPED: no GPU (%s)\n", gpu::unavailableReason().c_str());
    return 77;
  }
  return boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
}
