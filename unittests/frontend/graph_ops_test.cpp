// The meaning of the graph ops HLO needs, checked on the float64 reference:
// small cases worked out by hand for each op's definition (XLA's semantics),
// and the recorder's refusals.
#define BOOST_TEST_MODULE graph_ops
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "frontend/graph.h"
#include "reference/evaluator.h"

#include <cmath>
#include <limits>
#include <tuple>

using namespace mlpipe;
using namespace mlpipe::fe;
using mlpipe::testing::messageOf;

namespace {

// Evaluates `build`'s single output on the given inputs.
std::vector<double> evaluateOne(Graph &g, Tensor out, const ref::Values &inputs = {}) {
  g.output("y", out);
  return ref::evaluate(g, inputs).at("y")->data;
}

ref::ArrayPtr array(Shape shape, std::vector<double> data) {
  return std::make_shared<ref::Array>(ref::Array{std::move(shape), std::move(data)});
}

} // namespace

BOOST_AUTO_TEST_CASE(pad_adds_edges_and_interior_and_negative_edges_cut) {
  Graph g("pad", DType::f32);
  Tensor x = g.input("x", {3});
  // interior 1: 1 9 2 9 3; low -1 cuts the 1; high 2 adds two 9s.
  Tensor y = g.pad(x, g.constant(9), {-1}, {2}, {1});
  BOOST_TEST(y.shape() == (Shape{6}));
  std::vector<double> expected = {9, 2, 9, 3, 9, 9};
  BOOST_TEST(evaluateOne(g, y, {{"x", array({3}, {1, 2, 3})}}) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(pad_of_a_matrix_with_a_tensor_value) {
  Graph g("pad", DType::f32);
  Tensor x = g.input("x", {2, 2});
  Tensor value = g.input("v", {});
  Tensor y = g.pad(x, value, {1, 0}, {0, 1}, {0, 0});
  std::vector<double> expected = {7, 7, 7, 1, 2, 7, 3, 4, 7};
  BOOST_TEST(evaluateOne(g, y, {{"x", array({2, 2}, {1, 2, 3, 4})}, {"v", array({}, {7})}}) == expected,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_transpose_that_moves_only_unit_axes_is_a_reshape) {
  // [1, 2, 3] -> [2, 1, 3]: the one axis of extent 1 moves, the others keep
  // their order, so every element stays where it was (a decode step's
  // one-row head split).
  Graph g("transpose", DType::f32);
  Tensor x = g.input("x", {1, 2, 3});
  Tensor y = transpose(x, {1, 0, 2});
  BOOST_TEST(y.shape() == (Shape{2, 1, 3}));
  BOOST_TEST((g.node(y.id()).kind == OpKind::Reshape));
  std::vector<double> values = {1, 2, 3, 4, 5, 6};
  BOOST_TEST(evaluateOne(g, y, {{"x", array({1, 2, 3}, values)}}) == values, boost::test_tools::per_element());

  // [2, 1, 3] -> [3, 1, 2] swaps two axes of extent > 1: a real transpose.
  Graph h("transpose", DType::f32);
  Tensor z = transpose(h.input("x", {2, 1, 3}), {2, 1, 0});
  BOOST_TEST((h.node(z.id()).kind == OpKind::Transpose));
  std::vector<double> swapped = {1, 4, 2, 5, 3, 6};
  BOOST_TEST(evaluateOne(h, z, {{"x", array({2, 1, 3}, values)}}) == swapped, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(broadcast_places_operand_axes) {
  Graph g("broadcast", DType::f32);
  Tensor column = g.input("c", {2});
  Tensor row = g.input("r", {3});
  Tensor y = g.broadcast(column, {2, 3}, {0}) + g.broadcast(row, {2, 3}, {1});
  std::vector<double> expected = {11, 12, 13, 21, 22, 23};
  BOOST_TEST(evaluateOne(g, y, {{"c", array({2}, {10, 20})}, {"r", array({3}, {1, 2, 3})}}) == expected,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(iota_counts_along_its_axis) {
  Graph g("iota", DType::f32);
  std::vector<double> expected = {0, 1, 2, 0, 1, 2};
  BOOST_TEST(evaluateOne(g, g.iota({2, 3}, DType::i32, 1)) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(concat_and_strided_slice) {
  Graph g("slices", DType::f32);
  Tensor a = g.input("a", {2, 1});
  Tensor b = g.input("b", {2, 2});
  Tensor joined = g.concat({a, b}, 1); // [[1, 3, 4], [2, 5, 6]]
  Tensor y = g.stridedSlice(joined, {0, 0}, {2, 3}, {1, 2});
  std::vector<double> expected = {1, 4, 2, 6};
  BOOST_TEST(evaluateOne(g, y, {{"a", array({2, 1}, {1, 2})}, {"b", array({2, 2}, {3, 4, 5, 6})}}) == expected,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(integer_arithmetic_follows_xla) {
  for (auto [a, b, quotient] : std::initializer_list<std::tuple<double, double, double>>{
           {7, -2, -3}, {-7, 2, -3}, {5, 0, -1}, {-2147483648.0, -1, -2147483648.0}})
    BOOST_TEST(applyBinary(BinaryFn::Div, a, b, DType::i32) == quotient);
  BOOST_TEST(applyBinary(BinaryFn::Add, 2147483647, 1, DType::i32) == -2147483648.0);
  BOOST_TEST(applyBinary(BinaryFn::Mul, 65536, 65536, DType::i32) == 0);
  BOOST_TEST(applyBinary(BinaryFn::And, 12, 10, DType::i32) == 8);
  BOOST_TEST(applyBinary(BinaryFn::Or, -8, 3, DType::i32) == -5);
  BOOST_TEST(applyUnary(UnaryFn::Not, 5, DType::i32) == -6);
  BOOST_TEST(applyUnary(UnaryFn::Not, 1, DType::i1) == 0);
  BOOST_TEST(applyUnary(UnaryFn::Neg, -2147483648.0, DType::i32) == -2147483648.0);
  BOOST_TEST(applyUnary(UnaryFn::Abs, -7, DType::i64) == 7);
}

// Remainder, the shifts and the bit functions on integers, with XLA's
// edge cases: a zero divisor, INT_MIN and -1, amounts at or past the width
// and negative ones (read as unsigned).
BOOST_AUTO_TEST_CASE(integer_remainders_shifts_and_bits_follow_xla) {
  for (auto [a, b, remainder] : std::initializer_list<std::tuple<double, double, double>>{
           {7, -2, 1}, {-7, 2, -1}, {5, 0, 5}, {-5, 0, -5}, {-2147483648.0, -1, 0}})
    BOOST_TEST(applyBinary(BinaryFn::Rem, a, b, DType::i32) == remainder);
  BOOST_TEST(applyBinary(BinaryFn::Rem, -128, -1, DType::i8) == 0);
  BOOST_TEST(applyBinary(BinaryFn::Div, -128, -1, DType::i8) == -128);
  BOOST_TEST(applyBinary(BinaryFn::Xor, 12, 10, DType::i32) == 6);
  BOOST_TEST(applyBinary(BinaryFn::Xor, 1, 1, DType::i1) == 0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftLeft, 1, 31, DType::i32) == -2147483648.0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftLeft, 1, 32, DType::i32) == 0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftLeft, 1, -1, DType::i32) == 0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftLeft, 3, 7, DType::i8) == -128);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightLogical, -1, 28, DType::i32) == 15);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightLogical, -1, 4, DType::i8) == 15);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightLogical, -1, 64, DType::i64) == 0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightArithmetic, -16, 2, DType::i32) == -4);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightArithmetic, -16, 40, DType::i32) == -1);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightArithmetic, 16, -3, DType::i32) == 0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightArithmetic, 128, 1, DType::u8) == 192); // the top bit fills
  BOOST_TEST(applyBinary(BinaryFn::ShiftRightArithmetic, 128, 9, DType::u8) == 255);
  BOOST_TEST(applyUnary(UnaryFn::Popcnt, -1, DType::i32) == 32);
  BOOST_TEST(applyUnary(UnaryFn::Popcnt, -1, DType::i8) == 8);
  BOOST_TEST(applyUnary(UnaryFn::Popcnt, 255, DType::u8) == 8);
  BOOST_TEST(applyUnary(UnaryFn::Sign, -7, DType::i16) == -1);
  BOOST_TEST(applyUnary(UnaryFn::Sign, 200, DType::u8) == 1);
  BOOST_TEST(applyUnary(UnaryFn::Abs, -128, DType::i8) == -128);
}

