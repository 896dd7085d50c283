#include "driver/model_options.h"

#include "driver/cli_checks.h"
#include "driver/matmul_choice.h"

#include "compiler/compiler.h"
#include "runtime/mgpu_runtime.h"
#include "support/error.h"

namespace mlpipe {

void addModelOptions(CLI::App &app, GenerateRequest &request, ModelFlags &flags, bool withMode) {
  app.add_option("--weights", request.weights, "synthetic, or a Hugging Face GPT-2 model.safetensors")
      ->capture_default_str();
  app.add_option("--config", request.config,
                 "tiny, 124M or a config.json (default: 124M, or the config.json beside --weights)");
  app.add_option("--seed", request.seed, "Seed of the synthetic weights")->check(kNonNegative)->capture_default_str();
  app.add_option("--target", flags.target, "gpu or cpu (default: gpu when there is one)")
      ->check(CLI::IsMember({"gpu", "cpu"}));
  app.add_option("--chip", request.run.compile.chip, "GPU to compile for")->capture_default_str();
  app.add_flag("--managed", flags.managed,
               "Weights and buffers in managed memory (the tutorial's path), not device memory");
  app.add_flag("--no-graphs", flags.noGraphs,
               "Launch every kernel directly instead of replaying each forward as a CUDA graph");
  app.add_option("--matmul", flags.matmul, kMatmulFlagHelp)->check(CLI::IsMember({"cublas", "generated"}));
  app.add_option("--precision", request.run.compile.precision, kPrecisionFlagHelp)
      ->check(CLI::IsMember({"f32", "tf32"}))
      ->capture_default_str();
  app.add_option("--pass-option", request.run.compile.passOptions,
                 "PASS:OPTIONS added to a pass's options where the compile pipelines run it, e.g. "
                 "mlpipe-fused-attention:tc-key-groups=1 (repeatable; mlpipe-opt --help lists each pass's options)")
      ->allow_extra_args(false);
  app.add_option("--dtype", flags.dtype,
                 "Storage of the weights, activations and KV cache: f32, or bf16 or f16 (computed in f32, "
                 "matmuls on tensor cores)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  if (withMode)
    app.add_option("--mode", flags.mode, "sublayer (a host loop over compiled blocks) or fused (one function)")
        ->check(CLI::IsMember({"sublayer", "fused"}))
        ->capture_default_str();
}

DType gpt2StorageType(const std::string &dtype, const std::string &precision) {
  std::optional<DType> parsed = parseDType(dtype);
  if (!parsed || (*parsed != DType::f32 && *parsed != DType::bf16 && *parsed != DType::f16))
    fail("gpt2 runs in f32, bf16 or f16, not {}", dtype);
  if (*parsed != DType::f32 && precision != "f32")
    fail("--precision {} applies to f32 matmuls; {} matmuls already run on tensor cores", precision, dtype);
  return *parsed;
}

Target resolveTarget(const std::string &target) {
  if (target.empty())
    return gpu::available() ? Target::Gpu : Target::Cpu;
  return target == "gpu" ? Target::Gpu : Target::Cpu;
}

void applyModelFlags(GenerateRequest &request, const ModelFlags &flags) {
  checkChip(request.run.compile.chip); // an unknown --chip is refused on every target
  checkPassOptions(request.run.compile.passOptions);
  request.run.mode = parseGpt2Mode(flags.mode);
  request.run.compile.target = resolveTarget(flags.target);
  request.run.compile.diskCache = true;
  request.run.execution.memory = flags.managed ? gpu::Memory::Managed : gpu::Memory::Device;
  request.run.graphs = !flags.noGraphs;
  request.run.dtype = gpt2StorageType(flags.dtype, request.run.compile.precision);
  if (request.run.compile.target == Target::Gpu)
    request.run.compile.matmul = resolveMatmulChoice(flags.matmul);
  else if (request.run.compile.precision != "f32")
    fail("--precision tf32 applies to cuBLAS's GEMMs on the GPU; the CPU computes in f32");
}

} // namespace mlpipe
