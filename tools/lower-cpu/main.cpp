// lower-cpu: bufferized linalg down to LLVM for the host CPU.
#include "driver/stage_tool.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Lower a bufferized module to LLVM for the CPU: matmuls become cblas_sgemm/dgemm calls where\n"
               "their layouts allow, everything else loops."};
  app.footer("Example:\n  trace gelu | fuse | bufferize | lower-cpu > gelu.cpu.mlir\n"
             "  run gelu.cpu.mlir --input x=@x.npy --output y=@y.npy\n\n"
             "The pass pipeline is pipelines/lower-cpu.pipeline; --pipeline FILE runs another.");
  std::string input = "-", output = "-";
  mlpipe::StageOptions options;
  app.add_option("input", input, "MLIR file, or - for stdin")->capture_default_str();
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  app.add_option("--pipeline", options.pipelineFile, "Run this pipeline file instead of the built-in one");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("lower-cpu",
                         [&] { mlpipe::runStageTool(mlpipe::StageTool::LowerCpu, input, output, options); });
}
