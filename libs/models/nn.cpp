#include "models/nn.h"

#include "support/error.h"

#include <cmath>
#include <limits>

namespace mlpipe::nn {

using namespace fe;

Tensor gelu(Tensor x) {
  const double sqrtTwoOverPi = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + tanh(sqrtTwoOverPi * (x + 0.044715 * x * x * x)));
}

Tensor softmax(Tensor x) {
  Tensor shifted = exp(x - max(x, -1, /*keepdims=*/true));
  return shifted / sum(shifted, -1, /*keepdims=*/true);
}

Tensor layerNorm(Tensor x, Tensor weight, Tensor bias, double eps) {
  Tensor centered = x - mean(x, -1, /*keepdims=*/true);
  Tensor variance = mean(centered * centered, -1, /*keepdims=*/true);
  return centered / sqrt(variance + eps) * weight + bias;
}

Tensor linear(Tensor x, Tensor weight, Tensor bias) { return matmul(x, weight) + bias; }

double maskedScore(DType dtype) {
  // f16's largest finite value: -1e10 would round to -inf, and the mask's
  // 0 * -inf to NaN.
  return dtype == DType::f16 ? -65504.0 : -1e10;
}

DType scoresType(DType storage) { return storage == DType::bf16 || storage == DType::f16 ? DType::f32 : storage; }

Tensor causalMask(Graph &graph, int64_t length) {
  DType scores = scoresType(graph.floatType());
  return graph.triu(length, length, 1, scores) * maskedScore(scores);
}

// [T, C] -> [H, T, C/H]
Tensor splitHeads(Tensor x, int64_t heads) {
  int64_t length = x.dim(0), width = x.dim(1);
  return transpose(reshape(x, {length, heads, width / heads}), {1, 0, 2});
}

namespace {

// [T, C] -> [H, C/H, T]: the keys already transposed for q @ k^T, in one
// permutation rather than two.
Tensor splitHeadsTransposed(Tensor x, int64_t heads) {
  int64_t length = x.dim(0), width = x.dim(1);
  return transpose(reshape(x, {length, heads, width / heads}), {1, 2, 0});
}

// [H, T, D] -> [T, H*D]
Tensor mergeHeads(Tensor x) {
  int64_t heads = x.dim(0), length = x.dim(1), headWidth = x.dim(2);
  return reshape(transpose(x, {1, 0, 2}), {length, heads * headWidth});
}

} // namespace

Tensor causalAttention(Tensor q, Tensor k, Tensor v, int64_t heads) {
  if (q.rank() != 2 || q.shape() != k.shape() || q.shape() != v.shape())
    fail("attention needs q, k and v of one 2-D shape [T, C]");
  if (heads <= 0 || q.dim(1) % heads != 0)
    fail("attention: width {} does not split into {} heads", q.dim(1), heads);
  int64_t length = q.dim(0);
  double scale = 1.0 / std::sqrt(static_cast<double>(q.dim(1) / heads));
  Graph &g = q.graph();
  Tensor qh, khT, vh, scores, weights, values;
  {
    Graph::Scope scope(g, "heads");
    qh = splitHeads(q, heads), khT = splitHeadsTransposed(k, heads), vh = splitHeads(v, heads);
  }
  {
    Graph::Scope scope(g, "scores");
    scores = g.matmul(qh, khT, scoresType(q.dtype())) * scale + causalMask(g, length);
  }
  {
    Graph::Scope scope(g, "softmax");
    weights = astype(softmax(scores), q.dtype());
  }
  {
    Graph::Scope scope(g, "values");
    values = matmul(weights, vh);
  }
  Graph::Scope scope(g, "merge_heads");
  return mergeHeads(values);
}

