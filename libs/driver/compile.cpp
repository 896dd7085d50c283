#include "driver/compile.h"

#include "driver/matmul_choice.h"

#include "frontend/mlir_emitter.h"
#include "support/output_file.h"
#include "support/statistics.h"

#include <fmt/format.h>

#include <link.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

namespace mlpipe {

namespace {

MlirModule lower(MlirModule module, const CompileOptions &options, const std::string &matmul, CompileTimings &timings) {
  StageOptions stage;
  stage.chip = options.chip;
  stage.toolkit = options.toolkit;
  stage.format = options.format;
  stage.matmul = matmul;
  stage.precision = options.precision;
  stage.passOptions = options.passOptions;
  auto timed = [&](StageTool tool, double &ms) {
    auto start = std::chrono::steady_clock::now();
    runStage(tool, module, stage);
    ms += millisecondsSince(start);
  };
  timed(StageTool::Fuse, timings.fuseMs);
  timed(StageTool::Bufferize, timings.bufferizeMs);
  if (options.target == Target::Gpu) {
    timed(StageTool::Outline, timings.outlineMs);
    // ptxas is a pass of lower-nvvm; its time is told apart.
    std::map<std::string, double> passMs;
    auto start = std::chrono::steady_clock::now();
    runStage(StageTool::LowerNvvm, module, stage, &passMs);
    double ptxasMs = passMs["mlpipe-assemble-kernels"];
    timings.ptxasMs += ptxasMs;
    timings.lowerMs += millisecondsSince(start) - ptxasMs;
  } else {
    timed(StageTool::LowerCpu, timings.lowerMs);
  }
  return module;
}

} // namespace

void CompileTimings::add(const CompileTimings &other) {
  traceMs += other.traceMs;
  fuseMs += other.fuseMs;
  bufferizeMs += other.bufferizeMs;
  outlineMs += other.outlineMs;
  lowerMs += other.lowerMs;
  ptxasMs += other.ptxasMs;
  loadMs += other.loadMs;
  cacheHits += other.cacheHits;
}

double CompileTimings::totalMs() const {
  return traceMs + fuseMs + bufferizeMs + outlineMs + lowerMs + ptxasMs + loadMs;
}

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

std::string compilerBuildIdentity() {
  static const std::string identity = [] {
    std::vector<std::string> paths;
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *data) {
          std::string_view name = info->dlpi_name ? info->dlpi_name : "";
          if (name.find("libmlpipe") != std::string_view::npos)
            static_cast<std::vector<std::string> *>(data)->emplace_back(name);
          return 0;
        },
        &paths);
    std::sort(paths.begin(), paths.end());
    // Linked statically, the compiler is the executable.
    if (paths.empty())
      paths.push_back("/proc/self/exe");
    std::string lines;
    for (const std::string &path : paths) {
      struct stat status {};
      if (stat(path.c_str(), &status) == 0)
        lines += fmt::format("{} {} {}.{:09}\n", path, status.st_size, status.st_mtim.tv_sec, status.st_mtim.tv_nsec);
    }
    return lines;
  }();
  return identity;
}

MlirModule compileProgram(const fe::Program &program, const std::string &name, const CompileOptions &options,
                          CompileTimings *timings) {
  CompileTimings local;
  CompileTimings &times = timings ? *timings : local;
  auto start = std::chrono::steady_clock::now();
  std::string traced = fe::emitMlir(program);
  times.traceMs += millisecondsSince(start);
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
                        options.chip + options.toolkit + options.format + "\nmatmul=" + matmul +
                        " precision=" + options.precision + "\n" + compilerBuildIdentity();
      for (const std::string &entry : options.passOptions)
        key += "\npass-option " + entry;
      cached = fmt::format("{}/{}-{:016x}.mlir", directory, name, stableHash(key));
    }
  }
  if (!cached.empty() && std::filesystem::exists(cached)) {
    try {
      MlirModule module = MlirModule::parse(readInput(cached), cached);
      ++times.cacheHits;
      return module;
    } catch (const Error &) {
      // A damaged cache entry is recompiled and rewritten.
    }
  }
  MlirModule module = lower(MlirModule::parse(traced, name + ".mlir"), options, matmul, times);
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
