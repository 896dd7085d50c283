// The opcodes the HLO builder knows: the elementwise ones it maps onto the
// graph's unary and binary functions, and every one XLA has that it refuses.
#include "frontend/hlo/hlo_builder.h"

namespace mlpipe::fe::hlo {

// Every opcode XLA knows that mlpipe does not read, to tell "not supported"
// from "unknown".
const std::set<std::string_view> &unsupportedOpcodes() {
  static const std::set<std::string_view> opcodes = {
      "acos",
      "acosh",
      "add-dependency",
      "after-all",
      "all-gather",
      "all-gather-done",
      "all-gather-start",
      "all-reduce",
      "all-reduce-done",
      "all-reduce-start",
      "all-to-all",
      "asin",
      "asinh",
      "async-done",
      "async-start",
      "async-update",
      "atanh",
      "batch-norm-grad",
      "batch-norm-inference",
      "batch-norm-training",
      "bitcast-convert",
      "cbrt",
      "cholesky",
      "collective-broadcast",
      "collective-permute",
      "collective-permute-done",
      "collective-permute-start",
      "complex",
      "composite",
      "conditional",
      "convolution",
      "copy-done",
      "copy-start",
      "cosh",
      "custom-call",
      "domain",
      "dynamic-reshape",
      "dynamic-slice",
      "dynamic-update-slice",
      "fft",
      "get-dimension-size",
      "imag",
      "infeed",
      "map",
      "outfeed",
      "partition-id",
      "ragged-all-to-all",
      "ragged-dot",
      "real",
      "recv",
      "recv-done",
      "reduce-precision",
      "reduce-scatter",
      "reduce-window",
      "replica-id",
      "reverse",
      "rng",
      "rng-bit-generator",
      "rng-get-and-update-state",
      "scaled-dot",
      "scan",
      "scatter",
      "select-and-scatter",
      "send",
      "send-done",
      "set-dimension-size",
      "sinh",
      "sort",
      "stochastic-convert",
      "topk",
      "triangular-solve",
      "while",
  };
  return opcodes;
}

const std::map<std::string_view, UnaryFn> &unaryOpcodes() {
  static const std::map<std::string_view, UnaryFn> opcodes = {
      {"negate", UnaryFn::Neg},
      {"exponential", UnaryFn::Exp},
      {"tanh", UnaryFn::Tanh},
      {"sqrt", UnaryFn::Sqrt},
      {"rsqrt", UnaryFn::Rsqrt},
      {"log", UnaryFn::Log},
      {"abs", UnaryFn::Abs},
      {"not", UnaryFn::Not},
      {"sine", UnaryFn::Sin},
      {"cosine", UnaryFn::Cos},
      {"tan", UnaryFn::Tan},
      {"erf", UnaryFn::Erf},
      {"exponential-minus-one", UnaryFn::Expm1},
      {"log-plus-one", UnaryFn::Log1p},
      {"floor", UnaryFn::Floor},
      {"ceil", UnaryFn::Ceil},
      {"round-nearest-even", UnaryFn::RoundEven},
      {"round-nearest-afz", UnaryFn::RoundAway},
      {"sign", UnaryFn::Sign},
      {"popcnt", UnaryFn::Popcnt},
  };
  return opcodes;
}

const std::map<std::string_view, BinaryFn> &binaryOpcodes() {
  static const std::map<std::string_view, BinaryFn> opcodes = {
      {"add", BinaryFn::Add},
      {"subtract", BinaryFn::Sub},
      {"multiply", BinaryFn::Mul},
      {"divide", BinaryFn::Div},
      {"maximum", BinaryFn::Max},
      {"minimum", BinaryFn::Min},
      {"power", BinaryFn::Pow},
      {"and", BinaryFn::And},
      {"or", BinaryFn::Or},
      {"xor", BinaryFn::Xor},
      {"atan2", BinaryFn::Atan2},
      {"remainder", BinaryFn::Rem},
      {"shift-left", BinaryFn::ShiftLeft},
      {"shift-right-logical", BinaryFn::ShiftRightLogical},
      {"shift-right-arithmetic", BinaryFn::ShiftRightArithmetic},
  };
  return opcodes;
}

} // namespace mlpipe::fe::hlo
