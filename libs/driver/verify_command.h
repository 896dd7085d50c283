// verify's command line once parsed: which use of verify it asks for (two
// .npy files, gpt2, or kernels and HLO modules), the refusal of flags that
// belong to another use, and the exit status. tools/verify declares the
// flags into a VerifyFlags and calls runVerify.
#pragma once

#include "driver/verify.h"
#include "driver/verify_gpt2.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mlpipe {

// Every flag of verify, each where its use reads it.
struct VerifyFlags {
  std::vector<std::string> what; // two .npy files, kernel names or FILE.hlo modules, or gpt2

  // Two .npy files.
  double rtol = 1e-5;
  double atol = 1e-8;

  // Kernels and HLO modules. The flags that fill a request's fields directly
  // (--batch, --heads, --chip, --format, --precision, --transpose-a|b,
  // --epilogue, --save, --input-offset, --input-scale) are bound to it;
  // --chip and --precision serve gpt2 too.
  KernelVerifyRequest kernels;
  std::vector<std::string> shapes;
  double tolerance = 0; // read only when --tolerance was given

  // Kernels and gpt2.
  std::string dtype = "f32"; // float storage type
  std::string target;        // gpu or cpu; empty: gpu when there is one
  std::string matmul;        // cublas or generated; empty: cublas where it loads
  uint64_t seed = 0;         // read only when --seed was given
  bool managed = false;

  // gpt2. --steps, --weights, --config, --prompt and --save-weights are
  // bound to the request.
  Gpt2VerifyRequest gpt2;
  std::string gpt2Mode = "sublayer";
  std::string gpt2Cache = "on";
  bool noGraphs = false;
};

// Runs the use of verify that `flags.what` names, after refusing, in one
// line, any flag of another use; `app` is the parsed command line, which
// tells which flags were given. Returns the exit status: 0 PASS, 1 FAIL,
// 2 unusable input (the error printed as "verify: error: ...").
int runVerify(const CLI::App &app, VerifyFlags flags);

} // namespace mlpipe
