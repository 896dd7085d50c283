#include "driver/compile.h"

#include "driver/matmul_choice.h"

#include "frontend/mlir_emitter.h"
#include "support/output_file.h"
#include "support/statistics.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

namespace mlpipe {

namespace {

MlirModule lower(MlirModule module, const CompileOptions &options, const std::string &matmul) {
  StageOptions stage;
  stage.chip = options.chip;
  stage.toolkit = options.toolkit;
  stage.matmul = matmul;
  stage.precision = options.precision;
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

} // namespace

std::string compileCacheDirectory() {
  std::filesystem::path directory;
  if (const char *configured = std::getenv("MLPIPE_CACHE_DIR"); configured && *configured)
    directory = configured;
  else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    directory = std::filesystem::path(xdg) / "mlpipe";
  else if (const char *home = std::getenv("HOME"); home && *home)
    directory = std::filesystem::path(home) / ".cache" / "mlpipe";
  else
    return "";
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  return error ? "" : directory.string();
}

MlirModule compileProgram(const fe::Program &program, const std::string &name, const CompileOptions &options) {
  std::string traced = fe::emitMlir(program);
  checkPrecision(options.precision);
  // Resolved before the cache key: a module compiled for cuBLAS must not be
  // taken from the cache where cuBLAS is missing.
  std::string matmul = options.target == Target::Gpu ? resolveMatmulChoice(options.matmul) : "";
  std::string cached;
  if (options.diskCache) {
    std::string directory = compileCacheDirectory();
    if (!directory.empty()) {
      std::string key = traced + builtinPipeline("fuse") + builtinPipeline("bufferize") + builtinPipeline("outline") +
                        builtinPipeline("lower-nvvm") + builtinPipeline("lower-cpu") + targetName(options.target) +
                        options.chip + options.toolkit + "\nmatmul=" + matmul + " precision=" + options.precision;
      cached = fmt::format("{}/{}-{:016x}.mlir", directory, name, stableHash(key));
    }
  }
  if (!cached.empty() && std::filesystem::exists(cached)) {
    try {
      return MlirModule::parse(readInput(cached), cached);
    } catch (const Error &) {
      // A damaged cache entry is recompiled and rewritten.
    }
  }
  MlirModule module = lower(MlirModule::parse(traced, name + ".mlir"), options, matmul);
  if (!cached.empty()) {
    try {
      writeOutput(cached, module.print());
    } catch (const Error &) {
      // The cache is an optimisation: a full disk must not stop the run.
    }
  }
  return module;
}

} // namespace mlpipe
