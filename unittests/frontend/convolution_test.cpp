// Convolution: the reference's definition on cases worked out by hand, and
// the im2col lowering the compiler uses (frontend/convolution.h) against
// that definition on many dimension orders, windows and groups, both
// evaluated in float64.
#define BOOST_TEST_MODULE convolution
#include <boost/test/unit_test.hpp>

#include "frontend/convolution.h"
#include "frontend/graph.h"
#include "reference/evaluator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace mlpipe;
using namespace mlpipe::fe;

namespace {

ref::ArrayPtr array(Shape shape, std::vector<double> data) {
  return std::make_shared<ref::Array>(ref::Array{std::move(shape), std::move(data)});
}

// A 1-D convolution [1, W, 1] by [K, 1, 1] (b0f_0io->b0f) on the reference.
std::vector<double> conv1d(std::vector<double> x, std::vector<double> w, WindowAxis axis) {
  Graph g("conv", DType::f32);
  Tensor in = g.input("x", {1, static_cast<int64_t>(x.size()), 1});
  Tensor kernel = g.input("w", {static_cast<int64_t>(w.size()), 1, 1});
  ConvolutionDims dims{0, 2, {1}, 1, 2, {0}, 0, 2, {1}, {axis}, 1, 1};
  g.output("y", g.convolution(in, kernel, dims));
  Shape xs{1, static_cast<int64_t>(x.size()), 1}, ws{static_cast<int64_t>(w.size()), 1, 1};
  return ref::evaluate(g, {{"x", array(xs, x)}, {"w", array(ws, w)}}).at("y")->data;
}

} // namespace

