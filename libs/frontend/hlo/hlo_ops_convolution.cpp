// HLO's convolution recorded into the front-end graph: XLA's general
// dimension numbers (dim_labels=b01f_01io->b01f, any permutation, any
// number of spatial axes), its window (size, stride, pad, lhs_dilate,
// rhs_dilate), feature_group_count (grouped and depthwise convolutions) and
// batch_group_count (as JAX writes a grouped convolution's weight gradient).
#include "frontend/convolution.h"
#include "frontend/hlo/hlo_builder.h"

#include <algorithm>
#include <cctype>

namespace mlpipe::fe::hlo {

// dim_labels=b01f_01io->b01f: the input's axes (b batch, f feature), the
// kernel's (i input feature, o output feature), then the result's (b, f);
// digits are the spatial axes, the same digit naming the same axis in all
// three. Each string has one letter per axis of its tensor.
ConvolutionDims Builder::dimensionLabels(const Instruction &ins, int64_t rank) const {
  const Attribute &labels = attribute(ins, "dim_labels");
  return parseAttribute(labels, [&](Cursor &in) {
    in.skipTrivia();
    ConvolutionDims dims;
    int64_t spatial = rank - 2;
    dims.inputSpatial.assign(static_cast<size_t>(spatial), -1);
    dims.kernelSpatial = dims.inputSpatial;
    dims.outputSpatial = dims.inputSpatial;
    // One tensor's labels: `first` and `second` are its two lettered axes.
    auto part = [&](const char *tensor, char first, char second, int64_t &firstAxis, int64_t &secondAxis,
                    std::vector<int64_t> &spatialAxes) {
      Location start = in.location();
      firstAxis = secondAxis = -1;
      int64_t axis = 0;
      for (; std::isalnum(static_cast<unsigned char>(in.peek())); ++axis, in.advance()) {
        char c = in.peek();
        int64_t *slot = c == first                      ? &firstAxis
                        : c == second                   ? &secondAxis
                        : c >= '0' && c - '0' < spatial ? &spatialAxes[static_cast<size_t>(c - '0')]
                                                        : nullptr;
        if (!slot || *slot != -1)
          in.fail(in.location(),
                  fmt::format("convolution: dim_labels: '{}' is not an axis of the {} or names one twice: its "
                              "labels are {}, {} and the digits 0 to {}",
                              c, tensor, first, second, spatial - 1));
        *slot = axis;
      }
      if (axis != rank)
        in.fail(start, fmt::format("convolution: dim_labels: the {} has {} labels, but {} axes", tensor, axis, rank));
    };
    part("input", 'b', 'f', dims.inputBatch, dims.inputFeature, dims.inputSpatial);
    in.expect('_', "'_' after the input's dim_labels");
    part("kernel", 'i', 'o', dims.kernelInput, dims.kernelOutput, dims.kernelSpatial);
    in.expect('-', "'->' after the kernel's dim_labels");
    in.expect('>', "'->' after the kernel's dim_labels");
    part("result", 'b', 'f', dims.outputBatch, dims.outputFeature, dims.outputSpatial);
    return dims;
  });
}

// A convolution's dim_labels, window and groups, as its instruction (or a
// cuDNN call's) writes them.
ConvolutionDims Builder::convolutionAttributes(const Instruction &ins, int64_t rank) const {
  ConvolutionDims dims = dimensionLabels(ins, rank);
  int64_t spatial = rank - 2;
  if (findAttribute(ins, "window"))
    dims.window = window(ins, spatial, "number of spatial axes");
  else if (spatial > 0)
    failOp(ins, fmt::format("a convolution over {} spatial axes needs a window", spatial));
  for (const char *name : {"feature_group_count", "batch_group_count"})
    if (const Attribute *groups = findAttribute(ins, name)) {
      int64_t count = intValue(*groups);
      if (count < 1)
        failOp(ins, fmt::format("{}={} is below 1", name, count));
      (std::string_view(name) == "feature_group_count" ? dims.featureGroups : dims.batchGroups) = count;
    }
  return dims;
}

// convolution(input, kernel), window={...}, dim_labels=...,
// feature_group_count=N, batch_group_count=N: the graph's Convolution,
// its operands converted to the result's float type first (as dot does
// for preferred_element_type).
Tensor Builder::convolution(const Instruction &ins, Tensor input, Tensor kernel) {
  if (input.rank() != kernel.rank())
    failOp(ins, fmt::format("the input {} and the kernel {} differ in rank", describe(input), describe(kernel)));
  if (input.rank() < 2)
    failOp(ins, fmt::format("the input {} has no room for a batch and a feature axis", describe(input)));
  for (const char *name : {"window_reversal", "rhs_reversal"})
    if (findAttribute(ins, name))
      failOp(ins, fmt::format("{} is not supported", name));
  DType result = elementType(arrayShape(ins));
  if (!isFloat(result) || !isFloat(input.dtype()) || !isFloat(kernel.dtype()))
    failOp(ins, fmt::format("a convolution of {} by {} giving {} is not supported: mlpipe convolves floats",
                            describe(input), describe(kernel), hloTypeName(result)));
  ConvolutionDims dims = convolutionAttributes(ins, input.rank());
  // batch_group_count=G splits the input's batch into G contiguous groups
  // and the output features into G contiguous blocks: block g reads batch
  // group g only (XLA's evaluator; what JAX's weight gradient of a grouped
  // convolution relies on). The graph's Convolution has that meaning.
  if (dims.featureGroups > 1 && dims.batchGroups > 1)
    failOp(ins, fmt::format("feature_group_count={} and batch_group_count={}: XLA takes one of them above 1",
                            dims.featureGroups, dims.batchGroups));
  return checkedConvolution(ins, input, kernel, dims, result);
}

Tensor Builder::checkedConvolution(const Instruction &ins, Tensor input, Tensor kernel, const ConvolutionDims &dims,
                                   DType result) {
  int64_t positions = 1;
  for (size_t d = 0; d < dims.window.size(); ++d) {
    const WindowAxis &axis = dims.window[d];
    int64_t kernelSize = kernel.shape()[dims.kernelSpatial[d]];
    if (axis.size != kernelSize)
      failOp(ins, fmt::format("the window's size along spatial axis {} is {}, but the kernel {} has {} there", d,
                              axis.size, describe(kernel), kernelSize));
    // In 128 bits: the sizes come from the file and may be anything.
    using Wide = __int128;
    Wide padded = Wide(input.shape()[dims.inputSpatial[d]] - 1) * axis.baseDilation + 1 + axis.padLow + axis.padHigh;
    Wide span = Wide(axis.size - 1) * axis.windowDilation + 1;
    if (padded < span)
      failOp(ins, fmt::format("along spatial axis {} the window spans {} positions but the padded input has {}: the "
                              "result would be empty",
                              d, static_cast<double>(span), static_cast<double>(padded)));
    positions = std::min(positions * axis.size, kMaxConvolutionWindowPositions + 1);
  }
  if (positions > kMaxConvolutionWindowPositions)
    failOp(ins,
           fmt::format("a window of more than {} positions is not supported: mlpipe lowers a convolution to one matmul "
                       "of the input's windows (im2col) and takes windows of at most that many positions",
                       kMaxConvolutionWindowPositions));
  int64_t features = input.shape()[dims.inputFeature], kernelInputs = kernel.shape()[dims.kernelInput];
  int64_t outputs = kernel.shape()[dims.kernelOutput], batch = input.shape()[dims.inputBatch];
  if (features != kernelInputs * dims.featureGroups)
    failOp(ins, fmt::format("the input {} has {} features, but the kernel {} takes {} in each of {} groups",
                            describe(input), features, describe(kernel), kernelInputs, dims.featureGroups));
  int64_t groups = dims.featureGroups * dims.batchGroups;
  if (outputs % groups != 0)
    failOp(ins, fmt::format("the kernel's {} output features do not split into {} groups", outputs, groups));
  if (batch % dims.batchGroups != 0)
    failOp(ins, fmt::format("the input's batch of {} does not split into {} groups", batch, dims.batchGroups));
  return graph_->convolution(graph_->convert(input, result), graph_->convert(kernel, result), dims);
}

} // namespace mlpipe::fe::hlo
