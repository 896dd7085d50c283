// In-process compilation, for drivers that trace and run in one process
// (verify, generate, bench): the same stages the tools run, one after
// another, with an optional on-disk cache of the lowered module.
#pragma once

#include "compiler/compiler.h"
#include "frontend/graph.h"
#include "jit/executable.h"

#include <string>
#include <vector>

namespace mlpipe {

struct CompileOptions {
  Target target = Target::Gpu;
  std::string chip = "sm_90";
  std::string toolkit; // empty: the default toolkit
  // GPU matmuls: cublas, generated, or "" for cuBLAS where it loads
  // (driver/matmul_choice.h); and f32 or tf32 for cuBLAS's f32 GEMMs.
  std::string matmul;
  std::string precision = "f32";
  // Keep lowered modules on disk, keyed by a hash of the traced IR, the
  // pipelines and these options ($MLPIPE_CACHE_DIR, else ~/.cache/mlpipe).
  bool diskCache = false;
  std::string format = "bin"; // GPU kernels as cubin (bin), fatbin, or PTX for the driver to assemble (isa)
  // --pass-option entries, "PASS:OPTIONS" (StageOptions::passOptions).
  std::vector<std::string> passOptions;
};

// Milliseconds by stage, for bench: what a first call (empty cache) costs.
struct CompileTimings {
  double traceMs = 0; // the front end's program to MLIR text (the caller traces)
  double fuseMs = 0;
  double bufferizeMs = 0;
  double outlineMs = 0;
  double lowerMs = 0; // lower-nvvm (or lower-cpu) without ptxas
  double ptxasMs = 0; // assembling the kernels to cubin (wall time, in parallel)
  double loadMs = 0;  // the JIT and loading the kernels on the GPU (the caller loads)
  int cacheHits = 0;  // modules read from the disk cache instead
  void add(const CompileTimings &other);
  double totalMs() const;
};

// trace's text (linalg on tensors) -> lowered module for the target:
// fuse, bufferize, then outline + lower-nvvm or lower-cpu. `timings`, when
// given, receives the time of each stage.
MlirModule compileProgram(const fe::Program &program, const std::string &name, const CompileOptions &options,
                          CompileTimings *timings = nullptr);

// Where the disk cache lives; empty when it cannot be used.
std::string compileCacheDirectory();

// The build of mlpipe that compiles: the path, size and modification time
// of each mlpipe library loaded (of the executable where none is: a static
// build), one a line, sorted. Part of the disk cache's key, so that a
// rebuilt or upgraded mlpipe never takes a module an older build lowered;
// the tools (thin mains over the same libraries) still share entries.
std::string compilerBuildIdentity();

} // namespace mlpipe
