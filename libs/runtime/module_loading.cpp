// GPU modules: loading a cubin, fatbin or PTX image (a cubin made for
// another chip is refused in one sentence, the driver JIT's log is kept in
// one line), and the kernels found in a module, each remembered with its
// name and what its launches need.
#include "runtime/runtime_internal.h"

#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

namespace mlpipe::gpu {
namespace {

struct KernelInfo {
  std::string name;
  int32_t dynamicSharedAllowed = 0; // the largest dynamic shared size opted into
  // Compiled to wait in griddepcontrol for the kernel before it (its module
  // holds kProgrammaticLaunchMarker), so it may be launched while that one
  // finishes.
  bool programmaticLaunch = false;
};

// The global mlpipe-programmatic-launch puts in every module whose kernels
// wait for their predecessors before touching memory.
constexpr const char *kProgrammaticLaunchMarker = "mlpipe_programmatic_launch";

// MLPIPE_PROGRAMMATIC_LAUNCH=0 launches every kernel after the one before it
// has finished, as on chips before sm_90 (to measure what overlapping gains).
bool programmaticLaunchAllowed() {
  static const bool allowed = [] {
    const char *value = std::getenv("MLPIPE_PROGRAMMATIC_LAUNCH");
    return !value || std::string_view(value) != "0";
  }();
  return allowed;
}

// Finds functions by name without building a std::string per lookup.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return std::hash<std::string_view>()(name); }
};
using FunctionsByName = std::unordered_map<std::string, CUfunction, NameHash, std::equal_to<>>;

// The kernels the runtime handed out, by function and by module. One mutex:
// JIT code may call in from several threads, and none of this is on a hot
// path heavier than a kernel launch.
struct Kernels {
  std::mutex mutex;
  std::unordered_map<CUfunction, KernelInfo> byFunction;
  std::unordered_map<CUmodule, FunctionsByName> byModule;
};

Kernels &kernels() {
  // Never destroyed, like the driver: JIT global destructors may unload
  // after this library's static destructors have run.
  static Kernels *all = new Kernels();
  return *all;
}

// The JIT log is a multi-line buffer; errors are one line.
std::string oneLine(const char *log) {
  std::string text(log);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r'))
    text.pop_back();
  std::string line;
  for (char c : text) {
    if (c == '\n')
      line += "; ";
    else if (c != '\r')
      line += c;
  }
  return line;
}

int chipNumber(const std::string &chip) { return std::atoi(chip.c_str() + 3); }

// A cubin runs on its own compute capability and on later minor versions of
// the same major one (sm_80 code on an sm_86 GPU), never across majors.
bool cubinRunsOn(const std::string &cubin, const std::string &device) {
  int made = chipNumber(cubin), have = chipNumber(device);
  return made / 10 == have / 10 && made % 10 <= have % 10;
}

std::string wrongChipMessage(const std::string &cubin, CudaDriver &d, const std::string &device) {
  char name[256] = {};
  d.cuDeviceGetName(name, sizeof(name) - 1, d.device());
  return fmt::format("the GPU module is a cubin made for {}, which this GPU ({}, {}) cannot run: compile it with "
                     "--chip {}",
                     cubin, name, device, device);
}

} // namespace

CUmodule loadModule(const void *image, size_t bytes, const int *optLevel) {
  CudaDriver &d = driver();
  if (!image)
    fail("cannot load a GPU module from a null image");
  // A cubin for another chip is refused before the driver sees it, in words.
  std::string cubin = optLevel ? std::string() : cubinChip(image, bytes);
  std::string device = cubin.empty() ? std::string() : chipOfDevice(d);
  if (!cubin.empty() && !cubinRunsOn(cubin, device))
    throw Error(wrongChipMessage(cubin, d, device));
  char errorLog[8192] = {};
  CUjit_option options[3] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL};
  // Option values are passed in pointer-sized slots, integers by value. The
  // last byte of the log is kept for the terminating NUL.
  void *values[3] = {errorLog, reinterpret_cast<void *>(uintptr_t(sizeof(errorLog) - 1)), nullptr};
  unsigned count = 2;
  if (optLevel) {
    // The driver accepts levels 0-4 only; MLIR passes the pipeline's -O.
    values[2] = reinterpret_cast<void *>(uintptr_t(std::clamp(*optLevel, 0, 4)));
    count = 3;
  }
  CUmodule module = nullptr;
  CUresult r = d.cuModuleLoadDataEx(&module, image, count, options, values);
  if (r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU && !cubin.empty())
      throw Error(wrongChipMessage(cubin, d, device));
    std::string message = d.errorMessage(r, "cuModuleLoadDataEx");
    if (std::string log = oneLine(errorLog); !log.empty())
      message += "; JIT log: " + log;
    throw Error(message);
  }
  return module;
}

