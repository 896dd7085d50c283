// run's body: bind .npy inputs to a lowered module's entry by name, run it
// on the GPU (a module with gpu.binary) or the CPU (lower-cpu's output), and
// write the named outputs as .npy.
#pragma once

#include <string>
#include <vector>

namespace mlpipe {

struct RunRequest {
  std::string module = "-";         // MLIR file or - for stdin
  std::vector<std::string> inputs;  // NAME=@FILE
  std::vector<std::string> outputs; // NAME=@FILE
  std::string entry;                // "" = the only entry
  int repeat = 0;                   // > 0: time this many more runs and print the median
  bool managed = false;             // GPU buffers in managed memory (the tutorial's path), not device memory
  bool graphs = true;               // --repeat replays the call as a CUDA graph
};

void runModule(const RunRequest &request);

// For `run --gpu-info`: the GPU's name; throws mlpipe::Error saying why
// there is none.
std::string gpuInfo();

} // namespace mlpipe