// The unsigned types wrap modulo 2^n, divide and compare as unsigned, and
// read every bit pattern as a value in [0, 2^n).
BOOST_AUTO_TEST_CASE(unsigned_integers_wrap_and_divide_unsigned) {
  BOOST_TEST(applyBinary(BinaryFn::Sub, 0, 1, DType::u8) == 255);
  BOOST_TEST(applyBinary(BinaryFn::Sub, 0, 1, DType::u32) == 4294967295.0);
  BOOST_TEST(applyBinary(BinaryFn::Mul, 300, 300, DType::u16) == 90000 % 65536);
  BOOST_TEST(applyBinary(BinaryFn::Div, 200, 0, DType::u8) == 255);
  BOOST_TEST(applyBinary(BinaryFn::Rem, 200, 0, DType::u8) == 200);
  BOOST_TEST(applyBinary(BinaryFn::Div, 200, 7, DType::u8) == 28);
  BOOST_TEST(applyBinary(BinaryFn::Max, 200, 7, DType::u8) == 200);
  BOOST_TEST(applyUnary(UnaryFn::Neg, 1, DType::u16) == 65535);
  BOOST_TEST(applyUnary(UnaryFn::Abs, 200, DType::u8) == 200);
  BOOST_TEST(applyUnary(UnaryFn::Not, 0, DType::u64) == 18446744073709551615.0);
  BOOST_TEST(applyBinary(BinaryFn::ShiftLeft, 1, 63, DType::u64) == 9223372036854775808.0);
  BOOST_TEST(applyCompare(CompareFn::Lt, 7, 200)); // on values: 200 is no negative number in u8
}

