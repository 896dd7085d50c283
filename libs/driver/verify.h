// verify's two forms.
//
//   verify A.npy B.npy [--rtol R --atol A]
//     compares two arrays elementwise (numpy allclose); exit 1 on FAIL.
//   verify KERNEL... [--shape ...] --target gpu|cpu
//     traces each kernel (or reads each FILE.hlo), compiles it, runs it on
//     fresh random inputs and compares with the float64 reference (the same
//     graph evaluated eagerly); prints a table; exit 1 if any kernel fails.
#pragma once

#include "jit/executable.h"
#include "models/unit_kernels.h"
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
  std::string format = "bin";           // GPU kernels as cubin, fatbin, or PTX (isa) the driver assembles
  std::string matmul;                   // GPU: cublas, generated, "" = cublas where it loads
  std::string precision = "f32";        // GPU: tf32 lets cuBLAS round f32 matmul inputs to TF32
  std::vector<std::string> passOptions; // --pass-option PASS:OPTIONS (StageOptions::passOptions)
  std::optional<uint64_t> seed;         // fresh when unset; printed so a failure can be replayed
  // On ||out - ref|| / ||ref||; default by the narrowest float stored
  // (verificationBound): for bf16 and f16 from the unit roundoff and the
  // longest reduction, 1e-5 (f32), 1e-12 (f64), and with --precision tf32
  // kTf32Tolerance.
  std::optional<double> tolerance;
  std::string saveDirectory; // when set: DIR/KERNEL/{input}.npy, {output}.npy, {output}.reference.npy
  // When set, a kernel or module that fails leaves DIR/KERNEL/ to replay it:
  // traced.mlir (the front end's module), its inputs as .npy, each output's
  // {output}.actual.npy and {output}.expected.npy, and replay.sh (the exact
  // verify command, then the stage tools, run and a comparison by hand).
  std::string reproDirectory;
  // When set (one program only): the inputs are DIR/in<i>.npy, in parameter
  // order, instead of random ones, and each output i is also compared with
  // DIR/out<i>.npy where that file exists (another framework's results on
  // the same inputs), within the same bound.
  std::string inputsDirectory;
  bool managed = false; // GPU buffers in managed memory (the tutorial's path)
  // The first input is offset + scale * uniform[-1, 1) (the others stay in
  // [-1, 1)): large values test what a naive softmax (overflow) or a naive
  // variance (cancellation) gets wrong.
  double inputOffset = 0;
  double inputScale = 1;
};

// The default bound with --precision tf32: TF32 keeps 10 of f32's 23
// mantissa bits, so each product is off by up to about 2^-10 relative;
// random-sign sums keep the relative error near 1e-3.
inline constexpr double kTf32Tolerance = 5e-3;

// The bound a program's outputs are checked against, and how it was
// reached ("bf16: 4 x 2^-8 + 768 x 2^-24"; empty for a fixed one).
//
// The policy for 16-bit storage: the float64 reference runs on the same
// 16-bit inputs and rounds only where the program converts; the compiled
// program computes in f32 and rounds each stored result once. Each rounding
// is off by at most the unit roundoff u (2^-8 bf16, 2^-11 f16), relative;
// the bound allows kStoredRoundings of them on the way to an output (the
// output's own and those of results kept in 16 bits between kernels), plus
// the f32 accumulation of the longest reduction or matmul, K terms at 2^-24
// each.
struct VerificationBound {
  double tolerance;
  std::string derivation;
};
inline constexpr int kStoredRoundings = 4;
VerificationBound verificationBound(const fe::Graph &graph, const KernelVerifyRequest &request);

// Returns true when every kernel passes; the table goes to stdout.
bool verifyKernels(const KernelVerifyRequest &request);

// Random inputs for a graph: floats uniform in [-1, 1) (the first input
// offset + scale * that), ids uniform over their table's rows, other
// integers in [-16, 16), i1 true or false.
std::vector<std::pair<std::string, HostTensor>> randomInputs(const fe::Graph &graph, uint64_t seed, double offset = 0,
                                                             double scale = 1);

} // namespace mlpipe
