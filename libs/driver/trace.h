// trace: a program name and options in, verified linalg-on-tensors MLIR out.
#pragma once

#include "models/unit_kernels.h"

#include <string>

namespace mlpipe {

struct TraceRequest {
  std::string program;  // a unit kernel name, gpt2, or an HLO module's path (FILE.hlo)
  KernelOptions kernel; // shapes, dtype, batch, heads
  // gpt2 only:
  std::string mode = "fused";    // fused or sublayer (or decode / prefill: fused, in that phase)
  std::string phase = "forward"; // forward, prefill (fills the KV cache) or decode (one token with it)
  std::string config = "124M";   // tiny, 124M or a config.json
  int64_t seq = 16;              // token positions
};

// Records the program, emits MLIR and parses it back (so a bug in the
// emitter shows as an error here, not three stages later). Returns the text
// as MLIR prints it.
std::string trace(const TraceRequest &request);

// Whether `program` names an HLO text file (it ends in .hlo).
bool isHloFile(const std::string &program);
// Reads an HLO module (fe::readHlo) from `path`.
fe::Program readHloFile(const std::string &path);

} // namespace mlpipe
