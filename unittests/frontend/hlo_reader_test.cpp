// The HLO reader: the spellings of one module that XLA prints all read the
// same; dot and gather keep XLA's meaning for any dimension numbers (checked
// against loops written from the operation semantics, on random data); the
// signature, and refusals that stay one line even for hostile input.
#define BOOST_TEST_MODULE hlo_reader
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "test_support.h"

#include "frontend/hlo/hlo_builder.h"
#include "frontend/hlo_reader.h"
#include "frontend/mlir_emitter.h"
#include "reference/evaluator.h"

#include <fmt/format.h>

#include <numeric>
#include <random>
#include <set>

using namespace mlpipe;
using namespace mlpipe::fe;
using mlpipe::testing::messageOf;
using mlpipe::testing::rng;

namespace {

// The emitted MLIR without its locations (the metadata the spellings differ
// in).
std::string emitted(std::string_view text) {
  std::string mlir = emitMlir(readHlo(text, "test.hlo"));
  for (size_t at = mlir.find(" loc(\""); at != std::string::npos; at = mlir.find(" loc(\"", at))
    mlir.erase(at, mlir.find("\")", at + 6) + 2 - at);
  return mlir;
}

ref::ArrayPtr randomArray(const Shape &shape) {
  auto array = std::make_shared<ref::Array>();
  array->shape = shape;
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (int64_t i = 0; i < numElements(shape); ++i)
    array->data.push_back(uniform(rng()));
  return array;
}

std::vector<int64_t> strides(const Shape &shape) {
  std::vector<int64_t> result(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    result[i - 1] = result[i] * shape[i];
  return result;
}

// Calls visit(index) for every multi-index of `shape` in C order.
template <typename Visit> void forEachIndex(const Shape &shape, Visit visit) {
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < numElements(shape); ++flat) {
    visit(index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

std::string hloDims(const Shape &shape) { return fmt::format("{}", fmt::join(shape, ",")); }

const char *kTanh = R"(HloModule jit_f, entry_computation_layout={(f32[4,8]{1,0})->f32[4,8]{1,0}}

ENTRY main.4 {
  Arg_0.1 = f32[4,8]{1,0} parameter(0)
  exponential.2 = f32[4,8]{1,0} exponential(Arg_0.1)
  ROOT tanh.3 = f32[4,8]{1,0} tanh(exponential.2), metadata={op_name="jit(f)/tanh" source_file="f.py" source_line=3}
}
)";

} // namespace

BOOST_AUTO_TEST_CASE(spellings_of_one_module_read_the_same) {
  std::string reference = emitted(kTanh);
  // % names, verbose operands, a signature, comments, stack frame tables.
  BOOST_TEST(emitted(R"(HloModule jit_f

FileNames
1 "f.py"
FunctionNames
1 "f"
FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}
StackFrames
1 {file_location_id=1 parent_frame_id=1}

/* the entry */ ENTRY %main.4 (Arg_0.1: f32[4,8]) -> f32[4,8] {
  %Arg_0.1 = f32[4,8]{1,0} parameter(0) // its only input
  %exponential.2 = f32[4,8]{1,0} exponential(f32[4,8]{1,0} %Arg_0.1), metadata={op_name="a, b}" stack_frame_id=1}
  ROOT %tanh.3 = f32[4,8]{1,0} tanh(f32[4,8]{1,0} %exponential.2), backend_config={"x":[1,{"y":"}"}]}
}, execution_thread="main"
)") == reference);
  // Shapes left out where the op implies them, instructions out of order, no
  // ENTRY (the last computation is the entry), the tables at the end.
  BOOST_TEST(emitted(R"(HloModule jit_f
main.4 {
  ROOT tanh.3 = tanh(exponential.2)
  exponential.2 = exponential(Arg_0.1)
  Arg_0.1 = f32[4,8] parameter(0)
}
FileNames
1 "f.py"
FunctionNames
FileLocations
StackFrames
)") == reference);
}

// A fragment (no HloModule header, no ENTRY: the last computation is the
// entry) reads as the module that wraps it, but for the name it takes from
// its entry computation.
BOOST_AUTO_TEST_CASE(fragments_read_as_their_module) {
  std::string fragment = R"(// a comment first
helper {
  x = f32[4,8] parameter(0)
  ROOT e = f32[4,8] exponential(x)
}
main.4 {
  Arg_0.1 = f32[4,8]{1,0} parameter(0)
  exponential.2 = f32[4,8]{1,0} call(Arg_0.1), to_apply=helper
  ROOT tanh.3 = f32[4,8]{1,0} tanh(exponential.2)
})";
  std::string mlir = emitted(fragment);
  std::string module = emitted(std::string("HloModule main_4\n") + fragment);
  BOOST_TEST(mlir == module);
  BOOST_TEST(mlir.find("func.func @main_4(") != std::string::npos);
  BOOST_TEST(emitted("ENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}").find("@e(") !=
             std::string::npos);
}

// Every op `trace --list-ops` lists is one the builder reads (not one it
// refuses), once; every unary and binary opcode is listed; and the list
// prints one line per op.
BOOST_AUTO_TEST_CASE(the_list_of_ops_is_what_the_reader_reads) {
  std::set<std::string_view> listed;
  for (const hlo::SupportedOp &op : hlo::supportedOps()) {
    BOOST_TEST(listed.insert(op.opcode).second, op.opcode << " is listed twice");
    BOOST_TEST(!hlo::unsupportedOpcodes().count(op.opcode), op.opcode << " is listed and refused");
  }
  for (auto &[opcode, fn] : hlo::unaryOpcodes())
    BOOST_TEST(listed.count(opcode), opcode << " is read but not listed");
  for (auto &[opcode, fn] : hlo::binaryOpcodes())
    BOOST_TEST(listed.count(opcode), opcode << " is read but not listed");
  std::string text = listHloOps();
  BOOST_TEST(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) == listed.size());
  BOOST_TEST(text.find("reduce ") != std::string::npos);
  // An op off the list is refused by name, with its shape and place.
  BOOST_TEST(messageOf([] {
               readHlo("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT s = f32[2] cbrt(p)\n}", "x.hlo");
             }) ==
             "x.hlo:4:19: error: cbrt %s of shape f32[2] is not supported: `trace --list-ops` lists the ops mlpipe "
             "reads");
}

// A result layout other than the default (JAX's {0,1,2} for a transpose)
// says how XLA lays the result out in memory; the values, returned
// row-major, are the same. A layout that names other shapes than the
// entry's is still refused.
BOOST_AUTO_TEST_CASE(a_result_layout_leaves_the_values_in_logical_order) {
  std::string_view plain = R"(HloModule m
ENTRY e {
  x = f32[2,3,4]{2,1,0} parameter(0)
  ROOT t = f32[4,3,2]{2,1,0} transpose(x), dimensions={2,1,0}
})";
  std::string_view laidOut = R"(HloModule m, entry_computation_layout={(f32[2,3,4]{2,1,0})->f32[4,3,2]{0,1,2}}
ENTRY e {
  x = f32[2,3,4]{2,1,0} parameter(0)
  ROOT t = f32[4,3,2]{0,1,2} transpose(x), dimensions={2,1,0}
})";
  BOOST_TEST(emitted(plain) == emitted(laidOut));
  BOOST_TEST(messageOf([] {
               readHlo("HloModule m, entry_computation_layout={(f32[2]{0})->f32[3]{0}}\nENTRY e {\n  ROOT x = f32[2] "
                       "parameter(0)\n}",
                       "x.hlo");
             }) == "x.hlo:1:53: error: entry_computation_layout gives the result the shape f32[3], but the ENTRY's "
                   "ROOT %x is f32[2]");
}

