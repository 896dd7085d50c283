// lower-nvvm: outlined GPU kernels down to gpu.binary (PTX by default) and
// LLVM host code.
#include "driver/stage_tool.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Lower outlined GPU kernels to NVVM and PTX (or cubin), and the host code to LLVM."};
  app.footer("Example:\n  trace gelu | fuse | bufferize | outline | lower-nvvm --chip sm_90 > gelu.mlir\n"
             "  ptx-check --chip sm_90 gelu.mlir\n\n"
             "libdevice is linked from the CUDA toolkit (--toolkit, else $CUDA_HOME, else the one found at\n"
             "build time). The pass pipeline is pipelines/lower-nvvm.pipeline; --pipeline FILE runs another.");
  std::string input = "-", output = "-";
  mlpipe::StageOptions options;
  app.add_option("input", input, "MLIR file, or - for stdin")->capture_default_str();
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  app.add_option("--chip", options.chip, "Target GPU, e.g. sm_75, sm_90")->capture_default_str();
  app.add_option("--opt", options.optLevel, "Optimisation level 0-3")->capture_default_str();
  app.add_option("--format", options.format, "isa (PTX text), bin (cubin) or fatbin")->capture_default_str();
  app.add_option("--toolkit", options.toolkit, "CUDA toolkit root");
  app.add_option("--pipeline", options.pipelineFile, "Run this pipeline file instead of the built-in one");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("lower-nvvm",
                         [&] { mlpipe::runStageTool(mlpipe::StageTool::LowerNvvm, input, output, options); });
}
