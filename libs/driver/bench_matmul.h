// bench matmul: mlpipe's compiled matmul (each --matmul path) and cuBLAS
// called directly (cublasSgemm / cublasSgemmStridedBatched), on the same
// shapes in one run, for BENCHMARKS.md.
//
// Each path is timed with CUDA events around `launches` back-to-back calls,
// `repeat` times after `warmup` such batches, and the median per call is
// reported with its TFLOP/s and its speed relative to cuBLAS (cuBLAS's time
// over its own: 1.00 is as fast). Operands rotate over enough copies to
// exceed twice the L2 cache of the chip's description, so no path times a
// warm cache. Each path's result is compared with cuBLAS's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlpipe {

// A product A [m, k] @ B [k, n], `batch` times when batch > 0.
struct MatmulShape {
  int64_t batch = 0, m = 0, k = 0, n = 0;
  bool bTransposed = false; // B stored [N, K] and read transposed (a tied embedding)
};
// "1024x768x3072" (m x k x n) or "12x1024x64x1024" (batch x m x k x n); a
// trailing "t" stores B as [N, K] ("16x768x50257t": GPT-2's logits).
MatmulShape parseMatmulShape(const std::string &text);
// "1024x768x3072", "12x(1024x64 @ 64x1024)", "16x768x50257t".
std::string formatMatmulShape(const MatmulShape &shape);

struct MatmulBenchRequest {
  // GPT-2 124M's: c_fc and c_proj at T=1024, the tied logits, c_fc at
  // T=16, the attention's q k^T per head.
  std::vector<MatmulShape> shapes = {
      {0, 1024, 768, 3072}, {0, 1024, 3072, 768}, {0, 1024, 768, 50257}, {0, 16, 768, 3072}, {12, 1024, 64, 1024}};
  std::vector<std::string> matmuls = {"cublas", "generated"};
  std::string precision = "f32";
  // f32, or bf16 or f16: A, B and y stored in 16 bits, products accumulated
  // in f32 (cuBLAS: cuBLASLt with 16-bit A, B and D).
  std::string dtype = "f32";
  std::string chip = "sm_90";
  int warmup = 3;
  int repeat = 15;
  int launches = 20;
};

// Prints the table to stdout. Throws mlpipe::Error without a GPU or cuBLAS.
void benchMatmul(const MatmulBenchRequest &request);

} // namespace mlpipe
