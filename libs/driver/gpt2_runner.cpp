#include "driver/gpt2_runner.h"

#include "runtime/mgpu_runtime.h"
#include "support/error.h"
#include "support/float16.h"
#include "support/statistics.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

namespace mlpipe {

namespace {

// Threads that convert the weights to the storage type at upload: enough
// for the 2-16 cores of the machines mlpipe runs on; the conversion is
// memory-bound past that.
constexpr unsigned kWeightConversionThreads = 8;

// The largest read from the GPU that comes down through page-locked memory
// kept by the runner: a forward's last row of logits (100-200 KB), a short
// prompt's every row. Larger reads (every row of a long forward, up to
// 206 MB) are bandwidth-bound, and would pin that much host memory for the
// runner's life.
constexpr size_t kPinnedReadbackMaxBytes = size_t{16} << 20;

// One step of a forward: a call of an entry, or a copy on the target (a
// block's residual kept for the caller).
struct Step {
  const EntrySignature *entry = nullptr;
  std::vector<void *> buffers;
  void *copyTo = nullptr;
  const void *copyFrom = nullptr;
  size_t copyBytes = 0;
};

// Page-locked host memory, freed on destruction.
class PinnedHost {
public:
  explicit PinnedHost(size_t bytes) : data_(gpu::allocatePinned(bytes)) {}
  PinnedHost(const PinnedHost &) = delete;
  PinnedHost &operator=(const PinnedHost &) = delete;
  ~PinnedHost() {
    try {
      gpu::releasePinned(data_);
    } catch (const Error &error) { // a destructor must not throw; say it
      std::fprintf(stderr, "mlpipe: %s\n", error.what());
    }
  }
  void *data() const { return data_; }

private:
  void *data_;
};

// A decode step's host side on the GPU: its token and position, and the
// logits it returns, in page-locked memory. Copied by the GPU as steps of
// the pass (in its graph with the kernels), the host neither stages them
// nor waits between them; it waits once, for the logits.
// The logits follow the header, 16-byte aligned, in the storage type.
struct DecodeStaging {
  int32_t position = 0;
  int32_t id = 0;
  static constexpr size_t kLogitsOffset = 16;
  void *logits() { return reinterpret_cast<char *>(this) + kLogitsOffset; }
  static size_t bytes(int64_t vocabSize, DType dtype) {
    return kLogitsOffset + static_cast<size_t>(vocabSize) * dtypeSize(dtype);
  }
};
static_assert(sizeof(DecodeStaging) <= DecodeStaging::kLogitsOffset);

// Host memory for i32 values the target's copies read and write: page-locked
// on the GPU (a copy from it is queued, not staged by the driver), plain on
// the CPU. Kept, and grown when a call needs more.
class HostInts {
public:
  int32_t *reserve(Target target, size_t count) {
    if (count > capacity_) {
      pinned_.reset();
      if (target == Target::Gpu)
        pinned_.emplace(count * sizeof(int32_t));
      else
        plain_.assign(count, 0);
      capacity_ = count;
    }
    return pinned_ ? static_cast<int32_t *>(pinned_->data()) : plain_.data();
  }

private:
  std::optional<PinnedHost> pinned_;
  std::vector<int32_t> plain_;
  size_t capacity_ = 0;
};

// What both strategies share: weights on the target, one compiled module,
// one set of activation buffers and one captured graph per padded length,
// and one stream.
class RunnerBase : public Gpt2Runner {
public:
  RunnerBase(const Gpt2Config &config, std::shared_ptr<const TargetWeights> weights, const Gpt2RunOptions &options)
      : config_(config), options_(options), weights_(std::move(weights)), stream_(options.compile.target) {
    if (weights_->target() != options.compile.target)
      fail("the weights were uploaded for the {}, not the {}", targetName(weights_->target()),
           targetName(options.compile.target));
    if (weights_->dtype() != options.dtype)
      fail("the weights were uploaded in {}, not {}", dtypeName(weights_->dtype()), dtypeName(options.dtype));
    timing_.uploadMs = weights_->uploadMs();
    timing_.convertMs = weights_->convertMs();
  }

  void prepare(int64_t tokens) override { compiled(Gpt2Phase::Forward, paddedLength(tokens, config_)); }

  void useGraphs(bool graphs) override { options_.graphs = graphs; }

  Gpt2ModuleInfo moduleInfo(int64_t tokens) override {
    Compiled &module = compiled(Gpt2Phase::Forward, paddedLength(tokens, config_));
    Gpt2ModuleInfo info;
    info.arenaBytes = module.executable.arenaBytes();
    for (const EntrySignature &entry : module.executable.entries())
      info.unplannedBytes = std::max(info.unplannedBytes, entry.arena.unplannedBytes);
    for (auto &[name, buffer] : module.activations)
      info.activationBytes += static_cast<int64_t>(buffer.size());
    info.kernelCosts = module.executable.kernelCosts();
    return info;
  }

