// fuse: Fuse elementwise linalg ops of a linalg-on-tensors module.
#include "driver/stage_tool.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Fuse elementwise linalg ops of a linalg-on-tensors module."};
  app.footer("Example:\n  trace gelu | fuse | bufferize > gelu.buffers.mlir\n\nThe pass pipeline is pipelines/fuse.pipeline; --pipeline FILE runs another.");
  std::string input = "-", output = "-";
  mlpipe::StageOptions options;
  app.add_option("input", input, "MLIR file, or - for stdin")->capture_default_str();
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  app.add_option("--pipeline", options.pipelineFile, "Run this pipeline file instead of the built-in one");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("fuse", [&] { mlpipe::runStageTool(mlpipe::StageTool::Fuse, input, output, options); });
}