Tensor attentionOverCache(Tensor q, Tensor keys, Tensor values, Tensor position, int64_t heads) {
  if (q.rank() != 2 || q.dim(0) != 1 || keys.rank() != 3 || keys.shape() != values.shape() || keys.dim(0) != heads ||
      keys.dim(0) * keys.dim(2) != q.dim(1))
    fail("attention over a cache needs q [1, C] and keys, values [heads, n_ctx, C/heads]");
  Graph &g = q.graph();
  int64_t context = keys.dim(1);
  double scale = 1.0 / std::sqrt(static_cast<double>(keys.dim(2)));
  Tensor qh, scores, weights, out;
  {
    Graph::Scope scope(g, "heads");
    qh = splitHeads(q, heads); // [H, 1, D]
  }
  {
    Graph::Scope scope(g, "scores");
    DType scoresDtype = scoresType(q.dtype());
    scores = g.matmul(qh, swapLastAxes(keys), scoresDtype) * scale +
             g.positionMask(context, position, maskedScore(scoresDtype), scoresDtype); // [H, 1, n_ctx]
  }
  {
    Graph::Scope scope(g, "softmax");
    weights = astype(softmax(scores), q.dtype());
  }
  {
    Graph::Scope scope(g, "values");
    out = matmul(weights, values); // [H, 1, D]
  }
  Graph::Scope scope(g, "merge_heads");
  return mergeHeads(out);
}

Tensor batchedAttentionOverCache(Tensor q, Tensor keys, Tensor values, Tensor positions, int64_t heads) {
  if (q.rank() != 2 || heads <= 0 || q.dim(1) % heads != 0 || keys.rank() != 3 || keys.shape() != values.shape() ||
      keys.dim(0) != q.dim(0) * heads || keys.dim(2) * heads != q.dim(1))
    fail("batched attention over a cache needs q [B, C] and keys, values [B * heads, n_ctx, C/heads]");
  if (positions.rank() != 1 || positions.dim(0) != q.dim(0) || positions.dtype() != DType::i32)
    fail("batched attention over a cache needs one i32 position per query");
  Graph &g = q.graph();
  int64_t batch = q.dim(0), rows = keys.dim(0), context = keys.dim(1), headWidth = keys.dim(2);
  double scale = 1.0 / std::sqrt(static_cast<double>(headWidth));
  Tensor qh, scores, weights, out;
  {
    Graph::Scope scope(g, "heads");
    qh = reshape(q, {rows, 1, headWidth}); // [B * H, 1, D]: sequence b's heads in rows b * H ...
  }
  {
    Graph::Scope scope(g, "scores");
    DType scoresDtype = scoresType(q.dtype());
    // The mask of every row: the masked score where the key is after the
    // row's sequence's position, else 0 (positionMask's values, per row).
    Tensor mask = g.positionsMask(rows, context, positions, heads, maskedScore(scoresDtype), scoresDtype);
    scores = g.matmul(qh, swapLastAxes(keys), scoresDtype) * scale + mask; // [B * H, 1, n_ctx]
  }
  {
    Graph::Scope scope(g, "softmax");
    weights = astype(softmax(scores), q.dtype());
  }
  {
    Graph::Scope scope(g, "values");
    out = matmul(weights, values); // [B * H, 1, D]
  }
  Graph::Scope scope(g, "merge_heads");
  return reshape(out, {batch, heads * headWidth});
}

Tensor greedyTokens(Tensor logits) {
  Graph &g = logits.graph();
  Graph::Scope scope(g, "greedy_tokens");
  int64_t last = logits.rank() - 1;
  Tensor best = max(logits, -1, /*keepdims=*/true);
  // The positions holding the maximum, or NaN (which a maximum may skip);
  // the least of them.
  Tensor holders =
      g.binary(BinaryFn::Or, g.compare(CompareFn::Eq, logits, best), g.compare(CompareFn::Ne, logits, logits));
  Tensor positions = g.iota(logits.shape(), DType::i32, last);
  Tensor index = g.select(holders, positions, g.constant(std::numeric_limits<int32_t>::max(), DType::i32));
  return g.reduce(ReduceFn::Min, index, last, /*keepdims=*/false);
}

} // namespace mlpipe::nn