BOOST_AUTO_TEST_CASE(names_inputs_in_parameter_order_and_outputs_by_position) {
  Program program = readHlo(R"(HloModule m
ENTRY e {
  b = f32[3] parameter(1)
  a = f32[2] parameter(0)
  t = (f32[2], (f32[3], f32[2])) tuple(a, (f32[3], f32[2]) u)
  u = (f32[3], f32[2]) tuple(b, a)
  ROOT r = (f32[2], (f32[3], f32[2])) tuple(a, u)
})",
                            "test.hlo");
  const Graph &graph = *program.functions.front();
  BOOST_TEST(graph.name() == "m");
  BOOST_TEST(graph.node(graph.inputs()[0]).name == "a");
  BOOST_TEST(graph.node(graph.inputs()[1]).name == "b");
  BOOST_REQUIRE(graph.outputs().size() == 3u);
  BOOST_TEST(graph.outputs()[0].first == "y0");
  BOOST_TEST(graph.outputs()[2].first == "y2");
  BOOST_TEST(graph.outputs()[1].second == graph.inputs()[1]);
}

// dot's result for random dimension numbers, against loops over its
// definition: result[batch..., lhs free..., rhs free...] = sum over the
// contracting indices of lhs * rhs.
BOOST_AUTO_TEST_CASE(dot_keeps_xla_dimension_numbers) {
  struct Case {
    Shape lhs, rhs;
    std::vector<int64_t> lhsBatch, rhsBatch, lhsContracting, rhsContracting;
  };
  std::vector<Case> cases = {
      {{5, 3}, {3, 4}, {}, {}, {1}, {0}},
      {{3, 5}, {4, 3}, {}, {}, {0}, {1}},
      {{2, 5, 3}, {2, 3, 4}, {0}, {0}, {2}, {1}},
      {{5, 2, 3, 6}, {6, 4, 2, 3}, {1}, {2}, {3, 2}, {0, 3}},
      {{3, 4}, {2}, {}, {}, {}, {}},
      {{7}, {7}, {}, {}, {0}, {0}},
      {{2, 3, 1, 4}, {4, 2, 5}, {0}, {1}, {3}, {0}},
  };
  for (const Case &c : cases) {
    auto free = [](const Shape &shape, const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
        if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end())
          axes.push_back(i);
      return axes;
    };
    std::vector<int64_t> lhsFree = free(c.lhs, c.lhsBatch, c.lhsContracting);
    std::vector<int64_t> rhsFree = free(c.rhs, c.rhsBatch, c.rhsContracting);
    Shape out, contracting;
    for (int64_t axis : c.lhsBatch)
      out.push_back(c.lhs[axis]);
    for (int64_t axis : lhsFree)
      out.push_back(c.lhs[axis]);
    for (int64_t axis : rhsFree)
      out.push_back(c.rhs[axis]);
    for (int64_t axis : c.lhsContracting)
      contracting.push_back(c.lhs[axis]);
    std::string text = fmt::format(
        "HloModule dot\nENTRY e {{\n  a = f32[{}] parameter(0)\n  b = f32[{}] parameter(1)\n"
        "  ROOT d = f32[{}] dot(a, b), lhs_batch_dims={{{}}}, rhs_batch_dims={{{}}}, lhs_contracting_dims={{{}}}, "
        "rhs_contracting_dims={{{}}}\n}}\n",
        hloDims(c.lhs), hloDims(c.rhs), hloDims(out), fmt::join(c.lhsBatch, ","), fmt::join(c.rhsBatch, ","),
        fmt::join(c.lhsContracting, ","), fmt::join(c.rhsContracting, ","));
    BOOST_TEST_CONTEXT(text) {
      ref::ArrayPtr a = randomArray(c.lhs), b = randomArray(c.rhs);
      Program program = readHlo(text, "dot.hlo");
      std::vector<double> actual = ref::evaluate(*program.functions.front(), {{"a", a}, {"b", b}}).at("y")->data;
      std::vector<double> expected, magnitudes;
      std::vector<int64_t> lhsStrides = strides(c.lhs), rhsStrides = strides(c.rhs);
      size_t batches = c.lhsBatch.size();
      forEachIndex(out, [&](const std::vector<int64_t> &o) {
        double sum = 0, magnitude = 0;
        forEachIndex(contracting, [&](const std::vector<int64_t> &k) {
          int64_t ia = 0, ib = 0;
          for (size_t i = 0; i < batches; ++i) {
            ia += o[i] * lhsStrides[c.lhsBatch[i]];
            ib += o[i] * rhsStrides[c.rhsBatch[i]];
          }
          for (size_t i = 0; i < lhsFree.size(); ++i)
            ia += o[batches + i] * lhsStrides[lhsFree[i]];
          for (size_t i = 0; i < rhsFree.size(); ++i)
            ib += o[batches + lhsFree.size() + i] * rhsStrides[rhsFree[i]];
          for (size_t i = 0; i < k.size(); ++i) {
            ia += k[i] * lhsStrides[c.lhsContracting[i]];
            ib += k[i] * rhsStrides[c.rhsContracting[i]];
          }
          sum += a->data[ia] * b->data[ib];
          magnitude += std::abs(a->data[ia] * b->data[ib]);
        });
        expected.push_back(sum);
        magnitudes.push_back(magnitude);
      });
      BOOST_REQUIRE(actual.size() == expected.size());
      // Relative to the sum of the terms' magnitudes: a sum that random signs
      // cancel towards zero has no relative accuracy of its own.
      for (size_t i = 0; i < actual.size(); ++i)
        BOOST_TEST(std::abs(actual[i] - expected[i]) <= 1e-12 * std::max(magnitudes[i], 1e-300),
                   "element " << i << ": " << actual[i] << " against " << expected[i]);
    }
  }
}

