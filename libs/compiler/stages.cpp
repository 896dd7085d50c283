// Running one stage: check the input's level, read the stage's text
// pipeline (built in, or --pipeline FILE), fill in its options, run it, and
// check what the stage promises about its output.
#include "attention/passes.h"
#include "codegen/debug.h"
#include "codegen/device_description.h"
#include "compiler/compiler.h"
#include "compiler/diagnostics.h"
#include "compiler/passes.h"
#include "emitters/passes.h"
#include "fusion/passes.h"
#include "matmul/passes.h"
#include "transforms/passes.h"
#include "transforms/ptx.h"

#include "support/output_file.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

namespace mlpipe {

const std::map<std::string, std::string> &embeddedPipelines();

namespace {
// Each generated file undefines the macro after its registration section.
#define GEN_PASS_REGISTRATION
#include "attention/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "emitters/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "fusion/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "matmul/Passes.h.inc"
#define GEN_PASS_REGISTRATION
#include "transforms/Passes.h.inc"
} // namespace

void registerMlpipePasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerFusionPasses();
    registerMatmulPasses();
    registerEmittersPasses();
    registerAttentionPasses();
    registerTransformsPasses();
  });
}

const char *stageToolName(StageTool tool) {
  switch (tool) {
  case StageTool::Fuse:
    return "fuse";
  case StageTool::Bufferize:
    return "bufferize";
  case StageTool::Outline:
    return "outline";
  case StageTool::LowerNvvm:
    return "lower-nvvm";
  case StageTool::LowerCpu:
    return "lower-cpu";
  }
  return "?";
}

std::string builtinPipeline(const std::string &name) {
  auto &pipelines = embeddedPipelines();
  auto found = pipelines.find(name);
  if (found == pipelines.end())
    fail("no built-in pipeline named '{}'", name);
  return found->second;
}

std::string defaultCudaToolkit() {
  const char *fromEnvironment = std::getenv("CUDA_HOME");
  if (fromEnvironment && *fromEnvironment)
    return fromEnvironment;
  return MLPIPE_DEFAULT_CUDA_TOOLKIT;
}

std::string kernelCacheDirectory() {
  std::string root;
  if (const char *configured = std::getenv("MLPIPE_CACHE_DIR"); configured && *configured)
    root = configured;
  else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    root = std::string(xdg) + "/mlpipe";
  else if (const char *home = std::getenv("HOME"); home && *home)
    root = std::string(home) + "/.cache/mlpipe";
  // The directory goes into the pipeline's text as a pass option: a path
  // that text could not hold means no cache.
  if (root.empty() || root.find_first_of(" \t,{}\"'=") != std::string::npos)
    return "";
  return root + "/kernels";
}

void checkChip(const std::string &chip) {
  static const std::set<std::string> known = {"sm_50",  "sm_52",   "sm_53",   "sm_60",  "sm_61",   "sm_62",  "sm_70",
                                              "sm_72",  "sm_75",   "sm_80",   "sm_86",  "sm_87",   "sm_89",  "sm_90",
                                              "sm_90a", "sm_100",  "sm_100a", "sm_101", "sm_101a", "sm_103", "sm_103a",
                                              "sm_120", "sm_120a", "sm_121",  "sm_121a"};
  if (!known.count(chip))
    fail("unknown chip '{}': expected an NVIDIA compute capability such as sm_75, sm_80 or sm_90", chip);
}

namespace {

Stage inputStage(StageTool tool) {
  switch (tool) {
  case StageTool::Fuse:
  case StageTool::Bufferize:
    return Stage::Tensor;
  case StageTool::Outline:
  case StageTool::LowerCpu:
    return Stage::Bufferized;
  case StageTool::LowerNvvm:
    return Stage::Outlined;
  }
  return Stage::Tensor;
}

// What to run first when the input is not at the stage a tool wants.
std::string hint(Stage have, Stage want) {
  if (static_cast<int>(have) > static_cast<int>(want))
    return "it is already past that stage";
  switch (want) {
  case Stage::Tensor:
    return "start from trace";
  case Stage::Bufferized:
    return "run bufferize first";
  case Stage::Outlined:
    return have == Stage::Tensor ? "run bufferize and outline first" : "run outline first";
  default:
    return "run the earlier stages first";
  }
}

void requireStage(StageTool tool, const MlirModule &module) {
  Stage want = inputStage(tool), have = module.stage();
  if (have != want)
    fail("the input is {}, but {} wants {}: {}", stageName(have), stageToolName(tool), stageName(want),
         hint(have, want));
}

std::string stripComments(const std::string &text) {
  std::string result;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != '#')
      result += line + " ";
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return result;
}

