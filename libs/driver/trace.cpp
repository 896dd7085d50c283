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

namespace mlpipe {

bool isHloFile(const std::string &program) { return program.size() > 4 && program.ends_with(".hlo"); }

fe::Program readHloFile(const std::string &path) { return fe::readHlo(readInput(path), path); }

std::string trace(const TraceRequest &request) {
  fe::Program program;
  if (isHloFile(request.program)) {
    if (!request.kernel.shapes.empty() || request.kernel.batch != 0)
      fail("an HLO module's shapes come from the file: --shape and --batch do not apply");
    program = readHloFile(request.program);
  } else if (request.program == "gpt2") {
    if (!request.kernel.shapes.empty())
      fail("gpt2 takes --seq and --config, not --shape");
    // --mode decode (or prefill) is the fused program in that phase.
    std::string mode = request.mode, phase = request.phase;
    if (mode == "decode" || mode == "prefill") {
      phase = mode;
      mode = "fused";
    }
    Gpt2Phase gpt2Phase = parseGpt2Phase(phase);
    int64_t seq = gpt2Phase == Gpt2Phase::Decode ? 1 : request.seq;
    program = traceGpt2(resolveGpt2Config(request.config), parseGpt2Mode(mode), seq, request.kernel.dtype, gpt2Phase);
  } else if (isUnitKernel(request.program)) {
    program = traceUnitKernel(request.program, request.kernel);
  } else {
    std::vector<std::string> names;
    for (auto &kernel : unitKernels())
      names.push_back(kernel.name);
    fail("unknown program '{}': expected one of {}, gpt2, or an HLO module FILE.hlo", request.program,
         fmt::join(names, ", "));
  }
  MlirModule module = MlirModule::parse(fe::emitMlir(program), request.program + ".traced.mlir");
  return module.print(/*locations=*/true);
}

} // namespace mlpipe