  // Compiles on first use of a length (timed as compile), then runs the
  // strategy's pass (timed as run).
  ForwardResult forward(const std::vector<int32_t> &tokens, bool everyRow, bool capture) final {
    int64_t count = static_cast<int64_t>(tokens.size());
    Compiled &module = compiled(Gpt2Phase::Forward, paddedLength(count, config_));
    auto start = std::chrono::steady_clock::now();
    ForwardResult result = execute(module, tokens, everyRow, capture);
    timing_.runMs += millisecondsSince(start);
    ++timing_.forwards;
    return result;
  }

  ForwardResult prefill(const std::vector<int32_t> &prompt, bool everyRow, bool capture) final {
    int64_t count = static_cast<int64_t>(prompt.size());
    Compiled &module = compiled(Gpt2Phase::Prefill, paddedLength(count, config_));
    auto start = std::chrono::steady_clock::now();
    cachedTokens_ = 0;
    ForwardResult result = execute(module, prompt, everyRow, capture);
    cachedTokens_ = count;
    timing_.prefillMs += millisecondsSince(start);
    ++timing_.prefills;
    timing_.prefillTokens += count;
    return result;
  }

  ForwardResult decodeStep(int32_t token, bool capture) final {
    if (cachedTokens_ == 0)
      fail("a decode step needs a prefilled KV cache: run the prompt first");
    if (cachedTokens_ >= config_.nCtx)
      fail("the KV cache is full: {} tokens fill the model's context of {}", cachedTokens_, config_.nCtx);
    Compiled &module = compiled(Gpt2Phase::Decode, 1);
    auto start = std::chrono::steady_clock::now();
    int32_t position = static_cast<int32_t>(cachedTokens_);
    if (staged(module, capture, false)) {
      decodeStaging()->position = position; // copied up as the pass's first steps
    } else {
      // The position goes up on the stream, ahead of the calls (or the
      // graph) that read it.
      TargetStream::Scope current(stream_);
      positionBuffer().upload(&position, sizeof(position));
    }
    ForwardResult result = execute(module, {token}, /*everyRow=*/false, capture);
    ++cachedTokens_;
    timing_.decodeMs += millisecondsSince(start);
    ++timing_.decodeSteps;
    return result;
  }

  int64_t cachedTokens() const final { return cachedTokens_; }

  ForwardResult prefillSlot(int64_t batch, int64_t slot, const std::vector<int32_t> &prompt) final {
    if (slot < 0 || slot >= batch)
      fail("slot {} is outside a batch of {} sequences", slot, batch);
    ForwardResult result = prefill(prompt, /*everyRow=*/false, /*capture=*/false);
    // Each (layer, keys or values) part of the cache, [H, n_ctx, D], goes
    // to the slot's H rows of the same part of the batched cache.
    auto start = std::chrono::steady_clock::now();
    const char *from = static_cast<const char *>(kvCache().data());
    char *to = static_cast<char *>(batchedCache(batch).data());
    size_t partBytes =
        static_cast<size_t>(byteSize({config_.nHead, config_.nCtx, config_.nEmbd / config_.nHead}, options_.dtype));
    TargetStream::Scope current(stream_);
    for (int64_t part = 0; part < 2 * config_.nLayer && to != from; ++part) {
      char *slotPart = to + (part * batch + slot) * partBytes;
      if (options_.compile.target == Target::Gpu)
        gpu::copyOnDevice(slotPart, from + part * partBytes, partBytes);
      else
        std::memcpy(slotPart, from + part * partBytes, partBytes);
    }
    timing_.prefillMs += millisecondsSince(start);
    return result;
  }

  ForwardResult decodeBatch(const std::vector<int32_t> &tokens, const std::vector<int32_t> &positions,
                            bool withLogits) final {
    int64_t batch = static_cast<int64_t>(tokens.size());
    if (batch == 0 || positions.size() != tokens.size())
      fail("a batched decode step needs one position per token, and at least one token");
    for (size_t sequence = 0; sequence < positions.size(); ++sequence)
      if (positions[sequence] < 0 || positions[sequence] >= config_.nCtx)
        fail("sequence {} of the batch is at position {}, outside the model's context of {}", sequence,
             positions[sequence], config_.nCtx);
    Compiled &module = compiled(Gpt2Phase::Decode, batch, batch);
    auto start = std::chrono::steady_clock::now();
    batchedCache(batch); // allocated (zeroed) if no slot was prefilled
    {
      // The positions go up on the stream, ahead of the calls that read them.
      TargetStream::Scope current(stream_);
      batchedPositions_->upload(positions.data(), positions.size() * sizeof(int32_t));
    }
    ForwardResult result = execute(module, tokens, /*everyRow=*/true, /*capture=*/false, withLogits);
    timing_.batchDecodeMs += millisecondsSince(start);
    ++timing_.batchDecodeSteps;
    return result;
  }

