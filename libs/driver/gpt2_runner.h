// Running GPT-2 forward passes, one strategy per trace mode behind a
// factory (as XLA picks an emitter per fusion):
//
//   SublayerRunner  embed, attend, feedforward and project compiled once per
//                   sequence length; a host loop calls attend/feedforward
//                   per block with that block's weights, the residual
//                   staying in target memory between calls, so every
//                   block's residual can be captured;
//   FusedRunner     the whole forward pass as one compiled function taking
//                   every parameter; only the logits come back.
//
// Both pad the token ids to paddedLength() (the next power of two), compile
// each padded length once (and keep it on disk), and upload the weights to
// the target once. On the GPU a runner puts everything on one stream of its
// own, asynchronously: the ids go up, the forward's calls are queued (the
// whole forward replayed as one CUDA graph, captured once per length, unless
// graphs are off), and the only wait is the copy of the logits back.
//
// With a KV cache (both strategies, both targets, one code path): the runner
// allocates one cache of kvCacheShape() in target memory the first time it
// is needed. prefill() runs the padded prompt through the prefill program,
// which writes every position's keys and values into the cache; each
// decodeStep() runs the decode program on one token at the next position,
// the position being a rank-0 i32 input uploaded on the stream before the
// calls, so one compiled decode program (one CUDA graph) serves every step.
// Positions past the prompt that padding wrote are masked until a decode
// step overwrites them.
//
// Batched decoding (generate --prompts) uses a second cache, of
// batchedKvCacheShape() for the batch (allocated when a batch size is first
// used, replacing one of another size): prefillSlot() prefills one prompt
// alone, as prefill() does, and copies its keys and values into its
// sequence's slot; each decodeBatch() then runs the batched decode program
// once for every slot, each token at its own position (a [batch] i32
// input), so the weights are read once per step for the whole batch. A
// batch of one's cache is the single sequence's (the same layout).
// decodeGreedy() chains batched steps on the target, each step's greedy
// tokens the next one's ids, without the host between them.
#pragma once

#include "driver/compile.h"
#include "models/gpt2.h"
#include "models/gpt2_weights.h"
#include "support/host_tensor.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mlpipe {

// Greedy decoding chained on the target (Gpt2Runner::decodeGreedy): the
// steps one graph holds. The host waits, and a graph launch with its copies
// goes, once per this many steps; a decode step of GPT-2 124M is about a
// hundred kernels, so 16 steps are a graph of 1600 to instantiate once.
constexpr int64_t kChainedDecodeSteps = 16;

struct Gpt2RunOptions {
  Gpt2Mode mode = Gpt2Mode::Sublayer;
  CompileOptions compile;
  ExecutionOptions execution; // managed memory instead of device memory, for the tutorial's path
  bool graphs = true;         // replay each forward as a CUDA graph
  // Storage of the weights, activations, KV cache and logits; bf16 and f16
  // compute in f32 (results rounded once to the storage type).
  DType dtype = DType::f32;
  int64_t chainedSteps = kChainedDecodeSteps; // decodeGreedy's steps per graph
};

// Results come back as f32 whatever the storage type (a 16-bit value is
// exactly an f32).
struct ForwardResult {
  HostTensor logits;                // [rows, vocab]: every real position, or the last one
  std::vector<HostTensor> captured; // with capture, sublayer mode: embedding, then each block's residual [T, C]
  std::vector<int32_t> nextTokens;  // a batched decode step: each sequence's greedy token, chosen on the target
};

struct Gpt2Timing {
  double compileMs = 0; // tracing, compiling and loading modules
  double runMs = 0;     // forward passes, host wall clock
  double uploadMs = 0;  // copying the weights to the target (converting them included)
  double convertMs = 0; // of uploadMs, converting them to the storage type
  std::vector<int64_t> compiledLengths;
  std::vector<std::string> compiledPrograms; // per program compiled: "16", "prefill 16", "decode"
  int forwards = 0;
  double prefillMs = 0; // prefill() calls, host wall clock
  int prefills = 0;
  int64_t prefillTokens = 0; // prompt tokens prefilled (without padding)
  double decodeMs = 0;       // decodeStep() calls, host wall clock
  int decodeSteps = 0;
  double batchDecodeMs = 0; // decodeBatch() calls, host wall clock
  int batchDecodeSteps = 0;
  CompileTimings stages; // compileMs by stage, summed over the lengths compiled
  int graphCaptures = 0; // CUDA graphs captured (one per length, unless buffers changed)
};

// What one compiled length holds, for bench.
struct Gpt2ModuleInfo {
  int64_t arenaBytes = 0;     // the module's arena
  int64_t unplannedBytes = 0; // the largest entry's temporaries allocated one by one
  int64_t activationBytes = 0;
  std::map<std::string, KernelCost> kernelCosts;
};

