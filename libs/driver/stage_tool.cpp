#include "driver/stage_tool.h"

#include "driver/matmul_choice.h"

#include "support/output_file.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace mlpipe {

std::string bufferName(const std::string &input) { return input == "-" ? "<stdin>" : input; }

void runStageTool(StageTool tool, const std::string &input, const std::string &output, const StageOptions &options,
                  const std::string &matmul) {
  MlirModule module = MlirModule::parse(readInput(input), bufferName(input));
  StageOptions resolved = options;
  // Loading cuBLAS to see whether it is there takes a moment: only for
  // modules with matmuls.
  if (tool == StageTool::Outline && !matmul.empty())
    resolved.matmul = resolveMatmulChoice(matmul);
  else if (tool == StageTool::Outline &&
           countOps(module, "linalg.matmul") + countOps(module, "linalg.batch_matmul") > 0)
    resolved.matmul = resolveMatmulChoice("");
  runStage(tool, module, resolved);
  writeOutput(output, module.print());
}

int stageToolMain(int argc, char **argv, StageTool tool, const char *summary, const char *example) {
  const char *name = stageToolName(tool);
  CLI::App app{summary};
  std::string footer = fmt::format(
      "Example:\n  {}\n\nThe pass pipeline is pipelines/{}.pipeline; --pipeline FILE runs another.", example, name);
  app.footer(footer);
  std::string input = "-", output = "-", matmul;
  StageOptions options;
  app.add_option("input", input, "MLIR file, or - for stdin")->capture_default_str();
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  app.add_option("--pipeline", options.pipelineFile, "Run this pipeline file instead of the built-in one");
  app.add_option("--dump-dir", options.dumpDirectory,
                 "Write the IR after each pass, one numbered .mlir file each, under DIR (for a bug report)");
  app.add_option("--pass-option", options.passOptions,
                 "PASS:OPTIONS added to the pass's options where this stage's pipeline runs it (repeatable; "
                 "entries for passes of other stages are left to them)")
      ->allow_extra_args(false);
  app.add_option("--debug-only", options.debugOnly,
                 "Print the choices of these debug types (mlpipe-partitioner, mlpipe-emitters, all)");
  if (tool == StageTool::Outline)
    app.add_option("--chip", options.chip, "The GPU whose description the emitters' heuristics read, e.g. sm_90")
        ->capture_default_str();
  if (tool == StageTool::LowerNvvm) {
    app.add_option("--chip", options.chip, "Target GPU, e.g. sm_75, sm_90")->capture_default_str();
    app.add_option("--opt", options.optLevel, "Optimisation level 0-3")->capture_default_str();
    app.add_option("--format", options.format, "bin (cubin, assembled by ptxas now), fatbin, or isa (PTX text)")
        ->capture_default_str();
    app.add_option("--toolkit", options.toolkit, "CUDA toolkit root (default: $CUDA_HOME, else the build's)");
  }
  if (tool == StageTool::Outline) {
    app.add_option("--matmul", matmul, kMatmulFlagHelp)->check(CLI::IsMember({"cublas", "generated"}));
    app.add_option("--precision", options.precision, kPrecisionFlagHelp)
        ->check(CLI::IsMember({"f32", "tf32"}))
        ->capture_default_str();
  }
  CLI11_PARSE(app, argc, argv);
  return runTool(name, [&] {
    checkPassOptions(options.passOptions);
    runStageTool(tool, input, output, options, matmul);
  });
}

} // namespace mlpipe
