// bufferize: Bufferize a linalg-on-tensors module into destination-passing memrefs.
#include "driver/stage_tool.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Bufferize a linalg-on-tensors module into destination-passing memrefs."};
  app.footer("Example:\n  trace softmax | fuse | bufferize | outline > softmax.gpu.mlir\n\nThe pass pipeline is pipelines/bufferize.pipeline; --pipeline FILE runs another.");
  std::string input = "-", output = "-";
  mlpipe::StageOptions options;
  app.add_option("input", input, "MLIR file, or - for stdin")->capture_default_str();
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  app.add_option("--pipeline", options.pipelineFile, "Run this pipeline file instead of the built-in one");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("bufferize", [&] { mlpipe::runStageTool(mlpipe::StageTool::Bufferize, input, output, options); });
}
