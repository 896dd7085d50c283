// verify: compare two .npy files, or check compiled kernels against the
// float64 reference on fresh random inputs.
#include "driver/cli_checks.h"
#include "driver/matmul_choice.h"
#include "driver/verify_command.h"

#include <CLI/CLI.hpp>

int main(int argc, char **argv) {
  CLI::App app{"Check results.\n"
               "  verify A.npy B.npy       compare two arrays (numpy allclose): PASS or FAIL\n"
               "  verify KERNEL...         compile each kernel, run it on fresh random inputs and compare\n"
               "                           with the float64 reference (KERNEL may be 'all', or an XLA HLO\n"
               "                           module FILE.hlo)\n"
               "  verify gpt2              greedy steps after a prompt (prefill, then decode steps against the\n"
               "                           KV cache), each compared with the float64 reference: embedding,\n"
               "                           block residuals, logits and token\n"
               "Kernels pass when ||out - ref|| / ||ref|| is under the tolerance: 1e-5 for f32, 1e-12 for f64;\n"
               "for bf16 and f16 the reference runs on the same 16-bit inputs, rounding only where the\n"
               "program converts, and the bound is 4 u + K 2^-24 (u = 2^-8 bf16, 2^-11 f16; K the longest\n"
               "reduction), printed with each run. Without --tolerance, an output past its bound still\n"
               "passes within 4 times the error of the reference evaluated in f32 arithmetic (every f32\n"
               "op rounded once): an ill-conditioned output (a sum that cancels), noted under its row.\n"
               "Exit status: 0 PASS, 1 FAIL, 2 unusable input."};
  app.footer(
      "Examples:\n"
      "  verify y.npy expected.npy --rtol 1e-5 --atol 1e-6\n"
      "  verify softmax --shape 128x1000 --target gpu --chip sm_90\n"
      "  verify matmul --shape 1x768 --shape 50257x768 --transpose-b --target gpu\n"
      "  verify layernorm --input-offset 1e4 --tolerance 1e-2 --target cpu  # near 1e4 f32 keeps ~1e-3 of the spread\n"
      "  verify all --target cpu\n"
      "  verify all --dtype bf16 --target cpu   # 16-bit storage, f32 arithmetic\n"
      "  verify matmul --shape 17x33 --shape 65x33 --transpose-b --epilogue bias-gelu --matmul cublas\n"
      "  verify model.hlo --target cpu --save out/\n"
      "  verify model.hlo --target gpu --repro bug/     # on a mismatch: bug/model/replay.sh\n"
      "  verify model.hlo --inputs run/    # on run/in0.npy...; outputs also against run/out0.npy...\n"
      "  verify gpt2 --steps 10 --mode sublayer --target cpu --weights synthetic --config tiny\n"
      "  verify gpt2 --steps 10 --mode fused --cache compare --config tiny   # with against without the KV cache");
  mlpipe::VerifyFlags flags;
  mlpipe::KernelVerifyRequest &request = flags.kernels;
  mlpipe::Gpt2VerifyRequest &gpt2 = flags.gpt2;
  app.add_option("what", flags.what, "Two .npy files, kernel names or FILE.hlo modules, or gpt2")->required();
  app.add_option("--rtol", flags.rtol, "Files: relative tolerance")->check(mlpipe::kNonNegative)->capture_default_str();
  app.add_option("--atol", flags.atol, "Files: absolute tolerance")->check(mlpipe::kNonNegative)->capture_default_str();
  app.add_option("--shape", flags.shapes, "Kernels: shape of each input in order");
  app.add_option("--dtype", flags.dtype,
                 "Kernels and gpt2: float storage type (bf16 and f16 compute in f32; gpt2: f32, bf16 or f16)")
      ->check(CLI::IsMember({"f32", "f64", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--batch", request.options.batch, "matmul: batch size")->check(mlpipe::kPositive);
  app.add_option("--heads", request.options.heads, "attention: heads")->capture_default_str();
  app.add_option("--target", flags.target, "Kernels: gpu or cpu (default: gpu when there is one)")
      ->check(CLI::IsMember({"gpu", "cpu"}));
  app.add_option("--chip", request.chip, "Kernels on the GPU: chip to compile for")->capture_default_str();
  app.add_option("--format", request.format,
                 "Kernels on the GPU: bin (cubin), fatbin, or isa (PTX the driver assembles)")
      ->check(CLI::IsMember({"bin", "fatbin", "isa"}))
      ->capture_default_str();
  app.add_option("--matmul", flags.matmul, mlpipe::kMatmulFlagHelp)->check(CLI::IsMember({"cublas", "generated"}));
  app.add_option("--pass-option", request.passOptions,
                 "Kernels and gpt2: PASS:OPTIONS added to a pass's options where the compile pipelines run it "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_option("--precision", request.precision, mlpipe::kPrecisionFlagHelp)
      ->check(CLI::IsMember({"f32", "tf32"}))
      ->capture_default_str();
  app.add_flag("--transpose-a", request.options.transposeA,
               "matmul: a is stored transposed ([K, M], --shape as stored) and read through a transposed view");
  app.add_flag("--transpose-b", request.options.transposeB,
               "matmul: b is stored transposed ([N, K], --shape as stored) and read through a transposed view");
  app.add_option("--epilogue", request.options.epilogue,
                 "matmul: what follows a @ b: none, bias (+ bias[N]), bias-gelu (GELU, tanh form, of that), "
                 "bias-residual (residual[M, N] + that) or bias-tanh (tanh of it: no cuBLASLt epilogue)")
      ->check(CLI::IsMember(mlpipe::matmulEpilogues()))
      ->capture_default_str();
  app.add_option("--save", request.saveDirectory,
                 "Kernels: write inputs, outputs and float64 reference outputs as .npy under DIR/KERNEL/");
  app.add_option("--repro", request.reproDirectory,
                 "Kernels: a kernel or module that fails leaves DIR/KERNEL/ with its traced module, inputs, actual "
                 "and expected outputs and replay.sh");
  app.add_option("--inputs", request.inputsDirectory,
                 "Kernels: run one program on DIR/in0.npy, in1.npy... (parameter order) instead of random inputs, "
                 "and also compare output i with DIR/out<i>.npy where it exists")
      ->check(CLI::ExistingDirectory);
  app.add_option("--seed", flags.seed,
                 "Seed of the random inputs (default: fresh), or of the synthetic weights (default: 1)")
      ->check(mlpipe::kNonNegative);
  app.add_option("--tolerance", flags.tolerance, "Kernels: bound on ||out-ref||/||ref||")->check(mlpipe::kPositive);
  app.add_option("--input-offset", request.inputOffset, "Kernels: the first input is OFFSET + SCALE * uniform[-1, 1)")
      ->check(mlpipe::kFinite)
      ->capture_default_str();
  app.add_option("--input-scale", request.inputScale, "Kernels: see --input-offset")
      ->check(mlpipe::kFinite)
      ->capture_default_str();
  app.add_flag("--managed", flags.managed, "GPU buffers in managed memory (the tutorial's path), not device memory");
  app.add_flag("--no-graphs", flags.noGraphs, "gpt2: launch every kernel directly instead of replaying CUDA graphs");
  app.add_option("--steps", gpt2.steps, "gpt2: greedy steps")->check(mlpipe::kPositive)->capture_default_str();
  app.add_option("--mode", flags.gpt2Mode, "gpt2: sublayer or fused")
      ->check(CLI::IsMember({"sublayer", "fused"}))
      ->capture_default_str();
  app.add_option("--weights", gpt2.model.weights, "gpt2: synthetic or a model.safetensors")->capture_default_str();
  app.add_option("--config", gpt2.model.config, "gpt2: tiny, 124M or a config.json");
  app.add_option("--prompt", gpt2.model.prompt, "gpt2: the prompt (default: ten tokens)")->check(mlpipe::kNonEmpty);
  app.add_option("--save-weights", gpt2.saveWeights, "gpt2: also write the weights used as .safetensors");
  app.add_option("--cache", flags.gpt2Cache,
                 "gpt2: on (prefill the prompt, then decode steps against the KV cache), off (a forward over the "
                 "whole sequence every step), or compare (both, also against each other)")
      ->check(CLI::IsMember({"on", "off", "compare"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &error) {
    int status = app.exit(error); // prints the flag's error (or --help)
    return status == 0 ? 0 : 2;   // a bad flag is unusable input
  }
  return mlpipe::runVerify(app, flags);
}
