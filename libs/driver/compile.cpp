#include "driver/compile.h"

#include "frontend/mlir_emitter.h"

namespace mlpipe {

MlirModule compileProgram(const fe::Program &program, const std::string &name, const CompileOptions &options) {
  MlirModule module = MlirModule::parse(fe::emitMlir(program), name);
  StageOptions stage;
  stage.chip = options.chip;
  stage.toolkit = options.toolkit;
  runStage(StageTool::Fuse, module, stage);
  runStage(StageTool::Bufferize, module, stage);
  if (options.target == Target::Gpu) {
    runStage(StageTool::Outline, module, stage);
    runStage(StageTool::LowerNvvm, module, stage);
  } else {
    runStage(StageTool::LowerCpu, module, stage);
  }
  return module;
}

} // namespace mlpipe
