// The unit kernels, each a small Program over the front end with a
// default shape, so that `trace gelu` alone works:
//
//   gelu       y = gelu(x)                         x: 64x256
//   softmax    y = softmax(x) over the last axis   x: 64x256
//   layernorm  y = layer_norm(x, weight, bias)     x: 64x256, weight and bias: 256
//   matmul     y = a @ b (batched with --batch)    a: 64x128, b: 128x96
//              with --transpose-a / --transpose-b an input is stored
//              transposed and read through a transposed view; --epilogue
//              adds bias[N], then GELU, a residual[M, N] or tanh
//   gather     y = table[ids]                      table: 512x64, ids: 32 (i32)
//   attention  y = causal multi-head attention     q, k, v: 64x128, 2 heads
//
// Every result is named y; inputs are named as above. These names are what
// `run` binds .npy files to.
#pragma once

#include "frontend/graph.h"

#include <string>
#include <vector>

namespace mlpipe {

struct KernelOptions {
  std::vector<Shape> shapes; // one per input in order, or empty for the defaults
  DType dtype = DType::f32;  // float type of the kernel
  int64_t batch = 0;         // matmul: > 0 makes it a batched matmul
  int64_t heads = 2;         // attention
  // matmul: a stored [K, M] (b stored [N, K]), --shape as stored, used as
  // swapLastAxes(a) (swapLastAxes(b)).
  bool transposeA = false, transposeB = false;
  // matmul: what follows a @ b, one of matmulEpilogues():
  //   none           y = a @ b
  //   bias           y = a @ b + bias            (bias: [N])
  //   bias-gelu      y = gelu(a @ b + bias)      (GPT-2's c_fc)
  //   bias-residual  y = residual + (a @ b + bias)  (residual: like y; GPT-2's c_proj)
  //   bias-tanh      y = tanh(a @ b + bias)      (no cuBLASLt epilogue computes it)
  std::string epilogue = "none";
};

const std::vector<std::string> &matmulEpilogues();

struct UnitKernel {
  std::string name;
  std::string summary;
  std::vector<std::string> inputNames; // the inputs --shape describes, in order
  std::vector<Shape> defaultShapes;
};

const std::vector<UnitKernel> &unitKernels();
bool isUnitKernel(const std::string &name);

// Records the kernel into a fresh Program (one function named after the
// kernel). Throws mlpipe::Error for an unknown kernel or unusable options.
fe::Program traceUnitKernel(const std::string &name, const KernelOptions &options);

} // namespace mlpipe
