// bench: time GPT-2 forward passes on the GPU (CUDA events) or the CPU;
// `bench kernels`: each unit kernel on the GPU beside its copy floor;
// `bench matmul`: mlpipe's matmuls against cuBLAS.
#include "driver/bench.h"
#include "driver/bench_matmul.h"
#include "driver/matmul_choice.h"
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Time GPT-2 forward passes compiled by mlpipe: per mode and sequence length, the median of\n"
               "--repeat passes after --warmup (GPU time from CUDA events, each forward replayed as a CUDA graph),\n"
               "launches per forward, the sum of the kernels' own times, the arena and peak device memory, and the\n"
               "compile time by stage. --profile adds one row per kernel against the copy floor measured in the\n"
               "same run. `bench kernels` times the unit kernels instead, `bench matmul` matmuls against cuBLAS."};
  app.footer("Examples:\n"
             "  bench --config 124M --modes sublayer,fused --seq 16,64,256,1024 --repeat 20\n"
             "  bench --config 124M --modes fused --seq 1024 --profile --csv profile.csv   # then: make roofline\n"
             "  bench --config 124M --seq 1024 --matmul generated\n"
             "  bench --config 124M --seq 16 --decode-prompt 1000        # decode steps late in the KV cache\n"
             "  bench --config 124M --seq 16 --batches 1,8,32,64         # batched decoding, tokens/s per batch\n"
             "  bench kernels                                  # gelu softmax layernorm transpose colsum matmul, "
             "reference shapes\n"
             "  bench kernels gelu --shape 4096x4096 --no-graphs\n"
             "  bench matmul --shapes 1024x768x3072,12x1024x64x1024 --matmul cublas\n"
             "  bench matmul --dtype bf16 --shapes 1024x768x3072,1024x3072x768   # tensor cores against cuBLASLt\n"
             "  bench matmul --shapes 16x768x50257t      # B stored [N, K]: GPT-2's logits at 16 rows");
  mlpipe::BenchRequest request;
  mlpipe::ModelFlags flags;
  std::vector<std::string> modes = {"sublayer", "fused"};
  app.add_option("--modes", modes, "Modes to time")->delimiter(',')->capture_default_str();
  app.add_option("--seq", request.lengths, "Sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--repeat", request.repeat, "Timed passes per shape")->capture_default_str();
  app.add_option("--warmup", request.warmup, "Untimed passes first")->capture_default_str();
  app.add_flag("--profile", request.profile, "One row per kernel: calls, us, bytes moved, ratio to the copy floor");
  app.add_option("--csv", request.csv, "With --profile: write the per-kernel rows to this CSV file");
  app.add_option("--decode-prompt", request.decodePrompt,
                 "Tokens of the prompt the KV-cache decoding table prefills before its steps")
      ->capture_default_str();
  app.add_option("--batches", request.batches,
                 "Sequences per batched decode step in the batched-decoding table, each at its own position")
      ->delimiter(',')
      ->capture_default_str();
  mlpipe::addModelOptions(app, request.model, flags, /*withMode=*/false);

  mlpipe::KernelBenchRequest kernels;
  std::vector<std::string> shapes;
  std::string dtype = "f32";
  bool noGraphs = false;
  CLI::App *kernelsCommand = app.add_subcommand(
      "kernels", "Time unit kernels on the GPU with CUDA events over back-to-back launches on inputs larger than L2,\n"
                 "beside a device-to-device copy of the same bytes timed in the same run");
  kernelsCommand->add_option(
      "names", kernels.kernels,
      "Kernels (default: gelu softmax layernorm transpose colsum matmul, skipping any not yet there)");
  kernelsCommand->add_option("--shape", shapes,
                             "Shape of each input in order (default: each kernel's reference shape)");
  kernelsCommand->add_option("--dtype", dtype, "Float type")
      ->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}))
      ->capture_default_str();
  kernelsCommand->add_option("--batch", kernels.options.batch, "matmul: batch size");
  kernelsCommand->add_option("--heads", kernels.options.heads, "attention: heads")->capture_default_str();
  kernelsCommand->add_option("--chip", kernels.chip, "GPU to compile for")->capture_default_str();
  kernelsCommand->add_option("--repeat", kernels.repeat, "Back-to-back launches per timing")->capture_default_str();
  kernelsCommand->add_option("--warmup", kernels.warmup, "Untimed launches first")->capture_default_str();
  kernelsCommand->add_flag("--no-graphs", noGraphs, "Launch directly instead of replaying a CUDA graph");
  mlpipe::MatmulBenchRequest matmulRequest;
  std::vector<std::string> matmulShapes;
  CLI::App *matmul = app.add_subcommand(
      "matmul", "Time mlpipe's compiled matmul (each --matmul path) and cuBLAS called directly on the same shapes:\n"
                "the median of --repeat timings of --launches back-to-back calls (CUDA events) after --warmup\n"
                "rounds, in microseconds, TFLOP/s and relative to cuBLAS, operands rotating past the L2 cache.");
  matmul
      ->add_option("--shapes", matmulShapes,
                   "Products MxKxN or BATCHxMxKxN, a trailing t for B stored [N, K] (default: 1024x768x3072, "
                   "1024x3072x768, 1024x768x50257, 16x768x3072, 12x1024x64x1024)")
      ->delimiter(',');
  matmul->add_option("--matmul", matmulRequest.matmuls, "mlpipe's paths to time")
      ->delimiter(',')
      ->check(CLI::IsMember({"cublas", "generated"}))
      ->capture_default_str();
  matmul->add_option("--precision", matmulRequest.precision, mlpipe::kPrecisionFlagHelp)
      ->check(CLI::IsMember({"f32", "tf32"}))
      ->capture_default_str();
  matmul
      ->add_option("--dtype", matmulRequest.dtype,
                   "f32, or bf16 or f16: A, B and y stored in 16 bits, products accumulated in f32 (cuBLAS: cuBLASLt)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  matmul->add_option("--chip", matmulRequest.chip, "GPU to compile for")->capture_default_str();
  matmul->add_option("--repeat", matmulRequest.repeat, "Timings per path (the median is reported)")
      ->capture_default_str();
  matmul->add_option("--launches", matmulRequest.launches, "Back-to-back calls per timing")->capture_default_str();
  matmul->add_option("--warmup", matmulRequest.warmup, "Untimed rounds of calls first")->capture_default_str();
  // One subcommand at most: "bench kernels matmul" names the matmul kernel,
  // not the matmul subcommand.
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  if (*matmul)
    return mlpipe::runTool("bench", [&] {
      if (!matmulShapes.empty()) {
        matmulRequest.shapes.clear();
        for (const std::string &shape : matmulShapes)
          matmulRequest.shapes.push_back(mlpipe::parseMatmulShape(shape));
      }
      mlpipe::benchMatmul(matmulRequest);
    });
  return mlpipe::runTool("bench", [&] {
    if (*kernelsCommand) {
      for (const std::string &shape : shapes)
        kernels.options.shapes.push_back(mlpipe::parseShape(shape));
      kernels.options.dtype = *mlpipe::parseDType(dtype);
      kernels.graphs = !noGraphs;
      kernels.passOptions = request.model.run.compile.passOptions; // bench --pass-option ... kernels
      mlpipe::benchKernels(kernels);
      return;
    }
    mlpipe::applyModelFlags(request.model, flags);
    request.modes.clear();
    for (const std::string &mode : modes)
      request.modes.push_back(mlpipe::parseGpt2Mode(mode));
    mlpipe::benchGpt2(request);
  });
}