BOOST_AUTO_TEST_CASE(reference_skips_padding_and_holes_of_a_dilated_input) {
  // x dilated by 2 and padded 2 before, 1 after: . . 1 _ 2 _ 3 _ 4 _ 5 .;
  // windows of 3 at stride 2 by w = 1 10 100.
  WindowAxis axis{3, 2, 2, 1, 2, 1};
  std::vector<double> expected = {100, 201, 302, 403, 504};
  BOOST_TEST(conv1d({1, 2, 3, 4, 5}, {1, 10, 100}, axis) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(reference_dilates_the_window_and_cuts_with_negative_padding) {
  std::vector<double> spread = {41, 52}; // x[o] + 10 x[o + 3]
  BOOST_TEST(conv1d({1, 2, 3, 4, 5}, {1, 10}, WindowAxis{2, 1, 0, 0, 1, 3}) == spread,
             boost::test_tools::per_element());
  std::vector<double> cut = {4, 6, 8, 10}; // the first element cut off, times 2
  BOOST_TEST(conv1d({1, 2, 3, 4, 5}, {2}, WindowAxis{1, 1, -1, 0, 1, 1}) == cut, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(reference_groups_features_and_batches) {
  // Depthwise: two input features, one kernel feature each, and 2 outputs
  // per group; output feature o reads input feature o / 2.
  Graph g("depthwise", DType::f32);
  Tensor x = g.input("x", {1, 2}), w = g.input("w", {1, 4});
  ConvolutionDims dims{0, 1, {}, 0, 1, {}, 0, 1, {}, {}, 2, 1};
  g.output("y", g.convolution(x, w, dims));
  std::vector<double> expected = {3 * 1, 3 * 2, 5 * 3, 5 * 4};
  BOOST_TEST(ref::evaluate(g, {{"x", array({1, 2}, {3, 5})}, {"w", array({1, 4}, {1, 2, 3, 4})}}).at("y")->data ==
                 expected,
             boost::test_tools::per_element());
  // Batch groups: a batch of 4 in 2 groups of 2; output features 0 and 1
  // read batch 0..1, features 2 and 3 batch 2..3; the result's batch is 2.
  Graph h("batch_groups", DType::f32);
  Tensor bx = h.input("x", {4, 1}), bw = h.input("w", {1, 4});
  ConvolutionDims grouped{0, 1, {}, 0, 1, {}, 0, 1, {}, {}, 1, 2};
  Tensor y = h.convolution(bx, bw, grouped);
  BOOST_TEST(y.shape() == (Shape{2, 4}));
  h.output("y", y);
  std::vector<double> batched = {1 * 1, 1 * 2, 3 * 3, 3 * 4, 2 * 1, 2 * 2, 4 * 3, 4 * 4};
  BOOST_TEST(ref::evaluate(h, {{"x", array({4, 1}, {1, 2, 3, 4})}, {"w", array({1, 4}, {1, 2, 3, 4})}}).at("y")->data ==
                 batched,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(lowering_matches_the_definition_on_random_convolutions) {
  std::mt19937 rng(26);
  auto pick = [&](int64_t low, int64_t high) { return std::uniform_int_distribution<int64_t>(low, high)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int64_t spatial = pick(0, 3), rank = spatial + 2;
    int64_t featureGroups = 1, batchGroups = 1;
    if (pick(0, 2) == 0)
      featureGroups = pick(2, 3);
    else if (pick(0, 3) == 0)
      batchGroups = pick(2, 3);
    int64_t kernelInputs = pick(1, 3), groupOutputs = pick(1, 3), groupBatch = pick(1, 2);
    int64_t groups = featureGroups * batchGroups;
    // Every tensor's axes in a random order.
    auto shuffled = [&]() {
      std::vector<int64_t> axes(static_cast<size_t>(rank));
      std::iota(axes.begin(), axes.end(), 0);
      std::shuffle(axes.begin(), axes.end(), rng);
      return axes;
    };
    std::vector<int64_t> in = shuffled(), ker = shuffled(), out = shuffled();
    ConvolutionDims dims;
    dims.inputBatch = in[0];
    dims.inputFeature = in[1];
    dims.kernelInput = ker[0];
    dims.kernelOutput = ker[1];
    dims.outputBatch = out[0];
    dims.outputFeature = out[1];
    dims.featureGroups = featureGroups;
    dims.batchGroups = batchGroups;
    Shape inputShape(static_cast<size_t>(rank)), kernelShape(static_cast<size_t>(rank));
    inputShape[in[0]] = groupBatch * batchGroups;
    inputShape[in[1]] = kernelInputs * featureGroups;
    kernelShape[ker[0]] = kernelInputs;
    kernelShape[ker[1]] = groupOutputs * groups;
    bool fits = true;
    for (int64_t d = 0; d < spatial; ++d) {
      dims.inputSpatial.push_back(in[2 + d]);
      dims.kernelSpatial.push_back(ker[2 + d]);
      dims.outputSpatial.push_back(out[2 + d]);
      WindowAxis axis{pick(1, 3), pick(1, 3), pick(-2, 3), pick(-2, 3), pick(1, 3), pick(1, 2)};
      int64_t size = pick(1, 6);
      inputShape[in[2 + d]] = size;
      kernelShape[ker[2 + d]] = axis.size;
      int64_t padded = (size - 1) * axis.baseDilation + 1 + axis.padLow + axis.padHigh;
      fits = fits && padded >= (axis.size - 1) * axis.windowDilation + 1;
      dims.window.push_back(axis);
    }
    if (!fits)
      continue;
    Graph g("conv", DType::f32);
    Tensor x = g.input("x", inputShape), w = g.input("w", kernelShape);
    g.output("y", g.convolution(x, w, dims));
    std::unique_ptr<Graph> lowered = withConvolutionsLowered(g);
    BOOST_REQUIRE(lowered);
    for (const Node &node : lowered->nodes())
      BOOST_REQUIRE(node.kind != OpKind::Convolution);
    std::normal_distribution<double> normal;
    auto randomArray = [&](const Shape &shape) {
      std::vector<double> data(static_cast<size_t>(numElements(shape)));
      for (double &v : data)
        v = normal(rng);
      return array(shape, data);
    };
    ref::Values inputs{{"x", randomArray(inputShape)}, {"w", randomArray(kernelShape)}};
    std::vector<double> expected = ref::evaluate(g, inputs).at("y")->data;
    std::vector<double> actual = ref::evaluate(*lowered, inputs).at("y")->data;
    BOOST_REQUIRE_EQUAL(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i)
      BOOST_REQUIRE_SMALL(actual[i] - expected[i], 1e-12 * (1 + std::abs(expected[i])));
    ++checked;
  }
  BOOST_TEST(checked > 100); // most random windows fit their inputs
}
