// ptx-check: assemble every kernel of a lowered module with ptxas.
#include "driver/ptx_check.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Assemble every PTX kernel of a lowered module with ptxas for a chip; needs no GPU.\n"
               "Prints one line per kernel: registers, shared memory, stack frame and spills."};
  app.footer("Example:\n  trace gelu | fuse | bufferize | outline | lower-nvvm --chip sm_75 | ptx-check --chip sm_75");
  std::string input = "-", chip = "sm_90", toolkit;
  app.add_option("input", input, "Lowered MLIR file, or - for stdin")->capture_default_str();
  app.add_option("--chip", chip, "Chip to assemble for")->capture_default_str();
  app.add_option("--toolkit", toolkit, "CUDA toolkit root (default: $CUDA_HOME or the build's)");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("ptx-check", [&] { mlpipe::runPtxCheck(input, chip, toolkit); });
}
