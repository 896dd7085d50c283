// A convolution as im2col and one matmul.
//
// Why this form: a convolution is a matmul of the input's windows by the
// kernel, and mlpipe's matmul paths are its fastest code on both targets
// (cuBLAS with its epilogues on the GPU, the tiled kernel otherwise), while
// a loop over every window per output element would run on the loop
// emitter, one thread per output doing all the arithmetic of its window.
// im2col gives one GEMM with K = window positions x input features, which
// keeps the matrix shapes large for the small kernels CNNs use; a sum of one
// matmul per window position would give as many GEMMs of K = features, too
// thin for the tensor cores when features are few (the first layer has 1 or
// 3). Its cost is memory: the im2col matrix holds each input element once
// per window position that reads it, which kMaxConvolutionWindowPositions
// bounds.
//
// The steps, with B batch, C = F * I input features (F feature groups of I),
// P window positions, O output features, Y the output's spatial sizes:
//   1. input to [B, spatial..., C], kernel to [spatial..., I, O] (with groups
//      [groups, spatial..., I, O / groups]);
//   2. the input padded (low, high, and base dilation as interior padding);
//   3. per window position k, the strided slice it reads: [B, Y..., C];
//   4. the slices side by side, position-major: [B, Y..., F, P * I];
//   5. one matmul [B * Y, P * I] x [P * I, O], or with groups a batched one
//      per group (feature groups take their features, batch groups their
//      part of the batch);
//   6. the result back to the output's axis order.
#include "frontend/convolution.h"

#include "support/error.h"

#include <numeric>

