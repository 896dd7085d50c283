// verify's two forms.
//
//   verify A.npy B.npy [--rtol R --atol A]
//     compares two arrays elementwise (numpy allclose); exit 1 on FAIL.
//   verify KERNEL... [--shape ...] --target gpu|cpu
//     traces each kernel (or reads each FILE.hlo), compiles it, runs it on
//     fresh random inputs and compares with the float64 reference (the same
//     graph evaluated eagerly); prints a table; exit 1 if any kernel fails.
#pragma once

#include "models/unit_kernels.h"
#include "runtime/executable.h"
#include "support/host_tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlpipe {

// Returns true on PASS; the report goes to stdout.
bool verifyFiles(const std::string &actual, const std::string &expected, double rtol, double atol);

struct KernelVerifyRequest {
  std::vector<std::string> kernels; // "all" expands to the six unit kernels; FILE.hlo is an HLO module
  KernelOptions options;
  Target target = Target::Gpu;
  std::string chip = "sm_90";
  std::optional<uint64_t> seed;    // fresh when unset; printed so a failure can be replayed
  std::optional<double> tolerance; // on ||out - ref|| / ||ref||; default by the narrowest float stored:
                                   // 1e-2 (bf16), 2e-3 (f16), 1e-5 (f32), 1e-12 (f64)
  std::string saveDirectory;       // when set: DIR/KERNEL/{input}.npy, {output}.npy, {output}.reference.npy
};

// Returns true when every kernel passes; the table goes to stdout.
bool verifyKernels(const KernelVerifyRequest &request);

// Random inputs for a graph: floats uniform in [-1, 1), ids uniform over
// their table's rows, other integers in [-16, 16), i1 true or false.
std::vector<std::pair<std::string, HostTensor>> randomInputs(const fe::Graph &graph, uint64_t seed);

} // namespace mlpipe