  std::vector<std::vector<int32_t>> decodeGreedy(const std::vector<int32_t> &tokens,
                                                 const std::vector<int32_t> &positions, int64_t steps,
                                                 const TokensSeen &onTokens) final {
    const int64_t batch = static_cast<int64_t>(tokens.size());
    if (batch == 0 || positions.size() != tokens.size())
      fail("a batched decode step needs one position per token, and at least one token");
    if (steps < 1)
      fail("greedy decoding needs at least one step, not {}", steps);
    for (size_t sequence = 0; sequence < positions.size(); ++sequence) {
      if (positions[sequence] < 0 || positions[sequence] >= config_.nCtx)
        fail("sequence {} of the batch is at position {}, outside the model's context of {}", sequence,
             positions[sequence], config_.nCtx);
      if (positions[sequence] + steps > config_.nCtx)
        fail("sequence {} of the batch is at position {}: {} steps would go past the model's context of {}", sequence,
             positions[sequence], steps, config_.nCtx);
    }
    Compiled &module = compiled(Gpt2Phase::Decode, batch, batch);
    auto start = std::chrono::steady_clock::now();
    batchedCache(batch); // allocated (zeroed) if no slot was prefilled
    const int64_t perGraph = std::max<int64_t>(1, options_.chainedSteps);
    const size_t rowBytes = static_cast<size_t>(batch) * sizeof(int32_t);
    const Target target = options_.compile.target;
    // On the host: every step's positions, [steps, batch], then the tokens,
    // [steps + 1, batch] (row 0 the tokens given, row k + 1 step k's
    // choice). On the target: a graph's positions and its tokens, the same
    // way, row 0 the ids of its first step.
    int32_t *hostPositions = chainStaging_.reserve(target, static_cast<size_t>((2 * steps + 1) * batch));
    int32_t *hostTokens = hostPositions + steps * batch;
    for (int64_t step = 0; step < steps; ++step)
      for (int64_t sequence = 0; sequence < batch; ++sequence)
        hostPositions[step * batch + sequence] = positions[static_cast<size_t>(sequence)] + static_cast<int32_t>(step);
    std::copy(tokens.begin(), tokens.end(), hostTokens);
    char *chainIds = static_cast<char *>(activation(module, "chain_ids", {perGraph + 1, batch}, DType::i32).data());
    char *chainPositions =
        static_cast<char *>(activation(module, "chain_positions", {perGraph, batch}, DType::i32).data());

    std::vector<std::vector<int32_t>> chosen;
    auto handOver = [&](int64_t first, int64_t count) {
      for (int64_t step = first; step < first + count; ++step) {
        const int32_t *row = hostTokens + (step + 1) * batch;
        chosen.emplace_back(row, row + batch);
        if (onTokens)
          onTokens(step, chosen.back());
      }
    };
    TargetStream::Scope current(stream_);
    // Two marks: the host takes a graph's tokens while the next one runs.
    std::optional<gpu::StreamMark> marks[2];
    if (target == Target::Gpu)
      for (auto &mark : marks)
        mark.emplace();
    // If a hand-over throws (the output closed, say), copies into the host
    // staging may still be queued: they finish before it is reused.
    try {
      int64_t lastFirst = 0, lastCount = 0;
      for (int64_t first = 0, graph = 0; first < steps; first += perGraph, ++graph) {
        const int64_t count = std::min(perGraph, steps - first);
        copyOnTarget(chainPositions, hostPositions + first * batch, static_cast<size_t>(count) * rowBytes);
        // The first step's ids: the tokens given, or the last graph's last choice.
        copyOnTarget(chainIds, first == 0 ? static_cast<const void *>(hostTokens) : chainIds + lastCount * rowBytes,
                     rowBytes);
        ChainedSteps &chain = chainedSteps(module, count, chainIds, chainPositions);
        chain.replay.run(
            stream_, module.executable, chain.plannedBuffers, [&] { enqueue(module, chain.planned); }, options_.graphs);
        timing_.graphCaptures += chain.replay.captures() - chain.capturesSeen;
        chain.capturesSeen = chain.replay.captures();
        copyOnTarget(hostTokens + (first + 1) * batch, chainIds + rowBytes, static_cast<size_t>(count) * rowBytes);
        if (target == Target::Gpu)
          marks[graph % 2]->record();
        if (graph > 0) {
          if (target == Target::Gpu)
            marks[(graph - 1) % 2]->wait();
          handOver(lastFirst, lastCount);
        }
        lastFirst = first;
        lastCount = count;
      }
      if (target == Target::Gpu)
        gpu::waitForCurrentStream();
      handOver(lastFirst, lastCount);
    } catch (...) {
      if (target == Target::Gpu)
        waitQuietly();
      throw;
    }
    timing_.batchDecodeMs += millisecondsSince(start);
    timing_.batchDecodeSteps += static_cast<int>(steps);
    return chosen;
  }

  void prepareBatch(int64_t batch) final { compiled(Gpt2Phase::Decode, batch, batch); }

protected:
  // Waits for the runner's stream while an error is on its way out: a
  // second error is said, not thrown over the first.
  void waitQuietly() {
    try {
      TargetStream::Scope current(stream_);
      gpu::waitForCurrentStream();
    } catch (const Error &error) {
      std::fprintf(stderr, "mlpipe: %s\n", error.what());
    }
  }

