#include "models/unit_kernels.h"

#include "models/nn.h"
#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace mlpipe {

using namespace fe;

const std::vector<UnitKernel> &unitKernels() {
  static const std::vector<UnitKernel> kernels = {
      {"gelu", "GELU (tanh form) of x", {"x"}, {{64, 256}}},
      {"softmax", "softmax of x over the last axis", {"x"}, {{64, 256}}},
      {"layernorm", "layer norm of x over the last axis, with weight and bias, eps 1e-5", {"x"}, {{64, 256}}},
      {"matmul", "a @ b (a batched matmul with --batch N)", {"a", "b"}, {{64, 128}, {128, 96}}},
      {"gather", "rows of table picked by i32 ids", {"table", "ids"}, {{512, 64}, {32}}},
      {"attention", "causal multi-head attention of q, k, v ([T, C]; --heads)", {"q"}, {{64, 128}}},
      {"transpose", "x transposed (its last two axes swapped)", {"x"}, {{64, 96}}},
      {"colsum", "sums of x over its first axis (one per column)", {"x"}, {{256, 96}}},
  };
  return kernels;
}

const std::vector<std::string> &matmulEpilogues() {
  static const std::vector<std::string> epilogues = {"none", "bias", "bias-gelu", "bias-residual", "bias-tanh"};
  return epilogues;
}

bool isUnitKernel(const std::string &name) {
  for (auto &kernel : unitKernels())
    if (kernel.name == name)
      return true;
  return false;
}

namespace {

const UnitKernel &findKernel(const std::string &name) {
  std::vector<std::string> names;
  for (auto &kernel : unitKernels()) {
    if (kernel.name == name)
      return kernel;
    names.push_back(kernel.name);
  }
  fail("unknown kernel '{}': expected one of {}", name, fmt::join(names, ", "));
}

// The shapes --shape gave, or the defaults; the count must match.
std::vector<Shape> resolveShapes(const UnitKernel &kernel, const KernelOptions &options) {
  if (options.shapes.empty())
    return kernel.defaultShapes;
  if (options.shapes.size() != kernel.inputNames.size())
    fail("{} takes {} --shape (for {}), not {}", kernel.name, kernel.inputNames.size(),
         fmt::join(kernel.inputNames, ", "), options.shapes.size());
  return options.shapes;
}

void requireRank(const UnitKernel &kernel, const Shape &shape, size_t rank, const std::string &input) {
  if (shape.size() != rank)
    fail("{}: --shape for {} must have {} dimensions, not {}", kernel.name, input, rank, formatShape(shape));
}

} // namespace

Program traceUnitKernel(const std::string &name, const KernelOptions &options) {
  const UnitKernel &kernel = findKernel(name);
  std::vector<Shape> shapes = resolveShapes(kernel, options);
  if (options.batch < 0)
    fail("--batch must be positive, not {}", options.batch);
  if (options.batch > 0 && name != "matmul")
    fail("--batch applies to matmul only");
  if ((options.transposeA || options.transposeB || options.epilogue != "none") && name != "matmul")
    fail("--transpose-a, --transpose-b and --epilogue apply to matmul only");
  const auto &epilogues = matmulEpilogues();
  if (std::find(epilogues.begin(), epilogues.end(), options.epilogue) == epilogues.end())
    fail("--epilogue must be one of {}, not '{}'", fmt::join(epilogues, ", "), options.epilogue);
  if (!isFloat(options.dtype))
    fail("--dtype must be f32, f64, bf16 or f16, not {}", dtypeName(options.dtype));

  Program program;
  Graph &g = program.addFunction(name, options.dtype);
  // Kernels are named for the unit kernel: gelu_loop, softmax_row_reduction.
  Graph::Scope scope(g, name);
  if (name == "gelu") {
    g.output("y", nn::gelu(g.input("x", shapes[0])));
  } else if (name == "softmax") {
    g.output("y", nn::softmax(g.input("x", shapes[0])));
  } else if (name == "layernorm") {
    Shape featureShape{shapes[0].back()};
    // One statement per input: argument order fixes the signature's order.
    Tensor x = g.input("x", shapes[0]);
    Tensor weight = g.input("weight", featureShape);
    Tensor bias = g.input("bias", featureShape);
    g.output("y", nn::layerNorm(x, weight, bias));
  } else if (name == "matmul") {
    requireRank(kernel, shapes[0], 2, "a");
    requireRank(kernel, shapes[1], 2, "b");
    // The shapes as used: a is [M, K] and b [K, N] after the transposes.
    Shape usedA = shapes[0], usedB = shapes[1];
    if (options.transposeA)
      std::swap(usedA[0], usedA[1]);
    if (options.transposeB)
      std::swap(usedB[0], usedB[1]);
    if (usedA[1] != usedB[0])
      fail("matmul: a is {}{} and b is {}{}; a's columns must equal b's rows", formatShape(shapes[0]),
           options.transposeA ? " (stored transposed)" : "", formatShape(shapes[1]),
           options.transposeB ? " (stored transposed)" : "");
    if (options.batch > 0) {
      shapes[0].insert(shapes[0].begin(), options.batch);
      shapes[1].insert(shapes[1].begin(), options.batch);
    }
    Tensor a = g.input("a", shapes[0]);
    Tensor b = g.input("b", shapes[1]);
    Tensor product = matmul(options.transposeA ? swapLastAxes(a) : a, options.transposeB ? swapLastAxes(b) : b);
    if (options.epilogue == "none") {
      g.output("y", product);
    } else {
      Tensor bias = g.input("bias", {usedB[1]});
      Tensor biased = product + bias;
      if (options.epilogue == "bias")
        g.output("y", biased);
      else if (options.epilogue == "bias-gelu")
        g.output("y", nn::gelu(biased));
      else if (options.epilogue == "bias-tanh")
        g.output("y", tanh(biased));
      else
        g.output("y", g.input("residual", product.shape()) + biased);
    }
  } else if (name == "gather") {
    requireRank(kernel, shapes[0], 2, "table");
    Tensor table = g.input("table", shapes[0]);
    Tensor ids = g.indexInput("ids", shapes[1], shapes[0][0]);
    g.output("y", take(table, ids));
  } else if (name == "transpose") {
    Tensor x = g.input("x", shapes[0]);
    if (x.rank() < 2)
      fail("transpose: --shape for x needs at least 2 dimensions, not {}", formatShape(shapes[0]));
    g.output("y", swapLastAxes(x));
  } else if (name == "colsum") {
    Tensor x = g.input("x", shapes[0]);
    g.output("y", sum(x, 0));
  } else if (name == "attention") {
    requireRank(kernel, shapes[0], 2, "q");
    Tensor q = g.input("q", shapes[0]);
    Tensor k = g.input("k", shapes[0]);
    Tensor v = g.input("v", shapes[0]);
    g.output("y", nn::causalAttention(q, k, v, options.heads));
  }
  return program;
}

} // namespace mlpipe