// Floats: sign keeps +-0 and NaN, remainder is fmod, the roundings break
// ties their own ways.
BOOST_AUTO_TEST_CASE(float_sign_remainder_and_roundings) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_TEST(std::signbit(applyUnary(UnaryFn::Sign, -0.0)));
  BOOST_TEST(applyUnary(UnaryFn::Sign, 0.0) == 0.0);
  BOOST_TEST(std::isnan(applyUnary(UnaryFn::Sign, nan)));
  BOOST_TEST(applyUnary(UnaryFn::Sign, -1e-30) == -1.0);
  BOOST_TEST(applyBinary(BinaryFn::Rem, -7.5, 2) == -1.5);
  BOOST_TEST(applyBinary(BinaryFn::Rem, 7.5, -2) == 1.5);
  for (auto [x, even, away] : std::initializer_list<std::tuple<double, double, double>>{
           {0.5, 0, 1}, {1.5, 2, 2}, {2.5, 2, 3}, {-0.5, -0.0, -1}, {-2.5, -2, -3}, {2.4, 2, 2}})
    BOOST_TEST_CONTEXT(x) {
      BOOST_TEST(applyUnary(UnaryFn::RoundEven, x) == even);
      BOOST_TEST(applyUnary(UnaryFn::RoundAway, x) == away);
    }
  BOOST_TEST(std::isnan(applyBinary(BinaryFn::Max, nan, 1.0)));
  BOOST_TEST(std::isnan(applyBinary(BinaryFn::Min, 1.0, nan)));
}

