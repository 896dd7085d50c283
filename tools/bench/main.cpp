// bench: time GPT-2 forward passes on the GPU (CUDA events) or the CPU, and
// `bench kernels`: each unit kernel on the GPU beside its copy floor.
#include "driver/bench.h"
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Time GPT-2 forward passes compiled by mlpipe: per mode and sequence length, the median of\n"
               "--repeat passes after --warmup (GPU time from CUDA events, each forward replayed as a CUDA graph),\n"
               "launches per forward, the sum of the kernels' own times, the arena and peak device memory, and the\n"
               "compile time by stage. --profile adds one row per kernel against the copy floor measured in the\n"
               "same run. `bench kernels` times the unit kernels instead."};
  app.footer(
      "Examples:\n"
      "  bench --config 124M --modes sublayer,fused --seq 16,64,256,1024 --repeat 20\n"
      "  bench --config 124M --modes fused --seq 1024 --profile --csv profile.csv   # then: make roofline\n"
      "  bench kernels                                  # gelu softmax layernorm transpose matmul, reference shapes\n"
      "  bench kernels gelu --shape 4096x4096 --no-graphs");
  mlpipe::BenchRequest request;
  mlpipe::ModelFlags flags;
  std::vector<std::string> modes = {"sublayer", "fused"};
  app.add_option("--modes", modes, "Modes to time")->delimiter(',')->capture_default_str();
  app.add_option("--seq", request.lengths, "Sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--repeat", request.repeat, "Timed passes per shape")->capture_default_str();
  app.add_option("--warmup", request.warmup, "Untimed passes first")->capture_default_str();
  app.add_flag("--profile", request.profile, "One row per kernel: calls, us, bytes moved, ratio to the copy floor");
  app.add_option("--csv", request.csv, "With --profile: write the per-kernel rows to this CSV file");
  mlpipe::addModelOptions(app, request.model, flags, /*withMode=*/false);

  mlpipe::KernelBenchRequest kernels;
  std::vector<std::string> shapes;
  std::string dtype = "f32";
  bool noGraphs = false;
  CLI::App *kernelsCommand = app.add_subcommand(
      "kernels", "Time unit kernels on the GPU with CUDA events over back-to-back launches on inputs larger than L2,\n"
                 "beside a device-to-device copy of the same bytes timed in the same run");
  kernelsCommand->add_option("names", kernels.kernels,
                             "Kernels (default: gelu softmax layernorm transpose matmul, skipping any not yet there)");
  kernelsCommand->add_option("--shape", shapes,
                             "Shape of each input in order (default: each kernel's reference shape)");
  kernelsCommand->add_option("--dtype", dtype, "Float type")
      ->check(CLI::IsMember({"f32", "f64"}))
      ->capture_default_str();
  kernelsCommand->add_option("--batch", kernels.options.batch, "matmul: batch size");
  kernelsCommand->add_option("--heads", kernels.options.heads, "attention: heads")->capture_default_str();
  kernelsCommand->add_option("--chip", kernels.chip, "GPU to compile for")->capture_default_str();
  kernelsCommand->add_option("--repeat", kernels.repeat, "Back-to-back launches per timing")->capture_default_str();
  kernelsCommand->add_option("--warmup", kernels.warmup, "Untimed launches first")->capture_default_str();
  kernelsCommand->add_flag("--no-graphs", noGraphs, "Launch directly instead of replaying a CUDA graph");
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("bench", [&] {
    if (*kernelsCommand) {
      for (const std::string &shape : shapes)
        kernels.options.shapes.push_back(mlpipe::parseShape(shape));
      kernels.options.dtype = *mlpipe::parseDType(dtype);
      kernels.graphs = !noGraphs;
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
