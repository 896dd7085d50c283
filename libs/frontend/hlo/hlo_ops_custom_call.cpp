// XLA's GPU library calls, as its passes leave them in optimised dumps, read
// back as the ops they compute:
//
//   __cudnn$convForward                 convolution(input, kernel)
//   __cudnn$convBackwardFilter          the kernel's gradient of convolution(input, kernel), from
//                                       the input and the result's gradient
//   __cudnn$convBackwardInput           the input's gradient, from the result's gradient and the
//                                       kernel
//   __cudnn$convBiasActivationForward   activation(conv_result_scale * convolution(input, kernel)
//                                           + side_input_scale * side_input + bias)
//   __cublas$gemm                       alpha * dot(a, b) + beta * c
//   __cublas$lt$matmul                  epilogue(alpha * dot(a, b) + beta * c + bias)
//
// as XLA's cudnn_fused_conv_rewriter and gemm_rewriter write them. A cuDNN
// call carries the convolution's window, dim_labels and
// feature_group_count on the instruction, its scales and activation_mode in
// backend_config's cudnn_conv_backend_config, and gives (result, u8[N]
// scratch). Its operands are the input, the kernel, then (for the fused
// form) the bias along the output feature axis and an optional side input
// of the result's shape. A cuBLAS call carries gemm_backend_config
// (alpha_real, alpha_imag, beta, dot_dimension_numbers, epilogue) and gives
// (result, s8[N] workspace), or the result alone in older dumps; its
// operands are a, b, then c when beta is not 0, then (cuBLASLt) the bias
// vector along the result's last axis when the epilogue adds one. Every
// other target, and every field value not listed here, is refused by name.
#include "frontend/hlo/hlo_builder.h"
#include "frontend/hlo/hlo_json.h"

#include <cmath>
#include <map>

