// How XLA's general gather and scatter are compiled: lowered, before the
// MLIR text is written, into ops mlpipe already compiles on every path
// (iota, integer arithmetic, compare, select, reductions and the row
// gather), so the CPU and the GPU emitters need nothing new. The reference
// evaluates the GatherSlices and Scatter nodes themselves, from their
// definitions, so verify checks these lowerings.
#pragma once

#include "frontend/graph.h"

#include <memory>

namespace mlpipe::fe {

// The most (operand element, update element) pairs a scatter may have. A
// scatter is lowered densely: every operand element reduces over every
// update element, keeping those aimed at it, which is exact for duplicate
// indices with any combiner but costs operand x updates work. 2^24 pairs
// (an embedding gradient of 16384 rows x 1024 updates, a KV cache of 64K
// elements and a 256-element update) take milliseconds on a GPU and well
// under a second on one CPU core; past that a scatter needs sorted or
// segmented updates, which mlpipe does not build, so it is refused.
constexpr int64_t kMaxScatterPairs = int64_t(1) << 24;

// Records `dims`' gather of `operand` at `indices` (result `shape`) in
// `graph`: the flat operand position of every result element, its starts
// clamped, then one row gather from the flattened operand.
Tensor lowerGatherSlices(Graph &graph, Tensor operand, Tensor indices, const SliceIndexing &dims, const Shape &shape);

// Records the scatter in `graph`: the flat target of every update element
// (-1 when its window is not wholly inside), then per operand element the
// combiner's reduction over the updates aimed at it (for assign, the last
// of them by position in the updates), combined with the operand.
Tensor lowerScatter(Graph &graph, Tensor operand, Tensor indices, Tensor updates, const SliceIndexing &dims, int fn);

// `graph` with every GatherSlices and Scatter node lowered; nullptr when it
// has none.
std::unique_ptr<Graph> withScatterGatherLowered(const Graph &graph);

} // namespace mlpipe::fe
