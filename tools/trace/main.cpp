// trace: print a program as linalg-on-tensors MLIR.
#include "driver/cli_checks.h"
#include "driver/trace.h"
#include "frontend/hlo_reader.h"
#include "support/error.h"
#include "support/output_file.h"
#include "support/tool.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Trace a tensor program to linalg-on-tensors MLIR.\n"
               "Programs: gelu softmax layernorm matmul gather attention transpose colsum, gpt2, or an XLA HLO\n"
               "module (FILE.hlo, any file holding one, or - for stdin; its ENTRY computation; inputs named after\n"
               "its parameters, outputs y or y0, y1, ...)."};
  app.footer("Examples:\n"
             "  trace gelu | fuse | bufferize | outline | lower-nvvm --chip sm_90 > gelu.mlir\n"
             "  trace matmul --shape 64x128 --shape 128x32 --batch 4\n"
             "  trace matmul --shape 16x768 --shape 3072x768 --transpose-b --epilogue bias-gelu\n"
             "  trace attention --shape 128x256 --heads 4 --dtype f64 -o attention.mlir\n"
             "  trace gpt2 --mode fused --config 124M --seq 16 | fuse | bufferize | outline | lower-nvvm\n"
             "  trace gpt2 --mode decode --config tiny       # one token against the KV cache\n"
             "  trace gpt2 --mode decode --batch 4 --config tiny   # 4 sequences, each at its own position\n"
             "  trace model.hlo | fuse | bufferize | lower-cpu > model.cpu.mlir\n"
             "  trace --list-ops                              # the HLO ops trace reads, with their limits");
  mlpipe::TraceRequest request;
  std::vector<std::string> shapes;
  std::string dtype = "f32", output = "-";
  bool listOps = false;
  app.add_option("program", request.program, "What to trace: a kernel, gpt2 or FILE.hlo");
  app.add_flag("--list-ops", listOps, "Print every HLO op trace reads, one per line with its limits, and exit");
  app.add_option("--shape", shapes, "Shape of each input in order, e.g. 64x256 (default: the program's own)");
  app.add_option("--dtype", dtype, "Float storage type (bf16 and f16 are computed in f32)")
      ->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--batch", request.kernel.batch,
                 "matmul: batch size (a batched matmul); gpt2 decode: sequences decoded at once, each at its own "
                 "position in a KV cache slot of its own")
      ->check(mlpipe::kPositive);
  app.add_option("--heads", request.kernel.heads, "attention: number of heads")->capture_default_str();
  app.add_flag("--transpose-a", request.kernel.transposeA, "matmul: a stored transposed ([K, M]), read as a view");
  app.add_flag("--transpose-b", request.kernel.transposeB, "matmul: b stored transposed ([N, K]), read as a view");
  app.add_option("--epilogue", request.kernel.epilogue,
                 "matmul: none, bias, bias-gelu, bias-residual or bias-tanh after a @ b")
      ->capture_default_str();
  app.add_option("--mode", request.mode,
                 "gpt2: fused (one function; the default) or sublayer (embed, attend, feedforward, project); "
                 "decode or prefill are the fused program in that --phase")
      ->check(CLI::IsMember({"fused", "sublayer", "decode", "prefill"}));
  app.add_option("--phase", request.phase,
                 "gpt2: forward (the default), prefill (also writes the KV cache) or decode (one token at a "
                 "run-time position, attending over the KV cache)")
      ->check(CLI::IsMember({"forward", "prefill", "decode"}));
  app.add_option("--config", request.config, "gpt2: tiny, 124M or a config.json (default: 124M)");
  app.add_option("--seq", request.seq, "gpt2: token positions (default: 16)")->check(mlpipe::kPositive);
  app.add_option("-o,--output", output, "Output file, or - for stdout")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return mlpipe::runTool("trace", [&] {
    if (listOps) {
      mlpipe::writeOutput(output, mlpipe::fe::listHloOps());
      return;
    }
    if (request.program.empty())
      mlpipe::fail("no program to trace: name a kernel, gpt2 or FILE.hlo (or give --list-ops)");
    for (const std::string &shape : shapes)
      request.kernel.shapes.push_back(mlpipe::parseShape(shape));
    request.kernel.dtype = *mlpipe::parseDType(dtype);
    mlpipe::writeOutput(output, mlpipe::trace(request));
  });
}
