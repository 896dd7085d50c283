// The reference: a recorded graph evaluated eagerly in float64.
//
// The same front-end graph that trace emits as MLIR is walked node by node
// here with double arithmetic (matmuls through CBLAS dgemm), so every
// compiled result can be checked against an independent float64 answer:
//
//   ref::Values out = ref::evaluate(graph, {{"x", ref::fromHost(x)}});
//   HostTensor y = ref::toHost(*out.at("y"), DType::f64);
#pragma once

#include "frontend/graph.h"
#include "support/host_tensor.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlpipe::ref {

// A dense C-ordered float64 array. Integer inputs (ids) are held as doubles
// too: they are exact below 2^53.
struct Array {
  Shape shape;
  std::vector<double> data;
};
using ArrayPtr = std::shared_ptr<const Array>;
using Values = std::map<std::string, ArrayPtr>;

ArrayPtr fromHost(const HostTensor &tensor);
HostTensor toHost(const Array &array, DType dtype);

// Which 16-bit float results the reference rounds to their type. EveryOp:
// each op's, as the program's text says (HLO's semantics). ConvertsOnly:
// only the converts the program asks for; other results stay in float64,
// the exact answer that verify's bounds for reduced precision are measured
// from. F32Arithmetic: as ConvertsOnly, and every f32 result rounded to
// f32, one rounding an op, as compiled code computes (verify's measure of
// how far f32 rounding alone moves an output). Integer results wrap to
// their type in every mode.
enum class Rounding { EveryOp, ConvertsOnly, F32Arithmetic };

// Evaluates `graph` on inputs given by name (every input must be given, with
// its declared shape). Returns every output and probe by name.
// Intermediate values are freed after their last use.
Values evaluate(const fe::Graph &graph, const Values &inputs, Rounding rounding = Rounding::EveryOp);

} // namespace mlpipe::ref
