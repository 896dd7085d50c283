// The mgpu* C ABI that MLIR 22's gpu-to-llvm lowering and gpu.binary
// translation emit calls to, and the table of their addresses for the JIT.
// Each entry point only converts its handles and calls the runtime, ending
// the process in one line on any error (fatal_error.h says why).
#include "runtime/mgpu_runtime.h"

#include "runtime/fatal_error.h"
#include "runtime/runtime_internal.h"

using namespace mlpipe::gpu;

extern "C" {

void *mgpuModuleLoad(void *data, uint64_t sizeBytes) {
  // cubin and fatbin images describe their own length; the size is used only
  // to read the chip a cubin was made for.
  return orDie([&] { return static_cast<void *>(loadModule(data, sizeBytes, nullptr)); });
}

void *mgpuModuleLoadJIT(void *ptx, int optLevel) {
  return orDie([&] { return static_cast<void *>(loadModule(ptx, 0, &optLevel)); });
}

void mgpuModuleUnload(void *module) {
  orDie([&] { unloadModule(static_cast<CUmodule>(module)); });
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  return orDie([&] { return static_cast<void *>(moduleFunction(static_cast<CUmodule>(module), name)); });
}

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY, intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream, void **params, void **extra, size_t paramsCount) {
  // The driver does not take paramsCount (the kernel's signature implies
  // it); the profiler uses it to find memref descriptors.
  orDie([&] {
    const intptr_t dims[6] = {gridX, gridY, gridZ, blockX, blockY, blockZ};
    launchKernel(static_cast<CUfunction>(function), dims, smem, static_cast<CUstream>(stream), params, extra,
                 paramsCount);
  });
}

void *mgpuStreamCreate() {
  return orDie([&] { return static_cast<void *>(createStream()); });
}

void mgpuStreamDestroy(void *stream) {
  orDie([&] { destroyStream(static_cast<CUstream>(stream)); });
}

void mgpuStreamSynchronize(void *stream) {
  orDie([&] { synchronizeStream(static_cast<CUstream>(stream)); });
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  orDie([&] { waitForEvent(static_cast<CUstream>(stream), static_cast<CUevent>(event)); });
}

void *mgpuEventCreate() {
  return orDie([&] { return static_cast<void *>(createEvent()); });
}

void mgpuEventDestroy(void *event) {
  orDie([&] { destroyEvent(static_cast<CUevent>(event)); });
}

void mgpuEventSynchronize(void *event) {
  orDie([&] { synchronizeEvent(static_cast<CUevent>(event)); });
}

void mgpuEventRecord(void *event, void *stream) {
  orDie([&] { recordEvent(static_cast<CUevent>(event), static_cast<CUstream>(stream)); });
}

void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, uint8_t isHostShared) {
  // cuMemAlloc is not stream-ordered, so the memory is ready before any work
  // on `stream` that could use it.
  return orDie([&] { return allocateOn(sizeBytes, isHostShared != 0); });
}

void mgpuMemFree(void *ptr, void *stream) {
  orDie([&] { freeAfterStream(ptr, static_cast<CUstream>(stream)); });
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream) {
  orDie([&] { copyOnStream(dst, src, sizeBytes, static_cast<CUstream>(stream)); });
}

void mgpuMemset32(void *dst, unsigned int value, size_t count, void *stream) {
  orDie([&] { setWords32(dst, value, count, static_cast<CUstream>(stream)); });
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream) {
  orDie([&] { setWords16(dst, value, count, static_cast<CUstream>(stream)); });
}

void mgpuMemHostRegisterMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes) {
  orDie([&] { registerHostMemRef(rank, memrefDescriptor, elementSizeBytes); });
}

void mgpuMemHostUnregisterMemRef(int64_t rank, void *memrefDescriptor, int64_t elementSizeBytes) {
  orDie([&] { unregisterHostMemRef(rank, memrefDescriptor, elementSizeBytes); });
}

void mgpuSetDefaultDevice(int32_t device) {
  // Only records the choice: the context is made on first GPU work.
  orDie([&] { CudaDriver::get().setDevice(device); });
}

} // extern "C"

namespace mlpipe::gpu {

std::vector<std::pair<std::string, void *>> runtimeSymbols() {
  return {
#define MLPIPE_SYMBOL(name) {#name, reinterpret_cast<void *>(&::name)}
      MLPIPE_SYMBOL(mgpuModuleLoad),
      MLPIPE_SYMBOL(mgpuModuleLoadJIT),
      MLPIPE_SYMBOL(mgpuModuleUnload),
      MLPIPE_SYMBOL(mgpuModuleGetFunction),
      MLPIPE_SYMBOL(mgpuLaunchKernel),
      MLPIPE_SYMBOL(mgpuStreamCreate),
      MLPIPE_SYMBOL(mgpuStreamDestroy),
      MLPIPE_SYMBOL(mgpuStreamSynchronize),
      MLPIPE_SYMBOL(mgpuStreamWaitEvent),
      MLPIPE_SYMBOL(mgpuEventCreate),
      MLPIPE_SYMBOL(mgpuEventDestroy),
      MLPIPE_SYMBOL(mgpuEventSynchronize),
      MLPIPE_SYMBOL(mgpuEventRecord),
      MLPIPE_SYMBOL(mgpuMemAlloc),
      MLPIPE_SYMBOL(mgpuMemFree),
      MLPIPE_SYMBOL(mgpuMemcpy),
      MLPIPE_SYMBOL(mgpuMemset32),
      MLPIPE_SYMBOL(mgpuMemset16),
      MLPIPE_SYMBOL(mgpuMemHostRegisterMemRef),
      MLPIPE_SYMBOL(mgpuMemHostUnregisterMemRef),
      MLPIPE_SYMBOL(mgpuSetDefaultDevice),
#undef MLPIPE_SYMBOL
  };
}

} // namespace mlpipe::gpu