// gather's embedding form: out[batch..., row...] = table[clamp(id), row...],
// whichever axis of the ids holds the (size 1) index vector.
BOOST_AUTO_TEST_CASE(gather_takes_rows_like_xla) {
  for (auto [ids, vectorDim] : {std::pair{Shape{5, 1}, 1}, {Shape{5}, 1}, {Shape{2, 1, 3}, 1}, {Shape{1}, 0}}) {
    Shape batch = ids;
    if (vectorDim < static_cast<int64_t>(ids.size()))
      batch.erase(batch.begin() + vectorDim);
    Shape table{6, 2, 3}, out = batch;
    out.insert(out.end(), {2, 3});
    std::vector<int64_t> offsets = {static_cast<int64_t>(batch.size()), static_cast<int64_t>(batch.size()) + 1};
    std::string text =
        fmt::format("HloModule g\nENTRY e {{\n  t = f32[6,2,3] parameter(0)\n  i = s32[{}] parameter(1)\n"
                    "  ROOT g = f32[{}] gather(t, i), offset_dims={{{}}}, collapsed_slice_dims={{0}}, "
                    "start_index_map={{0}}, index_vector_dim={}, slice_sizes={{1,2,3}}\n}}\n",
                    hloDims(ids), hloDims(out), fmt::join(offsets, ","), vectorDim);
    BOOST_TEST_CONTEXT(text) {
      Program program = readHlo(text, "gather.hlo");
      const Graph &graph = *program.functions.front();
      BOOST_TEST(graph.node(graph.inputs()[1]).ints == std::vector<int64_t>{6}); // ids draw from the rows
      auto idArray = std::make_shared<ref::Array>();
      idArray->shape = ids;
      std::uniform_int_distribution<int> row(-2, 7); // some outside the table: XLA clamps them
      for (int64_t k = 0; k < numElements(ids); ++k)
        idArray->data.push_back(row(rng()));
      ref::ArrayPtr t = randomArray(table);
      std::vector<double> actual = ref::evaluate(graph, {{"t", t}, {"i", idArray}}).at("y")->data;
      std::vector<double> expected;
      for (double id : idArray->data) {
        int64_t clamped = std::clamp<int64_t>(static_cast<int64_t>(id), 0, 5);
        expected.insert(expected.end(), t->data.begin() + clamped * 6, t->data.begin() + clamped * 6 + 6);
      }
      BOOST_TEST(actual == expected, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(fusions_inline_and_multi_output_fusions_split) {
  Program program = readHlo(R"(HloModule m
%fused (p0: f32[4], p1: f32[4]) -> (f32[4], f32[4]) {
  %p0 = f32[4]{0} parameter(0)
  %p1 = f32[4]{0} parameter(1)
  %s = f32[4]{0} add(%p0, %p1)
  %m = f32[4]{0} multiply(%p0, %p1)
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%s, %m)
}
ENTRY %e (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %y = f32[4]{0} parameter(1)
  %f = (f32[4]{0}, f32[4]{0}) fusion(%x, %y), kind=kLoop, calls=%fused
  %a = f32[4]{0} get-tuple-element(%f), index=0
  %b = f32[4]{0} get-tuple-element(%f), index=1
  ROOT %r = f32[4]{0} subtract(%a, %b)
})",
                            "test.hlo");
  const Graph &graph = *program.functions.front();
  ref::ArrayPtr x = randomArray({4}), y = randomArray({4});
  std::vector<double> out = ref::evaluate(graph, {{"x", x}, {"y", y}}).at("y")->data;
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(out[i] == (x->data[i] + y->data[i]) - x->data[i] * y->data[i]);
}

// Hostile shapes of input: refused or read, never a crash, a hang or an
// overflowed stack.
BOOST_AUTO_TEST_CASE(long_chains_deep_nesting_and_blowups_are_bounded) {
  std::string chain = "HloModule chain\nENTRY e {\n  x0 = f32[2] parameter(0)\n";
  for (int i = 1; i <= 20000; ++i)
    chain += fmt::format("  x{} = f32[2] negate(x{})\n", i, i - 1);
  chain += "}\n";
  BOOST_TEST(readHlo(chain, "chain.hlo").functions.front()->nodes().size() > 20000u);

  // The same chain written backwards: every operand is defined after its use.
  std::string backwards = "HloModule chain\nENTRY e {\n  ROOT x20000 = f32[2] negate(x19999)\n";
  for (int i = 19999; i >= 1; --i)
    backwards += fmt::format("  x{} = f32[2] negate(x{})\n", i, i - 1);
  backwards += "  x0 = f32[2] parameter(0)\n}\n";
  BOOST_TEST(readHlo(backwards, "chain.hlo").functions.front()->nodes().size() > 20000u);

  std::string nested = "HloModule n\nENTRY e {\n  ROOT p = " + std::string(5000, '(') + "f32[]" +
                       std::string(5000, ')') + " parameter(0)\n}\n";
  BOOST_TEST(messageOf([&] { readHlo(nested, "n.hlo"); }) == "n.hlo:3:77: error: tuple shapes nest deeper than 64");

  // Each computation calls the next twice: 2^40 copies once inlined.
  std::string doubling = "HloModule d\n%c40 (p: f32[2]) -> f32[2] {\n  ROOT %p = f32[2] parameter(0)\n}\n";
  for (int i = 39; i >= 0; --i)
    doubling +=
        fmt::format("%c{0} (p: f32[2]) -> f32[2] {{\n  %p = f32[2] parameter(0)\n  %a = f32[2] call(%p), "
                    "to_apply=%c{1}\n  %b = f32[2] call(%a), to_apply=%c{1}\n  ROOT %s = f32[2] add(%a, %b)\n}}\n",
                    i, i + 1);
  doubling +=
      "ENTRY %e (x: f32[2]) -> f32[2] {\n  %x = f32[2] parameter(0)\n  ROOT %r = f32[2] call(%x), to_apply=%c0\n}\n";
  std::string message = messageOf([&] { readHlo(doubling, "d.hlo"); });
  BOOST_TEST(message.find("records more than 65536 operations once calls and fusions are inlined") !=
             std::string::npos);

  BOOST_TEST(messageOf([&] {
               readHlo("HloModule m\nENTRY e {\n  ROOT p = f32[99999999999,99999999999] parameter(0)\n}", "big.hlo");
             }) ==
             "big.hlo:3:41: error: parameter %p: shape 99999999999x99999999999 has more elements than fit in 64 bits");
  BOOST_TEST(messageOf([&] {
               readHlo("HloModule m\nENTRY e {\n  ROOT p = f32[99999999999999999999] parameter(0)\n}", "big.hlo");
             }) == "big.hlo:3:16: error: a dimension size does not fit in 64 bits");
}

BOOST_AUTO_TEST_CASE(refusals_name_the_place_in_one_line) {
  auto refusal = [](std::string_view text) { return messageOf([&] { readHlo(text, "x.hlo"); }); };
  BOOST_TEST(refusal("") == "x.hlo:1:1: error: the file is empty: expected an HLO module ('HloModule NAME' and its "
                            "computations)");
  BOOST_TEST(refusal("module {\n  func.func @f() {\n  }\n}") ==
             "x.hlo:1:1: error: expected 'HloModule' or a computation ('NAME {' and its instructions) at the start of "
             "an HLO module, found 'module'");
  BOOST_TEST(refusal("HloModule m") == "x.hlo:1:11: error: the module has no computations");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  q = f32[2] parameter(0)\n}") ==
             "x.hlo:4:14: error: parameter %q: parameter number 0 is negative or used twice");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  p = f32[2] parameter(1)\n}") ==
             "x.hlo:3:14: error: parameter %p: parameter 0 is missing: the entry's parameters must be numbered 0, 1, "
             "2, ...");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, p)\n  ROOT b = "
                     "f32[2] add(p, p)\n}") == "x.hlo:5:8: error: computation %e has a second ROOT");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(negate(p), p)\n}") ==
             "x.hlo:4:29: error: add %a: nested instructions are not supported: give %negate a name of its own");
  BOOST_TEST(
      refusal("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f32[2] call(p), to_apply=%nowhere\n}") ==
      "x.hlo:4:37: error: there is no computation named %nowhere");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2, 3})\n}") ==
             "x.hlo:3:35: error: constant %c: the constant has more than 2 elements along axis 0");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  ROOT c = s32[2] constant({1, 2.5})\n}") ==
             "x.hlo:3:19: error: constant %c: 2.5 is not a value of s32");
  BOOST_TEST(refusal("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2} /* unterminated\n}") ==
             "x.hlo:3:35: error: constant %c: unterminated /* comment: the file ends inside it");
  BOOST_TEST(refusal(std::string("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\x01\n}")) ==
             "x.hlo:3:26: error: expected an instruction name (or '}' closing the computation), found '\\x01'");
}