// The weights, copied once into memory the target's code can read (device
// memory, managed memory if asked, or host memory), shared by every runner
// of the process, converted on the way to the storage type `dtype`
// (rounded to nearest even; a bf16 or f16 file's values come back exactly).
class TargetWeights {
public:
  static std::shared_ptr<const TargetWeights>
  upload(const Gpt2Weights &weights, Target target, gpu::Memory memory = gpu::Memory::Device, DType dtype = DType::f32);
  void *operator[](const std::string &name) const;
  Target target() const { return target_; }
  DType dtype() const { return dtype_; }
  double uploadMs() const { return uploadMs_; }
  double convertMs() const { return convertMs_; } // of uploadMs, converting to the storage type

private:
  TargetWeights() = default;
  Target target_ = Target::Cpu;
  DType dtype_ = DType::f32;
  double uploadMs_ = 0;
  double convertMs_ = 0;
  std::map<std::string, TargetBuffer> buffers_;
};

class Gpt2Runner {
public:
  virtual ~Gpt2Runner() = default;
  // The logits of the last token, or with `everyRow` of every token; with
  // `capture` (sublayer mode) also the embedding and the block residuals.
  virtual ForwardResult forward(const std::vector<int32_t> &tokens, bool everyRow, bool capture) = 0;
  // Runs the prompt (padded) and fills the KV cache with its keys and
  // values, forgetting what it held; returns the logits of the last prompt
  // token (of every one with `everyRow`) and with `capture` (sublayer mode)
  // the embedding and block residuals of every prompt token.
  virtual ForwardResult prefill(const std::vector<int32_t> &prompt, bool everyRow, bool capture) = 0;
  // Runs one token at position cachedTokens() against the cache, writing
  // its key and value there: the logits [1, vocab] (and with `capture` its
  // embedding and residuals, [1, C] each). Fails once the cache is full.
  virtual ForwardResult decodeStep(int32_t token, bool capture) = 0;
  // The positions the cache holds: the prompt and every decoded token.
  virtual int64_t cachedTokens() const = 0;
  // Batched decoding, `batch` sequences each in a slot of its own: runs
  // `prompt` alone as prefill() does (its logits returned as prefill's),
  // then copies its keys and values into slot `slot` of the batched cache
  // (a batch of one's cache is the single sequence's: nothing to copy);
  // the slot's next token goes at position prompt.size().
  virtual ForwardResult prefillSlot(int64_t batch, int64_t slot, const std::vector<int32_t> &prompt) = 0;
  // One decode step of a batch of tokens.size() sequences: token b at
  // positions[b] in slot b (its key and value written there, attending over
  // its slot up to it): each sequence's greedy token (the first maximum of
  // its logits, chosen where they were computed) and, `withLogits`, the
  // logits [batch, vocab] (else left on the target: 6.4 MB at 32 sequences
  // of GPT-2 in f32). Refuses a position outside the context.
  virtual ForwardResult decodeBatch(const std::vector<int32_t> &tokens, const std::vector<int32_t> &positions,
                                    bool withLogits) = 0;
  // Greedy decoding of a batch, `steps` steps chained on the target: step 0
  // is decodeBatch(tokens, positions); every later step decodes the greedy
  // tokens the step before chose, each sequence one position on, without
  // the host between the steps (on the GPU a graph of up to chainedSteps
  // steps, each step's greedy tokens the next one's ids). The tokens are
  // those of `steps` calls of decodeBatch, each fed the last one's
  // nextTokens: [steps][batch]. `onTokens`, if given, is called with each
  // step's tokens in order as they reach the host, a graph's steps at a
  // time, while the next graph runs. Refuses a sequence whose last step
  // would be outside the context.
  using TokensSeen = std::function<void(int64_t step, const std::vector<int32_t> &tokens)>;
  virtual std::vector<std::vector<int32_t>> decodeGreedy(const std::vector<int32_t> &tokens,
                                                         const std::vector<int32_t> &positions, int64_t steps,
                                                         const TokensSeen &onTokens = {}) = 0;
  // Compiles the batched decode program for `batch` sequences now.
  virtual void prepareBatch(int64_t batch) = 0;
  // Compiles the module for this many tokens now (benchmarks keep compile
  // time out of their numbers this way).
  virtual void prepare(int64_t tokens) = 0;
  // The compiled module for this many tokens (compiling it if needed).
  virtual Gpt2ModuleInfo moduleInfo(int64_t tokens) = 0;
  // Replay forwards as CUDA graphs (the default), or launch every kernel.
  virtual void useGraphs(bool graphs) = 0;
  const Gpt2Timing &timing() const { return timing_; }

protected:
  Gpt2Timing timing_;
};

std::unique_ptr<Gpt2Runner> makeGpt2Runner(const Gpt2Config &config, std::shared_ptr<const TargetWeights> weights,
                                           const Gpt2RunOptions &options);
// Uploads the weights for this runner alone.
std::unique_ptr<Gpt2Runner> makeGpt2Runner(const Gpt2Weights &weights, const Gpt2RunOptions &options);

} // namespace mlpipe