BOOST_AUTO_TEST_CASE(conversions_truncate_saturate_and_round) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  BOOST_TEST(convertValue(2.9, DType::f32, DType::i32) == 2);
  BOOST_TEST(convertValue(-2.9, DType::f32, DType::i32) == -2);
  BOOST_TEST(convertValue(nan, DType::f32, DType::i32) == 0);
  BOOST_TEST(convertValue(1e10, DType::f32, DType::i32) == 2147483647);
  BOOST_TEST(convertValue(-1e30, DType::f64, DType::i64) == static_cast<double>(std::numeric_limits<int64_t>::min()));
  BOOST_TEST(convertValue(-0.5, DType::f32, DType::i1) == 1);
  BOOST_TEST(convertValue(4294967297.0, DType::i64, DType::i32) == 1);
  BOOST_TEST(convertValue(1.0 + 1.0 / 512, DType::f32, DType::bf16) == 1.0);
  // Unsigned targets saturate at 0 and 2^n - 1; integers to integers keep
  // the source's bits, sign- or zero-extended by the source's type.
  BOOST_TEST(convertValue(-3.5, DType::f32, DType::u8) == 0);
  BOOST_TEST(convertValue(300.7, DType::f32, DType::u8) == 255);
  BOOST_TEST(convertValue(-1e30, DType::f32, DType::i8) == -128);
  BOOST_TEST(convertValue(1e30, DType::f32, DType::u64) == 18446744073709551615.0);
  BOOST_TEST(convertValue(-1, DType::i8, DType::u16) == 65535);
  BOOST_TEST(convertValue(255, DType::u8, DType::i8) == -1);
  BOOST_TEST(convertValue(255, DType::u8, DType::i32) == 255);
  BOOST_TEST(convertValue(-1, DType::i64, DType::u64) == 18446744073709551615.0);
  BOOST_TEST(convertValue(18446744073709551615.0, DType::u64, DType::i64) == -1);
  BOOST_TEST(convertValue(4294967295.0, DType::u32, DType::f32) == 4294967296.0);
}

BOOST_AUTO_TEST_CASE(comparisons_with_nan_are_false_except_ne) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (CompareFn fn : {CompareFn::Eq, CompareFn::Lt, CompareFn::Le, CompareFn::Gt, CompareFn::Ge})
    BOOST_TEST(!applyCompare(fn, nan, 1.0));
  BOOST_TEST(applyCompare(CompareFn::Ne, nan, nan));
}