namespace {

// The trips of `while (i <direction> bound) i = i <step>` from `start`, as
// the reader counts them: the body adds 1 to an f32 tally, which folds to a
// constant the module returns when the loop is unrolled. A loop run at run
// time gives "at run time"; a refused loop gives its message.
std::string tripsOf(const std::string &type, const std::string &start, const std::string &compare,
                    const std::string &step) {
  std::string tuple = fmt::format("({}[], f32[])", type);
  std::string text = fmt::format("HloModule loop\n"
                                 "cond {{\n  p = {0} parameter(0)\n  i = {1}[] get-tuple-element(p), index=0\n"
                                 "  ROOT c = pred[] {2}\n}}\n"
                                 "body {{\n  p = {0} parameter(0)\n  i = {1}[] get-tuple-element(p), index=0\n"
                                 "  n = f32[] get-tuple-element(p), index=1\n  one = f32[] constant(1)\n"
                                 "  m = f32[] add(n, one)\n  {3}\n  ROOT t = {0} tuple(next, m)\n}}\n"
                                 "ENTRY e {{\n  x = f32[2] parameter(0)\n  s = {1}[] constant({4})\n"
                                 "  z = f32[] constant(0)\n  init = {0} tuple(s, z)\n"
                                 "  w = {0} while(init), condition=cond, body=body\n"
                                 "  ROOT n = f32[] get-tuple-element(w), index=1\n}}\n",
                                 tuple, type, compare, step, start);
  try {
    Program program = readHlo(text, "loop.hlo");
    const Graph &graph = *program.functions.front();
    const Node &out = graph.node(graph.outputs().front().second);
    if (out.kind == OpKind::LoopResult)
      return "at run time";
    return fmt::format("{}", out.values.at(0));
  } catch (const Error &error) {
    return error.what();
  }
}

bool contains(const std::string &text, std::string_view part) { return text.find(part) != std::string::npos; }

} // namespace