std::string fillOptions(std::string text, const std::map<std::string, std::string> &values) {
  for (auto &[key, value] : values) {
    std::string placeholder = "{" + key + "}";
    for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at + value.size()))
      text.replace(at, placeholder.size(), value);
  }
  return text;
}

std::string checkedToolkit(const StageOptions &options) {
  std::string toolkit = options.toolkit.empty() ? defaultCudaToolkit() : options.toolkit;
  std::string libdevice = toolkit + "/nvvm/libdevice/libdevice.10.bc";
  if (!llvm::sys::fs::exists(libdevice))
    fail("no CUDA toolkit at {}: {} is missing (pass --toolkit DIR or set CUDA_HOME)", toolkit, libdevice);
  if (options.format != "isa" && !llvm::sys::fs::exists(toolkit + "/bin/ptxas"))
    fail("no CUDA toolkit at {}: bin/ptxas, needed for --format {}, is missing", toolkit, options.format);
  return toolkit;
}

// The PTX ISA version kernels for `chip` are written in, as NVVM target
// features; none means the chip's lowest, and the backend refuses one below
// that. On chips with programmatic dependent launch, kernels bring data into
// L2 before they wait (kSkinnyPrefetchesB), and LLVM's NVPTX backend selects
// its prefetch from PTX 8.0 on. Of those chips only sm_90's lowest version
// (7.8) predates 8.0: sm_90a's is 8.0, and from sm_100 on they are 8.6 and
// later.
static std::string ptxFeatures(const std::string &chip) { return chip == "sm_90" ? "+ptx80" : ""; }

// PASS and OPTIONS of a --pass-option entry "PASS:OPTIONS".
std::pair<std::string, std::string> splitPassOption(const std::string &entry) {
  size_t colon = entry.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size())
    fail("--pass-option takes PASS:OPTIONS (e.g. mlpipe-fused-attention:tc-key-groups=1), not '{}'", entry);
  return {entry.substr(0, colon), entry.substr(colon + 1)};
}

bool isPassNameCharacter(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// Where `pass` runs in `pipeline`: the offsets just past each whole-word
// occurrence of its name.
std::vector<size_t> passEnds(const std::string &pipeline, const std::string &pass) {
  std::vector<size_t> ends;
  for (size_t at = pipeline.find(pass); at != std::string::npos; at = pipeline.find(pass, at + 1)) {
    size_t end = at + pass.size();
    if ((at == 0 || !isPassNameCharacter(pipeline[at - 1])) &&
        (end == pipeline.size() || !isPassNameCharacter(pipeline[end])))
      ends.push_back(end);
  }
  return ends;
}

} // namespace

std::string withPassOptions(std::string pipeline, const std::vector<std::string> &passOptions) {
  for (const std::string &entry : passOptions) {
    auto [pass, added] = splitPassOption(entry);
    std::vector<size_t> ends = passEnds(pipeline, pass);
    // From the last, so that the earlier offsets stay valid.
    for (auto end = ends.rbegin(); end != ends.rend(); ++end) {
      if (*end < pipeline.size() && pipeline[*end] == '{') {
        size_t close = pipeline.find('}', *end);
        if (close == std::string::npos)
          fail("the pipeline's options of {} have no closing brace", pass);
        pipeline.insert(close, (close == *end + 1 ? "" : " ") + added);
      } else {
        pipeline.insert(*end, "{" + added + "}");
      }
    }
  }
  return pipeline;
}

void checkPassOptions(const std::vector<std::string> &passOptions) {
  for (const std::string &entry : passOptions) {
    std::string pass = splitPassOption(entry).first;
    bool found = false;
    for (const char *stage : {"fuse", "bufferize", "outline", "lower-nvvm", "lower-cpu"})
      found = found || !passEnds(stripComments(builtinPipeline(stage)), pass).empty();
    if (!found)
      fail("--pass-option: no pass '{}' in mlpipe's pipelines (pipelines/*.pipeline name them)", pass);
  }
}

