// Sort: the reference's stable sort on cases worked out by hand, and the
// counting lowering the compiler uses (frontend/sort.h) against it on
// random keys full of ties, signed zeros and NaNs of both signs, over
// several axes and keys, both evaluated in float64.
#define BOOST_TEST_MODULE sort
#include <boost/test/unit_test.hpp>

#include "frontend/graph.h"
#include "frontend/sort.h"
#include "reference/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace mlpipe;
using namespace mlpipe::fe;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

ref::ArrayPtr array(Shape shape, std::vector<double> data) {
  return std::make_shared<ref::Array>(ref::Array{std::move(shape), std::move(data)});
}

// The ranks of a 1-D x sorted by one key, on the reference.
std::vector<double> ranks(std::vector<double> x, SortKey key) {
  Graph g("sort", DType::f32);
  auto n = static_cast<int64_t>(x.size());
  Tensor in = g.input("x", {n});
  g.output("y", g.sortRank({in}, 0, {key}));
  return ref::evaluate(g, {{"x", array({n}, x)}}).at("y")->data;
}

} // namespace

BOOST_AUTO_TEST_CASE(numeric_order_ties_zeros_and_puts_nan_last) {
  std::vector<double> x = {kNaN, -0.0, 2, 0.0, -kNaN, -kInf, 2};
  std::vector<double> expected = {5, 1, 3, 2, 6, 0, 4};
  BOOST_TEST(ranks(x, {0, false, SortOrder::Numeric}) == expected, boost::test_tools::per_element());
  std::vector<double> descending = {0, 4, 2, 5, 1, 6, 3}; // NaNs first, in their order
  BOOST_TEST(ranks(x, {0, true, SortOrder::Numeric}) == descending, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(total_order_puts_negative_nan_first_and_negative_zero_before_zero) {
  std::vector<double> x = {kNaN, -0.0, 2, 0.0, -kNaN, -kInf, 2};
  std::vector<double> expected = {6, 2, 4, 3, 0, 1, 5};
  BOOST_TEST(ranks(x, {0, false, SortOrder::Total}) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(lowering_matches_the_reference) {
  std::mt19937 rng(26);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const std::vector<double> specials = {kNaN, -kNaN, 0.0, -0.0, kInf, -kInf};
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    int64_t rank = pick(1, 3);
    Shape shape;
    for (int64_t d = 0; d < rank; ++d)
      shape.push_back(pick(1, 7));
    int64_t axis = pick(0, rank - 1);
    int64_t operands = pick(1, 3);
    std::vector<DType> types;
    std::vector<SortKey> keys;
    for (int64_t i = 0; i < operands; ++i) {
      types.push_back(pick(0, 1) ? DType::f32 : DType::i32);
      if (pick(0, 3) != 0)
        keys.push_back({i, pick(0, 1) == 1, pick(0, 1) ? SortOrder::Total : SortOrder::Numeric});
    }
    if (keys.empty())
      keys.push_back({0, false, SortOrder::Numeric});
    std::shuffle(keys.begin(), keys.end(), rng);
    Graph g("sort", DType::f32);
    std::vector<Tensor> inputs;
    ref::Values values;
    for (int64_t i = 0; i < operands; ++i) {
      std::string name = "x" + std::to_string(i);
      inputs.push_back(g.input(name, shape, types[static_cast<size_t>(i)]));
      std::vector<double> data(static_cast<size_t>(numElements(shape)));
      for (double &v : data) // few distinct values: many ties
        v = types[static_cast<size_t>(i)] == DType::f32 && pick(0, 3) == 0 ? specials[static_cast<size_t>(pick(0, 5))]
                                                                           : static_cast<double>(pick(-2, 2));
      values[name] = array(shape, data);
    }
    Tensor rankTensor = g.sortRank(inputs, axis, keys);
    g.output("rank", rankTensor);
    g.output("sorted", placeByRank(g, inputs[0], rankTensor, axis));
    std::unique_ptr<Graph> lowered = withSortsLowered(g);
    BOOST_REQUIRE(lowered);
    for (const Node &node : lowered->nodes())
      BOOST_REQUIRE(node.kind != OpKind::SortRank);
    ref::Values expected = ref::evaluate(g, values), actual = ref::evaluate(*lowered, values);
    for (const char *output : {"rank", "sorted"}) {
      const std::vector<double> &want = expected.at(output)->data, &got = actual.at(output)->data;
      BOOST_REQUIRE_EQUAL(want.size(), got.size());
      for (size_t i = 0; i < want.size(); ++i) {
        bool same = std::isnan(want[i]) ? std::isnan(got[i]) : want[i] == got[i];
        BOOST_REQUIRE_MESSAGE(same && std::signbit(want[i]) == std::signbit(got[i]),
                              output << "[" << i << "] is " << got[i] << ", the reference says " << want[i]);
      }
    }
    ++checked;
  }
  BOOST_TEST(checked == 60);
}
