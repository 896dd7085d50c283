// What cuBLASLt can apply to a GEMM's product before it stores it, and the
// matcher that decides whether an elementwise linalg.generic after a matmul
// computes exactly that:
//
//   D = activation(alpha * (A B) + residual + bias[column])
//
// with the bias one value per column of D (cuBLASLt's BIAS epilogue), the
// residual a matrix shaped like D (added as beta * C with C apart from D)
// and the activation GELU in its tanh form (cuBLASLt's GELU epilogue, which
// is GPT-2's gelu_new; the erf form is not it). Sums may come in any order
// and association: cuBLASLt adds in its own order, which differs from the
// program's only by rounding (the GPU tests check every fold against the
// float64 reference).
//
// In 16 bits the generic reads the bias and residual as bf16 or f16
// (arith.extf to f32) and rounds its result to the same type (arith.truncf):
// cuBLASLt does exactly that with C, D and bias of that type, computing in
// f32 and rounding D once. The rounding ends the epilogue.
//
//   GemmEpilogue epilogue;
//   std::string whyNot;
//   if (foldIntoEpilogue(biasGelu, product, epilogue, whyNot)) ... epilogue.describe() == "bias + gelu"
#pragma once

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <string>

namespace mlpipe {

enum class GemmActivation { None, GeluTanh };

struct GemmEpilogue {
  double alpha = 1.0;
  mlir::Value bias;     // rank-1 memref, unit stride, one element per column of D; or null
  mlir::Value residual; // memref shaped like D, row-major; or null
  GemmActivation activation = GemmActivation::None;
  // The type D is stored in once rounded (bf16 or f16), with the bias and
  // the residual; null while D is the f32 product's type.
  mlir::Type stored;

  bool empty() const { return alpha == 1.0 && !bias && !residual && activation == GemmActivation::None && !stored; }
  // "none", "bias", "bias + gelu", "alpha 0.125 + residual + bias", ...
  std::string describe() const;
};

// Whether `generic`, an all-parallel linalg.generic on memrefs that reads
// `product` (the GEMM's output so far) through the identity map, computes
// something `epilogue` extended can express: then `epilogue` is extended and
// true returned. Otherwise false, with `whyNot` saying why in a few words.
//
// It folds at most one new bias, one residual and the activation, and
// scales the product only while nothing else has been added (alpha scales
// A B alone). Once the activation is in, nothing more folds; a residual
// never goes inside the activation. Only the generic itself is examined:
// whether it may move to the GEMM (aliasing, order) is the caller's to say.
bool foldIntoEpilogue(mlir::linalg::GenericOp generic, mlir::Value product, GemmEpilogue &epilogue,
                      std::string &whyNot);

} // namespace mlpipe
