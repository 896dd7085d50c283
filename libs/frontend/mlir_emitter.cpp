// Text emission of linalg-on-tensors MLIR from a recorded graph. See the
// header for the op each node becomes. The text is parsed and verified by the
// compiler before anything else sees it, so a slip here is caught at once.
//
// f16 and bf16 values are stored in their own type but computed in f32: an
// elementwise body extends its operands (arith.extf) and truncates its
// result (arith.truncf); reductions and matmuls run on f32 copies of their
// operands and truncate the result.
//
// emitter/function_emitter.h writes each function, one file per family of
// nodes; emitter/mlir_text.h spells literals, maps and op names.
#include "frontend/mlir_emitter.h"

#include "frontend/convolution.h"
#include "frontend/emitter/function_emitter.h"
#include "frontend/scatter_gather.h"
#include "frontend/sort.h"

#include "support/error.h"

namespace mlpipe::fe {

std::string tensorType(const Shape &shape, DType dtype) {
  std::string text = "tensor<";
  for (int64_t dim : shape)
    text += std::to_string(dim) + "x";
  return text + mlirType(dtype) + ">";
}

const char *mlirType(DType dtype) {
  switch (dtype) {
  case DType::u8:
    return "i8";
  case DType::u16:
    return "i16";
  case DType::u32:
    return "i32";
  case DType::u64:
    return "i64";
  default:
    return dtypeName(dtype);
  }
}

// Convolutions, sorts, gathers and scatters become the ops they are
// compiled as (convolution.h, sort.h, scatter_gather.h).
std::unique_ptr<Graph> withOpsLowered(const Graph &graph) {
  std::unique_ptr<Graph> lowered = withConvolutionsLowered(graph);
  if (std::unique_ptr<Graph> sorted = withSortsLowered(lowered ? *lowered : graph))
    lowered = std::move(sorted);
  if (std::unique_ptr<Graph> indexed = withScatterGatherLowered(lowered ? *lowered : graph))
    lowered = std::move(indexed);
  return lowered;
}

std::string emitMlir(const Program &program) {
  std::string out = "module {\n";
  for (auto &function : program.functions) {
    if (function->outputs().empty())
      fail("function '{}' has no outputs", function->name());
    std::unique_ptr<Graph> lowered = withOpsLowered(*function);
    emitter::FunctionEmitter(lowered ? *lowered : *function, out).emit();
  }
  out += "}\n";
  return out;
}

} // namespace mlpipe::fe
