// Gather and scatter: the lowering the compiler uses (frontend/
// scatter_gather.h) against the reference's definitions, both evaluated in
// float64, on many dimension numbers and random indices before, inside and
// past the operand, with duplicates; and the refusals of the graph.
#define BOOST_TEST_MODULE scatter_gather
#include <boost/test/unit_test.hpp>

#include "frontend/graph.h"
#include "frontend/scatter_gather.h"
#include "reference/evaluator.h"
#include "support/error.h"

#include <random>

using namespace mlpipe;
using namespace mlpipe::fe;

namespace {

struct Case {
  Shape operand, indices, updates; // updates: scatters only
  SliceIndexing dims;
};

// The forms of testdata/hlo/gathers.hlo and more: columns, take_along_axis,
// windows with the index vector first, a scalar index, size-1 axes, two
// batching axes paired out of order, and an index vector at the end of a
// rank-3 indices with several starts.
std::vector<Case> gatherCases() {
  return {
      {{8, 6}, {5, 1}, {}, {1, {0}, {1}, {1}, {}, {}, {8, 1}}},
      {{5, 7}, {5, 1, 1}, {}, {2, {}, {1}, {1}, {0}, {0}, {1, 1}}},
      {{7, 9, 5}, {2, 4}, {}, {0, {0, 1, 3}, {}, {0, 2}, {}, {}, {3, 9, 2}}},
      {{5, 11}, {}, {}, {0, {0, 1}, {}, {1}, {}, {}, {5, 3}}},
      {{1, 7}, {3, 2}, {}, {1, {1}, {0}, {1, 0}, {}, {}, {1, 2}}},
      {{3, 4, 10}, {4, 3, 1}, {}, {2, {2}, {}, {2}, {0, 1}, {1, 0}, {1, 1, 3}}},
      {{4, 5, 6}, {2, 3, 3}, {}, {2, {1, 3}, {0}, {2, 0, 1}, {}, {}, {1, 2, 4}}},
      {{6}, {4}, {}, {1, {1}, {}, {0}, {}, {}, {6}}},
  };
}

// The forms of testdata/hlo/scatters.hlo and more: a batching axis paired
// with the last indices axis, the index vector first.
std::vector<Case> scatterCases() {
  return {
      {{5, 3}, {9, 1}, {9, 3}, {1, {1}, {0}, {0}, {}, {}, {}}},
      {{4}, {6}, {6}, {1, {}, {0}, {0}, {}, {}, {}}},
      {{4, 7, 3}, {2, 6}, {6, 3}, {0, {1}, {0, 1}, {0, 1}, {}, {}, {}}},
      {{2, 9, 4}, {}, {2, 3, 4}, {0, {0, 1, 2}, {}, {1}, {}, {}, {}}},
      {{3, 6}, {3, 4}, {3, 4}, {2, {}, {1}, {1}, {0}, {0}, {}}},
      {{1}, {5, 1}, {5}, {1, {}, {0}, {0}, {}, {}, {}}},
      {{6, 5}, {4, 2}, {4, 2, 3}, {1, {1, 2}, {}, {0, 1}, {}, {}, {}}},
      {{3, 4, 5}, {2, 3, 4}, {3, 4, 2}, {0, {2}, {0}, {2, 0}, {1}, {2}, {}}},
  };
}

ref::ArrayPtr randomArray(const Shape &shape, std::mt19937 &rng, int64_t low, int64_t high) {
  std::uniform_int_distribution<int64_t> pick(low, high);
  std::vector<double> data(static_cast<size_t>(numElements(shape)));
  for (double &v : data)
    v = static_cast<double>(pick(rng));
  return std::make_shared<ref::Array>(ref::Array{shape, std::move(data)});
}

// Indices spread from a little below 0 to a little past the largest axis,
// so starts land on both sides and inside, often the same.
int64_t largest(const Shape &shape) {
  int64_t most = 1;
  for (int64_t d : shape)
    most = std::max(most, d);
  return most;
}

} // namespace

