// How the MLIR emitter spells the pieces of its text: literals, indexing
// maps, reassociations, and the arith/math op (or predicate) for each
// front-end function in each element type. Pure functions of their
// arguments; FunctionEmitter (function_emitter.h) puts them together.
#pragma once

#include "frontend/graph.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlpipe::fe::emitter {

using Reassociation = std::vector<std::vector<int64_t>>;

// Groups the dimensions of `big` so that each group multiplies to one
// dimension of `small` (trailing size-1 dimensions join the last group).
// Returns false when no such grouping exists (e.g. 2x3 -> 3x2).
bool groupDimensions(const Shape &small, const Shape &big, Reassociation &groups);

// [[0, 1], [2]]
std::string formatReassociation(const Reassociation &groups);

// A scalar of any element type as MLIR writes it: 1.5e+00, 7, true.
std::string scalarLiteral(double value, DType dtype);

// arith.constant's value: "1.5e+00 : f32", "7 : i32", "true" (an i1 is
// written without its type).
std::string typedLiteral(double value, DType dtype);

// The type arithmetic on `dtype` runs in: f32 for the 16-bit floats.
DType computeType(DType dtype);

// affine_map<(d0, d1) -> (d0, d1)>
std::string identityMap(size_t rank);

// The map reading an operand of shape `in` while iterating over `out`,
// following NumPy broadcasting: right-aligned, size-1 dimensions pinned to 0.
// When `dropAxis` is set, that axis of `in` (a size-1 axis a keepdims
// reduction kept) is left out: the operand is read without it.
std::string broadcastMap(const Shape &in, const Shape &out, int64_t dropAxis = -1);

// ["parallel", "parallel"]
std::string parallelIterators(size_t rank);

// The op computing a function on floats: "math.exp", "arith.addf", ...
const char *unaryFloatOp(UnaryFn fn);
const char *binaryFloatOp(BinaryFn fn);

// Integer and i1 forms, unsigned ones for the unsigned types; Div, Rem and
// the shifts have their own sequences (FunctionEmitter::integerDivide, ...).
const char *binaryIntegerOp(BinaryFn fn, DType dtype);

// The arith.cmpf / arith.cmpi predicate: ordered float comparisons (NaN
// compares false) except une, which is true for NaN as XLA's NE is; i1
// and the unsigned integers compare unsigned (true > false).
std::string comparePredicate(CompareFn fn, DType dtype);

// The identity of each reduction in `dtype`, where the reduction starts.
double reductionIdentity(ReduceFn fn, DType dtype);

// The op combining two elements in a reduction.
const char *reductionOp(ReduceFn fn, DType dtype);

} // namespace mlpipe::fe::emitter
