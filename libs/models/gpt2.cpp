#include "models/gpt2.h"

#include "models/nn.h"
#include "support/error.h"

#include <algorithm>
#include <map>

namespace mlpipe {

using namespace fe;

std::vector<ParameterSpec> blockParameters(const Gpt2Config &config) {
  int64_t c = config.nEmbd;
  return {{"ln_1.weight", {c}},
          {"ln_1.bias", {c}},
          {"attn.c_attn.weight", {c, 3 * c}},
          {"attn.c_attn.bias", {3 * c}},
          {"attn.c_proj.weight", {c, c}},
          {"attn.c_proj.bias", {c}},
          {"ln_2.weight", {c}},
          {"ln_2.bias", {c}},
          {"mlp.c_fc.weight", {c, 4 * c}},
          {"mlp.c_fc.bias", {4 * c}},
          {"mlp.c_proj.weight", {4 * c, c}},
          {"mlp.c_proj.bias", {c}}};
}

std::vector<ParameterSpec> gpt2Parameters(const Gpt2Config &config) {
  std::vector<ParameterSpec> specs = {{"wte.weight", {config.vocabSize, config.nEmbd}},
                                      {"wpe.weight", {config.nCtx, config.nEmbd}}};
  for (int64_t i = 0; i < config.nLayer; ++i)
    for (const ParameterSpec &spec : blockParameters(config))
      specs.push_back({"h." + std::to_string(i) + "." + spec.name, spec.shape});
  specs.push_back({"ln_f.weight", {config.nEmbd}});
  specs.push_back({"ln_f.bias", {config.nEmbd}});
  return specs;
}

Gpt2Mode parseGpt2Mode(const std::string &name) {
  if (name == "fused")
    return Gpt2Mode::Fused;
  if (name == "sublayer")
    return Gpt2Mode::Sublayer;
  fail("unknown mode '{}': expected sublayer or fused", name);
}

int64_t paddedLength(int64_t length, const Gpt2Config &config) {
  if (length <= 0)
    fail("a GPT-2 input needs at least one token");
  if (length > config.nCtx)
    fail("{} tokens do not fit the model's context of {}", length, config.nCtx);
  int64_t padded = 1;
  while (padded < length)
    padded *= 2;
  return std::min(padded, config.nCtx);
}

namespace {

// Inputs named by a prefix and a block's parameter list, in order.
std::map<std::string, Tensor> inputsFor(Graph &g, const std::string &prefix, const std::vector<ParameterSpec> &specs) {
  std::map<std::string, Tensor> tensors;
  for (const ParameterSpec &spec : specs)
    tensors[spec.name] = g.input(prefix + spec.name, spec.shape);
  return tensors;
}

// ---- The forward pass, one function per piece -------------------------------

// The cache a block's keys and values go into (prefill, decode), or none.
struct KvCache {
  Gpt2Phase phase = Gpt2Phase::Forward;
  Tensor cache;               // in-out: [L, 2, H, n_ctx, D] (fused) or one layer's [2, H, n_ctx, D]
  std::vector<int64_t> layer; // {l} into a whole-model cache, {} for one layer's
  Tensor position;            // decode: where the token goes (rank-0 i32)
  // Batched decoding: the sequences (0 for one sequence), and where each
  // one's token goes ([batch] i32); the cache holds a slot per sequence.
  int64_t batch = 0;
  Tensor positions;
};

Tensor embed(Tensor ids, Tensor wte, Tensor wpe, Tensor position = {}, Tensor positions = {}) {
  int64_t length = ids.dim(0);
  if (positions.id() >= 0) // one token per sequence, each at its own position
    return take(wte, ids) + take(wpe, positions);
  if (position.id() < 0)
    return take(wte, ids) + ids.graph().slice(wpe, 0, 0, length);
  // One token at a run-time position: its row of wpe, gathered.
  return take(wte, ids) + take(wpe, reshape(position, {1}));
}

// Writes the keys and values of c_attn's output [T, 3C] (its last 2C
// columns) into the cache at the block's layer, at position 0 (prefill) or
// the run-time one: as one block [2, H, T, D], so a decode step copies its
// new row into the cache in one kernel. A block that would cover the whole
// cache (a prefill of n_ctx tokens into one layer's cache, or into a
// one-layer model's) goes in as two, keys then values: a write of the
// whole would be a new tensor, not an update in place of the in-out cache.
void writeCache(KvCache &kv, Tensor qkv, int64_t heads) {
  Graph &g = qkv.graph();
  int64_t length = qkv.dim(0), width = qkv.dim(1) / 3;
  int64_t positionAxis = kv.phase == Gpt2Phase::Decode ? static_cast<int64_t>(kv.layer.size()) + 2 : -1;
  Shape both(kv.layer.size(), 1);
  both.insert(both.end(), {2, heads, length, width / heads});
  int64_t partsPerBlock = both == kv.cache.shape() ? 1 : 2; // of keys (part 0) and values (part 1)
  for (int64_t part = 0; part < 2; part += partsPerBlock) {
    Tensor columns = g.slice(qkv, 1, (1 + part) * width, partsPerBlock * width);
    Tensor split = transpose(reshape(columns, {length, partsPerBlock, heads, width / heads}), {1, 2, 0, 3});
    Shape block(kv.layer.size(), 1);
    for (int64_t extent : split.shape())
      block.push_back(extent);
    std::vector<int64_t> offsets = kv.layer;
    offsets.insert(offsets.end(), {part, 0, 0, 0});
    kv.cache = g.insert(kv.cache, reshape(split, block), offsets, positionAxis, kv.position);
  }
}

// Batched decoding: writes each sequence's key and value (row b of qkv
// [B, 3C], its last 2C columns) into its slot at the layer, at its own
// position: one block [2, H, 1, D] per sequence, at heads b * H and the
// position positions[b].
void writeBatchedCache(KvCache &kv, Tensor qkv, int64_t heads) {
  Graph &g = qkv.graph();
  int64_t width = qkv.dim(1) / 3, headWidth = width / heads;
  int64_t positionAxis = static_cast<int64_t>(kv.layer.size()) + 2;
  Tensor keysAndValues = reshape(g.slice(qkv, 1, width, 2 * width), {kv.batch, 2, heads, headWidth});
  Shape block(kv.layer.size(), 1);
  block.insert(block.end(), {2, heads, 1, headWidth});
  if (block == kv.cache.shape())
    fail("batched decoding needs a context of more than one position");
  for (int64_t sequence = 0; sequence < kv.batch; ++sequence) {
    Tensor row = reshape(g.slice(keysAndValues, 0, sequence, 1), block); // [1, 2, H, D] as [.., 2, H, 1, D]
    Tensor position = reshape(g.slice(kv.positions, 0, sequence, 1), {});
    std::vector<int64_t> offsets = kv.layer;
    offsets.insert(offsets.end(), {0, sequence * heads, 0, 0});
    kv.cache = g.insert(kv.cache, row, offsets, positionAxis, position);
  }
}

// The block's cached keys (kv = 0) or values (kv = 1): [H, n_ctx, D]
// ([B * H, n_ctx, D] in batched decoding).
Tensor readCache(const KvCache &kv, int64_t which, const Gpt2Config &config) {
  // Selects, not slices and reshapes: a reshape next to a matmul would be
  // folded into it by elementwise fusion, making it a generic contraction.
  Tensor part = kv.cache;
  Graph &g = part.graph();
  if (!kv.layer.empty())
    part = g.selectIndex(part, 0, kv.layer[0]);
  return g.selectIndex(part, 0, which);
}

// Each piece records under a scope named as the weights it uses are, so
// fusions and kernels carry names like ln_1_row_reduction.
Tensor attend(Tensor x, std::map<std::string, Tensor> &p, const Gpt2Config &config, KvCache &kv) {
  Graph &g = x.graph();
  Tensor h, qkvAll, heads, projected;
  {
    Graph::Scope scope(g, "ln_1");
    h = nn::layerNorm(x, p["ln_1.weight"], p["ln_1.bias"], config.layerNormEps);
  }
  {
    Graph::Scope scope(g, "attn.c_attn");
    qkvAll = nn::linear(h, p["attn.c_attn.weight"], p["attn.c_attn.bias"]);
  }
  {
    Graph::Scope scope(g, "attn");
    std::vector<Tensor> qkv = split(qkvAll, 3, -1);
    if (kv.phase != Gpt2Phase::Forward) {
      Graph::Scope cacheScope(g, "cache");
      if (kv.batch > 0)
        writeBatchedCache(kv, qkvAll, config.nHead);
      else
        writeCache(kv, qkvAll, config.nHead);
    }
    if (kv.batch > 0)
      heads = nn::batchedAttentionOverCache(qkv[0], readCache(kv, 0, config), readCache(kv, 1, config), kv.positions,
                                            config.nHead);
    else if (kv.phase == Gpt2Phase::Decode)
      heads =
          nn::attentionOverCache(qkv[0], readCache(kv, 0, config), readCache(kv, 1, config), kv.position, config.nHead);
    else
      heads = nn::causalAttention(qkv[0], qkv[1], qkv[2], config.nHead);
  }
  Graph::Scope scope(g, "attn.c_proj");
  return x + nn::linear(heads, p["attn.c_proj.weight"], p["attn.c_proj.bias"]);
}

Tensor feedforward(Tensor x, std::map<std::string, Tensor> &p, const Gpt2Config &config) {
  Graph &g = x.graph();
  Tensor h, inner;
  {
    Graph::Scope scope(g, "ln_2");
    h = nn::layerNorm(x, p["ln_2.weight"], p["ln_2.bias"], config.layerNormEps);
  }
  {
    Graph::Scope scope(g, "mlp.c_fc");
    inner = nn::gelu(nn::linear(h, p["mlp.c_fc.weight"], p["mlp.c_fc.bias"]));
  }
  Graph::Scope scope(g, "mlp.c_proj");
  return x + nn::linear(inner, p["mlp.c_proj.weight"], p["mlp.c_proj.bias"]);
}

// The language-model head is the token embedding, transposed (tied weights).
Tensor project(Tensor x, Tensor lnWeight, Tensor lnBias, Tensor wte, const Gpt2Config &config) {
  Graph &g = x.graph();
  Tensor h;
  {
    Graph::Scope scope(g, "ln_f");
    h = nn::layerNorm(x, lnWeight, lnBias, config.layerNormEps);
  }
  Graph::Scope scope(g, "lm_head");
  return matmul(h, transpose(wte, {1, 0}));
}

// A phase's cache and position inputs (the cache itself is bound by the
// caller). A batched step of one sequence is the single sequence's step,
// its one position rank-0 as a decode step's (so its attention is matched
// as one, masked past a host position), under the batched step's names
// (its "positions" holds 4 bytes either way).
KvCache decodeCache(Graph &g, const Gpt2Config &config, Gpt2Phase phase, int64_t batch) {
  KvCache kv;
  kv.phase = phase;
  kv.batch = batch > 1 ? batch : 0;
  if (batch > 1)
    kv.positions = g.indexInput("positions", {batch}, config.nCtx);
  else if (batch == 1)
    kv.position = g.indexInput("positions", {}, config.nCtx);
  else if (phase == Gpt2Phase::Decode)
    kv.position = g.indexInput("position", {}, config.nCtx);
  return kv;
}

// The whole model in one graph; with `probes`, the embedding and every
// block's residual are named for the reference. With a `batch`, a batched
// decode step of that many sequences (`length` is then the batch).
void buildFused(Graph &g, const Gpt2Config &config, int64_t length, bool probes, Gpt2Phase phase, int64_t batch = 0) {
  Tensor ids = g.indexInput("ids", {length}, config.vocabSize);
  KvCache kv = decodeCache(g, config, phase, batch);
  // Batched decoding takes each layer's part of the cache as an in-out
  // input of its own, h.L.kv_cache [2, B * H, n_ctx, D]: every sequence's
  // row is its own in-place write, and bufferization's analysis grows with
  // the cube of a chain of such writes into one tensor (L * B of them in a
  // whole-model cache: 36 s at 16 sequences, past an hour at 64; B each
  // here).
  Tensor cacheInput;
  std::vector<Tensor> layerCacheInputs;
  if (phase != Gpt2Phase::Forward && batch == 0)
    kv.cache = cacheInput = g.inoutInput("kv_cache", kvCacheShape(config));
  Shape layerCacheShape = batchedKvCacheShape(config, std::max<int64_t>(batch, 1));
  layerCacheShape.erase(layerCacheShape.begin());
  for (int64_t i = 0; batch > 0 && i < config.nLayer; ++i)
    layerCacheInputs.push_back(g.inoutInput(batchedLayerCacheName(i), layerCacheShape));
  Tensor wte = g.input("wte.weight", {config.vocabSize, config.nEmbd});
  Tensor wpe = g.input("wpe.weight", {config.nCtx, config.nEmbd});
  std::vector<std::map<std::string, Tensor>> blocks;
  for (int64_t i = 0; i < config.nLayer; ++i)
    blocks.push_back(inputsFor(g, "h." + std::to_string(i) + ".", blockParameters(config)));
  Tensor lnWeight = g.input("ln_f.weight", {config.nEmbd});
  Tensor lnBias = g.input("ln_f.bias", {config.nEmbd});

  Tensor x;
  {
    Graph::Scope scope(g, "embed");
    x = embed(ids, wte, wpe, kv.position, kv.positions);
  }
  if (probes)
    g.probe("embedding", x);
  for (int64_t i = 0; i < config.nLayer; ++i) {
    Graph::Scope scope(g, "h." + std::to_string(i));
    if (batch > 0)
      kv.cache = layerCacheInputs[i];
    else
      kv.layer = {i};
    x = feedforward(attend(x, blocks[i], config, kv), blocks[i], config);
    if (batch > 0)
      g.update(layerCacheInputs[i], kv.cache);
    if (probes)
      g.probe("blocks." + std::to_string(i) + ".residual", x);
  }
  Tensor logits = project(x, lnWeight, lnBias, wte, config);
  g.output("logits", logits);
  if (batch > 0)
    g.output("next_ids", nn::greedyTokens(logits));
  if (phase != Gpt2Phase::Forward && batch == 0)
    g.update(cacheInput, kv.cache);
}

// With a `batch`, a batched decode step of that many sequences (`length`
// is then the batch).
void buildSublayers(Program &program, const Gpt2Config &config, int64_t length, DType dtype, Gpt2Phase phase,
                    int64_t batch = 0) {
  Shape residual{length, config.nEmbd};
  {
    Graph &g = program.addFunction("embed", dtype);
    Tensor ids = g.indexInput("ids", {length}, config.vocabSize);
    KvCache kv = decodeCache(g, config, phase, batch);
    Tensor wte = g.input("wte.weight", {config.vocabSize, config.nEmbd});
    Tensor wpe = g.input("wpe.weight", {config.nCtx, config.nEmbd});
    Graph::Scope scope(g, "embed");
    g.output("x", embed(ids, wte, wpe, kv.position, kv.positions));
  }
  std::vector<ParameterSpec> all = blockParameters(config);
  {
    Graph &g = program.addFunction("attend", dtype);
    Tensor x = g.input("x", residual);
    KvCache kv = decodeCache(g, config, phase, batch);
    Tensor cacheInput;
    if (phase != Gpt2Phase::Forward) {
      Shape layerCache = batch > 0 ? batchedKvCacheShape(config, batch) : kvCacheShape(config);
      layerCache.erase(layerCache.begin());
      kv.cache = cacheInput = g.inoutInput("kv_cache", layerCache);
    }
    auto p = inputsFor(g, "", std::vector<ParameterSpec>(all.begin(), all.begin() + 6));
    g.output("x", attend(x, p, config, kv));
    if (phase != Gpt2Phase::Forward)
      g.update(cacheInput, kv.cache);
  }
  {
    Graph &g = program.addFunction("feedforward", dtype);
    Tensor x = g.input("x", residual);
    auto p = inputsFor(g, "", std::vector<ParameterSpec>(all.begin() + 6, all.end()));
    g.output("x", feedforward(x, p, config));
  }
  {
    Graph &g = program.addFunction("project", dtype);
    Tensor x = g.input("x", residual);
    Tensor lnWeight = g.input("ln_f.weight", {config.nEmbd});
    Tensor lnBias = g.input("ln_f.bias", {config.nEmbd});
    Tensor wte = g.input("wte.weight", {config.vocabSize, config.nEmbd});
    Tensor logits = project(x, lnWeight, lnBias, wte, config);
    g.output("logits", logits);
    if (batch > 0)
      g.output("next_ids", nn::greedyTokens(logits));
  }
}

} // namespace

Gpt2Phase parseGpt2Phase(const std::string &name) {
  if (name == "forward")
    return Gpt2Phase::Forward;
  if (name == "prefill")
    return Gpt2Phase::Prefill;
  if (name == "decode")
    return Gpt2Phase::Decode;
  fail("unknown phase '{}': expected forward, prefill or decode", name);
}

Shape kvCacheShape(const Gpt2Config &config) {
  return {config.nLayer, 2, config.nHead, config.nCtx, config.nEmbd / config.nHead};
}

Program traceGpt2(const Gpt2Config &config, Gpt2Mode mode, int64_t length, DType dtype, Gpt2Phase phase) {
  config.validate();
  if (length <= 0 || length > config.nCtx)
    fail("--seq {} is outside the model's context of 1 to {}", length, config.nCtx);
  if (phase == Gpt2Phase::Decode && length != 1)
    fail("a decode step takes one token, not --seq {}", length);
  Program program;
  if (mode == Gpt2Mode::Fused)
    buildFused(program.addFunction("gpt2", dtype), config, length, /*probes=*/false, phase);
  else
    buildSublayers(program, config, length, dtype, phase);
  return program;
}

std::string batchedLayerCacheName(int64_t layer) { return "h." + std::to_string(layer) + ".kv_cache"; }

Shape batchedKvCacheShape(const Gpt2Config &config, int64_t batch) {
  return {config.nLayer, 2, batch * config.nHead, config.nCtx, config.nEmbd / config.nHead};
}

Program traceGpt2BatchedDecode(const Gpt2Config &config, Gpt2Mode mode, int64_t batch, DType dtype) {
  config.validate();
  if (batch < 1)
    fail("a batched decode step needs at least one sequence, not {}", batch);
  Program program;
  if (mode == Gpt2Mode::Fused)
    buildFused(program.addFunction("gpt2", dtype), config, batch, /*probes=*/false, Gpt2Phase::Decode, batch);
  else
    buildSublayers(program, config, batch, dtype, Gpt2Phase::Decode, batch);
  return program;
}

Program traceGpt2Reference(const Gpt2Config &config, int64_t length) {
  Program program;
  buildFused(program.addFunction("gpt2", DType::f64), config, length, /*probes=*/true, Gpt2Phase::Forward);
  return program;
}

} // namespace mlpipe