  // What a pass binds besides the weights and its activations (null where
  // the program has none).
  struct PassBinding {
    char *cache = nullptr;    // the whole [L, 2, H, n_ctx, D] cache
    size_t layerBytes = 0;    // one layer's [2, H, n_ctx, D]
    void *position = nullptr; // decode: the rank-0 i32 position; batched: [batch] i32
    void *ids = nullptr;      // the token ids it reads
    void *nextIds = nullptr;  // a batched step: where its greedy tokens go
    bool operator==(const PassBinding &) const = default;
  };

  // Steps of a batched decode program chained by decodeGreedy: step k
  // reads its ids from row k of the chain's ids and writes its greedy
  // tokens to row k + 1, at row k of the chain's positions. Replayed as one
  // graph; planned again, and captured again, if the cache moved.
  struct ChainedSteps {
    PassBinding plannedFor;
    std::vector<Step> planned;
    std::vector<void *> plannedBuffers;
    CallReplay replay;
    int capturesSeen = 0;
  };

  struct Compiled {
    Gpt2Phase phase = Gpt2Phase::Forward;
    int64_t length = 0; // token positions the program runs (1 for a decode step, the batch for a batched one)
    int64_t batch = 0;  // a batched decode step's sequences; 0 for every other program
    Executable executable;
    std::map<std::string, TargetBuffer> activations; // by name, per program
    CallReplay replay;
    int capturesSeen = 0;
    // The last plan, and the capture flag and cache binding it was made
    // for: every buffer it binds is the module's, the weights' or the
    // cache's and never moves, so a pass like the last queues the same
    // steps. Planning looks each of ~150 weights up by name; a decode step
    // that planned again took 20-40 us longer on the H200, the GPU idle
    // until its launches (docs/benchmark-history.md).
    struct PlanKey {
      bool capture = false, staged = false;
      PassBinding binding;
      bool operator==(const PlanKey &) const = default;
    };
    std::optional<PlanKey> plannedFor;
    std::vector<Step> planned;
    std::vector<void *> plannedBuffers;     // every buffer the steps use, for the graph's check
    std::map<int64_t, ChainedSteps> chains; // decodeGreedy's graphs, by steps
  };

  // The steps of one pass, with every buffer bound.
  virtual std::vector<Step> plan(Compiled &module, bool capture, const PassBinding &bound) = 0;
  // The logits (and with `capture` the kept residuals) of the first
  // `tokens` positions back to the host.
  virtual ForwardResult read(Compiled &module, int64_t tokens, bool everyRow, bool capture) = 0;

  // One pass of a compiled program over `tokens` (padded to its length):
  // the ids go up, the steps are queued on the runner's stream (or replayed
  // as one graph: the cache and position buffers never move, so a program
  // is captured once), and the results come down.
  // A batched decode step also brings back each sequence's next token, and
  // the logits only `withLogits`.
  ForwardResult execute(Compiled &module, const std::vector<int32_t> &tokens, bool everyRow, bool capture,
                        bool withLogits = true) {
    TargetStream::Scope current(stream_);
    const bool isStaged = staged(module, capture, everyRow);
    if (isStaged)
      decodeStaging()->id = tokens.front(); // copied up as the pass's first step
    else
      uploadIds(module, tokens, module.length);
    PassBinding bound = bindingOf(module);
    typename Compiled::PlanKey planFor{capture, isStaged, bound};
    if (module.plannedFor != planFor) {
      module.planned = plan(module, capture, bound);
      if (isStaged) {
        // The token and position up first, the logits down last.
        DecodeStaging *staging = decodeStaging();
        module.planned.insert(module.planned.begin(),
                              {Step{nullptr, {}, bound.ids, &staging->id, sizeof(int32_t)},
                               Step{nullptr, {}, bound.position, &staging->position, sizeof(int32_t)}});
        module.planned.push_back(Step{nullptr,
                                      {},
                                      staging->logits(),
                                      module.activations.at("logits").data(),
                                      static_cast<size_t>(config_.vocabSize) * dtypeSize(options_.dtype)});
      }
      module.plannedBuffers = buffersOf(module.planned);
      module.plannedFor = planFor;
    }
    module.replay.run(
        stream_, module.executable, module.plannedBuffers, [&] { enqueue(module, module.planned); }, options_.graphs);
    timing_.graphCaptures += module.replay.captures() - module.capturesSeen;
    module.capturesSeen = module.replay.captures();
    if (isStaged) {
      gpu::waitForCurrentStream();
      HostTensor logits(DType::f32, {1, config_.vocabSize});
      widenToF32(decodeStaging()->logits(), logits);
      return {std::move(logits), {}, {}};
    }
    ForwardResult result;
    if (withLogits)
      result = read(module, static_cast<int64_t>(tokens.size()), everyRow, capture);
    if (module.batch > 0) {
      result.nextTokens.resize(static_cast<size_t>(module.batch));
      nextIds(module).download(result.nextTokens.data(), result.nextTokens.size() * sizeof(int32_t));
    }
    return result;
  }

