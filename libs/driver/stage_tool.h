// The body shared by the stage tools (fuse, bufferize, outline, lower-nvvm,
// lower-cpu): read MLIR (a file or - for stdin), run the stage, write the
// result atomically to -o FILE or stdout.
#pragma once

#include "compiler/compiler.h"

#include <string>

namespace mlpipe {

void runStageTool(StageTool tool, const std::string &input, const std::string &output, const StageOptions &options);

// The name MLIR diagnostics give an input: the path, or <stdin> for "-".
std::string bufferName(const std::string &input);

} // namespace mlpipe
