// Kernel launches: the launch shape checked in words, programmatic
// dependent launch for kernels compiled for it, the profiler's events
// around each launch, and the count of launches.
#include "runtime/runtime_internal.h"

#include "support/error.h"

#include <climits>

namespace mlpipe::gpu {
namespace {

std::atomic<uint64_t> launchCount{0};

// Every dimension must fit the driver's unsigned int and be at least 1; the
// driver's own message for a zero or huge dimension names no dimension.
void checkLaunchShape(std::string_view name, const intptr_t (&dims)[6], int32_t smem) {
  bool ok = smem >= 0;
  for (intptr_t v : dims)
    ok = ok && v >= 1 && static_cast<uintmax_t>(v) <= UINT_MAX;
  if (!ok)
    fail("invalid launch of {}: grid {}x{}x{}, block {}x{}x{}, {} bytes of dynamic shared "
         "memory (each dimension must be 1 to {})",
         name.empty() ? std::string("a kernel") : "kernel '" + std::string(name) + "'", dims[0], dims[1], dims[2],
         dims[3], dims[4], dims[5], smem, UINT_MAX);
}

} // namespace

CUresult KernelLaunch::enqueue(CudaDriver &d) const {
  if (!programmatic)
    return d.cuLaunchKernel(function, unsigned(dims[0]), unsigned(dims[1]), unsigned(dims[2]), unsigned(dims[3]),
                            unsigned(dims[4]), unsigned(dims[5]), unsigned(sharedBytes), stream, params, extra);
  // A kernel compiled to wait for its predecessor in griddepcontrol is
  // launched with programmatic stream serialisation: it may be scheduled
  // while the kernel before it on the stream (or in the graph) finishes.
  CUlaunchAttribute overlap{};
  overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = unsigned(dims[0]), config.gridDimY = unsigned(dims[1]), config.gridDimZ = unsigned(dims[2]);
  config.blockDimX = unsigned(dims[3]), config.blockDimY = unsigned(dims[4]), config.blockDimZ = unsigned(dims[5]);
  config.sharedMemBytes = unsigned(sharedBytes);
  config.hStream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  return d.cuLaunchKernelEx(&config, function, params, extra);
}

void launchKernel(CUfunction f, const intptr_t (&dims)[6], int32_t sharedBytes, CUstream stream, void **params,
                  void **extra, size_t paramsCount) {
  CudaDriver &d = driver();
  LaunchableKernel kernel = prepareKernelLaunch(d, f, sharedBytes);
  checkLaunchShape(kernel.name, dims, sharedBytes);
  KernelLaunch launch{f,
                      {dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]},
                      sharedBytes,
                      stream,
                      params,
                      extra,
                      kernel.programmatic};
  LaunchTiming timing(d, kernel.name, params, paramsCount, stream);
  if (CUresult r = launch.enqueue(d); r != CUDA_SUCCESS) {
    // A fault reported at launch was left by a kernel that ran before.
    std::string message = d.errorMessage(r, "cuLaunchKernel", kernel.name);
    std::string last = lastKernelAnywhere();
    if (isKernelFault(r) && !last.empty())
      message += ", left by an earlier kernel, most likely '" + last + "'";
    throw Error(message);
  }
  countLaunch(stream, kernel.name);
  timing.finish(launch);
  if (syncEveryLaunch() && !capturingOnThread)
    check(d.cuStreamSynchronize(stream), "cuStreamSynchronize", kernel.name);
}

void countLaunch(CUstream stream, const std::string &name) {
  ++launchCount;
  noteLaunch(stream, name);
}

Counters counters() { return {launchCount.load(), allocationsMade()}; }

} // namespace mlpipe::gpu
