// The opcodes the HLO builder knows: every one it reads, with its limits
// (what `trace --list-ops` prints, and what the builder's dispatch lets
// through), the elementwise ones it maps onto the graph's unary and binary
// functions, and every one XLA has that it refuses.
#include "frontend/hlo/hlo_builder.h"

#include "frontend/hlo_reader.h"

#include <algorithm>

namespace mlpipe::fe::hlo {

namespace {

constexpr std::string_view kFloats = "floats";
constexpr std::string_view kFloatsAndIntegers = "floats and integers";

} // namespace

const std::vector<SupportedOp> &supportedOps() {
  static const std::vector<SupportedOp> ops = {
      // Elementwise arithmetic and math
      {"abs", kFloatsAndIntegers},
      {"add", kFloatsAndIntegers},
      {"atan2", kFloats},
      {"ceil", kFloats},
      {"clamp", "floats and integers; the bounds are arrays or scalars"},
      {"cosine", kFloats},
      {"divide", "floats and integers; integer x / 0 is -1 (all ones), INT_MIN / -1 is INT_MIN"},
      {"erf", kFloats},
      {"exponential", kFloats},
      {"exponential-minus-one", kFloats},
      {"floor", kFloats},
      {"is-finite", "floats; gives pred"},
      {"log", kFloats},
      {"log-plus-one", kFloats},
      {"logistic", kFloats},
      {"maximum", "floats (NaN wins) and integers"},
      {"minimum", "floats (NaN wins) and integers"},
      {"multiply", kFloatsAndIntegers},
      {"negate", kFloatsAndIntegers},
      {"power", kFloats},
      {"remainder", "floats (the dividend's sign, as fmod) and integers; x % 0 is x, INT_MIN % -1 is 0"},
      {"round-nearest-afz", kFloats},
      {"round-nearest-even", kFloats},
      {"rsqrt", kFloats},
      {"sign", "floats (+-0 and NaN are their own sign) and integers"},
      {"sine", kFloats},
      {"sqrt", kFloats},
      {"subtract", kFloatsAndIntegers},
      {"tan", kFloats},
      {"tanh", kFloats},
      // Bits and logic
      {"and", "pred and integers"},
      {"not", "pred and integers"},
      {"or", "pred and integers"},
      {"popcnt", "integers"},
      {"shift-left", "integers; an amount read as unsigned, from the bit width up gives 0"},
      {"shift-right-arithmetic", "integers; an amount read as unsigned, from the bit width up gives the sign"},
      {"shift-right-logical", "integers; an amount read as unsigned, from the bit width up gives 0"},
      {"xor", "pred and integers"},
      // Comparison, selection, conversion
      {"compare", "directions EQ NE LT LE GT GE; integers compare as their type's signedness, floats of "
                  "type=TOTALORDER in XLA's total order"},
      {"convert", "between every element type; floats to integers truncate and saturate, NaN gives 0"},
      {"select", "an array or scalar predicate"},
      {"copy", "values unchanged (its layout is ignored)"},
      {"copy-done", "the copy copy-start began: values unchanged"},
      {"copy-start", "values unchanged"},
      {"opt-barrier", "values unchanged"},
      {"optimization-barrier", "values unchanged"},
      // Data movement
      {"bitcast", "same element type; a non-default layout read as the axes it permutes (not tiled layouts)"},
      {"broadcast", ""},
      {"concatenate", ""},
      {"constant", "scalars and arrays; an element outside its type is refused"},
      {"dynamic-slice", "one scalar integer start per axis, read at run time and clamped to [0, dim - size]"},
      {"dynamic-update-slice", "one scalar integer start per axis, read at run time and clamped to [0, dim - size]"},
      {"iota", ""},
      {"pad", "negative and interior padding"},
      {"reshape", ""},
      {"slice", "with strides"},
      {"transpose", ""},
      {"reverse", "any axes"},
      // Reductions, contractions, lookups
      {"dot", "any dimension numbers"},
      {"convolution", "floats; any dim_labels, window (size, stride, pad, lhs_dilate, rhs_dilate), "
                      "feature_group_count, batch_group_count; a window of at most 256 positions"},
      {"custom-call", "cuBLAS GEMMs (__cublas$gemm, __cublas$lt$matmul: alpha, beta, epilogue DEFAULT BIAS RELU GELU "
                      "BIAS_RELU BIAS_GELU) as dots, cuDNN convolutions (__cudnn$convForward, "
                      "__cudnn$convBiasActivationForward: scales, bias, side input, activation kNone kRelu kRelu6 "
                      "kElu kLeakyRelu) as convolutions, __cudnn$convBackwardFilter and __cudnn$convBackwardInput as "
                      "the kernel's and the input's gradients (convolutions; the input's without groups); any other "
                      "target refused"},
      {"gather", "any dimension numbers and batching dims, starts clamped into the operand; embedding lookups "
                 "as a row gather"},
      {"reduce", "over any axes: one input with an add, maximum, minimum, multiply, and or or reducer; two "
                 "as argmax or argmin (values and indices, a tie to the smaller index)"},
      {"reduce-window", "one input; the reduce's reducers, any window, stride, padding and base or window dilation"},
      {"scatter", "one or more operands, each combined on its own; any dimension numbers and batching dims; add, "
                  "multiply, maximum, minimum, and, or or assign (the last duplicate wins); windows not wholly inside "
                  "skipped; at most 2^24 operand x update elements"},
      {"sort", "one or more operands along one axis of at most 1024; a comparator of keys by LT or GT, numerically "
               "(NaN greatest) or in TOTALORDER, lexicographic over several; stable"},
      {"scan", "a running add, multiply, maximum or minimum as a reduce-window; any other region unrolled, at most "
               "4096 steps; is_reverse"},
      // Structure
      {"async-done", "the wrapped op's result (OP-done, as fusion-done, likewise)"},
      {"async-start", "the calls= computation inlined; OP-start (fusion-start, ...) is read as OP, any op listed here"},
      {"async-update", "values unchanged (OP-update likewise)"},
      {"call", "inlined"},
      {"conditional", "a pred or an s32 branch index (out of range: the last branch); every branch computed, its "
                      "result selected"},
      {"fusion", "inlined, whatever its kind"},
      {"get-tuple-element", ""},
      {"parameter", "arrays"},
      {"tuple", ""},
      {"while", "unrolled when its trip count is a constant of at most 64 (an integer counter in the carried "
                "value starts at a constant, is compared with a constant and steps by a constant); any other loop "
                "is compiled once and run, its condition read each trip"},
  };
  return ops;
}

const SupportedOp *findSupportedOp(std::string_view opcode) {
  const std::vector<SupportedOp> &ops = supportedOps();
  auto found = std::find_if(ops.begin(), ops.end(), [&](const SupportedOp &op) { return op.opcode == opcode; });
  return found == ops.end() ? nullptr : &*found;
}

} // namespace mlpipe::fe::hlo

namespace mlpipe::fe {

std::string listHloOps() {
  size_t width = 0;
  for (const hlo::SupportedOp &op : hlo::supportedOps())
    width = std::max(width, op.opcode.size());
  std::string text;
  for (const hlo::SupportedOp &op : hlo::supportedOps()) {
    std::string line = fmt::format("{:<{}}  {}", op.opcode, width, op.limits);
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + "\n";
  }
  return text;
}

} // namespace mlpipe::fe

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
      "cosh",
      "domain",
      "dynamic-reshape",
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
      "replica-id",
      "rng",
      "rng-bit-generator",
      "rng-get-and-update-state",
      "scaled-dot",
      "select-and-scatter",
      "send",
      "send-done",
      "set-dimension-size",
      "sinh",
      "stochastic-convert",
      "topk",
      "triangular-solve",
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