  // What a pass of `module` binds: its cache (the batched one for a batched
  // step), its position(s), its ids and a batched step's greedy tokens.
  PassBinding bindingOf(Compiled &module) {
    PassBinding bound;
    if (module.batch > 0) {
      bound.cache = static_cast<char *>(batchedCache(module.batch).data());
      bound.layerBytes =
          static_cast<size_t>(byteSize(batchedKvCacheShape(config_, module.batch), options_.dtype) / config_.nLayer);
      bound.position = batchedPositions_->data();
      bound.nextIds = nextIds(module).data();
    } else if (module.phase != Gpt2Phase::Forward) {
      bound.cache = static_cast<char *>(kvCache().data());
      bound.layerBytes = static_cast<size_t>(byteSize(kvCacheShape(config_), options_.dtype) / config_.nLayer);
    }
    if (module.phase == Gpt2Phase::Decode && module.batch == 0)
      bound.position = positionBuffer().data();
    bound.ids = ids(module, module.length);
    return bound;
  }

  // decodeGreedy's graph of `count` steps of a batched program, planned
  // over the chain's buffers (planned again if the batched cache moved).
  ChainedSteps &chainedSteps(Compiled &module, int64_t count, char *chainIds, char *chainPositions) {
    ChainedSteps &chain = module.chains[count];
    PassBinding base = bindingOf(module);
    base.ids = chainIds;
    base.position = chainPositions;
    base.nextIds = nullptr;
    if (chain.planned.empty() || chain.plannedFor != base) {
      const size_t rowBytes = static_cast<size_t>(module.batch) * sizeof(int32_t);
      chain.planned.clear();
      for (int64_t step = 0; step < count; ++step) {
        PassBinding bound = base;
        bound.position = chainPositions + step * rowBytes;
        bound.ids = chainIds + step * rowBytes;
        bound.nextIds = chainIds + (step + 1) * rowBytes;
        std::vector<Step> steps = plan(module, /*capture=*/false, bound);
        chain.planned.insert(chain.planned.end(), steps.begin(), steps.end());
      }
      chain.plannedBuffers = buffersOf(chain.planned);
      chain.plannedFor = base;
    }
    return chain;
  }

  // Every buffer the steps use, for the graph's check that none moved.
  static std::vector<void *> buffersOf(const std::vector<Step> &steps) {
    std::vector<void *> buffers;
    for (const Step &step : steps) {
      buffers.insert(buffers.end(), step.buffers.begin(), step.buffers.end());
      buffers.push_back(step.copyTo);
    }
    return buffers;
  }

  // A copy in the stream's order on the GPU (either side may be page-locked
  // host memory), at once on the CPU.
  void copyOnTarget(void *to, const void *from, size_t bytes) const {
    if (options_.compile.target == Target::Gpu)
      gpu::copyOnDevice(to, from, bytes);
    else
      std::memcpy(to, from, bytes);
  }

  // A batched decode step's greedy tokens, [batch] i32 ("next_ids").
  TargetBuffer &nextIds(Compiled &module) { return activation(module, "next_ids", {module.batch}, DType::i32); }

  // Whether a pass of `module` moves its token, position and logits
  // through page-locked memory (DecodeStaging): a decode step on the GPU
  // that returns only the logits.
  bool staged(const Compiled &module, bool capture, bool everyRow) const {
    return module.phase == Gpt2Phase::Decode && module.batch == 0 && options_.compile.target == Target::Gpu &&
           !capture && !everyRow;
  }

  DecodeStaging *decodeStaging() {
    if (!decodeStaging_)
      decodeStaging_.emplace(DecodeStaging::bytes(config_.vocabSize, options_.dtype));
    return static_cast<DecodeStaging *>(decodeStaging_->data());
  }

  // The KV cache, allocated once, the first time a program needs it, and
  // zeroed: a decode step multiplies the masked positions' values by zero
  // weights, which must not meet a NaN or an infinity left in fresh memory.
  TargetBuffer &kvCache() {
    if (!kvCache_) {
      size_t bytes = static_cast<size_t>(byteSize(kvCacheShape(config_), options_.dtype));
      kvCache_.emplace(options_.compile.target, bytes, options_.execution.memory);
      std::vector<char> zeros(bytes, 0);
      kvCache_->upload(zeros.data(), bytes);
    }
    return *kvCache_;
  }

  // The batched cache for `batch` sequences (and their positions), zeroed
  // as kvCache() is; one of another batch size is freed first. A batch of
  // one's cache, [L, 2, 1 * H, n_ctx, D], is laid out as the single
  // sequence's: it is that cache, so a prompt prefilled into slot 0 is
  // already where the batched step reads it (generate's one prompt).
  TargetBuffer &batchedCache(int64_t batch) {
    if (!batchedPositions_ || batchedCacheBatch_ != batch) {
      batchedCache_.reset();
      batchedPositions_.reset();
      if (batch > 1) {
        size_t bytes = static_cast<size_t>(byteSize(batchedKvCacheShape(config_, batch), options_.dtype));
        batchedCache_.emplace(options_.compile.target, bytes, options_.execution.memory);
        // Zeroed in place: 64 sequences of 124M in f32 take 4.8 GB, too
        // many to stage zeros for on the host. Every element is 2 or 4 bytes.
        if (options_.compile.target == Target::Gpu) {
          TargetStream::Scope current(stream_);
          mgpuMemset16(batchedCache_->data(), 0, bytes / 2, gpu::currentStream());
        } else {
          std::memset(batchedCache_->data(), 0, bytes);
        }
      }
      batchedPositions_.emplace(options_.compile.target, static_cast<size_t>(batch) * sizeof(int32_t),
                                options_.execution.memory);
      batchedCacheBatch_ = batch;
    }
    return batch == 1 ? kvCache() : *batchedCache_;
  }