BOOST_AUTO_TEST_CASE(while_trip_counts_follow_the_counter) {
  auto bound = [](const std::string &direction, const std::string &value, const std::string &type = "s32") {
    return fmt::format("compare(i, b), direction={}\n  b = {}[] constant({})", direction, type, value);
  };
  auto plus = [](const std::string &value, const std::string &type = "s32") {
    return fmt::format("k = {}[] constant({})\n  next = {}[] add(i, k)", type, value, type);
  };
  auto minus = [](const std::string &value, const std::string &type = "s32") {
    return fmt::format("k = {}[] constant({})\n  next = {}[] subtract(i, k)", type, value, type);
  };
  BOOST_TEST(tripsOf("s32", "0", bound("LT", "10"), plus("1")) == "10");
  BOOST_TEST(tripsOf("s32", "0", bound("LT", "10"), plus("3")) == "4");  // 0 3 6 9
  BOOST_TEST(tripsOf("s32", "0", bound("LE", "9"), plus("3")) == "4");   // 0 3 6 9
  BOOST_TEST(tripsOf("s32", "10", bound("GT", "0"), minus("3")) == "4"); // 10 7 4 1
  BOOST_TEST(tripsOf("s32", "9", bound("GE", "0"), plus("-3")) == "4");  // 9 6 3 0
  BOOST_TEST(tripsOf("s32", "0", bound("NE", "10"), plus("2")) == "5");
  BOOST_TEST(tripsOf("s32", "5", bound("EQ", "5"), plus("1")) == "1");
  BOOST_TEST(tripsOf("s32", "7", bound("LT", "7"), plus("1")) == "0");
  BOOST_TEST(tripsOf("s32", "-4", bound("LT", "-1"), plus("1")) == "3");
  // The constant on the left: 3 > i is i < 3.
  BOOST_TEST(tripsOf("s32", "0", "compare(b, i), direction=GT\n  b = s32[] constant(3)", plus("1")) == "3");
  // The step's constant on the left of an add.
  BOOST_TEST(tripsOf("s32", "0", bound("LT", "3"), "k = s32[] constant(1)\n  next = s32[] add(k, i)") == "3");
  // Unsigned and narrow counters: 250 then 255 fits a u8; an s8 that would
  // pass 127, and a u8 counting down past 0, wrap around and are refused.
  BOOST_TEST(tripsOf("u8", "250", bound("LT", "255", "u8"), plus("5", "u8")) == "1");
  BOOST_TEST(tripsOf("s64", "0", bound("LT", "4000000000", "s64"), plus("1000000000", "s64")) == "4");
  BOOST_TEST(contains(tripsOf("s8", "120", bound("LT", "127", "s8"), plus("5", "s8")),
                      "the counter, from 120 by 5, would wrap around its type s8 before the condition fails"));
  BOOST_TEST(contains(tripsOf("u8", "3", bound("GE", "0", "u8"), minus("1", "u8")), "would wrap around its type u8"));
  BOOST_TEST(contains(tripsOf("s32", "0", bound("NE", "9"), plus("2")), "the counter, from 0 by 2, never equals 9"));
  BOOST_TEST(contains(tripsOf("s32", "0", bound("LT", "9"), plus("0")), "the counter steps by 0"));
  // Up to 64 trips are unrolled; more, the loop runs at run time.
  BOOST_TEST(tripsOf("s32", "0", bound("LT", "64"), plus("1")) == "64");
  BOOST_TEST(tripsOf("s32", "0", bound("LT", "65"), plus("1")) == "at run time");
  BOOST_TEST(tripsOf("s32", "0", bound("LT", "70000"), plus("1")) == "at run time");
  // A counter that is not an integer gives no trip count: the loop runs
  // at run time.
  BOOST_TEST(tripsOf("f32", "0", bound("LT", "3", "f32"), plus("1", "f32")) == "at run time");
  // A counter stepped by anything but a constant: at run time.
  BOOST_TEST(tripsOf("s32", "1", bound("LT", "10"), "k = s32[] constant(2)\n  next = s32[] multiply(i, k)") ==
             "at run time");
}