namespace {

std::string pipelineText(StageTool tool, const StageOptions &options) {
  std::string text =
      options.pipelineFile.empty() ? builtinPipeline(stageToolName(tool)) : readInput(options.pipelineFile);
  std::map<std::string, std::string> values;
  if (tool == StageTool::Outline) {
    checkChip(options.chip);
    if (options.matmul != "cublas" && options.matmul != "generated")
      fail("--matmul must be cublas or generated, not '{}'", options.matmul);
    if (options.precision != "f32" && options.precision != "tf32")
      fail("--precision must be f32 or tf32, not '{}'", options.precision);
    values = {{"chip", options.chip},
              {"cublas", options.matmul == "cublas" ? "true" : "false"},
              {"precision", options.precision}};
  }
  if (tool == StageTool::LowerNvvm) {
    checkChip(options.chip);
    if (options.optLevel < 0 || options.optLevel > 3)
      fail("--opt must be 0, 1, 2 or 3, not {}", options.optLevel);
    if (options.format != "isa" && options.format != "bin" && options.format != "fatbin")
      fail("--format must be isa, bin or fatbin, not '{}'", options.format);
    values = {{"chip", options.chip},
              {"ptx_features", ptxFeatures(options.chip)},
              {"opt", std::to_string(options.optLevel)},
              {"format", options.format},
              {"toolkit", checkedToolkit(options)},
              {"cache", kernelCacheDirectory()}};
  }
  return withPassOptions(fillOptions(stripComments(text), values), options.passOptions);
}

// Adds the wall time of each pass on the whole module, by its argument, to
// a map. (Passes nested on kernels run on several threads at once; their
// time is the enclosing stage's.)
struct PassTimer : mlir::PassInstrumentation {
  explicit PassTimer(std::map<std::string, double> &times) : times(times) {}
  void runBeforePass(mlir::Pass *pass, mlir::Operation *op) override {
    if (mlir::isa<mlir::ModuleOp>(op) && !op->getParentOp())
      started[pass] = std::chrono::steady_clock::now();
  }
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override { stop(pass, op); }
  void runAfterPassFailed(mlir::Pass *pass, mlir::Operation *op) override { stop(pass, op); }
  void stop(mlir::Pass *pass, mlir::Operation *op) {
    if (!mlir::isa<mlir::ModuleOp>(op) || op->getParentOp())
      return;
    auto it = started.find(pass);
    if (it == started.end())
      return;
    times[pass->getArgument().str()] +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - it->second).count();
    started.erase(it);
  }
  std::map<std::string, double> &times;
  std::map<mlir::Pass *, std::chrono::steady_clock::time_point> started;
};

void runPipeline(const std::string &text, const std::string &source, MlirModule &module,
                 std::map<std::string, double> *passMs, const std::string &dumpDirectory) {
  mlir::MLIRContext &ctx = compilerContext();
  std::string parseErrors;
  llvm::raw_string_ostream errorStream(parseErrors);
  auto parsed = mlir::parsePassPipeline(text, errorStream);
  if (mlir::failed(parsed))
    fail("bad pass pipeline in {}: {}", source, errorStream.str());
  mlir::PassManager pm(&ctx);
  static_cast<mlir::OpPassManager &>(pm) = std::move(*parsed);
  if (passMs)
    pm.addInstrumentation(std::make_unique<PassTimer>(*passMs));
  if (!dumpDirectory.empty()) {
    // The IR after every pass, one numbered file each, in a tree of the ops
    // the passes ran on (the module, or each function for func.func(...)).
    if (std::error_code error = llvm::sys::fs::create_directories(dumpDirectory))
      fail("cannot create --dump-dir {}: {}", dumpDirectory, error.message());
    pm.enableIRPrintingToFileTree([](mlir::Pass *, mlir::Operation *) { return false; },
                                  [](mlir::Pass *, mlir::Operation *) { return true; },
                                  /*printModuleScope=*/false, /*printAfterOnlyOnChange=*/false,
                                  /*printAfterOnlyOnFailure=*/false, dumpDirectory);
  }
  DiagnosticCollector diagnostics(ctx);
  if (mlir::failed(pm.run(module.op())))
    diagnostics.fail(fmt::format("the {} pipeline failed", source));
}

