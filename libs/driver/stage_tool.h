// The body shared by the stage tools (fuse, bufferize, outline, lower-nvvm,
// lower-cpu): read MLIR (a file or - for stdin), run the stage, write the
// result atomically to -o FILE or stdout.
#pragma once

#include "compiler/compiler.h"

#include <string>

namespace mlpipe {

// For outline, `matmul` is --matmul as given ("" = cuBLAS where it loads).
void runStageTool(StageTool tool, const std::string &input, const std::string &output, const StageOptions &options,
                  const std::string &matmul = "");

// The whole main() of a stage tool: the input file, -o, --pipeline (for
// outline --matmul and --precision, for lower-nvvm --chip, --opt, --format,
// --toolkit), --help with `summary` and `example`, then runStageTool.
int stageToolMain(int argc, char **argv, StageTool tool, const char *summary, const char *example);

// The name MLIR diagnostics give an input: the path, or <stdin> for "-".
std::string bufferName(const std::string &input);

} // namespace mlpipe