namespace mlpipe::fe {

namespace {

// x with its axes in `order` (result axis i is x's axis order[i]); x itself
// when that is the identity.
Tensor arranged(Graph &graph, Tensor x, const std::vector<int64_t> &order) {
  std::vector<int64_t> identity(order.size());
  std::iota(identity.begin(), identity.end(), 0);
  return order == identity ? x : graph.transpose(x, order);
}

// Step 2: the spatial axes of the [B, spatial..., C] input padded as the
// window says (negative padding cuts), holes between dilated elements
// included.
Tensor paddedInput(Graph &graph, Tensor input, const std::vector<WindowAxis> &window) {
  size_t rank = window.size() + 2;
  std::vector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  bool padded = false;
  for (size_t d = 0; d < window.size(); ++d) {
    low[d + 1] = window[d].padLow;
    high[d + 1] = window[d].padHigh;
    interior[d + 1] = window[d].baseDilation - 1;
    padded = padded || low[d + 1] != 0 || high[d + 1] != 0 || interior[d + 1] != 0;
  }
  return padded ? graph.pad(input, graph.constant(0.0, input.dtype()), low, high, interior) : input;
}

// Steps 3 and 4: the im2col matrix [B, Y..., groups, P * I], window
// position k's slice at k * I within each group.
Tensor windowColumns(Graph &graph, Tensor padded, const std::vector<WindowAxis> &window, const Shape &outputSpatial,
                     const Shape &kernelSpatial, int64_t groups) {
  size_t spatial = window.size(), rank = spatial + 2;
  const Shape shape = padded.shape(); // a copy: recording nodes moves the graph's
  int64_t features = shape.back();
  Shape grouped = shape;
  std::vector<int64_t> position(spatial, 0);
  std::vector<Tensor> columns;
  int64_t positions = numElements(kernelSpatial);
  for (int64_t p = 0; p < positions; ++p) {
    std::vector<int64_t> start(rank, 0), limit = shape, stride(rank, 1);
    for (size_t d = 0; d < spatial; ++d) {
      start[d + 1] = position[d] * window[d].windowDilation;
      stride[d + 1] = window[d].stride;
      limit[d + 1] = start[d + 1] + (outputSpatial[d] - 1) * window[d].stride + 1;
    }
    bool whole = start == std::vector<int64_t>(rank, 0) && limit == shape && stride == std::vector<int64_t>(rank, 1);
    Tensor column = whole ? padded : graph.stridedSlice(padded, start, limit, stride);
    Shape split = column.shape();
    split.back() = groups;
    split.push_back(features / groups);
    columns.push_back(reshaped(graph, column, split));
    for (size_t d = spatial; d-- > 0;) // the next position, row-major
      if (++position[d] < kernelSpatial[d])
        break;
      else
        position[d] = 0;
  }
  return columns.size() == 1 ? columns.front() : graph.concat(columns, static_cast<int64_t>(rank));
}

} // namespace

Tensor lowerConvolution(Graph &graph, Tensor input, Tensor kernel, const ConvolutionDims &dims) {
  size_t spatial = dims.window.size();
  Shape kernelSpatial, outputSpatial;
  for (size_t d = 0; d < spatial; ++d)
    kernelSpatial.push_back(kernel.shape()[dims.kernelSpatial[d]]);
  int64_t positions = numElements(kernelSpatial);
  if (positions > kMaxConvolutionWindowPositions)
    fail("convolution: a window of {} positions is more than the {} the im2col lowering takes", positions,
         kMaxConvolutionWindowPositions);
  // The output's spatial sizes, as Graph::convolution works them out.
  for (size_t d = 0; d < spatial; ++d) {
    const WindowAxis &axis = dims.window[d];
    int64_t padded = (input.shape()[dims.inputSpatial[d]] - 1) * axis.baseDilation + 1 + axis.padLow + axis.padHigh;
    outputSpatial.push_back((padded - ((axis.size - 1) * axis.windowDilation + 1)) / axis.stride + 1);
  }

  // Step 1.
  std::vector<int64_t> inputOrder{dims.inputBatch}, kernelOrder = dims.kernelSpatial;
  inputOrder.insert(inputOrder.end(), dims.inputSpatial.begin(), dims.inputSpatial.end());
  inputOrder.push_back(dims.inputFeature);
  kernelOrder.push_back(dims.kernelInput);
  kernelOrder.push_back(dims.kernelOutput);
  int64_t groups = dims.featureGroups * dims.batchGroups; // one of them is 1
  int64_t outputs = kernel.shape()[dims.kernelOutput], kernelInputs = kernel.shape()[dims.kernelInput];
  int64_t groupOutputs = outputs / groups;
  input = arranged(graph, input, inputOrder);
  Tensor weights;
  std::vector<int64_t> outputMajor{dims.kernelOutput};
  outputMajor.insert(outputMajor.end(), dims.kernelSpatial.begin(), dims.kernelSpatial.end());
  outputMajor.push_back(dims.kernelInput);
  std::vector<int64_t> identity(outputMajor.size());
  std::iota(identity.begin(), identity.end(), 0);
  if (groups == 1 && outputMajor == identity) {
    // An o01i kernel (the layout XLA gives cuDNN's convolutions) is already
    // [O, P * I] in memory: one 2-D transpose makes it the matrix, where a
    // transpose of its axes to [spatial..., I, O] would move the output
    // axis across three others, which the GPU's transpose emitter does not
    // tile.
    int64_t depth = numElements(kernel.shape()) / kernel.shape()[dims.kernelOutput];
    weights = graph.transpose(reshaped(graph, kernel, {kernel.shape()[dims.kernelOutput], depth}), {1, 0});
  } else if (groups == 1) {
    weights = arranged(graph, kernel, kernelOrder);
  } else {
    // The kernel as [groups, spatial..., I, O / groups] in one transpose
    // (the output axis split in place first, which moves no element): a
    // transpose of a transpose, through a reshape, leaves the GPU's
    // transpose emitter a permutation that keeps the innermost axis.
    Shape split = kernel.shape();
    split[dims.kernelOutput] = groupOutputs;
    split.insert(split.begin() + dims.kernelOutput, groups);
    auto moved = [&](int64_t axis) { return axis > dims.kernelOutput ? axis + 1 : axis; };
    std::vector<int64_t> order{dims.kernelOutput};
    for (int64_t axis : dims.kernelSpatial)
      order.push_back(moved(axis));
    order.push_back(moved(dims.kernelInput));
    order.push_back(dims.kernelOutput + 1);
    weights = arranged(graph, reshaped(graph, kernel, split), order);
  }

  // Steps 2 to 4.
  int64_t batch = input.shape().front();
  Tensor columns = windowColumns(graph, paddedInput(graph, input, dims.window), dims.window, outputSpatial,
                                 kernelSpatial, dims.featureGroups);
  int64_t depth = positions * kernelInputs, rows = numElements(outputSpatial) * batch;

  // Step 5: the kernel as [P * I, O], or [groups, P * I, O / groups]
  // (position-major rows, as the columns), the output features of group g
  // at g * O / groups.
  Tensor product;
  if (groups == 1) {
    product = graph.matmul(reshaped(graph, columns, {rows, depth}), reshaped(graph, weights, {depth, outputs}));
  } else {
    weights = reshaped(graph, weights, {groups, depth, groupOutputs});
    Tensor lhs;
    if (dims.featureGroups > 1) // [B * Y, F, P * I] -> [F, B * Y, P * I]
      lhs = arranged(graph, reshaped(graph, columns, {rows, groups, depth}), {1, 0, 2});
    else // the batch is G groups of B / G: [G, B / G * Y, P * I]
      lhs = reshaped(graph, columns, {groups, rows / groups, depth});
    // [groups, rows / groups or rows, O / groups] -> [rows of the result, O]
    product = graph.matmul(lhs, weights);
    int64_t groupRows = product.shape()[1];
    product = reshaped(graph, arranged(graph, product, {1, 0, 2}), {groupRows, outputs});
  }

  // Step 6: [B / G, Y..., O] to the result's order.
  Shape result{batch / dims.batchGroups};
  result.insert(result.end(), outputSpatial.begin(), outputSpatial.end());
  result.push_back(outputs);
  std::vector<int64_t> outputOrder(spatial + 2);
  outputOrder[dims.outputBatch] = 0;
  outputOrder[dims.outputFeature] = static_cast<int64_t>(spatial) + 1;
  for (size_t d = 0; d < spatial; ++d)
    outputOrder[dims.outputSpatial[d]] = static_cast<int64_t>(d) + 1;
  return arranged(graph, reshaped(graph, product, result), outputOrder);
}

std::unique_ptr<Graph> withConvolutionsLowered(const Graph &graph) {
  bool any = false;
  for (const Node &node : graph.nodes())
    any = any || node.kind == OpKind::Convolution;
  if (!any)
    return nullptr;
  return graph.expanded(OpKind::Convolution, [](Graph &copy, const Node &node, const std::vector<Tensor> &operands) {
    return lowerConvolution(copy, operands[0], operands[1], convolutionDims(node));
  });
}

} // namespace mlpipe::fe
