// bench: time GPT-2 forward passes (or, with `bench matmul`, matmuls) on the
// GPU (CUDA events) or the CPU.
#include "driver/bench.h"
#include "driver/bench_matmul.h"
#include "driver/matmul_choice.h"
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Time GPT-2 forward passes compiled by mlpipe: per mode and sequence length, the median of\n"
               "--repeat passes after --warmup, GPU time from CUDA events. Compile time is reported apart.\n"
               "bench matmul times mlpipe's matmuls against cuBLAS instead (bench matmul --help)."};
  app.footer("Examples:\n"
             "  bench --config 124M --modes sublayer,fused --seq 16,64,256,1024 --repeat 20\n"
             "  bench --config 124M --seq 1024 --matmul generated\n"
             "  bench matmul\n"
             "  bench matmul --shapes 1024x768x3072,12x1024x64x1024 --matmul cublas");
  mlpipe::BenchRequest request;
  mlpipe::ModelFlags flags;
  std::vector<std::string> modes = {"sublayer", "fused"};
  app.add_option("--modes", modes, "Modes to time")->delimiter(',')->capture_default_str();
  app.add_option("--seq", request.lengths, "Sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--repeat", request.repeat, "Timed passes per shape")->capture_default_str();
  app.add_option("--warmup", request.warmup, "Untimed passes first")->capture_default_str();
  mlpipe::addModelOptions(app, request.model, flags, /*withMode=*/false);

  mlpipe::MatmulBenchRequest matmulRequest;
  std::vector<std::string> shapes;
  CLI::App *matmul = app.add_subcommand(
      "matmul", "Time mlpipe's compiled matmul (each --matmul path) and cuBLAS called directly on the same shapes:\n"
                "the median of --repeat timings of --launches back-to-back calls (CUDA events) after --warmup\n"
                "rounds, in microseconds, TFLOP/s and relative to cuBLAS, operands rotating past the L2 cache.");
  matmul
      ->add_option("--shapes", shapes,
                   "Products MxKxN or BATCHxMxKxN (default: 1024x768x3072, 1024x3072x768, 1024x768x50257, "
                   "16x768x3072, 12x1024x64x1024)")
      ->delimiter(',');
  matmul->add_option("--matmul", matmulRequest.matmuls, "mlpipe's paths to time")
      ->delimiter(',')
      ->check(CLI::IsMember({"cublas", "generated"}))
      ->capture_default_str();
  matmul->add_option("--precision", matmulRequest.precision, mlpipe::kPrecisionFlagHelp)
      ->check(CLI::IsMember({"f32", "tf32"}))
      ->capture_default_str();
  matmul->add_option("--chip", matmulRequest.chip, "GPU to compile for")->capture_default_str();
  matmul->add_option("--repeat", matmulRequest.repeat, "Timings per path (the median is reported)")
      ->capture_default_str();
  matmul->add_option("--launches", matmulRequest.launches, "Back-to-back calls per timing")->capture_default_str();
  matmul->add_option("--warmup", matmulRequest.warmup, "Untimed rounds of calls first")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (*matmul)
    return mlpipe::runTool("bench", [&] {
      if (!shapes.empty()) {
        matmulRequest.shapes.clear();
        for (const std::string &shape : shapes)
          matmulRequest.shapes.push_back(mlpipe::parseMatmulShape(shape));
      }
      mlpipe::benchMatmul(matmulRequest);
    });
  return mlpipe::runTool("bench", [&] {
    mlpipe::applyModelFlags(request.model, flags);
    request.modes.clear();
    for (const std::string &mode : modes)
      request.modes.push_back(mlpipe::parseGpt2Mode(mode));
    mlpipe::benchGpt2(request);
  });
}
