// Neural-network layers written once over the tensor front end, NumPy
// style. The unit kernels and GPT-2 are built from these, and the float64
// reference evaluates exactly the same graphs.
#pragma once

#include "frontend/graph.h"

namespace mlpipe::nn {

using fe::Tensor;

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu(Tensor x);
// Softmax over the last axis, with the row maximum subtracted first.
Tensor softmax(Tensor x);
// Layer norm over the last axis: (x - mean) / sqrt(var + eps) * weight + bias.
Tensor layerNorm(Tensor x, Tensor weight, Tensor bias, double eps = 1e-5);
// x @ weight + bias, with weight stored [in, out] (GPT-2's Conv1D layout).
Tensor linear(Tensor x, Tensor weight, Tensor bias);
// The score added where attention must not look: -1e10, or f16's most
// negative finite value (-1e10 is -inf in f16, and 0 * -inf NaN).
double maskedScore(DType dtype);
// The type attention's scores and softmax are computed and kept in: f32
// for 16-bit storage (as the frameworks' attention does: one rounding, of
// the probabilities, where a softmax stored in bf16 would round at every
// step), else the storage type itself.
DType scoresType(DType storage);
// (1 - tri(T)) * maskedScore: added to attention scores, it hides future
// tokens; of scoresType.
Tensor causalMask(fe::Graph &graph, int64_t length);
// Causal multi-head attention of q, k, v, each [T, C]; returns [T, C].
// Heads are batched: [T, C] -> [H, T, C/H], so the two products are
// batched matmuls.
Tensor causalAttention(Tensor q, Tensor k, Tensor v, int64_t heads);
// [T, C] -> [H, T, C/H]: the heads of q, k or v.
Tensor splitHeads(Tensor x, int64_t heads);
// One query [1, C] at the run-time `position` against cached keys and
// values [H, n_ctx, C/H] holding it and every earlier position: attention
// over the cache with the positions after it masked; returns [1, C].
Tensor attentionOverCache(Tensor q, Tensor keys, Tensor values, Tensor position, int64_t heads);
// Batched decoding: B queries [B, C], query b at its own run-time position
// positions[b] (positions: [B] i32), against cached keys and values
// [B * H, n_ctx, C/H] whose rows b * H ... (b + 1) * H - 1 are sequence
// b's heads: each row attends over its own sequence's cache up to its own
// position; returns [B, C]. The same arithmetic as attentionOverCache per
// row, the B * H heads being one batch of the products.
Tensor batchedAttentionOverCache(Tensor q, Tensor keys, Tensor values, Tensor positions, int64_t heads);
// Greedy decoding's next tokens: the index of each row's maximum of logits
// [B, V], the first on ties, as [B] i32 (a row holding NaN gives its first
// NaN). Computed where the logits are, so that only B ids come back.
Tensor greedyTokens(Tensor logits);

} // namespace mlpipe::nn
