// The unit kernels, each a small Program over the front end with a
// default shape, so that `trace gelu` alone works:
//
//   gelu       y = gelu(x)                         x: 64x256
//   softmax    y = softmax(x) over the last axis   x: 64x256
//   layernorm  y = layer_norm(x, weight, bias)     x: 64x256, weight and bias: 256
//   matmul     y = a @ b (batched with --batch;    a: 64x128, b: 128x96
//              a and/or b stored transposed with --transpose-a/-b)
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
  // matmul: the input is stored transposed (a as [K, M], b as [N, K], like a
  // tied embedding) and the program reads it through a transpose; --shape
  // still gives the product's a (MxK) and b (KxN).
  bool transposeA = false;
  bool transposeB = false;
  int64_t heads = 2; // attention
};

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
