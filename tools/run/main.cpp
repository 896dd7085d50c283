// run: execute a lowered module's entry on .npy inputs.
#include "driver/cli_checks.h"
#include "driver/run_module.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"Run a lowered module: on the GPU when it holds gpu.binary (lower-nvvm's output), on the CPU\n"
               "when it came from lower-cpu. Inputs and outputs bind to the entry's argument names.\n"
               "Element types in .npy: f32 '<f4', f64 '<f8', i32 '<i4', i64 '<i8', f16 '<f2', i1 (pred) '|b1'.\n"
               "numpy has no bf16: give a bf16 input as an f32 .npy (rounded to nearest even), and a bf16\n"
               "output is written as an f32 .npy (exactly)."};
  app.footer("Examples:\n"
             "  trace gelu | fuse | bufferize | outline | lower-nvvm > gelu.mlir\n"
             "  run gelu.mlir --input x=@x.npy --output y=@y.npy\n"
             "  run gelu.mlir --input x=@x.npy --repeat 100      # median time over 100 runs (a CUDA graph)\n"
             "  run gelu.mlir --input x=@x.npy --repeat 100 --no-graphs   # the same, launched directly\n"
             "  run --gpu-info                                    # the GPU's name, or why there is none");
  mlpipe::RunRequest request;
  bool gpuInfo = false;
  app.add_option("module", request.module, "Lowered MLIR file, or - for stdin")->capture_default_str();
  app.add_option("--input", request.inputs, "NAME=@FILE.npy for each input of the entry");
  app.add_option("--output", request.outputs, "NAME=@FILE.npy for each output to keep");
  app.add_option("--entry", request.entry, "Entry function (needed when the module has several)");
  app.add_option("--repeat", request.repeat, "Time this many more runs and print the median")
      ->check(mlpipe::kNonNegative);
  app.add_flag("--managed", request.managed, "GPU buffers in managed memory (the tutorial's path), not device memory");
  bool noGraphs = false;
  app.add_flag("--no-graphs", noGraphs, "With --repeat: launch each run directly instead of replaying a CUDA graph");
  app.add_flag("--gpu-info", gpuInfo, "Print the GPU's name and exit 0, or why there is none and exit 1");
  CLI11_PARSE(app, argc, argv);
  request.graphs = !noGraphs;
  return mlpipe::runTool("run", [&] {
    if (gpuInfo)
      std::cout << mlpipe::gpuInfo() << "\n";
    else
      mlpipe::runModule(request);
  });
}
