// bench: time GPT-2 forward passes on the GPU (CUDA events) or the CPU.
#include "driver/bench.h"
#include "driver/model_options.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Time GPT-2 forward passes compiled by mlpipe: per mode and sequence length, the median of\n"
               "--repeat passes after --warmup, GPU time from CUDA events. Compile time is reported apart."};
  app.footer("Example:\n  bench --config 124M --modes sublayer,fused --seq 16,64,256,1024 --repeat 20");
  mlpipe::BenchRequest request;
  mlpipe::ModelFlags flags;
  std::vector<std::string> modes = {"sublayer", "fused"};
  app.add_option("--modes", modes, "Modes to time")->delimiter(',')->capture_default_str();
  app.add_option("--seq", request.lengths, "Sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--repeat", request.repeat, "Timed passes per shape")->capture_default_str();
  app.add_option("--warmup", request.warmup, "Untimed passes first")->capture_default_str();
  mlpipe::addModelOptions(app, request.model, flags, /*withMode=*/false);
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("bench", [&] {
    mlpipe::applyModelFlags(request.model, flags);
    request.modes.clear();
    for (const std::string &mode : modes)
      request.modes.push_back(mlpipe::parseGpt2Mode(mode));
    mlpipe::benchGpt2(request);
  });
}
