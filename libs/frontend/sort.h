// How a sort is compiled: lowered, before the MLIR text is written, into
// ops mlpipe already compiles on every target (broadcasts, comparisons and
// reductions), with no sorting network of its own. Each element's rank
// along the sorted axis is counted: the elements that sort before it, plus
// the equal ones before it (so ties keep their order: a stable sort), one
// row reduction over every pair of the axis; each output position then
// picks the element whose rank it is, another reduction. That is O(n^2)
// comparisons along an axis of n elements, so the length is limited. The
// reference sorts the SortRank node itself (std::stable_sort), so verify
// checks this lowering.
#pragma once

#include "frontend/graph.h"

#include <memory>

namespace mlpipe::fe {

// The longest axis a sort may sort: the lowering compares every pair of
// the axis' elements, n^2 comparisons per row (a million at 1024), where a
// sorting network would do n log^2 n.
constexpr int64_t kMaxSortLength = 1024;

// The most pairs (elements times the sorted axis' length) a sort may
// compare: where a pass keeps the pairs' comparisons in memory rather than
// fusing them into the reduction, each takes this many elements (256 MB at
// four bytes).
constexpr int64_t kMaxSortPairs = int64_t(1) << 26;

// Whether each element of a sorts before b's (ascending) under `order`
// (graph.h, SortKey): an i1 tensor, by comparisons, and for Total the
// sign bits.
Tensor sortsBefore(Graph &graph, SortOrder order, Tensor a, Tensor b);

// Records the SortRank of `operands` along `axis` by `keys` (graph.h) as
// comparisons of every pair counted by a reduction.
Tensor lowerSortRank(Graph &graph, const std::vector<Tensor> &operands, int64_t axis, const std::vector<SortKey> &keys);

// x with each element moved along `axis` to the position `rank` (an s32
// tensor of x's shape, a permutation along the axis) gives it: every
// position takes, by a max (or) reduction, the one element whose rank it
// is, the others replaced by the reduction's identity, so values pass
// unchanged (-0 and infinities included).
Tensor placeByRank(Graph &graph, Tensor x, Tensor rank, int64_t axis);

// `graph` with every SortRank node lowered; nullptr when it has none.
std::unique_ptr<Graph> withSortsLowered(const Graph &graph);

} // namespace mlpipe::fe
