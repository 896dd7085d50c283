// Records when every kernel and memory copy of a process starts and ends on
// the GPU, from the GPU's own timestamps, and writes them as CSV at exit
// (a copy's name says its direction and bytes): loaded into an
// unchanged program through CUDA_INJECTION64_PATH (CUPTI's activity API;
// kernels in CUDA graphs too). bench/scripts/step-timeline.sh builds and
// uses it on the GPU host:
//   g++ -shared -fPIC -O2 bench/scripts/kernel-timeline.cpp -I$CUDA_HOME/include \
//     -I$CUDA_HOME/extras/CUPTI/include -L$CUDA_HOME/extras/CUPTI/lib64 -lcupti -o libkernel-timeline.so
//   MLPIPE_TIMELINE_CSV=out.csv CUDA_INJECTION64_PATH=$PWD/libkernel-timeline.so generate ...
// Columns: start_ns, end_ns, grid, block, name (the name last, quoted).
#include <cupti.h>

// The kernel record of this CUPTI (bench/scripts/step-timeline.sh picks the
// newest the headers have).
#ifndef KERNEL_RECORD
#define KERNEL_RECORD CUpti_ActivityKernel9
#endif
#ifndef MEMCPY_RECORD
#define MEMCPY_RECORD CUpti_ActivityMemcpy5
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8 << 20;

struct KernelRecord {
  uint64_t start, end;
  uint32_t grid, block;
  std::string name;
};

std::mutex &recordsMutex() {
  static std::mutex m;
  return m;
}
std::vector<KernelRecord> &records() {
  static std::vector<KernelRecord> r;
  return r;
}

void CUPTIAPI bufferRequested(uint8_t **buffer, size_t *size, size_t *maxRecords) {
  *buffer = static_cast<uint8_t *>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t validSize) {
  CUpti_Activity *record = nullptr;
  std::lock_guard<std::mutex> lock(recordsMutex());
  while (cuptiActivityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto *copy = reinterpret_cast<MEMCPY_RECORD *>(record);
      const char *kind = copy->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "copy host to device"
                         : copy->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "copy device to host"
                                                                             : "copy";
      records().push_back({copy->start, copy->end, 0, 0,
                           std::string(kind) + " " + std::to_string(copy->bytes) + " bytes" +
                               ((copy->srcKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
                                 copy->dstKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE)
                                    ? " (pageable)"
                                    : "")});
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    auto *kernel = reinterpret_cast<KERNEL_RECORD *>(record);
    records().push_back(
        {kernel->start, kernel->end, static_cast<uint32_t>(kernel->gridX * kernel->gridY * kernel->gridZ),
         static_cast<uint32_t>(kernel->blockX * kernel->blockY * kernel->blockZ), kernel->name ? kernel->name : "?"});
  }
  free(buffer);
}

void writeRecords() {
  cuptiActivityFlushAll(1);
  const char *path = std::getenv("MLPIPE_TIMELINE_CSV");
  FILE *out = path ? std::fopen(path, "w") : stderr;
  if (!out)
    return;
  std::fprintf(out, "start_ns,end_ns,grid,block,name\n");
  std::lock_guard<std::mutex> lock(recordsMutex());
  for (const KernelRecord &r : records())
    std::fprintf(out, "%llu,%llu,%u,%u,\"%s\"\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.grid, r.block, r.name.c_str());
  if (out != stderr)
    std::fclose(out);
}

} // namespace

extern "C" int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel-timeline: CUPTI would not trace kernels\n");
    return 0;
  }
  std::atexit(writeRecords);
  return 1;
}
