// trace: a program name and options in, verified linalg-on-tensors MLIR out.
#pragma once

#include "models/unit_kernels.h"

#include <optional>
#include <string>

namespace mlpipe {

struct TraceRequest {
  std::string program;  // a unit kernel name, gpt2, or an HLO module's path (FILE.hlo)
  KernelOptions kernel; // shapes, dtype, batch, heads
  // gpt2 only (refused for other programs); unset means the default shown:
  std::optional<std::string> mode;   // fused or sublayer (or decode / prefill: fused, in that phase)
  std::optional<std::string> phase;  // forward, prefill (fills the KV cache) or decode (one token with it)
  std::optional<std::string> config; // tiny, 124M (the default) or a config.json
  std::optional<int64_t> seq;        // token positions (16)
};

// Records the program, emits MLIR and parses it back (so a bug in the
// emitter shows as an error here, not three stages later). Returns the text
// as MLIR prints it.
std::string trace(const TraceRequest &request);

// Records the program `request` names (a unit kernel, gpt2 or an HLO module),
// refusing flags that do not apply to it.
fe::Program traceProgram(const TraceRequest &request);

// Whether `program` names an HLO text module: not a unit kernel or gpt2, and
// "-" (stdin), a name ending in .hlo (any case), or any file that exists
// (XLA's dump flags write *.txt).
bool isHloFile(const std::string &program);
// Reads an HLO module (fe::readHlo) from `path` ("-" = stdin).
fe::Program readHloFile(const std::string &path);

} // namespace mlpipe