  TargetBuffer &positionBuffer() {
    if (!position_)
      position_.emplace(options_.compile.target, sizeof(int32_t), options_.execution.memory);
    return *position_;
  }

  static const char *phaseName(Gpt2Phase phase) {
    return phase == Gpt2Phase::Prefill ? "prefill" : phase == Gpt2Phase::Decode ? "decode" : "forward";
  }

  // The program of `phase` for `length` positions, or with a `batch` the
  // batched decode step of that many sequences (length = batch).
  Compiled &compiled(Gpt2Phase phase, int64_t length, int64_t batch = 0) {
    auto found = modules_.find({phase, length, batch});
    if (found != modules_.end())
      return found->second;
    auto start = std::chrono::steady_clock::now();
    CompileTimings stages;
    fe::Program program = batch > 0 ? traceGpt2BatchedDecode(config_, options_.mode, batch, options_.dtype)
                                    : traceGpt2(config_, options_.mode, length, options_.dtype, phase);
    stages.traceMs += millisecondsSince(start);
    std::string phasePart = batch > 0                     ? fmt::format("decode-batch{}-", batch)
                            : phase == Gpt2Phase::Forward ? ""
                                                          : std::string(phaseName(phase)) + "-";
    std::string dtypePart = options_.dtype == DType::f32 ? "" : std::string("-") + dtypeName(options_.dtype);
    std::string name =
        fmt::format("gpt2-{}-{}{}-L{}C{}H{}V{}{}", options_.mode == Gpt2Mode::Fused ? "fused" : "sublayer", phasePart,
                    length, config_.nLayer, config_.nEmbd, config_.nHead, config_.vocabSize, dtypePart);
    MlirModule lowered = compileProgram(program, name, options_.compile, &stages);
    auto loadStart = std::chrono::steady_clock::now();
    Executable executable = Executable::load(std::move(lowered), options_.execution);
    stages.loadMs += millisecondsSince(loadStart);
    timing_.stages.add(stages);
    timing_.compileMs += millisecondsSince(start);
    timing_.compiledLengths.push_back(length);
    timing_.compiledPrograms.push_back(batch > 0                     ? fmt::format("decode batch {}", batch)
                                       : phase == Gpt2Phase::Forward ? std::to_string(length)
                                       : phase == Gpt2Phase::Prefill ? fmt::format("prefill {}", length)
                                                                     : std::string("decode"));
    return modules_
        .emplace(std::make_tuple(phase, length, batch),
                 Compiled{phase, length, batch, std::move(executable), {}, {}, 0, {}, {}, {}, {}})
        .first->second;
  }

  TargetBuffer &activation(Compiled &module, const std::string &name, const Shape &shape, DType dtype) {
    auto found = module.activations.find(name);
    if (found == module.activations.end())
      found = module.activations
                  .emplace(name, TargetBuffer(options_.compile.target, static_cast<size_t>(byteSize(shape, dtype)),
                                              options_.execution.memory))
                  .first;
    return found->second;
  }

  // The ids, padded with token 0 up to the compiled length (the causal mask
  // keeps the padding from touching the real positions).
  void uploadIds(Compiled &module, const std::vector<int32_t> &tokens, int64_t length) {
    std::vector<int32_t> padded(static_cast<size_t>(length), 0);
    std::copy(tokens.begin(), tokens.end(), padded.begin());
    activation(module, "ids", {length}, DType::i32).upload(padded.data(), padded.size() * sizeof(int32_t));
  }

  void *ids(Compiled &module, int64_t length) { return activation(module, "ids", {length}, DType::i32).data(); }

  // Rows [first, first + rows) of a [length, width] buffer in the storage
  // type, as f32. On the GPU, reads up to kPinnedReadbackMaxBytes come down
  // into page-locked memory kept for the next read, and are widened from
  // there: a pageable copy is staged by the driver, and a tensor in the
  // storage type is one more copy.
  HostTensor rowsOf(const TargetBuffer &buffer, int64_t first, int64_t rows, int64_t width) {
    HostTensor tensor(DType::f32, {rows, width});
    size_t bytes = static_cast<size_t>(rows * width) * dtypeSize(options_.dtype);
    size_t offset = static_cast<size_t>(first * width) * dtypeSize(options_.dtype);
    if (options_.compile.target != Target::Gpu || bytes > kPinnedReadbackMaxBytes) {
      HostTensor stored(options_.dtype, {rows, width});
      buffer.download(stored.data(), bytes, offset);
      return stored.convertedTo(DType::f32);
    }
    if (!readback_ || readbackBytes_ < bytes) {
      readback_.reset();
      readback_.emplace(bytes);
      readbackBytes_ = bytes;
    }
    buffer.download(readback_->data(), bytes, offset);
    widenToF32(readback_->data(), tensor);
    return tensor;
  }

