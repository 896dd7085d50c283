// In-process compilation, for drivers that trace and run in one process
// (verify, generate): the same stages the tools run, one after another.
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
};

// trace's text (linalg on tensors) -> lowered module for the target:
// fuse, bufferize, then outline + lower-nvvm or lower-cpu.
MlirModule compileProgram(const fe::Program &program, const std::string &name, const CompileOptions &options);

} // namespace mlpipe
