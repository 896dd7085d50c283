// GPT-2, written once as a NumPy-style forward pass over the front end.
//
//   x = wte[ids] + wpe[:T]                                  embed
//   for each block:
//     x = x + c_proj(attention(split_heads(c_attn(ln_1(x)))))  attend
//     x = x + mlp.c_proj(gelu(c_fc(ln_2(x))))                  feedforward
//   logits = ln_f(x) @ wte^T                                project
//
// The same functions build every form it is traced in (each in three
// phases: forward, prefill and decode, see Gpt2Phase):
//   fused     one function "gpt2" taking ids and every parameter by its
//             Hugging Face name (h.3.attn.c_attn.weight, ...), returning the
//             logits of every position;
//   sublayer  four functions, embed, attend, feedforward and project, each
//             compiled once and called from a host loop over the blocks;
//   reference the fused graph with probes on the embedding and every
//             block's residual, evaluated in float64.
#pragma once

#include "frontend/graph.h"
#include "models/gpt2_config.h"

#include <string>
#include <vector>

namespace mlpipe {

struct ParameterSpec {
  std::string name; // Hugging Face name, e.g. "h.0.ln_1.weight"
  Shape shape;      // Conv1D weights are [in, out]
};

// Every parameter of the model in a fixed order: wte, wpe, the blocks, ln_f.
std::vector<ParameterSpec> gpt2Parameters(const Gpt2Config &config);
// The parameters of one block, without the "h.N." prefix ("ln_1.weight", ...).
std::vector<ParameterSpec> blockParameters(const Gpt2Config &config);

// The program forms; `length` is the (padded) number of token positions.
enum class Gpt2Mode { Fused, Sublayer };
Gpt2Mode parseGpt2Mode(const std::string &name); // "fused" | "sublayer"

// What a program does with the KV cache:
//   Forward  the whole sequence, no cache (as a plain forward pass);
//   Prefill  the whole (padded) prompt, and its keys and values written into
//            the cache at positions [0, length);
//   Decode   one token at the run-time `position` (a rank-0 i32 input): its
//            key and value written into the cache there, attention over the
//            cache up to it.
// The cache is an in-out input "kv_cache" of kvCacheShape() (fused) or one
// layer's [2, heads, n_ctx, head_dim] (sublayer's attend), written in place.
enum class Gpt2Phase { Forward, Prefill, Decode };
Gpt2Phase parseGpt2Phase(const std::string &name); // "forward" | "prefill" | "decode"
Shape kvCacheShape(const Gpt2Config &config);      // [layers, 2, heads, n_ctx, head_dim]

fe::Program traceGpt2(const Gpt2Config &config, Gpt2Mode mode, int64_t length, DType dtype = DType::f32,
                      Gpt2Phase phase = Gpt2Phase::Forward);

// Batched decoding: one decode step of `batch` sequences at once, each at
// its own position in a cache slot of its own (generate --prompts). The
// inputs "ids" and "positions" are [batch] i32: sequence b's token and
// where it goes (one sequence's "positions" is rank 0: its step is the
// single sequence's decode step, attention and all, under these names);
// the outputs are the logits [batch, vocab] and "next_ids", each row's
// greedy token ([batch] i32, nn::greedyTokens). The cache is
// batchedKvCacheShape(), taken a layer at a time: in-out inputs
// "h.L.kv_cache" (fused) or "kv_cache" (sublayer's attend), each one
// layer's [2, batch * heads, n_ctx, head_dim]: sequence b's slot is rows b * heads to
// (b + 1) * heads - 1 of the heads axis, so that every sequence's heads
// are one batch of the attention's products. Each row's key and value are
// written at its own position and each row attends over its own slot up
// to it; the weights are read once for the whole batch.
Shape batchedKvCacheShape(const Gpt2Config &config, int64_t batch); // [layers, 2, batch * heads, n_ctx, head_dim]
// The fused batched decode step's in-out input of one layer's part of
// that cache, [2, batch * heads, n_ctx, head_dim]: "h.L.kv_cache".
std::string batchedLayerCacheName(int64_t layer);
fe::Program traceGpt2BatchedDecode(const Gpt2Config &config, Gpt2Mode mode, int64_t batch, DType dtype = DType::f32);

// The fused graph with probes "embedding" and "blocks.N.residual", for the
// reference.
fe::Program traceGpt2Reference(const Gpt2Config &config, int64_t length);

// The next power of two >= length, at most the context: the sequence length
// compiled for `length` tokens, so generation compiles few shapes.
int64_t paddedLength(int64_t length, const Gpt2Config &config);

} // namespace mlpipe