// outline's promise: host functions only launch kernels, manage memory and
// run loops whose trip counts are read at run time (scf.while, its
// condition read back from the device each trip; the scf.if that frees a
// buffer a trip may own, and bufferization's dealloc helper's loops over
// pointers, marked mlpipe.host_loops by outline).
void checkHostCodeIsOutlined(const MlirModule &module) {
  for (auto function : module.op().getOps<mlir::func::FuncOp>()) {
    mlir::Operation *leftover = nullptr;
    function.walk([&](mlir::Operation *op) {
      llvm::StringRef dialect = op->getName().getDialectNamespace();
      bool hostLoop =
          mlir::isa<mlir::scf::WhileOp, mlir::scf::ConditionOp, mlir::scf::ForOp, mlir::scf::IfOp, mlir::scf::YieldOp>(
              op) &&
          function->hasAttr("mlpipe.host_loops");
      if (!leftover && ((dialect == "scf" && !hostLoop) || dialect == "linalg" || mlir::isa<mlir::memref::AllocOp>(op)))
        leftover = op;
    });
    if (leftover)
      fail("outline left {} in host function @{} at {}: it has no GPU lowering",
           leftover->getName().getStringRef().str(), function.getName().str(), formatLocation(leftover->getLoc()));
  }
}

// lower-nvvm's promise: nothing but binaries and launches left of the gpu
// dialect, and no PTX that calls a libdevice function it did not link.
void checkLoweredForGpu(const MlirModule &module) {
  module.op().walk([&](mlir::Operation *op) {
    if (op->getName().getDialectNamespace() == "gpu" && !mlir::isa<mlir::gpu::BinaryOp, mlir::gpu::LaunchFuncOp>(op))
      fail("lower-nvvm left {} unconverted at {}", op->getName().getStringRef().str(), formatLocation(op->getLoc()));
  });
  module.op().walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attribute : binary.getObjects()) {
      std::string call = unresolvedLibdeviceCall(ptxOf(mlir::cast<mlir::gpu::ObjectAttr>(attribute)));
      if (!call.empty())
        fail("the PTX of {} calls {}, which libdevice did not resolve: is the CUDA toolkit complete?",
             binary.getName().str(), call);
    }
  });
}

// A module outlined for a later chip may hold what `chip` lacks: the
// tensor-core kernels' mma.sync m16n8k16 on 16-bit operands (sm_80 and
// later) would abort the backend; one line says so first.
void checkKernelsFitChip(const MlirModule &module, const std::string &chip) {
  if (deviceDescription(chip).sixteenBitMma)
    return;
  module.op().walk([&](mlir::NVVM::MmaOp mma) {
    if (mma.getShape().getK() == 16) {
      auto kernel = mma->getParentOfType<mlir::gpu::GPUFuncOp>();
      fail("kernel @{} uses mma.sync m16n8k16 (16-bit tensor cores, sm_80 and later), which {} lacks: outline the "
           "program with --chip {}",
           kernel ? kernel.getName().str() : std::string("?"), chip, chip);
    }
  });
}

} // namespace

void runStage(StageTool tool, MlirModule &module, const StageOptions &options, std::map<std::string, double> *passMs) {
  requireStage(tool, module);
  if (!options.debugOnly.empty())
    enableDebugTypes(options.debugOnly);
  std::string source = options.pipelineFile.empty() ? std::string("built-in ") + stageToolName(tool) + " pipeline"
                                                    : options.pipelineFile;
  std::string text = pipelineText(tool, options);
  if (tool == StageTool::LowerNvvm)
    checkKernelsFitChip(module, options.chip);
  runPipeline(text, source, module, passMs, options.dumpDirectory);
  if (tool == StageTool::Outline)
    checkHostCodeIsOutlined(module);
  if (tool == StageTool::LowerNvvm)
    checkLoweredForGpu(module);
}

} // namespace mlpipe
