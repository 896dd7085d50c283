// How a convolution is compiled: lowered, before the MLIR text is written,
// into ops mlpipe already compiles (pad, strided slices, concatenate,
// reshape, transpose and one matmul), so it runs through the matmul paths
// (cuBLAS on the GPU). The reference evaluates the Convolution node itself,
// from its definition, so verify checks this lowering.
#pragma once

#include "frontend/graph.h"

#include <memory>

namespace mlpipe::fe {

// The most window positions (the product of the kernel's spatial sizes) a
// convolution may have: the lowering records one strided slice per position
// and its im2col matrix holds that many copies of the input, so a window
// much larger than a CNN's kernels (11x11 = 121, 5x5x5 = 125) would make a
// program of thousands of ops and a matrix of hundreds of input copies.
constexpr int64_t kMaxConvolutionWindowPositions = 256;

// Records `dims`' convolution of `input` by `kernel` in `graph` as im2col
// and a matmul.
Tensor lowerConvolution(Graph &graph, Tensor input, Tensor kernel, const ConvolutionDims &dims);

// `graph` with every Convolution node lowered; nullptr when it has none.
std::unique_ptr<Graph> withConvolutionsLowered(const Graph &graph);

} // namespace mlpipe::fe