BOOST_AUTO_TEST_CASE(gather_lowering_matches_the_definition) {
  std::mt19937 rng(7);
  for (const Case &c : gatherCases()) {
    Graph g("gather", DType::f32);
    Tensor x = g.input("x", c.operand), ids = g.input("ids", c.indices, DType::i32);
    g.output("y", g.gatherSlices(x, ids, c.dims));
    std::unique_ptr<Graph> lowered = withScatterGatherLowered(g);
    BOOST_REQUIRE(lowered);
    for (const Node &node : lowered->nodes())
      BOOST_REQUIRE(node.kind != OpKind::GatherSlices);
    for (int trial = 0; trial < 20; ++trial) {
      ref::Values inputs{{"x", randomArray(c.operand, rng, -1000, 1000)},
                         {"ids", randomArray(c.indices, rng, -3, largest(c.operand) + 2)}};
      std::vector<double> expected = ref::evaluate(g, inputs).at("y")->data;
      std::vector<double> actual = ref::evaluate(*lowered, inputs).at("y")->data;
      BOOST_TEST(actual == expected, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(scatter_lowering_matches_the_definition_for_every_combiner) {
  std::mt19937 rng(11);
  for (int fn : {kScatterAssign, static_cast<int>(ReduceFn::Sum), static_cast<int>(ReduceFn::Prod),
                 static_cast<int>(ReduceFn::Max), static_cast<int>(ReduceFn::Min)})
    for (const Case &c : scatterCases()) {
      Graph g("scatter", DType::f32);
      Tensor x = g.input("x", c.operand), ids = g.input("ids", c.indices, DType::i32);
      Tensor u = g.input("u", c.updates);
      g.output("y", g.scatter(x, ids, u, c.dims, fn));
      std::unique_ptr<Graph> lowered = withScatterGatherLowered(g);
      BOOST_REQUIRE(lowered);
      for (int trial = 0; trial < 20; ++trial) {
        // Small values keep products of duplicates exact in float64.
        ref::Values inputs{{"x", randomArray(c.operand, rng, -9, 9)},
                           {"ids", randomArray(c.indices, rng, -2, largest(c.operand) + 1)},
                           {"u", randomArray(c.updates, rng, -9, 9)}};
        std::vector<double> expected = ref::evaluate(g, inputs).at("y")->data;
        std::vector<double> actual = ref::evaluate(*lowered, inputs).at("y")->data;
        BOOST_TEST(actual == expected, boost::test_tools::per_element());
      }
    }
}

BOOST_AUTO_TEST_CASE(scatter_skips_windows_not_wholly_inside_and_keeps_the_last_assignment) {
  // x = 0 0 0 0 0; windows of 2 at 3 (inside: 3, 4), at 4 (one past the
  // end: skipped) and at 3 again (the last assignment wins).
  Graph g("windows", DType::f32);
  Tensor x = g.input("x", {5}), ids = g.input("ids", {3, 1}, DType::i32), u = g.input("u", {3, 2});
  g.output("y", g.scatter(x, ids, u, {1, {1}, {}, {0}, {}, {}, {}}, kScatterAssign));
  auto array = [](Shape shape, std::vector<double> data) {
    return std::make_shared<ref::Array>(ref::Array{std::move(shape), std::move(data)});
  };
  ref::Values inputs{
      {"x", array({5}, {0, 0, 0, 0, 0})}, {"ids", array({3, 1}, {3, 4, 3})}, {"u", array({3, 2}, {1, 2, 3, 4, 5, 6})}};
  std::vector<double> expected = {0, 0, 0, 5, 6};
  BOOST_TEST(ref::evaluate(g, inputs).at("y")->data == expected, boost::test_tools::per_element());
  BOOST_TEST(ref::evaluate(*withScatterGatherLowered(g), inputs).at("y")->data == expected,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(scatter_refuses_more_pairs_than_the_dense_form_computes) {
  Graph g("large", DType::f32);
  Tensor x = g.input("x", {kMaxScatterPairs / 4 + 1}), ids = g.input("ids", {4, 1}, DType::i32), u = g.input("u", {4});
  BOOST_CHECK_THROW(g.scatter(x, ids, u, {1, {}, {0}, {0}, {}, {}, {}}, static_cast<int>(ReduceFn::Sum)), Error);
  Tensor fits = g.input("fits", {kMaxScatterPairs / 4});
  BOOST_CHECK_NO_THROW(g.scatter(fits, ids, u, {1, {}, {0}, {0}, {}, {}, {}}, static_cast<int>(ReduceFn::Sum)));
}