namespace mlpipe::fe::hlo {

namespace {

constexpr std::string_view kCudnnForward = "__cudnn$convForward";
constexpr std::string_view kCudnnBiasActivation = "__cudnn$convBiasActivationForward";
constexpr std::string_view kCudnnBackwardFilter = "__cudnn$convBackwardFilter";
constexpr std::string_view kCudnnBackwardInput = "__cudnn$convBackwardInput";
constexpr std::string_view kCublasGemm = "__cublas$gemm";
constexpr std::string_view kCublasLtMatmul = "__cublas$lt$matmul";

// sqrt(2 / pi), the tanh form of GELU that cuBLASLt's GELU epilogue
// computes (XLA fuses that form, GPT-2's gelu_new, into it).
constexpr double kGeluTanhScale = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

} // namespace

// custom-call(...), custom_call_target="...": the library calls above.
// Messages name the call by its instruction, its target and its result.
Value Builder::customCall(const Instruction &written, const std::vector<const Value *> &operands) {
  const Attribute &targetAttribute = attribute(written, "custom_call_target");
  std::string target(targetAttribute.text);
  if (target.size() >= 2 && target.front() == '"' && target.back() == '"')
    target = target.substr(1, target.size() - 2);
  Instruction ins = written;
  if (ins.shape) {
    const ShapeText &first = ins.shape->tuple && !ins.shape->elements.empty() ? ins.shape->elements[0] : *ins.shape;
    std::string dims;
    for (size_t i = 0; i < first.dims.size(); ++i)
      dims += (i ? "," : "") + std::to_string(first.dims[i]);
    ins.name += fmt::format(" ({} giving {}[{}])", printable(target), printable(first.typeName), dims);
  }
  bool cudnn = target == kCudnnForward || target == kCudnnBiasActivation || target == kCudnnBackwardFilter ||
               target == kCudnnBackwardInput;
  bool cublas = target == kCublasGemm || target == kCublasLtMatmul;
  if (!cudnn && !cublas)
    failOp(ins, fmt::format("this library call is not supported: mlpipe reads the cuBLAS GEMMs ({}, {}) and the "
                            "cuDNN convolutions ({}, {}, {}, {}) XLA writes, and no other custom call",
                            kCublasGemm, kCublasLtMatmul, kCudnnForward, kCudnnBiasActivation, kCudnnBackwardFilter,
                            kCudnnBackwardInput));
  if (!ins.shape)
    failOp(ins, "its result shape must be written out");
  // The result, then the library's scratch space.
  const ShapeText &shape = *ins.shape;
  if (cudnn && (!shape.tuple || shape.elements.empty() || shape.elements[0].tuple))
    failOp(ins, "a cuDNN convolution gives a tuple of its result and a u8 scratch buffer");
  if (shape.tuple && (shape.elements.size() != 2 || shape.elements[0].tuple || shape.elements[1].tuple))
    failOp(ins, fmt::format("it gives {} results: mlpipe reads library calls that give their result and one scratch "
                            "buffer (an epilogue's auxiliary output is not read)",
                            shape.elements.size()));
  const ShapeText &result = shape.tuple ? shape.elements[0] : shape;
  Tensor value = target == kCudnnBackwardFilter  ? cudnnBackwardFilter(ins, operands, result)
                 : target == kCudnnBackwardInput ? cudnnBackwardInput(ins, operands, result)
                 : cudnn                         ? cudnnConvolution(ins, operands, target, result)
                                                 : cublasGemm(ins, operands, target, result);
  if (!shape.tuple)
    return tensorValue(value);
  Value tuple;
  tuple.elements = {tensorValue(value), placeholder()};
  return tuple;
}

// __cudnn$convBackwardFilter(input, output gradient): the call's window,
// dim_labels (input_kernel->output, the kernel being the result) and
// feature_group_count are the forward convolution's. Its gradient with
// respect to the kernel is itself a convolution, as XLA writes it before
// its passes: the input's feature axis as the batch (in the forward
// groups, as batch groups), its batch axis contracted with the gradient's,
// the gradient as the kernel (its features the output features), the
// forward stride as the window dilation and the forward window dilation as
// the stride, padded after so that the result spans the kernel's window.
Tensor Builder::cudnnBackwardFilter(const Instruction &ins, const std::vector<const Value *> &operands,
                                    const ShapeText &result) {
  if (operands.size() != 2)
    failOp(ins, fmt::format("{} takes 2 operands (the input and the result's gradient), not {}", kCudnnBackwardFilter,
                            operands.size()));
  Tensor input = tensorOperand(ins, operands, 0), gradient = tensorOperand(ins, operands, 1);
  if (input.rank() != gradient.rank() || static_cast<int64_t>(result.dims.size()) != input.rank() || input.rank() < 2)
    failOp(ins, fmt::format("the input {}, the gradient {} and the kernel's gradient must have one rank, at least 2",
                            describe(input), describe(gradient)));
  DType dtype = elementType(result);
  if (!isFloat(dtype) || !isFloat(input.dtype()) || !isFloat(gradient.dtype()))
    failOp(ins, "mlpipe convolves floats");
  ConvolutionDims forward = convolutionAttributes(ins, input.rank());
  int64_t spatial = input.rank() - 2;
  if (forward.batchGroups != 1)
    failOp(ins, fmt::format("batch_group_count={} in a backward filter is not read", forward.batchGroups));

  ConvolutionDims dims;
  dims.inputBatch = forward.inputFeature;
  dims.inputFeature = forward.inputBatch;
  dims.inputSpatial = forward.inputSpatial;
  dims.kernelInput = forward.outputBatch;
  dims.kernelOutput = forward.outputFeature;
  dims.kernelSpatial = forward.outputSpatial;
  dims.outputBatch = forward.kernelInput;
  dims.outputFeature = forward.kernelOutput;
  dims.outputSpatial = forward.kernelSpatial;
  dims.batchGroups = forward.featureGroups;
  for (int64_t d = 0; d < spatial; ++d) {
    const WindowAxis &axis = forward.window[static_cast<size_t>(d)];
    if (axis.baseDilation != 1)
      failOp(ins,
             fmt::format("lhs_dilate={} along spatial axis {} in a backward filter is not read", axis.baseDilation, d));
    int64_t inputSize = input.shape()[forward.inputSpatial[d]];
    int64_t gradientSize = gradient.shape()[forward.outputSpatial[d]];
    int64_t kernelSize = result.dims[static_cast<size_t>(forward.kernelSpatial[d])];
    if (axis.size != kernelSize)
      failOp(ins, fmt::format("the window's size along spatial axis {} is {}, but the kernel's gradient has {} there",
                              d, axis.size, kernelSize));
    WindowAxis transposed;
    transposed.size = gradientSize;
    transposed.stride = axis.windowDilation;
    transposed.windowDilation = axis.stride;
    transposed.padLow = axis.padLow;
    // The last window starts at (kernelSize - 1) * windowDilation.
    transposed.padHigh =
        (kernelSize - 1) * axis.windowDilation + (gradientSize - 1) * axis.stride + 1 - inputSize - axis.padLow;
    dims.window.push_back(transposed);
  }
  Tensor y = checkedConvolution(ins, input, gradient, dims, dtype);
  Shape expected(result.dims.begin(), result.dims.end());
  if (y.shape() != expected)
    failOp(ins, fmt::format("the kernel's gradient is {}, but the call gives {}[{}]", describe(y),
                            printable(result.typeName), fmt::join(result.dims, ",")));
  return y;
}

// __cudnn$convBackwardInput(dy, kernel): the call's window, dim_labels
// (the input being the result) and feature_group_count are the forward
// convolution's. The input's gradient is the convolution JAX writes for
// it: dy dilated by the forward stride, by the kernel reversed along its
// spatial axes with its input and output features swapped, with the
// forward window dilation, padded so that the result spans the input.
Tensor Builder::cudnnBackwardInput(const Instruction &ins, const std::vector<const Value *> &operands,
                                   const ShapeText &result) {
  if (operands.size() != 2)
    failOp(ins, fmt::format("{} takes 2 operands (the result's gradient and the kernel), not {}", kCudnnBackwardInput,
                            operands.size()));
  Tensor gradient = tensorOperand(ins, operands, 0), kernel = tensorOperand(ins, operands, 1);
  if (gradient.rank() != kernel.rank() || static_cast<int64_t>(result.dims.size()) != kernel.rank() ||
      kernel.rank() < 2)
    failOp(ins, fmt::format("the gradient {}, the kernel {} and the input's gradient must have one rank, at least 2",
                            describe(gradient), describe(kernel)));
  DType dtype = elementType(result);
  if (!isFloat(dtype) || !isFloat(gradient.dtype()) || !isFloat(kernel.dtype()))
    failOp(ins, "mlpipe convolves floats");
  ConvolutionDims forward = convolutionAttributes(ins, kernel.rank());
  int64_t spatial = kernel.rank() - 2;
  if (forward.featureGroups != 1 || forward.batchGroups != 1)
    failOp(ins, fmt::format("feature_group_count={} or batch_group_count={} in a backward input is not read",
                            forward.featureGroups, forward.batchGroups));

  ConvolutionDims dims;
  dims.inputBatch = forward.outputBatch;
  dims.inputFeature = forward.outputFeature;
  dims.inputSpatial = forward.outputSpatial;
  dims.kernelInput = forward.kernelOutput;
  dims.kernelOutput = forward.kernelInput;
  dims.kernelSpatial = forward.kernelSpatial;
  dims.outputBatch = forward.inputBatch;
  dims.outputFeature = forward.inputFeature;
  dims.outputSpatial = forward.inputSpatial;
  for (int64_t d = 0; d < spatial; ++d) {
    const WindowAxis &axis = forward.window[static_cast<size_t>(d)];
    if (axis.baseDilation != 1)
      failOp(ins,
             fmt::format("lhs_dilate={} along spatial axis {} in a backward input is not read", axis.baseDilation, d));
    int64_t inputSize = result.dims[static_cast<size_t>(forward.inputSpatial[d])];
    int64_t gradientSize = gradient.shape()[forward.outputSpatial[d]];
    int64_t span = (axis.size - 1) * axis.windowDilation + 1;
    WindowAxis transposed;
    transposed.size = axis.size;
    transposed.baseDilation = axis.stride;
    transposed.windowDilation = axis.windowDilation;
    transposed.padLow = span - 1 - axis.padLow;
    transposed.padHigh = inputSize + span - 1 - (gradientSize - 1) * axis.stride - 1 - transposed.padLow;
    dims.window.push_back(transposed);
  }
  Tensor flipped = reversed(kernel, forward.kernelSpatial);
  Tensor y = checkedConvolution(ins, gradient, flipped, dims, dtype);
  Shape expected(result.dims.begin(), result.dims.end());
  if (y.shape() != expected)
    failOp(ins, fmt::format("the input's gradient is {}, but the call gives {}[{}]", describe(y),
                            printable(result.typeName), fmt::join(result.dims, ",")));
  return y;
}

Tensor Builder::cudnnConvolution(const Instruction &ins, const std::vector<const Value *> &operands,
                                 const std::string &target, const ShapeText &result) {
  bool fused = target == kCudnnBiasActivation;
  if (fused ? operands.size() != 3 && operands.size() != 4 : operands.size() != 2)
    failOp(ins, fmt::format("{} takes {} operands, not {}", target,
                            fused ? "3 (input, kernel, bias) or 4 (and a side input)" : "2 (input and kernel)",
                            operands.size()));
  Instruction conv = ins; // the call's window, dim_labels and groups, its result's shape
  conv.shape = result;
  Tensor input = tensorOperand(ins, operands, 0), kernel = tensorOperand(ins, operands, 1);
  Tensor y = convolution(conv, input, kernel);
  DType dtype = y.dtype();
  if (!fused)
    return y;

  std::optional<Json> config = backendConfig(ins);
  const Json *conv_config = config ? config->find("cudnn_conv_backend_config") : nullptr;
  if (!conv_config)
    failOp(ins, "its backend_config has no cudnn_conv_backend_config");
  auto scale = [&](const char *name, double absent) {
    const Json *field = conv_config->find(name);
    if (!field)
      return absent;
    std::optional<double> value = field->numeric();
    if (!value || !std::isfinite(*value))
      failOp(ins, fmt::format("cudnn_conv_backend_config's {} is not a finite number", name));
    return *value;
  };
  // Protobuf's JSON leaves out fields at their default (0): an absent
  // conv_result_scale would scale the convolution away, so it must be
  // written; side_input_scale at 0 means no side input.
  if (!conv_config->find("conv_result_scale"))
    failOp(ins, "its cudnn_conv_backend_config gives no conv_result_scale");
  double convScale = scale("conv_result_scale", 1), sideScale = scale("side_input_scale", 0);
  if (convScale != 1)
    y = graph_->binary(BinaryFn::Mul, y, graph_->constant(convScale, dtype));
  if (operands.size() == 4) {
    Tensor side = tensorOperand(ins, operands, 3);
    if (side.shape() != y.shape())
      failOp(ins, fmt::format("the side input {} is not the result's shape {}", describe(side), describe(y)));
    if (sideScale != 0)
      y = graph_->binary(
          BinaryFn::Add, y,
          graph_->binary(BinaryFn::Mul, graph_->convert(side, dtype), graph_->constant(sideScale, dtype)));
  }
  Tensor bias = tensorOperand(ins, operands, 2);
  int64_t feature = dimensionLabels(conv, input.rank()).outputFeature;
  if (bias.rank() != 1 || bias.shape()[0] != y.shape()[static_cast<size_t>(feature)])
    failOp(ins, fmt::format("the bias {} is not one value per output feature of {} (axis {})", describe(bias),
                            describe(y), feature));
  y = graph_->binary(BinaryFn::Add, y, graph_->broadcast(graph_->convert(bias, dtype), y.shape(), {feature}));

  const Json *mode = conv_config->find("activation_mode");
  std::string activation = mode && mode->kind == Json::Kind::String ? mode->text : mode ? "?" : "kNone";
  Tensor zero = graph_->constant(0, dtype);
  if (activation == "kNone")
    return y;
  if (activation == "kRelu")
    return graph_->binary(BinaryFn::Max, y, zero);
  if (activation == "kRelu6")
    return graph_->binary(BinaryFn::Min, graph_->binary(BinaryFn::Max, y, zero), graph_->constant(6, dtype));
  if (activation == "kElu")
    return graph_->select(graph_->compare(CompareFn::Gt, y, zero), y, graph_->unary(UnaryFn::Expm1, y));
  if (activation == "kLeakyRelu") {
    double alpha = scale("leakyrelu_alpha", 0);
    return graph_->select(graph_->compare(CompareFn::Gt, y, zero), y,
                          graph_->binary(BinaryFn::Mul, y, graph_->constant(alpha, dtype)));
  }
  failOp(ins, fmt::format("activation_mode {} is not supported: mlpipe reads kNone, kRelu, kRelu6, kElu and "
                          "kLeakyRelu, the activations XLA fuses into a cuDNN convolution",
                          printable(activation)));
}

Tensor Builder::cublasGemm(const Instruction &ins, const std::vector<const Value *> &operands,
                           const std::string &target, const ShapeText &result) {
  std::optional<Json> config = backendConfig(ins);
  const Json *gemm = config ? config->find("gemm_backend_config") : nullptr;
  if (!gemm)
    failOp(ins, "its backend_config has no gemm_backend_config");
  auto number = [&](const char *name) {
    const Json *field = gemm->find(name);
    std::optional<double> value = field ? field->numeric() : std::optional<double>(0);
    if (!value || !std::isfinite(*value))
      failOp(ins, fmt::format("gemm_backend_config's {} is not a finite number", name));
    return *value;
  };
  // Protobuf's JSON leaves out fields at their default (0, empty): an
  // absent alpha_real would zero the product and absent dimension numbers
  // would make it an outer product, so both must be written.
  const Json *numbers = gemm->find("dot_dimension_numbers");
  if (!gemm->find("alpha_real") || !numbers || numbers->kind != Json::Kind::Object)
    failOp(ins, "its gemm_backend_config does not give alpha_real and dot_dimension_numbers");
  double alpha = number("alpha_real"), beta = number("beta");
  if (number("alpha_imag") != 0)
    failOp(ins, fmt::format("alpha_imag={} scales by a complex number; mlpipe reads real GEMMs", number("alpha_imag")));
  auto axes = [&](const char *name) {
    std::vector<int64_t> list;
    if (const Json *field = numbers->find(name)) {
      if (field->kind != Json::Kind::Array)
        failOp(ins, fmt::format("dot_dimension_numbers' {} is not a list", name));
      for (const Json &item : field->items) {
        std::optional<double> axis = item.numeric();
        if (!axis || *axis < 0 || *axis != std::trunc(*axis) || *axis > static_cast<double>(kMaxRank))
          failOp(ins, fmt::format("dot_dimension_numbers' {} holds something other than an axis", name));
        list.push_back(static_cast<int64_t>(*axis));
      }
    }
    return list;
  };
  DotDimensions dims{axes("lhs_batch_dimensions"), axes("rhs_batch_dimensions"), axes("lhs_contracting_dimensions"),
                     axes("rhs_contracting_dimensions")};
  const Json *epilogueField = gemm->find("epilogue");
  std::string epilogue = epilogueField && epilogueField->kind == Json::Kind::String ? epilogueField->text
                         : epilogueField                                            ? "?"
                                                                                    : "DEFAULT";
  static const std::map<std::string, std::pair<bool, const char *>> epilogues = {
      {"DEFAULT", {false, ""}},  {"BIAS", {true, ""}},          {"RELU", {false, "relu"}},
      {"GELU", {false, "gelu"}}, {"BIAS_RELU", {true, "relu"}}, {"BIAS_GELU", {true, "gelu"}}};
  auto kind = epilogues.find(epilogue);
  if (kind == epilogues.end() || (target == kCublasGemm && epilogue != "DEFAULT"))
    failOp(ins, fmt::format("epilogue {} is not supported: mlpipe reads DEFAULT{}", printable(epilogue),
                            target == kCublasGemm ? " on __cublas$gemm"
                                                  : ", BIAS, RELU, GELU, BIAS_RELU and BIAS_GELU (not the _AUX "
                                                    "forms, which give a second output)"));
  auto [addsBias, activation] = kind->second;
  size_t expected = 2 + (beta != 0 ? 1 : 0) + (addsBias ? 1 : 0);
  if (operands.size() != expected)
    failOp(ins, fmt::format("it takes {} operands (a, b{}{}), not {}", expected,
                            beta != 0 ? ", c as beta is not 0" : "", addsBias ? ", the bias" : "", operands.size()));
  DType dtype = elementType(result);
  Tensor y = dotGeneral(ins, tensorOperand(ins, operands, 0), tensorOperand(ins, operands, 1), dims, dtype);
  if (y.shape() != result.dims)
    failOp(ins, fmt::format("the product is {}, but the call declares {}", describe(y), hloShape(dtype, result.dims)));
  if (alpha != 1)
    y = graph_->binary(BinaryFn::Mul, y, graph_->constant(alpha, dtype));
  if (beta != 0) {
    Tensor c = tensorOperand(ins, operands, 2);
    if (c.shape() != y.shape())
      failOp(ins, fmt::format("c {} is not the result's shape {}", describe(c), describe(y)));
    y = graph_->binary(BinaryFn::Add, y,
                       graph_->binary(BinaryFn::Mul, graph_->convert(c, dtype), graph_->constant(beta, dtype)));
  }
  if (addsBias) {
    Tensor bias = tensorOperand(ins, operands, operands.size() - 1);
    // cuBLASLt adds the vector to every row of the row-major result; laid
    // out otherwise, its axis is not the last logical one.
    if (!hasDefaultLayout(result))
      failOp(ins, "a bias epilogue on a result with a non-default layout is not supported");
    if (y.rank() < 1 || bias.rank() != 1 || bias.shape()[0] != y.shape().back())
      failOp(ins, fmt::format("the bias {} is not one value per element of the last axis of {}", describe(bias),
                              describe(y)));
    y = graph_->binary(BinaryFn::Add, y, graph_->broadcast(graph_->convert(bias, dtype), y.shape(), {y.rank() - 1}));
  }
  std::string_view act = activation;
  if (act == "relu")
    return graph_->binary(BinaryFn::Max, y, graph_->constant(0, dtype));
  if (act == "gelu") {
    Tensor cube = graph_->binary(BinaryFn::Mul, graph_->binary(BinaryFn::Mul, y, y), y);
    Tensor inner =
        graph_->binary(BinaryFn::Add, y, graph_->binary(BinaryFn::Mul, cube, graph_->constant(kGeluCubic, dtype)));
    Tensor t =
        graph_->unary(UnaryFn::Tanh, graph_->binary(BinaryFn::Mul, inner, graph_->constant(kGeluTanhScale, dtype)));
    Tensor half = graph_->binary(BinaryFn::Mul, y, graph_->constant(0.5, dtype));
    return graph_->binary(BinaryFn::Mul, half, graph_->binary(BinaryFn::Add, t, graph_->constant(1, dtype)));
  }
  return y;
}

} // namespace mlpipe::fe::hlo
