// HLO ops that move elements without computing them (broadcast, reshape,
// bitcast, transpose, slice, concatenate, pad, iota) recorded into the
// front-end graph.
#include "frontend/hlo/hlo_builder.h"

namespace mlpipe::fe::hlo {

// slice={[start:limit(:stride)?], ...}: one contiguous axis maps onto the
// graph's slice, anything else onto its strided slice.
Tensor Builder::slice(const Instruction &ins, Tensor x) {
  const Attribute &ranges = attribute(ins, "slice");
  std::vector<int64_t> starts, limits, strides;
  parseAttribute(ranges, [&](Cursor &in) {
    in.expect('{', "'{' opening the slice ranges");
    if (!in.consume('}')) {
      do {
        in.expect('[', "'[' opening a range");
        starts.push_back(in.integer("a start"));
        in.expect(':', "':' after the start");
        limits.push_back(in.integer("a limit"));
        strides.push_back(in.consume(':') ? in.integer("a stride") : 1);
        in.expect(']', "']' closing the range");
      } while (in.consume(','));
      in.expect('}', "',' or '}' in the slice ranges");
    }
    return 0;
  });
  if (static_cast<int64_t>(starts.size()) != x.rank())
    failOp(ins, fmt::format("it gives {} ranges for an operand of rank {}", starts.size(), x.rank()));
  std::vector<size_t> cut;
  for (size_t i = 0; i < starts.size(); ++i)
    if (starts[i] != 0 || limits[i] != x.shape()[i] || strides[i] != 1)
      cut.push_back(i);
  if (cut.empty())
    return x;
  if (cut.size() == 1 && strides[cut[0]] == 1 && limits[cut[0]] > starts[cut[0]])
    return graph_->slice(x, static_cast<int64_t>(cut[0]), starts[cut[0]], limits[cut[0]] - starts[cut[0]]);
  return graph_->stridedSlice(x, starts, limits, strides);
}

// padding=low_high(_interior)?x... per axis.
Tensor Builder::pad(const Instruction &ins, Tensor x, Tensor value) {
  const Attribute &padding = attribute(ins, "padding");
  std::vector<int64_t> low, high, interior;
  parseAttribute(padding, [&](Cursor &in) {
    do {
      low.push_back(in.integer("the low padding"));
      in.expect('_', "'_' between low and high padding");
      high.push_back(in.integer("the high padding"));
      interior.push_back(in.peek() == '_' ? (in.advance(), in.integer("the interior padding")) : 0);
    } while (!in.atEnd() && in.peek() == 'x' && (in.advance(), true));
    return 0;
  });
  if (static_cast<int64_t>(low.size()) != x.rank())
    failOp(ins, fmt::format("padding= gives {} axes for an operand of rank {}", low.size(), x.rank()));
  return graph_->pad(x, value, low, high, interior);
}

} // namespace mlpipe::fe::hlo
