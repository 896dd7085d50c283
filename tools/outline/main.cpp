// outline: Turn bufferized linalg into GPU kernels launched from host code, with managed allocations.
#include "driver/stage_tool.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Turn bufferized linalg into GPU kernels launched from host code, with managed allocations."};
  app.footer("Example:\n  trace matmul | fuse | bufferize | outline | lower-nvvm > matmul.mlir\n\nThe pass pipeline is pipelines/outline.pipeline; --pipeline FILE runs another.");
  std::string input = "-", output = "-";
  mlpipe::StageOptions options;
  app.add_option("input", input, "MLIR file, or - for stdin")->capture_default_str();
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  app.add_option("--pipeline", options.pipelineFile, "Run this pipeline file instead of the built-in one");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("outline", [&] { mlpipe::runStageTool(mlpipe::StageTool::Outline, input, output, options); });
}
