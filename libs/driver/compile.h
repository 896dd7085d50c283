// In-process compilation, for drivers that trace and run in one process
// (verify, generate, bench): the same stages the tools run, one after
// another, with an optional on-disk cache of the lowered module.
#pragma once

#include "compiler/compiler.h"
#include "frontend/graph.h"
#include "runtime/executable.h"

#include <string>

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
};

// trace's text (linalg on tensors) -> lowered module for the target:
// fuse, bufferize, then outline + lower-nvvm or lower-cpu.
MlirModule compileProgram(const fe::Program &program, const std::string &name, const CompileOptions &options);

// Where the disk cache lives; empty when it cannot be used.
std::string compileCacheDirectory();

} // namespace mlpipe
