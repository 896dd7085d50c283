// The compiler's public face: parse MLIR text, check which stage it is at,
// run one stage's pipeline, print. Tools and in-process drivers (verify,
// generate) use only this header; MLIR's own headers stay inside libs/compiler.
//
//   MlirModule module = MlirModule::parse(text, "gelu.mlir");
//   runStage(StageTool::Fuse, module, {});
//   std::string fused = module.print();
#pragma once

#include "support/error.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mlir {
class ModuleOp;
}

namespace mlpipe {

// How far down the pipeline a module is.
enum class Stage {
  Tensor,     // linalg on tensors: trace's output, fuse's input and output
  Bufferized, // memrefs in destination-passing form: bufferize's output
  Outlined,   // host code launching gpu.module kernels: outline's output
  GpuBinary,  // LLVM host code plus gpu.binary objects: lower-nvvm's output
  CpuLowered, // LLVM code only: lower-cpu's output
};
const char *stageName(Stage stage);

class MlirModule {
public:
  // Parses and verifies; throws DiagnosticError at file:line:col on bad text.
  // An empty module, or one with no function, is refused too.
  static MlirModule parse(std::string_view text, const std::string &bufferName);
  MlirModule(MlirModule &&) noexcept;
  MlirModule &operator=(MlirModule &&) noexcept;
  ~MlirModule();

  // The module as text. With `locations`, every op's location is printed too
  // (trace does this: the front end's scopes, loc("h.3.ln_1"), name the
  // fusions that fuse makes).
  std::string print(bool locations = false) const;
  Stage stage() const;
  mlir::ModuleOp op() const;

private:
  struct Impl;
  explicit MlirModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The stages as tools. Each checks that its input is at the stage it wants
// and says in one line what the input looks like otherwise.
enum class StageTool { Fuse, Bufferize, Outline, LowerNvvm, LowerCpu };
const char *stageToolName(StageTool tool);

struct StageOptions {
  std::string pipelineFile; // replaces the built-in pipeline when set
  std::string chip = "sm_90";
  int optLevel = 3;
  std::string format = "bin"; // bin (cubin), fatbin, or isa (PTX text, assembled by the driver when it loads)
  std::string toolkit;        // CUDA toolkit root; empty = the configured default
  std::string debugOnly;      // --debug-only: debug types whose choices are printed
  // outline: how matmuls are computed, "cublas" (calls of the runtime's
  // cuBLAS GEMM) or "generated" (kernels). The stage does not check that
  // cuBLAS loads: drivers resolve the default (driver/matmul_choice.h).
  std::string matmul = "cublas";
  std::string precision = "f32"; // outline: f32, or tf32 for cuBLAS's f32 GEMMs (opt-in)
  // --dump-dir: the IR after each pass, one numbered .mlir file each, under
  // this directory (a tree of the ops each pass ran on); empty: none.
  std::string dumpDirectory;
  // --pass-option: "PASS:OPTIONS" (e.g. "mlpipe-fused-attention:tc-key-groups=1"),
  // OPTIONS added to PASS's own wherever the stage's pipeline runs PASS
  // (withPassOptions): one build timed under other choices of a heuristic.
  std::vector<std::string> passOptions;
};

// `pipeline` (a pipeline's text, comments stripped) with each "PASS:OPTIONS"
// of `passOptions` added to PASS's options wherever it runs; entries whose
// pass is not in it are left out. Fails on an entry not of that form.
std::string withPassOptions(std::string pipeline, const std::vector<std::string> &passOptions);
// Fails, naming it, on an entry of `passOptions` whose pass is in none of
// the built-in pipelines.
void checkPassOptions(const std::vector<std::string> &passOptions);

// `passMs`, when given, receives each pass's milliseconds by its argument
// (e.g. "mlpipe-assemble-kernels").
void runStage(StageTool tool, MlirModule &module, const StageOptions &options,
              std::map<std::string, double> *passMs = nullptr);

// The text of a built-in pipeline ("fuse", "bufferize", "outline",
// "lower-nvvm", "lower-cpu"), comments included.
std::string builtinPipeline(const std::string &name);
// The CUDA toolkit used when none is given: $CUDA_HOME, else the one found
// at configure time.
std::string defaultCudaToolkit();
// Where lower-nvvm keeps assembled kernels ($MLPIPE_CACHE_DIR/kernels, else
// $XDG_CACHE_HOME/mlpipe/kernels, else ~/.cache/mlpipe/kernels); empty when
// there is none usable.
std::string kernelCacheDirectory();
// Refuses chips ptxas would not know: "sm_" then a known compute capability.
void checkChip(const std::string &chip);

// One line of ptx-check's report.
struct KernelReport {
  std::string module; // the gpu.binary symbol
  std::string kernel; // the .entry name
  int registers = 0;
  int sharedBytes = 0;
  int stackFrameBytes = 0;
  int spillStoreBytes = 0;
  int spillLoadBytes = 0;
};

// Assembles every PTX object of every gpu.binary with ptxas for `chip`.
// Throws Error naming the kernel and quoting ptxas when one fails.
std::vector<KernelReport> checkPtx(const MlirModule &module, const std::string &chip, const std::string &toolkit);

// Counts ops by name ("linalg.generic") in a module: structural checks.
int countOps(const MlirModule &module, std::string_view opName);

// The whole of mlpipe-opt: MLIR's opt driver with every upstream dialect and
// pass and all of mlpipe's own registered, plus --debug-only.
int mlpipeOptMain(int argc, char **argv);

} // namespace mlpipe