void unloadModule(CUmodule module) {
  {
    Kernels &all = kernels();
    std::lock_guard lock(all.mutex);
    if (auto it = all.byModule.find(module); it != all.byModule.end()) {
      for (auto &[name, f] : it->second)
        all.byFunction.erase(f);
      all.byModule.erase(it);
    }
  }
  checkRelease(driver().cuModuleUnload(module), "cuModuleUnload");
}

CUfunction moduleFunction(CUmodule module, const char *name) {
  std::string_view kernel = name ? name : "";
  // Generated code asks again before every launch: the answer is kept.
  Kernels &all = kernels();
  {
    std::lock_guard lock(all.mutex);
    auto functions = all.byModule.find(module);
    if (functions != all.byModule.end())
      if (auto found = functions->second.find(kernel); found != functions->second.end())
        return found->second;
  }
  std::string owned(kernel);
  CudaDriver &d = driver();
  CUfunction f = nullptr;
  check(d.cuModuleGetFunction(&f, module, owned.c_str()), "cuModuleGetFunction", owned);
  KernelInfo info{owned};
  CUdeviceptr marker = 0;
  size_t markerBytes = 0;
  info.programmaticLaunch =
      programmaticLaunchAllowed() && d.cuLaunchKernelEx && d.cuModuleGetGlobal &&
      d.cuModuleGetGlobal(&marker, &markerBytes, module, kProgrammaticLaunchMarker) == CUDA_SUCCESS;
  std::lock_guard lock(all.mutex);
  all.byModule[module].emplace(owned, f);
  all.byFunction.try_emplace(f, std::move(info));
  return f;
}

// Dynamic shared memory beyond the default limit must be opted into per
// function. The default (48 KiB) counts static shared memory too, so the
// limit is raised for any dynamic size not yet allowed, and remembered so
// repeated launches skip the call. The kernel's name and whether the limit
// must be raised come from one look-up.
LaunchableKernel prepareKernelLaunch(CudaDriver &d, CUfunction f, int32_t sharedBytes) {
  Kernels &all = kernels();
  LaunchableKernel kernel;
  bool raise = false;
  {
    std::lock_guard lock(all.mutex);
    auto it = all.byFunction.find(f);
    if (it != all.byFunction.end()) {
      kernel.name = it->second.name;
      kernel.programmatic = it->second.programmaticLaunch;
      raise = sharedBytes > it->second.dynamicSharedAllowed;
    } else {
      raise = sharedBytes > 0;
    }
  }
  if (raise) {
    check(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, sharedBytes), "cuFuncSetAttribute",
          kernel.name);
    std::lock_guard lock(all.mutex);
    if (auto it = all.byFunction.find(f); it != all.byFunction.end())
      it->second.dynamicSharedAllowed = sharedBytes;
  }
  return kernel;
}

bool launchesProgrammatically(void *function) {
  Kernels &all = kernels();
  std::lock_guard lock(all.mutex);
  auto it = all.byFunction.find(static_cast<CUfunction>(function));
  return it != all.byFunction.end() && it->second.programmaticLaunch;
}

// ---- Cubin images -----------------------------------------------------------

void checkCubinRunsHere(const void *image, size_t bytes) {
  std::string cubin = cubinChip(image, bytes);
  if (cubin.empty())
    return;
  CudaDriver &d = driver();
  std::string device = chipOfDevice(d);
  if (!cubinRunsOn(cubin, device))
    throw Error(wrongChipMessage(cubin, d, device));
}

std::string cubinChip(const void *image, size_t bytes) {
  // ELF64: e_ident[EI_ABIVERSION] at 8, e_machine at 18, e_flags at 48.
  constexpr size_t kHeaderBytes = 64;
  constexpr uint16_t kMachineCuda = 190;
  constexpr uint8_t kAbiVersionSmInSecondByte = 8;
  if (!image || bytes < kHeaderBytes)
    return "";
  const auto *header = static_cast<const unsigned char *>(image);
  if (std::memcmp(header,
                  "\x7f"
                  "ELF",
                  4) != 0 ||
      header[4] != 2 /* 64-bit */)
    return "";
  uint16_t machine = 0;
  uint32_t flags = 0;
  std::memcpy(&machine, header + 18, sizeof(machine));
  std::memcpy(&flags, header + 48, sizeof(flags));
  if (machine != kMachineCuda)
    return "";
  // Before Blackwell's toolkits the SM number sat in the low byte of
  // e_flags; from ELF ABI version 8 on it sits in the second byte.
  unsigned sm = header[8] >= kAbiVersionSmInSecondByte ? (flags >> 8) & 0xff : flags & 0xff;
  return sm ? fmt::format("sm_{}", sm) : "";
}

} // namespace mlpipe::gpu