// cuDNN's backward filter (the kernel's gradient of a convolution, from the
// input and the result's gradient dy) is checked by what a gradient is: for
// y = conv(x, w), linear in w, sum(dy * y) equals sum(dW * w). Random
// windows (stride, padding on either side, window dilation), feature
// groups, NHWC/HWIO and NCHW/OIHW layouts, all in float64.
BOOST_AUTO_TEST_CASE(cudnn_backward_filter_is_the_kernels_gradient) {
  std::uniform_int_distribution<int64_t> pick(1, 3);
  for (int trial = 0; trial < 24; ++trial) {
    bool nchw = trial % 2 == 1;
    int64_t groups = trial % 3 == 0 ? 2 : 1;
    int64_t n = pick(rng()), perGroup = pick(rng()), outputs = groups * pick(rng());
    int64_t channels = groups * perGroup;
    std::vector<int64_t> size, stride, dilation, low, high, inputSize, outputSize;
    for (int d = 0; d < 2; ++d) {
      size.push_back(pick(rng()));
      stride.push_back(pick(rng()));
      dilation.push_back(pick(rng()));
      low.push_back(pick(rng()) - 1);
      high.push_back(pick(rng()) - 1);
      inputSize.push_back((size[d] - 1) * dilation[d] + 1 + pick(rng()) + 2);
      int64_t padded = inputSize[d] + low[d] + high[d];
      outputSize.push_back((padded - ((size[d] - 1) * dilation[d] + 1)) / stride[d] + 1);
    }
    Shape x = nchw ? Shape{n, channels, inputSize[0], inputSize[1]} : Shape{n, inputSize[0], inputSize[1], channels};
    Shape w = nchw ? Shape{outputs, perGroup, size[0], size[1]} : Shape{size[0], size[1], perGroup, outputs};
    Shape y = nchw ? Shape{n, outputs, outputSize[0], outputSize[1]} : Shape{n, outputSize[0], outputSize[1], outputs};
    std::string labels = nchw ? "bf01_oi01->bf01" : "b01f_01io->b01f";
    std::string window =
        fmt::format("window={{size={}x{} stride={}x{} pad={}_{}x{}_{} rhs_dilate={}x{}}}", size[0], size[1], stride[0],
                    stride[1], low[0], high[0], low[1], high[1], dilation[0], dilation[1]);
    std::string forwardText = fmt::format(
        "HloModule f\nENTRY e {{\n  x = f32[{}] parameter(0)\n  w = f32[{}] parameter(1)\n  ROOT y = f32[{}] "
        "convolution(x, w), {}, dim_labels={}, feature_group_count={}\n}}\n",
        hloDims(x), hloDims(w), hloDims(y), window, labels, groups);
    std::string backwardText = fmt::format(
        "HloModule b\nENTRY e {{\n  x = f32[{}] parameter(0)\n  dy = f32[{}] parameter(1)\n  c = (f32[{}], u8[0]) "
        "custom-call(x, dy), {}, dim_labels={}, feature_group_count={}, "
        "custom_call_target=\"__cudnn$convBackwardFilter\"\n  ROOT dw = f32[{}] get-tuple-element(c), index=0\n}}\n",
        hloDims(x), hloDims(y), hloDims(w), window, labels, groups, hloDims(w));
    BOOST_TEST_CONTEXT(backwardText) {
      ref::ArrayPtr xs = randomArray(x), ws = randomArray(w), dys = randomArray(y);
      Program forward = readHlo(forwardText, "forward.hlo"), backward = readHlo(backwardText, "backward.hlo");
      std::vector<double> ys = ref::evaluate(*forward.functions.front(), {{"x", xs}, {"w", ws}}).at("y")->data;
      std::vector<double> dws = ref::evaluate(*backward.functions.front(), {{"x", xs}, {"dy", dys}}).at("y")->data;
      BOOST_REQUIRE(dws.size() == ws->data.size());
      double throughY = std::inner_product(dys->data.begin(), dys->data.end(), ys.begin(), 0.0);
      double throughW = std::inner_product(dws.begin(), dws.end(), ws->data.begin(), 0.0);
      BOOST_TEST(std::abs(throughY - throughW) <= 1e-9 * (1 + std::abs(throughY)));
    }
  }
}

