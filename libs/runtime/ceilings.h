// The GPU's ceilings, measured in the run that reports against them (bench,
// bench kernels, the roofline): what a device-to-device copy moves per
// second, and what cuBLAS's f32 matmul computes per second.
#pragma once

#include <cstddef>
#include <string>

namespace mlpipe::gpu {

// Milliseconds of one device-to-device copy of `bytes` (reading and writing
// that many each), on the current stream: the median of `repeat` copies,
// rotating over enough buffer pairs that each copy starts cold in L2.
double copyMilliseconds(size_t bytes, int repeat = 20);

// Microseconds of one device-to-device copy of `bytes` (read and written
// each) between the same two buffers, timed as LaunchProfiler(replays)
// times a kernel: `replays` copies captured in a graph, replayed once to
// warm up, then timed. The floor for a kernel profiled so: a copy whose
// data is as warm in L2 as the kernel's.
double replayedCopyMicroseconds(size_t bytes, int replays);

// Copy bandwidth, bytes read plus written per second, over 256 MiB copies.
double copyBytesPerSecond();

struct MatmulCeiling {
  double flopsPerSecond = 0; // 0 when it could not be measured
  std::string source;        // "cuBLAS sgemm 4096x4096x4096", or why there is no figure
};
// cuBLAS's f32 sgemm (default math: no TF32) on 4096-cubed, loaded with
// dlopen like the driver; the median of a few runs after a warm-up.
MatmulCeiling measureMatmulCeiling();

} // namespace mlpipe::gpu
