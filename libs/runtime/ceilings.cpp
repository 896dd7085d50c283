// Ceilings measured on the GPU in the same run as what is compared to them.
#include "runtime/ceilings.h"

#include "runtime/mgpu_runtime.h"
#include "support/error.h"
#include "support/statistics.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace mlpipe::gpu {

namespace {

// Enough buffer pairs that their bytes exceed twice the L2 cache, so a copy
// (or kernel) never finds its input left in L2 by the one before.
size_t coldCopies(size_t bytesPerSet) {
  size_t l2 = deviceL2Bytes();
  return std::max<size_t>(1, (2 * l2 + bytesPerSet - 1) / std::max<size_t>(bytesPerSet, 1));
}

// cuBLAS's C API, declared here by hand: only what the ceiling needs, and
// no header from the toolkit.
using CublasHandle = void *;
using CublasCreate = int (*)(CublasHandle *);
using CublasDestroy = int (*)(CublasHandle);
using CublasSetStream = int (*)(CublasHandle, void *);
using CublasSgemm = int (*)(CublasHandle, int, int, int, int, int, const float *, const float *, int, const float *,
                            int, const float *, float *, int);
constexpr int kCublasOpN = 0;

void *openCublas(std::string &why) {
  std::vector<std::string> names = {"libcublas.so", "libcublas.so.13", "libcublas.so.12"};
  if (const char *cuda = std::getenv("CUDA_HOME"); cuda && *cuda)
    names.push_back(std::string(cuda) + "/lib64/libcublas.so");
  names.push_back("/usr/local/cuda/lib64/libcublas.so");
  for (const std::string &name : names)
    if (void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))
      return library;
  const char *error = dlerror();
  why = std::string("no cuBLAS: libcublas.so could not be loaded (") + (error ? error : "unknown reason") + ")";
  return nullptr;
}

} // namespace

double copyMilliseconds(size_t bytes, int repeat) {
  if (bytes == 0)
    return 0;
  size_t sets = coldCopies(2 * bytes);
  std::vector<void *> sources, targets;
  for (size_t i = 0; i < sets; ++i) {
    sources.push_back(allocate(bytes, Memory::Device));
    targets.push_back(allocate(bytes, Memory::Device));
  }
  std::vector<double> times;
  try {
    for (size_t i = 0; i < sets; ++i) // warm-up: first touch of every page
      copyOnDevice(targets[i], sources[i], bytes);
    for (int r = 0; r < repeat; ++r) {
      EventTimer timer;
      timer.start();
      copyOnDevice(targets[r % sets], sources[r % sets], bytes);
      timer.stop();
      times.push_back(timer.milliseconds());
    }
  } catch (...) {
    for (size_t i = 0; i < sets; ++i) {
      release(sources[i]);
      release(targets[i]);
    }
    throw;
  }
  waitForCurrentStream();
  for (size_t i = 0; i < sets; ++i) {
    release(sources[i]);
    release(targets[i]);
  }
  return median(times);
}

double replayedCopyMicroseconds(size_t bytes, int replays) {
  if (bytes == 0 || replays <= 0)
    return 0;
  Stream stream;
  StreamScope scope(stream);
  void *source = allocate(bytes, Memory::Device);
  void *target = nullptr;
  double microseconds = 0;
  try {
    target = allocate(bytes, Memory::Device);
    copyOnDevice(target, source, bytes); // first touch of every page
    Graph graph;
    graph.capture(stream, [&] {
      for (int i = 0; i < replays; ++i)
        copyOnDevice(target, source, bytes);
    });
    graph.launch(stream);
    EventTimer timer;
    timer.start();
    graph.launch(stream);
    timer.stop();
    microseconds = timer.milliseconds() * 1000.0 / replays;
  } catch (...) {
    waitForCurrentStream();
    release(source);
    if (target)
      release(target);
    throw;
  }
  waitForCurrentStream();
  release(source);
  release(target);
  return microseconds;
}

double copyBytesPerSecond() {
  constexpr size_t kBytes = size_t(256) << 20;
  return 2.0 * double(kBytes) / (copyMilliseconds(kBytes) * 1e-3);
}

MatmulCeiling measureMatmulCeiling() {
  constexpr int kSize = 4096;
  constexpr int kRuns = 5;
  MatmulCeiling ceiling;
  void *library = openCublas(ceiling.source);
  if (!library)
    return ceiling;
  auto create = reinterpret_cast<CublasCreate>(dlsym(library, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<CublasDestroy>(dlsym(library, "cublasDestroy_v2"));
  auto setStream = reinterpret_cast<CublasSetStream>(dlsym(library, "cublasSetStream_v2"));
  auto sgemm = reinterpret_cast<CublasSgemm>(dlsym(library, "cublasSgemm_v2"));
  if (!create || !destroy || !setStream || !sgemm) {
    ceiling.source = "no cuBLAS: libcublas has no cublasSgemm_v2";
    return ceiling;
  }
  CublasHandle handle = nullptr;
  if (create(&handle) != 0) {
    ceiling.source = "no cuBLAS: cublasCreate failed";
    return ceiling;
  }
  size_t bytes = size_t(kSize) * kSize * sizeof(float);
  void *a = allocate(bytes, Memory::Device), *b = allocate(bytes, Memory::Device), *c = allocate(bytes, Memory::Device);
  std::vector<double> times;
  const float one = 1.0f, zero = 0.0f;
  setStream(handle, currentStream());
  bool ok = true;
  for (int run = 0; run <= kRuns && ok; ++run) {
    EventTimer timer;
    timer.start();
    ok = sgemm(handle, kCublasOpN, kCublasOpN, kSize, kSize, kSize, &one, static_cast<float *>(a), kSize,
               static_cast<float *>(b), kSize, &zero, static_cast<float *>(c), kSize) == 0;
    timer.stop();
    double ms = timer.milliseconds();
    if (run > 0) // the first is the warm-up
      times.push_back(ms);
  }
  waitForCurrentStream();
  destroy(handle);
  release(a);
  release(b);
  release(c);
  if (!ok) {
    ceiling.source = "no cuBLAS figure: cublasSgemm failed";
    return ceiling;
  }
  ceiling.flopsPerSecond = 2.0 * kSize * double(kSize) * kSize / (median(times) * 1e-3);
  ceiling.source = "cuBLAS sgemm 4096x4096x4096";
  return ceiling;
}

} // namespace mlpipe::gpu