// cuDNN's backward input (the input's gradient of a convolution, from dy
// and the kernel), by the same identity: sum(dy * conv(x, w)) equals
// sum(dx * x). Random windows (stride, padding either side, window
// dilation, negative padding too) in NHWC/HWIO and NCHW/OIHW.
BOOST_AUTO_TEST_CASE(cudnn_backward_input_is_the_inputs_gradient) {
  std::uniform_int_distribution<int64_t> pick(1, 3);
  for (int trial = 0; trial < 24; ++trial) {
    bool nchw = trial % 2 == 1;
    int64_t n = pick(rng()), channels = pick(rng()), outputs = pick(rng());
    std::vector<int64_t> size, stride, dilation, low, high, inputSize, outputSize;
    for (int d = 0; d < 2; ++d) {
      size.push_back(pick(rng()));
      stride.push_back(pick(rng()));
      dilation.push_back(pick(rng()));
      low.push_back(pick(rng()) - 2);
      high.push_back(pick(rng()) - 1);
      inputSize.push_back((size[d] - 1) * dilation[d] + 1 + pick(rng()) + 3);
      int64_t padded = inputSize[d] + low[d] + high[d];
      outputSize.push_back((padded - ((size[d] - 1) * dilation[d] + 1)) / stride[d] + 1);
    }
    Shape x = nchw ? Shape{n, channels, inputSize[0], inputSize[1]} : Shape{n, inputSize[0], inputSize[1], channels};
    Shape w = nchw ? Shape{outputs, channels, size[0], size[1]} : Shape{size[0], size[1], channels, outputs};
    Shape y = nchw ? Shape{n, outputs, outputSize[0], outputSize[1]} : Shape{n, outputSize[0], outputSize[1], outputs};
    std::string labels = nchw ? "bf01_oi01->bf01" : "b01f_01io->b01f";
    std::string window =
        fmt::format("window={{size={}x{} stride={}x{} pad={}_{}x{}_{} rhs_dilate={}x{}}}", size[0], size[1], stride[0],
                    stride[1], low[0], high[0], low[1], high[1], dilation[0], dilation[1]);
    std::string forwardText = fmt::format(
        "HloModule f\nENTRY e {{\n  x = f32[{}] parameter(0)\n  w = f32[{}] parameter(1)\n  ROOT y = f32[{}] "
        "convolution(x, w), {}, dim_labels={}\n}}\n",
        hloDims(x), hloDims(w), hloDims(y), window, labels);
    std::string backwardText = fmt::format(
        "HloModule b\nENTRY e {{\n  dy = f32[{}] parameter(0)\n  w = f32[{}] parameter(1)\n  c = (f32[{}], u8[0]) "
        "custom-call(dy, w), {}, dim_labels={}, custom_call_target=\"__cudnn$convBackwardInput\"\n  ROOT dx = f32[{}] "
        "get-tuple-element(c), index=0\n}}\n",
        hloDims(y), hloDims(w), hloDims(x), window, labels, hloDims(x));
    BOOST_TEST_CONTEXT(backwardText) {
      ref::ArrayPtr xs = randomArray(x), ws = randomArray(w), dys = randomArray(y);
      Program forward = readHlo(forwardText, "forward.hlo"), backward = readHlo(backwardText, "backward.hlo");
      std::vector<double> ys = ref::evaluate(*forward.functions.front(), {{"x", xs}, {"w", ws}}).at("y")->data;
      std::vector<double> dxs = ref::evaluate(*backward.functions.front(), {{"dy", dys}, {"w", ws}}).at("y")->data;
      BOOST_REQUIRE(dxs.size() == xs->data.size());
      double throughY = std::inner_product(dys->data.begin(), dys->data.end(), ys.begin(), 0.0);
      double throughX = std::inner_product(dxs.begin(), dxs.end(), xs->data.begin(), 0.0);
      BOOST_TEST(std::abs(throughY - throughX) <= 1e-9 * (1 + std::abs(throughY)));
    }
  }
}