  // `to`'s elements from `from`, in the storage type.
  void widenToF32(const void *from, HostTensor &to) const {
    auto count = static_cast<size_t>(to.numel());
    if (options_.dtype == DType::bf16)
      widenBf16Bits(static_cast<const uint16_t *>(from), to.as<float>(), count);
    else if (options_.dtype == DType::f16)
      widenF16Bits(static_cast<const uint16_t *>(from), to.as<float>(), count);
    else
      std::memcpy(to.data(), from, count * sizeof(float));
  }

  HostTensor logitsOf(const TargetBuffer &buffer, int64_t tokens, bool everyRow) {
    return everyRow ? rowsOf(buffer, 0, tokens, config_.vocabSize) : rowsOf(buffer, tokens - 1, 1, config_.vocabSize);
  }

  // A call of `entryName` with inputs bound by name: activations first,
  // then weights.
  Step call(Compiled &module, const std::string &entryName, const std::map<std::string, void *> &bound,
            const std::string &weightPrefix) {
    Step step;
    step.entry = &module.executable.entry(entryName);
    for (const TensorSpec &spec : step.entry->inputs) {
      auto found = bound.find(spec.name);
      step.buffers.push_back(found != bound.end() ? found->second : (*weights_)[weightPrefix + spec.name]);
    }
    for (const TensorSpec &spec : step.entry->outputs)
      step.buffers.push_back(bound.at(spec.name + ":out"));
    return step;
  }

  void enqueue(Compiled &module, const std::vector<Step> &steps) {
    for (const Step &step : steps) {
      if (step.entry)
        module.executable.enqueue(*step.entry, step.buffers);
      else
        copyOnTarget(step.copyTo, step.copyFrom, step.copyBytes);
    }
  }

  Gpt2Config config_;
  Gpt2RunOptions options_;
  std::shared_ptr<const TargetWeights> weights_;
  TargetStream stream_;
  std::map<std::tuple<Gpt2Phase, int64_t, int64_t>, Compiled> modules_; // by phase, length and batch
  std::optional<TargetBuffer> kvCache_;                                 // [L, 2, H, n_ctx, D] in the storage type
  std::optional<TargetBuffer> position_;                                // decode's position, rank-0 i32
  // Batched decoding: the cache of batchedKvCacheShape() for
  // batchedCacheBatch_ sequences, and their positions ([batch] i32).
  std::optional<TargetBuffer> batchedCache_;
  std::optional<TargetBuffer> batchedPositions_;
  int64_t batchedCacheBatch_ = 0;
  // Destroyed before the modules whose graphs copy with it: they are never
  // launched after.
  std::optional<PinnedHost> decodeStaging_;
  // Page-locked memory that rows read back from the GPU come down into.
  std::optional<PinnedHost> readback_;
  size_t readbackBytes_ = 0;
  // decodeGreedy's positions and tokens on the host.
  HostInts chainStaging_;
  int64_t cachedTokens_ = 0;
};

class FusedRunner final : public RunnerBase {
public:
  using RunnerBase::RunnerBase;

protected:
  std::vector<Step> plan(Compiled &module, bool /*capture*/, const PassBinding &pass) override {
    int64_t length = module.length;
    void *logits = activation(module, "logits", {length, config_.vocabSize}, options_.dtype).data();
    std::map<std::string, void *> bound = {{"ids", pass.ids}, {"logits:out", logits}};
    if (pass.nextIds)
      bound["next_ids:out"] = pass.nextIds;
    if (pass.cache && module.batch > 0) {
      for (int64_t layer = 0; layer < config_.nLayer; ++layer)
        bound[batchedLayerCacheName(layer)] = pass.cache + layer * pass.layerBytes;
    } else if (pass.cache) {
      bound["kv_cache"] = pass.cache;
    }
    if (pass.position)
      bound[module.batch > 0 ? "positions" : "position"] = pass.position;
    return {call(module, "gpt2", bound, "")};
  }

