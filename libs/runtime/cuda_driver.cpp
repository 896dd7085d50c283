// CudaDriver: dlopen("libcuda.so.1"), dlsym of each entry point, cuInit, and
// the primary context of the chosen device, all on first use.
#include "runtime/cuda_driver.h"

#include "support/error.h"

#include <cstdlib>
#include <dlfcn.h>

namespace mlpipe::gpu {

namespace {

// Expands a macro argument before turning it into a string, so that
// MLPIPE_CUDA_SYMBOL(cuMemAlloc) is "cuMemAlloc_v2", as cuda.h #defines it.
#define MLPIPE_CUDA_STRINGIFY(x) #x
#define MLPIPE_CUDA_SYMBOL(x) MLPIPE_CUDA_STRINGIFY(x)

// The context current on this thread as far as the runtime knows: set once
// per thread, so each entry costs one comparison after the first.
thread_local CUcontext currentOnThisThread = nullptr;

// Names for the codes cuInit gives when the driver cannot describe them
// itself: the toolkit's stub libcuda answers every call with STUB_LIBRARY.
const char *fallbackDescription(CUresult r) {
  switch (r) {
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA_ERROR_STUB_LIBRARY (libcuda.so.1 is the CUDA toolkit's stub, not a driver)";
  case CUDA_ERROR_NO_DEVICE:
    return "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)";
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (libcuda and the kernel driver differ in version)";
  default:
    return nullptr;
  }
}

std::string driverVersionText(CudaDriver &driver) {
  int version = 0;
  if (!driver.cuDriverGetVersion || driver.cuDriverGetVersion(&version) != CUDA_SUCCESS)
    return "unknown CUDA version";
  return "CUDA " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

} // namespace

CudaDriver &CudaDriver::get() {
  // Never destroyed: JIT-compiled code unloads its modules from global
  // destructors, which may run after this library's static destructors.
  static CudaDriver *driver = new CudaDriver();
  return *driver;
}

bool CudaDriver::resolve(void *&slot, const char *symbol, bool required) {
  slot = dlsym(library_, symbol);
  if (slot || !required)
    return true;
  reason_ = missingEntryPoint(symbol);
  return false;
}

std::string CudaDriver::missingEntryPoint(const char *symbol) {
  return "the NVIDIA GPU driver is too old for mlpipe: its libcuda.so.1 (" + driverVersionText(*this) + ") has no " +
         symbol + "; install a newer driver";
}

void CudaDriver::load() {
  // MLPIPE_CUDA_DRIVER names another driver library: tests use it to see
  // what a machine without a driver does, on a machine with one.
  const char *name = std::getenv("MLPIPE_CUDA_DRIVER");
  if (!name || !*name)
    name = "libcuda.so.1";
  library_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    const char *why = dlerror();
    reason_ =
        std::string("no NVIDIA GPU driver: ") + name + " could not be loaded (" + (why ? why : "unknown reason") + ")";
    return;
  }
  // cuDriverGetVersion first, so that a missing symbol can be reported with
  // the version of the driver that lacks it.
  cuDriverGetVersion =
      reinterpret_cast<decltype(cuDriverGetVersion)>(dlsym(library_, MLPIPE_CUDA_SYMBOL(cuDriverGetVersion)));

  void *slot = nullptr;
#define MLPIPE_CUDA_RESOLVE(name, required)                                                                            \
  if (!resolve(slot, MLPIPE_CUDA_SYMBOL(name), required))                                                              \
    return;                                                                                                            \
  name = reinterpret_cast<decltype(name)>(slot);
#define MLPIPE_CUDA_RESOLVE_REQUIRED(name) MLPIPE_CUDA_RESOLVE(name, true)
#define MLPIPE_CUDA_RESOLVE_OPTIONAL(name) MLPIPE_CUDA_RESOLVE(name, false)
  MLPIPE_CUDA_REQUIRED_ENTRY_POINTS(MLPIPE_CUDA_RESOLVE_REQUIRED)
  MLPIPE_CUDA_OPTIONAL_ENTRY_POINTS(MLPIPE_CUDA_RESOLVE_OPTIONAL)
#undef MLPIPE_CUDA_RESOLVE_OPTIONAL
#undef MLPIPE_CUDA_RESOLVE_REQUIRED
#undef MLPIPE_CUDA_RESOLVE

  // cuda.h 13 maps cuEventElapsedTime to the _v2 added in CUDA 12.8; older
  // drivers have only the original, whose signature is the same.
  slot = dlsym(library_, MLPIPE_CUDA_SYMBOL(cuEventElapsedTime));
  if (!slot)
    slot = dlsym(library_, "cuEventElapsedTime");
  if (!slot) {
    reason_ = missingEntryPoint("cuEventElapsedTime");
    return;
  }
  cuEventElapsedTime = reinterpret_cast<decltype(cuEventElapsedTime)>(slot);

  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) {
    reason_ = "no usable NVIDIA GPU: cuInit failed with " + describe(r);
    return;
  }
  int count = 0;
  if (CUresult r = cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    reason_ = "no usable NVIDIA GPU: cuDeviceGetCount failed with " + describe(r);
    return;
  }
  if (count == 0) {
    reason_ = "no usable NVIDIA GPU: the NVIDIA driver (" + driverVersionText(*this) + ") reports no CUDA device";
    return;
  }
  available_ = true;
}

bool CudaDriver::available() {
  std::call_once(loadOnce_, [this] { load(); });
  return available_;
}

std::string CudaDriver::unavailableReason() { return available() ? std::string() : reason_; }

void CudaDriver::requireAvailable() {
  if (!available())
    throw Error(reason_);
}

void CudaDriver::setDevice(int ordinal) {
  std::lock_guard lock(contextMutex_);
  if (contextReady_ && ordinal != ordinal_)
    fail("cannot switch the GPU runtime to device {}: it already runs on device {}, and the "
         "modules and memory made there cannot move; choose the device before any GPU work",
         ordinal, ordinal_);
  ordinal_ = ordinal;
}

int CudaDriver::deviceOrdinal() {
  std::lock_guard lock(contextMutex_);
  return ordinal_;
}

void CudaDriver::createContext() {
  requireAvailable();
  int count = 0;
  check(cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal_ < 0 || ordinal_ >= count)
    fail("CUDA device {} was asked for, but the driver reports {} device{} (0 to {})", ordinal_, count,
         count == 1 ? "" : "s", count - 1);
  check(cuDeviceGet(&device_, ordinal_), "cuDeviceGet");
  // The primary context is the one the CUDA runtime and every library in the
  // process share, so mlpipe's memory and modules interoperate with theirs.
  check(cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  contextReady_.store(true, std::memory_order_release);
}

void CudaDriver::makeCurrent() {
  // Double-checked: after the first call, no lock on the launch path.
  if (!contextReady_.load(std::memory_order_acquire)) {
    std::lock_guard lock(contextMutex_);
    if (!contextReady_.load(std::memory_order_relaxed))
      createContext();
  }
  if (currentOnThisThread == context_)
    return;
  check(cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  currentOnThisThread = context_;
}

CUdevice CudaDriver::device() {
  makeCurrent();
  return device_;
}

std::string CudaDriver::describe(CUresult r) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (!cuGetErrorName || cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) {
    const char *fallback = fallbackDescription(r);
    return fallback ? fallback : "CUresult " + std::to_string(static_cast<int>(r));
  }
  if (!cuGetErrorString || cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
    return name;
  return std::string(name) + " (" + text + ")";
}

std::string CudaDriver::errorMessage(CUresult r, const char *call, std::string_view kernel) {
  std::string message = std::string("CUDA error in ") + call;
  if (!kernel.empty())
    message += " for kernel '" + std::string(kernel) + "'";
  return message + ": " + describe(r);
}

void CudaDriver::check(CUresult r, const char *call, std::string_view kernel) {
  if (r != CUDA_SUCCESS)
    throw Error(errorMessage(r, call, kernel));
}

} // namespace mlpipe::gpu