BOOST_AUTO_TEST_CASE(select_and_compare_broadcast) {
  Graph g("select", DType::f32);
  Tensor x = g.input("x", {2, 2});
  Tensor positive = g.compare(CompareFn::Gt, x, g.constant(0));
  Tensor y = g.select(positive, x, g.constant(-1));
  std::vector<double> expected = {3, -1, -1, 0.5};
  BOOST_TEST(evaluateOne(g, y, {{"x", array({2, 2}, {3, -2, 0, 0.5})}}) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(reductions_min_and_product) {
  Graph g("reduce", DType::f32);
  Tensor x = g.input("x", {2, 3});
  Tensor y = g.reduce(ReduceFn::Min, x, 1, false) + g.reduce(ReduceFn::Prod, x, 1, false);
  std::vector<double> expected = {-2 + -6.0, 0 + 0.0};
  BOOST_TEST(evaluateOne(g, y, {{"x", array({2, 3}, {1, -2, 3, 4, 0, 5})}}) == expected,
             boost::test_tools::per_element());
}

// The reference stores what the compiled code stores: a bf16 op's result is
// rounded to bf16 after every op.
BOOST_AUTO_TEST_CASE(bf16_results_are_rounded_after_each_op) {
  Graph g("round", DType::f32);
  Tensor x = g.input("x", {1}, DType::bf16);
  Tensor y = x + g.constant(1.0 / 512); // 1 + 2^-9 is not a bf16: it rounds back to 1
  std::vector<double> expected = {1.0};
  BOOST_TEST(evaluateOne(g, y, {{"x", array({1}, {1.0})}}) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(literals_hold_their_values) {
  Graph g("literal", DType::f32);
  Tensor y = g.literal({2, 2}, DType::i32, {1.7, -2, 3, 4}); // stored as i32: 1.7 truncates
  std::vector<double> expected = {1, -2, 3, 4};
  BOOST_TEST(evaluateOne(g, y) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(constants_fold_in_their_own_type) {
  Graph g("fold", DType::f32);
  Tensor seven = g.constant(7, DType::i32), two = g.constant(2, DType::i32);
  const Node &quotient = g.node(g.binary(BinaryFn::Div, seven, two).id());
  BOOST_TEST((quotient.kind == OpKind::Constant && quotient.value == 3 && quotient.dtype == DType::i32));
  const Node &converted = g.node(g.convert(g.constant(2.5), DType::i32).id());
  BOOST_TEST((converted.kind == OpKind::Constant && converted.value == 2));
}

BOOST_AUTO_TEST_CASE(refuses_ops_that_do_not_fit) {
  Graph g("bad", DType::f32);
  Tensor x = g.input("x", {2, 3});
  Tensor ids = g.input("i", {2, 3}, DType::i32);
  Tensor truth = g.input("p", {2, 3}, DType::i1);
  BOOST_TEST(messageOf([&] { g.binary(BinaryFn::Add, x, ids); }) ==
             "elementwise arithmetic needs operands of one element type, not f32 and i32");
  BOOST_TEST(messageOf([&] { g.unary(UnaryFn::Not, x); }) ==
             "this elementwise function does not apply to a f32 tensor");
  BOOST_TEST(messageOf([&] { g.binary(BinaryFn::Pow, ids, ids); }) ==
             "this elementwise arithmetic does not apply to i32 tensors");
  BOOST_TEST(messageOf([&] { g.binary(BinaryFn::Add, truth, truth); }) ==
             "this elementwise arithmetic does not apply to i1 tensors");
  BOOST_TEST(messageOf([&] { g.select(x, x, x); }) == "select needs an i1 predicate, not f32");
  BOOST_TEST(messageOf([&] {
               g.pad(x, g.constant(0), {-2, 0}, {0, 0}, {0, 0});
             }) == "pad: axis 0 of 2x3 would be left with 0 elements");
  BOOST_TEST(messageOf([&] {
               g.broadcast(x, {3, 2}, {0, 1});
             }) == "broadcast: axis 0 of 2x3 does not fit axis 0 of 3x2");
  BOOST_TEST(messageOf([&] {
               g.broadcast(g.input("square", {3, 3}), {3, 3}, {1, 1});
             }) == "broadcast: dimension 1 is out of range or repeated for a result of rank 2");
  BOOST_TEST(messageOf([&] { g.concat({x, g.input("z", {3, 3})}, 1); }) == "concat: 2x3 and 3x3 differ off axis 1");
  BOOST_TEST(messageOf([&] {
               g.stridedSlice(x, {0, 2}, {2, 2}, {1, 1});
             }) == "slice [2:2:1] is out of range or empty for axis 1 of size 3");
  BOOST_TEST(messageOf([&] { g.literal({2}, DType::f32, {1}); }) == "a literal of shape 2 needs 2 values, not 1");
  BOOST_TEST(messageOf([&] {
               g.pad(x, g.constant(0), {int64_t(1) << 62, 0}, {int64_t(1) << 62, 0}, {0, 0});
             }) == "pad: a size does not fit in 64 bits");
}

BOOST_AUTO_TEST_CASE(a_matmul_of_16_bit_operands_may_keep_its_f32_result) {
  // 1 + 2^-9 needs 10 significand bits: bf16 (8) rounds it to 1, f32 keeps it.
  Graph g("scores", DType::bf16);
  Tensor a = g.input("a", {1, 2}), b = g.input("b", {2, 1});
  Tensor wide = g.matmul(a, b, DType::f32);
  BOOST_TEST((wide.dtype() == DType::f32));
  BOOST_TEST((g.matmul(a, b).dtype() == DType::bf16));
  ref::Values inputs{{"a", array({1, 2}, {1, 1})}, {"b", array({2, 1}, {1, std::ldexp(1.0, -9)})}};
  BOOST_TEST(evaluateOne(g, wide, inputs) == (std::vector<double>{1 + std::ldexp(1.0, -9)}),
             boost::test_tools::per_element());
  Graph rounded("rounded", DType::bf16);
  Tensor ra = rounded.input("a", {1, 2}), rb = rounded.input("b", {2, 1});
  BOOST_TEST(evaluateOne(rounded, rounded.matmul(ra, rb), inputs) == (std::vector<double>{1.0}),
             boost::test_tools::per_element());
  // f32 operands keep f32; an f64 result of them is refused.
  Graph single("single", DType::f32);
  Tensor sa = single.input("a", {1, 2}), sb = single.input("b", {2, 1});
  BOOST_TEST(messageOf([&] { single.matmul(sa, sb, DType::f64); }) ==
             "matmul: a result in f64 takes operands of that type, or 16-bit ones (f32 only)");
}

namespace {

// while (i < n) { i += 1; x *= 2 } over (i, n, x), its condition and body
// as graphs of their own.
std::vector<Tensor> doublingLoop(Graph &g, Tensor i, Tensor n, Tensor x) {
  auto condition = std::make_shared<Graph>("cond", DType::f32);
  Tensor ci = condition->input("i", {}, DType::i32), cn = condition->input("n", {}, DType::i32);
  condition->input("x", {3});
  condition->output("holds", condition->compare(CompareFn::Lt, ci, cn));
  auto body = std::make_shared<Graph>("body", DType::f32);
  Tensor bi = body->input("i", {}, DType::i32), bn = body->input("n", {}, DType::i32), bx = body->input("x", {3});
  body->output("i", body->binary(BinaryFn::Add, bi, body->constant(1, DType::i32)));
  body->output("n", bn);
  body->output("x", bx * 2.0);
  return g.whileLoop({i, n, x}, condition, body);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_loop_runs_until_its_condition_fails) {
  for (auto [n, trips] : {std::pair{3.0, 3}, std::pair{0.0, 0}, std::pair{-5.0, 0}}) {
    Graph g("loop", DType::f32);
    Tensor x = g.input("x", {3});
    Tensor n_ = g.input("n", {}, DType::i32);
    std::vector<Tensor> out = doublingLoop(g, g.constant(0, DType::i32), n_, x);
    g.output("i", out[0]);
    g.output("x", out[2]);
    ref::Values results = ref::evaluate(g, {{"x", array({3}, {1, -2, 0.5})}, {"n", array({}, {n})}});
    double scale = std::pow(2.0, trips);
    BOOST_TEST(results.at("i")->data == std::vector<double>{double(trips)});
    BOOST_TEST(results.at("x")->data == (std::vector<double>{scale, -2 * scale, 0.5 * scale}),
               boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(a_loop_refuses_regions_that_do_not_fit_what_it_carries) {
  Graph g("loop", DType::f32);
  Tensor x = g.input("x", {3});
  auto body = std::make_shared<Graph>("body", DType::f32);
  body->output("x", body->input("x", {3}) * 2.0);
  auto wide = std::make_shared<Graph>("cond", DType::f32);
  wide->output("holds", wide->compare(CompareFn::Lt, wide->input("x", {3}), wide->constant(1)));
  BOOST_TEST(messageOf([&] { g.whileLoop({x}, wide, body); }) ==
             "whileLoop: the condition returns 3 i1, not a rank-0 i1");
  auto condition = std::make_shared<Graph>("cond", DType::f32);
  condition->output("holds", condition->compare(CompareFn::Lt, condition->constant(0), condition->constant(1)));
  condition->input("x", {3});
  auto narrow = std::make_shared<Graph>("body", DType::f32);
  narrow->input("x", {3});
  narrow->output("x", narrow->input("y", {2}) * 2.0);
  BOOST_TEST(messageOf([&] { g.whileLoop({x}, condition, narrow); }) ==
             "whileLoop: the body takes 2 tensors, but the loop carries 1");
}

// Batched decoding's mask: row r is masked past positions[r / rows per
// position] (2 sequences of 3 rows, 4 keys; one sequence at its first key,
// one at its last), and the op's refusals.
BOOST_AUTO_TEST_CASE(a_positions_mask_masks_each_row_past_its_sequences_position) {
  Graph g("mask", DType::f32);
  Tensor positions = g.indexInput("positions", {2}, 4);
  Tensor y = g.positionsMask(6, 4, positions, 3, -100.0);
  BOOST_TEST(y.shape() == (Shape{6, 1, 4}));
  std::vector<double> expected = {0, -100, -100, -100, 0, -100, -100, -100, 0, -100, -100, -100,
                                  0, 0,    0,    0,    0, 0,    0,    0,    0, 0,    0,    0};
  BOOST_TEST(evaluateOne(g, y, {{"positions", array({2}, {0, 3})}}) == expected, boost::test_tools::per_element());
  BOOST_TEST(messageOf([&] { g.positionsMask(5, 4, positions, 3, -100.0); }) ==
             "positionsMask: 5 rows are not 2 positions of 3 rows each");
  BOOST_TEST(messageOf([&] { g.positionsMask(3, 4, g.input("p", {3}), 1, -100.0); }) ==
             "positionsMask: the positions must be a rank-1 i32 tensor");
}

BOOST_AUTO_TEST_CASE(f32_arithmetic_rounds_every_f32_result_the_others_keep_float64) {
  Graph g("cancel", DType::f32);
  Tensor x = g.input("x", {2});
  g.output("y", (x + 4096.0) - 4096.0);
  ref::Values inputs{{"x", array({2}, {0.1, -0.3})}};
  std::vector<double> exact = ref::evaluate(g, inputs, ref::Rounding::ConvertsOnly).at("y")->data;
  std::vector<double> inF32 = ref::evaluate(g, inputs, ref::Rounding::F32Arithmetic).at("y")->data;
  BOOST_TEST(exact == (std::vector<double>{0.1, -0.3}), boost::test_tools::tolerance(1e-9)
                                                            << boost::test_tools::per_element());
  // f32 holds 4096 + x to 2^-11: the sum is rounded there before 4096 goes.
  std::vector<double> rounded{double(float(4096.0 + 0.1)) - 4096.0, double(float(4096.0 - 0.3)) - 4096.0};
  BOOST_TEST(inF32 == rounded, boost::test_tools::per_element());
  BOOST_TEST(std::abs(inF32[0] - 0.1) > 1e-6);
}

BOOST_AUTO_TEST_CASE(f32_arithmetic_leaves_sixteen_bit_results_to_the_converts) {
  Graph g("scale", DType::bf16);
  Tensor x = g.input("x", {1});
  g.output("y", x * 3.0);
  ref::Values inputs{{"x", array({1}, {0.1})}};
  double everyOp = ref::evaluate(g, inputs, ref::Rounding::EveryOp).at("y")->data[0];
  double inF32 = ref::evaluate(g, inputs, ref::Rounding::F32Arithmetic).at("y")->data[0];
  BOOST_TEST(everyOp == storedValue(DType::bf16, 0.1 * 3.0));
  BOOST_TEST(inF32 == 0.1 * 3.0);
}
