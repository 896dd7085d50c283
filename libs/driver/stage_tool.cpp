#include "driver/stage_tool.h"

#include "support/output_file.h"

namespace mlpipe {

std::string bufferName(const std::string &input) { return input == "-" ? "<stdin>" : input; }

void runStageTool(StageTool tool, const std::string &input, const std::string &output, const StageOptions &options) {
  MlirModule module = MlirModule::parse(readInput(input), bufferName(input));
  runStage(tool, module, options);
  writeOutput(output, module.print());
}

} // namespace mlpipe
