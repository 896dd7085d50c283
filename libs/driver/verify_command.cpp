// verify's dispatch: two .npy files, gpt2, or kernels and HLO modules, each
// refusing the flags of the others.
#include "driver/verify_command.h"

#include "compiler/compiler.h"

#include "driver/cli_checks.h"
#include "driver/model_options.h"
#include "runtime/mgpu_runtime.h"
#include "support/error.h"
#include "support/tool.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

namespace mlpipe {
namespace {

// The flags only one use of verify takes; the others refuse them rather
// than ignore them.
const std::initializer_list<const char *> kFileFlags = {"--rtol", "--atol"};
const std::initializer_list<const char *> kGpt2Flags = {"--steps",  "--mode",         "--weights", "--config",
                                                        "--prompt", "--save-weights", "--cache",   "--no-graphs"};
const std::initializer_list<const char *> kKernelFlags = {
    "--shape",     "--batch",        "--heads",       "--transpose-a", "--transpose-b", "--epilogue", "--save",
    "--tolerance", "--input-offset", "--input-scale", "--format",      "--repro",       "--inputs"};

enum class VerifyUse { Files, Gpt2, Kernels };

// The use `what` names. A .npy file among them must be one of exactly two.
VerifyUse verifyUse(const std::vector<std::string> &what) {
  bool anyNpy = std::any_of(what.begin(), what.end(), [](auto &w) { return w.ends_with(".npy"); });
  if (anyNpy && what.size() != 2)
    throw Error(fmt::format("comparing arrays takes two .npy files (actual, then expected), not {}", what.size()));
  bool files = what.size() == 2 && what[0].ends_with(".npy") && what[1].ends_with(".npy");
  if (anyNpy && !files)
    throw Error("comparing arrays takes two .npy files (actual, then expected)");
  if (files)
    return VerifyUse::Files;
  if (what.size() == 1 && what[0] == "gpt2")
    return VerifyUse::Gpt2;
  return VerifyUse::Kernels;
}

bool compareFiles(const CLI::App &app, const VerifyFlags &flags) {
  refuseFlags(app, kGpt2Flags, "comparing two .npy files");
  refuseFlags(app, kKernelFlags, "comparing two .npy files");
  refuseFlags(app, {"--target", "--chip", "--matmul", "--precision", "--seed", "--managed", "--dtype", "--pass-option"},
              "comparing two .npy files");
  return verifyFiles(flags.what[0], flags.what[1], flags.rtol, flags.atol);
}

bool checkGpt2(const CLI::App &app, VerifyFlags &flags) {
  refuseFlags(app, kFileFlags, "gpt2");
  refuseFlags(app, kKernelFlags, "gpt2");
  Gpt2VerifyRequest &gpt2 = flags.gpt2;
  ModelFlags model{flags.target, flags.gpt2Mode, flags.managed, flags.noGraphs, flags.matmul, flags.dtype};
  gpt2.model.run.compile.chip = flags.kernels.chip;
  gpt2.model.run.compile.precision = flags.kernels.precision;
  gpt2.model.run.compile.passOptions = flags.kernels.passOptions;
  if (app.count("--seed") > 0)
    gpt2.model.seed = flags.seed;
  applyModelFlags(gpt2.model, model);
  gpt2.tolerance = gpt2Tolerance(gpt2.model.run.dtype, gpt2.model.run.compile.precision);
  gpt2.cache = parseGpt2CacheCheck(flags.gpt2Cache);
  return verifyGpt2(gpt2);
}

bool checkKernels(const CLI::App &app, VerifyFlags &flags) {
  checkPassOptions(flags.kernels.passOptions);
  refuseFlags(app, kFileFlags, "kernels (they compare with a float64 reference)");
  refuseFlags(app, kGpt2Flags, "kernels or HLO modules (they apply to gpt2)");
  KernelVerifyRequest &request = flags.kernels;
  request.kernels = flags.what;
  request.managed = flags.managed;
  for (const std::string &shape : flags.shapes)
    request.options.shapes.push_back(parseShape(shape));
  request.options.dtype = *parseDType(flags.dtype);
  std::string target = flags.target.empty() ? (gpu::available() ? "gpu" : "cpu") : flags.target;
  request.target = target == "gpu" ? Target::Gpu : Target::Cpu;
  request.matmul = flags.matmul;
  if (app.count("--seed") > 0)
    request.seed = flags.seed;
  if (app.count("--inputs") > 0)
    refuseFlags(app, {"--seed", "--input-offset", "--input-scale", "--shape"},
                "--inputs (the inputs are the files given)");
  if (app.count("--tolerance") > 0)
    request.tolerance = flags.tolerance;
  return verifyKernels(request);
}

} // namespace

int runVerify(const CLI::App &app, VerifyFlags flags) {
  bool pass = false;
  int status = runTool(
      "verify",
      [&] {
        switch (verifyUse(flags.what)) {
        case VerifyUse::Files:
          pass = compareFiles(app, flags);
          break;
        case VerifyUse::Gpt2:
          pass = checkGpt2(app, flags);
          break;
        case VerifyUse::Kernels:
          pass = checkKernels(app, flags);
          break;
        }
      },
      /*errorStatus=*/2);
  return status != 0 ? status : (pass ? 0 : 1);
}

} // namespace mlpipe