  ForwardResult read(Compiled &module, int64_t tokens, bool everyRow, bool /*capture*/) override {
    return {logitsOf(module.activations.at("logits"), tokens, everyRow), {}, {}};
  }
};

class SublayerRunner final : public RunnerBase {
public:
  using RunnerBase::RunnerBase;

protected:
  std::vector<Step> plan(Compiled &module, bool capture, const PassBinding &pass) override {
    int64_t length = module.length;
    Shape residual{length, config_.nEmbd};
    // The residual stream alternates between two buffers on the target;
    // with capture, the embedding and each block's residual are copied, on
    // the target, into one buffer read back at the end.
    void *x = activation(module, "x0", residual, options_.dtype).data();
    void *y = activation(module, "x1", residual, options_.dtype).data();
    void *logits = activation(module, "logits", {length, config_.vocabSize}, options_.dtype).data();
    size_t residualBytes = static_cast<size_t>(byteSize(residual, options_.dtype));
    char *kept =
        capture ? static_cast<char *>(
                      activation(module, "kept", {config_.nLayer + 1, length, config_.nEmbd}, options_.dtype).data())
                : nullptr;
    std::vector<Step> steps;
    auto keep = [&](int64_t index) {
      if (capture)
        steps.push_back({nullptr, {}, kept + index * residualBytes, x, residualBytes});
    };
    std::map<std::string, void *> embedBound = {{"ids", pass.ids}, {"x:out", x}};
    const char *positionName = module.batch > 0 ? "positions" : "position";
    if (pass.position)
      embedBound[positionName] = pass.position;
    steps.push_back(call(module, "embed", embedBound, ""));
    keep(0);
    for (int64_t block = 0; block < config_.nLayer; ++block) {
      std::string prefix = "h." + std::to_string(block) + ".";
      std::map<std::string, void *> attendBound = {{"x", x}, {"x:out", y}};
      if (pass.cache)
        attendBound["kv_cache"] = pass.cache + block * pass.layerBytes;
      if (pass.position)
        attendBound[positionName] = pass.position;
      steps.push_back(call(module, "attend", attendBound, prefix));
      steps.push_back(call(module, "feedforward", {{"x", y}, {"x:out", x}}, prefix));
      keep(block + 1);
    }
    std::map<std::string, void *> projectBound = {{"x", x}, {"logits:out", logits}};
    if (pass.nextIds)
      projectBound["next_ids:out"] = pass.nextIds;
    steps.push_back(call(module, "project", projectBound, ""));
    return steps;
  }

  ForwardResult read(Compiled &module, int64_t tokens, bool everyRow, bool capture) override {
    ForwardResult result;
    result.logits = logitsOf(module.activations.at("logits"), tokens, everyRow);
    if (capture) {
      int64_t length = module.length;
      const TargetBuffer &kept = module.activations.at("kept");
      for (int64_t index = 0; index <= config_.nLayer; ++index)
        result.captured.push_back(rowsOf(kept, index * length, tokens, config_.nEmbd));
    }
    return result;
  }
};

} // namespace

std::shared_ptr<const TargetWeights> TargetWeights::upload(const Gpt2Weights &weights, Target target,
                                                           gpu::Memory memory, DType dtype) {
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<TargetWeights> uploaded(new TargetWeights);
  uploaded->target_ = target;
  uploaded->dtype_ = dtype;
  // Converted to the storage type first, the tensors shared out among
  // threads (124M's 500 MB of f32 is 150 tensors, a few of them large).
  std::vector<std::pair<const std::string *, const HostTensor *>> tensors;
  for (auto &[name, stored] : weights.tensors())
    tensors.push_back({&name, &stored});
  std::vector<HostTensor> converted(tensors.size());
  auto convertStart = std::chrono::steady_clock::now();
  {
    std::atomic<size_t> next = 0;
    auto convertSome = [&] {
      for (size_t i = next++; i < tensors.size(); i = next++)
        if (tensors[i].second->dtype() != dtype)
          converted[i] = tensors[i].second->convertedTo(dtype);
    };
    unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, kWeightConversionThreads);
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
      pool.emplace_back(convertSome);
    convertSome();
    for (std::thread &thread : pool)
      thread.join();
  }
  uploaded->convertMs_ = millisecondsSince(convertStart);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string &name = *tensors[i].first;
    const HostTensor &tensor = tensors[i].second->dtype() == dtype ? *tensors[i].second : converted[i];
    TargetBuffer buffer(target, tensor.byteSize(), memory);
    buffer.upload(tensor.data(), tensor.byteSize());
    if (target == Target::Gpu && memory == gpu::Memory::Managed)
      gpu::prefetchToDevice(buffer.data(), tensor.byteSize());
    uploaded->buffers_.emplace(name, std::move(buffer));
  }
  if (target == Target::Gpu)
    gpu::synchronize();
  uploaded->uploadMs_ = millisecondsSince(start);
  return uploaded;
}

void *TargetWeights::operator[](const std::string &name) const {
  auto found = buffers_.find(name);
  if (found == buffers_.end())
    fail("no weight named '{}'", name);
  return found->second.data();
}

std::unique_ptr<Gpt2Runner> makeGpt2Runner(const Gpt2Config &config, std::shared_ptr<const TargetWeights> weights,
                                           const Gpt2RunOptions &options) {
  if (options.mode == Gpt2Mode::Fused)
    return std::make_unique<FusedRunner>(config, std::move(weights), options);
  return std::make_unique<SublayerRunner>(config, std::move(weights), options);
}

std::unique_ptr<Gpt2Runner> makeGpt2Runner(const Gpt2Weights &weights, const Gpt2RunOptions &options) {
  return makeGpt2Runner(weights.config(),
                        TargetWeights::upload(weights, options.compile.target, options.execution.memory, options.dtype),
                        options);
}

} // namespace mlpipe
