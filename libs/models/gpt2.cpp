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

Tensor embed(Tensor ids, Tensor wte, Tensor wpe) {
  int64_t length = ids.dim(0);
  return take(wte, ids) + ids.graph().slice(wpe, 0, 0, length);
}

// Each piece records under a scope named as the weights it uses are, so
// fusions and kernels carry names like ln_1_row_reduction.
Tensor attend(Tensor x, std::map<std::string, Tensor> &p, const Gpt2Config &config) {
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

// The whole model in one graph; with `probes`, the embedding and every
// block's residual are named for the reference.
void buildFused(Graph &g, const Gpt2Config &config, int64_t length, bool probes) {
  Tensor ids = g.indexInput("ids", {length}, config.vocabSize);
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
    x = embed(ids, wte, wpe);
  }
  if (probes)
    g.probe("embedding", x);
  for (int64_t i = 0; i < config.nLayer; ++i) {
    Graph::Scope scope(g, "h." + std::to_string(i));
    x = feedforward(attend(x, blocks[i], config), blocks[i], config);
    if (probes)
      g.probe("blocks." + std::to_string(i) + ".residual", x);
  }
  g.output("logits", project(x, lnWeight, lnBias, wte, config));
}

void buildSublayers(Program &program, const Gpt2Config &config, int64_t length, DType dtype) {
  Shape residual{length, config.nEmbd};
  {
    Graph &g = program.addFunction("embed", dtype);
    Tensor ids = g.indexInput("ids", {length}, config.vocabSize);
    Tensor wte = g.input("wte.weight", {config.vocabSize, config.nEmbd});
    Tensor wpe = g.input("wpe.weight", {config.nCtx, config.nEmbd});
    Graph::Scope scope(g, "embed");
    g.output("x", embed(ids, wte, wpe));
  }
  std::vector<ParameterSpec> all = blockParameters(config);
  {
    Graph &g = program.addFunction("attend", dtype);
    Tensor x = g.input("x", residual);
    auto p = inputsFor(g, "", std::vector<ParameterSpec>(all.begin(), all.begin() + 6));
    g.output("x", attend(x, p, config));
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
    g.output("logits", project(x, lnWeight, lnBias, wte, config));
  }
}

} // namespace

Program traceGpt2(const Gpt2Config &config, Gpt2Mode mode, int64_t length, DType dtype) {
  config.validate();
  if (length <= 0 || length > config.nCtx)
    fail("--seq {} is outside the model's context of 1 to {}", length, config.nCtx);
  Program program;
  if (mode == Gpt2Mode::Fused)
    buildFused(program.addFunction("gpt2", dtype), config, length, /*probes=*/false);
  else
    buildSublayers(program, config, length, dtype);
  return program;
}

Program traceGpt2Reference(const Gpt2Config &config, int64_t length) {
  Program program;
  buildFused(program.addFunction("gpt2", DType::f64), config, length, /*probes=*/true);
  return program;
}

} // namespace mlpipe
