#include "driver/trace.h"

#include "compiler/compiler.h"
#include "frontend/hlo_reader.h"
#include "frontend/mlir_emitter.h"
#include "models/gpt2.h"
#include "models/gpt2_weights.h"
#include "support/error.h"
#include "support/output_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <sys/stat.h>

namespace mlpipe {

bool isHloFile(const std::string &program) {
  if (program == "gpt2" || isUnitKernel(program))
    return false;
  if (program == "-")
    return true;
  std::string lower = program;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.size() > 4 && lower.ends_with(".hlo"))
    return true;
  // XLA's dump flags write modules as *.txt: any other file that exists is
  // read as HLO (the reader says so if it is not).
  struct stat status;
  return ::stat(program.c_str(), &status) == 0;
}

fe::Program readHloFile(const std::string &path) {
  return fe::readHlo(readInput(path), path == "-" ? "<stdin>" : path);
}

namespace {

// Refuses the gpt2 flags for other programs, and the kernel flags for gpt2.
void checkFlagsApply(const TraceRequest &request, bool gpt2) {
  if (gpt2) {
    const KernelOptions &kernel = request.kernel;
    if (!kernel.shapes.empty())
      fail("gpt2 takes --seq and --config, not --shape");
    if (kernel.transposeA || kernel.transposeB || kernel.epilogue != "none")
      fail("--transpose-a, --transpose-b and --epilogue apply to matmul, not gpt2");
    return;
  }
  std::vector<std::string> given;
  if (request.mode)
    given.push_back("--mode");
  if (request.phase)
    given.push_back("--phase");
  if (request.config)
    given.push_back("--config");
  if (request.seq)
    given.push_back("--seq");
  if (!given.empty())
    fail("{} appl{} to gpt2 only, not to {}", fmt::join(given, ", "), given.size() == 1 ? "ies" : "y", request.program);
}

// The gpt2 program's form and phase: --mode decode (or prefill) is the fused
// program in that phase, and may not contradict --phase.
std::pair<Gpt2Mode, Gpt2Phase> gpt2FormOf(const TraceRequest &request) {
  std::string mode = request.mode.value_or("fused"), phase = request.phase.value_or("forward");
  if (mode == "decode" || mode == "prefill") {
    if (request.phase && *request.phase != mode)
      fail("--mode {} is the fused program in phase {}, but --phase says {}", mode, mode, *request.phase);
    phase = mode;
    mode = "fused";
  }
  return {parseGpt2Mode(mode), parseGpt2Phase(phase)};
}

} // namespace

fe::Program traceProgram(const TraceRequest &request) {
  if (isHloFile(request.program)) {
    checkFlagsApply(request, false);
    if (!request.kernel.shapes.empty() || request.kernel.batch != 0)
      fail("an HLO module's shapes come from the file: --shape and --batch do not apply");
    return readHloFile(request.program);
  }
  if (request.program == "gpt2") {
    checkFlagsApply(request, true);
    auto [mode, phase] = gpt2FormOf(request);
    int64_t seq = request.seq.value_or(16);
    if (seq < 1)
      fail("--seq must be at least 1, not {}", seq);
    if (phase == Gpt2Phase::Decode)
      seq = 1;
    int64_t batch = request.kernel.batch;
    if (batch != 0) {
      if (phase != Gpt2Phase::Decode)
        fail("gpt2 takes --batch in the decode phase only (a batched decode step), not in {}",
             phase == Gpt2Phase::Forward ? "forward" : "prefill");
      if (request.seq)
        fail("a batched decode step takes one token per sequence: give --batch, not --seq");
      return traceGpt2BatchedDecode(resolveGpt2Config(request.config.value_or("124M")), mode, batch,
                                    request.kernel.dtype);
    }
    return traceGpt2(resolveGpt2Config(request.config.value_or("124M")), mode, seq, request.kernel.dtype, phase);
  }
  if (isUnitKernel(request.program)) {
    checkFlagsApply(request, false);
    return traceUnitKernel(request.program, request.kernel);
  }
  std::vector<std::string> names;
  for (auto &kernel : unitKernels())
    names.push_back(kernel.name);
  fail("unknown program '{}': expected one of {}, gpt2, or an HLO module FILE.hlo", request.program,
       fmt::join(names, ", "));
}

std::string trace(const TraceRequest &request) {
  fe::Program program = traceProgram(request);
  MlirModule module = MlirModule::parse(fe::emitMlir(program), request.program + ".traced.mlir");
  return module.print(/*locations=*/true);
}

} // namespace mlpipe
