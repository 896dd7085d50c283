// The runtime's way to the CUDA driver: the context made current on the
// calling thread, what the device is, and how a failed call is reported,
// naming the kernel most likely at fault (which is why the last kernel
// launched on each stream is kept here).
#include "runtime/runtime_internal.h"

#include "support/error.h"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace mlpipe::gpu {
namespace {

// The kernels launched last, by stream and anywhere. One mutex: JIT code
// may call in from several threads.
struct LastKernels {
  std::mutex mutex;
  std::unordered_map<CUstream, std::string> onStream;
  std::string anywhere;
};

LastKernels &lastKernels() {
  // Never destroyed, like the driver: JIT global destructors may destroy
  // streams after this library's static destructors have run.
  static LastKernels *kernels = new LastKernels();
  return *kernels;
}

// Set once a kernel fault is seen: the context is unusable from then on, so
// releasing memory, modules or streams fails too, and is skipped quietly
// (the fault itself has been reported).
std::atomic<bool> contextLost{false};

} // namespace

CudaDriver &driver() {
  CudaDriver &d = CudaDriver::get();
  d.makeCurrent();
  return d;
}

bool isKernelFault(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ASSERT:
    return true;
  default:
    return false;
  }
}

void check(CUresult r, const char *call, std::string_view kernel) {
  if (r == CUDA_SUCCESS)
    return;
  if (isKernelFault(r))
    contextLost = true;
  std::string message = CudaDriver::get().errorMessage(r, call, kernel);
  if (kernel.empty() && isKernelFault(r)) {
    std::string last = lastKernelAnywhere();
    if (!last.empty())
      message += ", most likely from kernel '" + last + "', launched earlier";
  }
  throw Error(message);
}

void checkRelease(CUresult r, const char *call, std::string_view kernel) {
  if (r == CUDA_ERROR_DEINITIALIZED || (r != CUDA_SUCCESS && contextLost))
    return;
  check(r, call, kernel);
}

void checkWait(CUresult r, const char *call, CUstream stream) {
  if (r == CUDA_SUCCESS)
    return;
  if (isKernelFault(r))
    contextLost = true;
  std::string kernel = lastKernelOn(stream);
  std::string message = CudaDriver::get().errorMessage(r, call, kernel);
  if (isKernelFault(r) && !kernel.empty() && !syncEveryLaunch())
    message += " (the last kernel launched before the wait; MLPIPE_SYNC_LAUNCHES=1 stops at the faulting launch)";
  else if (isKernelFault(r) && kernel.empty())
    if (std::string last = lastKernelAnywhere(); !last.empty())
      message += ", most likely from kernel '" + last + "', launched earlier";
  throw Error(message);
}

bool syncEveryLaunch() {
  static const bool enabled = [] {
    const char *value = std::getenv("MLPIPE_SYNC_LAUNCHES");
    return value && *value && std::string_view(value) != "0";
  }();
  return enabled;
}

// ---- Which kernel ran last --------------------------------------------------

void noteLaunch(CUstream stream, const std::string &name) {
  LastKernels &last = lastKernels();
  std::lock_guard lock(last.mutex);
  last.onStream[stream] = name;
  last.anywhere = name;
}

std::string lastKernelOn(CUstream stream) {
  LastKernels &last = lastKernels();
  std::lock_guard lock(last.mutex);
  auto it = last.onStream.find(stream);
  return it == last.onStream.end() ? std::string() : it->second;
}

std::string lastKernelAnywhere() {
  LastKernels &last = lastKernels();
  std::lock_guard lock(last.mutex);
  return last.anywhere;
}

void forgetStream(CUstream stream) {
  LastKernels &last = lastKernels();
  std::lock_guard lock(last.mutex);
  last.onStream.erase(stream);
}

// ---- The device -------------------------------------------------------------

std::string chipOfDevice(CudaDriver &d) {
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d.device()),
        "cuDeviceGetAttribute");
  check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d.device()),
        "cuDeviceGetAttribute");
  return fmt::format("sm_{}{}", major, minor);
}

bool available() { return CudaDriver::get().available(); }

std::string unavailableReason() { return CudaDriver::get().unavailableReason(); }

std::string deviceName() {
  CudaDriver &d = driver();
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, d.device()), "cuDeviceGetName");
  return name;
}

std::string deviceChip() { return chipOfDevice(driver()); }

size_t deviceL2Bytes() {
  CudaDriver &d = driver();
  int bytes = 0;
  check(d.cuDeviceGetAttribute(&bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, d.device()), "cuDeviceGetAttribute");
  return static_cast<size_t>(bytes);
}

} // namespace mlpipe::gpu
