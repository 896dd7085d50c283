// bench: GPT-2 forwards and KV-cache decoding timed on the target
// (benchGpt2), and the unit kernels timed beside a copy of their bytes
// (benchKernels).
#include "driver/bench.h"
#include "driver/generate.h"

#include "driver/matmul_choice.h"
#include "driver/verify.h"
#include "runtime/ceilings.h"
#include "runtime/mgpu_runtime.h"
#include "support/error.h"
#include "support/output_file.h"
#include "support/statistics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <random>

namespace mlpipe {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

const char *modeName(Gpt2Mode mode) { return mode == Gpt2Mode::Fused ? "fused" : "sublayer"; }

// One kernel's launches in one forward.
struct KernelRow {
  std::string mode;
  int64_t length = 0;
  std::string kernel;
  int64_t calls = 0;
  double microseconds = 0; // all calls
  int64_t bytes = 0;       // all calls; -1 when not known
  int64_t flops = 0;       // all calls
};

std::vector<KernelRow> aggregate(const std::vector<gpu::KernelTime> &launches, const std::string &mode,
                                 int64_t length) {
  std::map<std::string, KernelRow> byName;
  std::vector<std::string> order;
  for (const gpu::KernelTime &launch : launches) {
    auto [it, inserted] = byName.try_emplace(launch.kernel, KernelRow{mode, length, launch.kernel});
    if (inserted)
      order.push_back(launch.kernel);
    KernelRow &row = it->second;
    ++row.calls;
    row.microseconds += launch.microseconds;
    row.bytes = row.bytes < 0 || launch.bytes < 0 ? -1 : row.bytes + launch.bytes;
    row.flops += launch.flops;
  }
  std::vector<KernelRow> rows;
  for (const std::string &name : order)
    rows.push_back(byName.at(name));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const KernelRow &a, const KernelRow &b) { return a.microseconds > b.microseconds; });
  return rows;
}

struct ShapeReport {
  std::string mode;
  int64_t length = 0;
  double medianMs = 0, minMs = 0;
  double kernelMs = -1; // the kernels' own time, summed (GPU)
  int64_t launches = -1;
  bool graph = false;
  CompileTimings compile;
  Gpt2ModuleInfo module;
  size_t peakBytes = 0;
};

std::string csvField(const std::string &text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

constexpr int64_t kDecodeTokens = 10;

// --profile times each kernel over a graph of this many replays of its
// launch (LaunchProfiler): bracketing one launch with events adds a few
// microseconds, more than a layer norm or a decode step's kernels take.
constexpr int kProfileReplays = 20;

// KV-cache decoding, per mode: a prompt of request.decodePrompt tokens
// prefilled, each decode step after it timed alone, and the whole job of
// kDecodeTokens tokens after the prompt timed end to end two ways: a
// prefill and kDecodeTokens - 1 decode steps, each returning its logits;
// and as generate runs it, the prompt prefilled into a batch of one and the
// kDecodeTokens - 1 greedy steps chained on the target. Medians over
// `repeat`, after the programs are compiled, run directly and captured.
void benchDecoding(const BenchRequest &request, const Gpt2Config &config,
                   const std::shared_ptr<const TargetWeights> &onTarget, std::mt19937 &generator,
                   std::vector<KernelRow> &kernelRows) {
  const int64_t promptTokens = request.decodePrompt;
  if (config.nCtx < promptTokens + kDecodeTokens) {
    std::cout << fmt::format(
        "\nKV-cache decoding: skipped: a prompt of {} tokens and {} more exceed the context of {}\n", promptTokens,
        kDecodeTokens, config.nCtx);
    return;
  }
  Target target = request.model.run.compile.target;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocabSize - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(promptTokens));
  for (int32_t &id : prompt)
    id = token(generator);
  std::cout << fmt::format("\nKV-cache decoding: a prompt of {} tokens, then decode steps (median ms{})\n",
                           promptTokens, target == Target::Gpu ? ", GPU time" : "");
  std::cout << fmt::format("{:<9} {:>10} {:>10} {:>10} {:>16} {:>10} {:>16} {:>10}\n", "mode", "prefill", "step",
                           "step min", fmt::format("{} after {}", kDecodeTokens, promptTokens), "tokens/s", "chained",
                           "tokens/s");
  for (Gpt2Mode mode : request.modes) {
    Gpt2RunOptions options = request.model.run;
    options.mode = mode;
    std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(config, onTarget, options);
    auto job = [&] {
      runner->prefill(prompt, false, false);
      for (int64_t step = 1; step < kDecodeTokens; ++step)
        runner->decodeStep(token(generator), false);
    };
    // Compiles both programs, runs each directly, then captures them.
    for (int i = 0; i < 2 + request.warmup; ++i)
      job();
    std::vector<double> prefills, steps, jobs;
    for (int i = 0; i < request.repeat; ++i) {
      jobs.push_back(timeOnTarget(target, job));
      prefills.push_back(timeOnTarget(target, [&] { runner->prefill(prompt, false, false); }));
      for (int64_t step = 1; step < kDecodeTokens; ++step)
        steps.push_back(timeOnTarget(target, [&] { runner->decodeStep(token(generator), false); }));
    }
    double jobMs = median(jobs);
    // The same job as generate runs it.
    auto chainedJob = [&] {
      int32_t first = greedyToken(runner->prefillSlot(1, 0, prompt).logits, 0);
      runner->decodeGreedy({first}, {static_cast<int32_t>(promptTokens)}, kDecodeTokens - 1);
    };
    for (int i = 0; i < 2 + request.warmup; ++i)
      chainedJob();
    std::vector<double> chainedJobs;
    for (int i = 0; i < request.repeat; ++i)
      chainedJobs.push_back(timeOnTarget(target, chainedJob));
    double chainedMs = median(chainedJobs);
    std::cout << fmt::format("{:<9} {:>10.3f} {:>10.3f} {:>10.3f} {:>16.3f} {:>10.0f} {:>16.3f} {:>10.0f}\n",
                             modeName(mode), median(prefills), median(steps),
                             *std::min_element(steps.begin(), steps.end()), jobMs,
                             jobMs > 0 ? kDecodeTokens * 1000.0 / jobMs : 0.0, chainedMs,
                             chainedMs > 0 ? kDecodeTokens * 1000.0 / chainedMs : 0.0)
              << std::flush;
    if (request.profile && target == Target::Gpu) {
      // One decode step after the prompt, launched directly, every kernel
      // timed; its rows carry the step's position as T.
      runner->prefill(prompt, false, false);
      runner->useGraphs(false);
      std::vector<gpu::KernelTime> launches;
      {
        gpu::LaunchProfiler profiler(kProfileReplays);
        runner->decodeStep(token(generator), false);
        launches = profiler.take();
      }
      runner->useGraphs(request.model.run.graphs);
      for (KernelRow &row : aggregate(launches, std::string(modeName(mode)) + "-step", promptTokens))
        kernelRows.push_back(std::move(row));
    }
  }
}

// Batched decoding, per mode and batch size: every sequence's prompt of
// request.decodePrompt tokens (random, one per sequence) prefilled into its
// slot, then batched decode steps timed alone, each sequence at its own
// position (they start kDecodeTokens apart, as prompts of different
// lengths would be): the median step and the tokens per second it gives
// (batch * 1000 / step ms), and that rate against the first batch size's.
// A step brings back each sequence's greedy token, chosen on the target, and
// leaves the logits there. Then the same slots decode greedily with the
// steps chained on the target, as generate decodes (two graphs of steps, or
// as many steps as the context leaves): the time per step, and its rate
// against the first batch size's chained rate.
void benchBatchedDecoding(const BenchRequest &request, const Gpt2Config &config,
                          const std::shared_ptr<const TargetWeights> &onTarget, std::mt19937 &generator) {
  if (request.batches.empty())
    return;
  const int64_t promptTokens = request.decodePrompt;
  // Each step moves every sequence one position on; the positions cycle
  // through kDecodeTokens of them, the first at the prompt's end.
  if (config.nCtx < promptTokens + 2 * kDecodeTokens) {
    std::cout << fmt::format(
        "\nBatched decoding: skipped: a prompt of {} tokens and {} more exceed the context of {}\n", promptTokens,
        2 * kDecodeTokens, config.nCtx);
    return;
  }
  Target target = request.model.run.compile.target;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocabSize - 1));
  std::cout << fmt::format("\nBatched decoding: each sequence after a prompt of {} tokens, one step for all of them, "
                           "greedy tokens chosen on the {}; chained: up to {} greedy steps chained there, {} a graph, "
                           "per step (median ms{})\n",
                           promptTokens, targetName(target), 2 * request.model.run.chainedSteps,
                           request.model.run.chainedSteps, target == Target::Gpu ? ", GPU time" : "");
  std::cout << fmt::format("{:<9} {:>6} {:>10} {:>10} {:>12} {:>12} {:>10} {:>12} {:>12}\n", "mode", "batch", "step",
                           "step min", "tokens/s", fmt::format("vs batch {}", request.batches.front()), "chained",
                           "tokens/s", fmt::format("vs batch {}", request.batches.front()));
  for (Gpt2Mode mode : request.modes) {
    Gpt2RunOptions options = request.model.run;
    options.mode = mode;
    std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(config, onTarget, options);
    double firstRate = 0, firstChainedRate = 0;
    for (int64_t batch : request.batches) {
      runner->prepareBatch(batch);
      std::vector<int32_t> tokens(static_cast<size_t>(batch)), positions(static_cast<size_t>(batch));
      for (int64_t slot = 0; slot < batch; ++slot) {
        std::vector<int32_t> prompt(static_cast<size_t>(promptTokens));
        for (int32_t &id : prompt)
          id = token(generator);
        runner->prefillSlot(batch, slot, prompt);
        positions[slot] = static_cast<int32_t>(promptTokens + slot % kDecodeTokens);
      }
      auto step = [&] {
        for (int64_t slot = 0; slot < batch; ++slot) {
          tokens[slot] = token(generator);
          positions[slot] =
              static_cast<int32_t>(promptTokens + (positions[slot] + 1 - promptTokens) % (2 * kDecodeTokens));
        }
        runner->decodeBatch(tokens, positions, /*withLogits=*/false);
      };
      // Runs the program directly, then captures it.
      for (int i = 0; i < 2 + request.warmup; ++i)
        step();
      std::vector<double> steps;
      for (int i = 0; i < request.repeat; ++i)
        steps.push_back(timeOnTarget(target, step));
      double stepMs = median(steps);
      double rate = stepMs > 0 ? static_cast<double>(batch) * 1000.0 / stepMs : 0.0;
      if (firstRate == 0)
        firstRate = rate;

      // Chained greedy steps from each slot's first position on.
      int32_t lastStart = 0;
      for (int64_t slot = 0; slot < batch; ++slot) {
        positions[slot] = static_cast<int32_t>(promptTokens + slot % kDecodeTokens);
        lastStart = std::max(lastStart, positions[slot]);
      }
      const int64_t chainedSteps = std::min<int64_t>(2 * options.chainedSteps, config.nCtx - lastStart);
      auto chained = [&] { runner->decodeGreedy(tokens, positions, chainedSteps); };
      for (int i = 0; i < 2 + request.warmup; ++i) // each graph run directly, then captured
        chained();
      std::vector<double> chainedTimes;
      for (int i = 0; i < request.repeat; ++i)
        chainedTimes.push_back(timeOnTarget(target, chained) / static_cast<double>(chainedSteps));
      double chainedMs = median(chainedTimes);
      double chainedRate = chainedMs > 0 ? static_cast<double>(batch) * 1000.0 / chainedMs : 0.0;
      if (firstChainedRate == 0)
        firstChainedRate = chainedRate;
      std::cout << fmt::format("{:<9} {:>6} {:>10.3f} {:>10.3f} {:>12.0f} {:>11.1f}x {:>10.3f} {:>12.0f} {:>11.1f}x\n",
                               modeName(mode), batch, stepMs, *std::min_element(steps.begin(), steps.end()), rate,
                               firstRate > 0 ? rate / firstRate : 0.0, chainedMs, chainedRate,
                               firstChainedRate > 0 ? chainedRate / firstChainedRate : 0.0)
                << std::flush;
    }
  }
}

// Flag values bench gpt2 refuses before anything loads.
void checkBenchRequest(const BenchRequest &request) {
  if (request.repeat <= 0 || request.warmup < 0)
    fail("--repeat must be positive and --warmup not negative");
  if (!request.csv.empty() && !request.profile)
    fail("--csv writes the --profile table: give --profile too");
  if (request.decodePrompt < 1)
    fail("--decode-prompt must be at least 1 token, not {}", request.decodePrompt);
  for (int64_t batch : request.batches)
    if (batch < 1)
      fail("--batches must be at least 1 sequence each, not {}", batch);
}

// The first line: the model, the target, and how forwards are timed.
void printBenchHeader(const BenchRequest &request, const Gpt2Weights &weights) {
  const Gpt2Config &config = weights.config();
  const CompileOptions &compile = request.model.run.compile;
  bool gpu = compile.target == Target::Gpu;
  std::cout << fmt::format(
      "bench gpt2: L={} H={} C={} V={}, {}, {} on the {}{}; median of {} after {} warm-up{}\n", config.nLayer,
      config.nHead, config.nEmbd, config.vocabSize, weights.description(), dtypeName(request.model.run.dtype),
      targetName(compile.target),
      gpu ? " (" + gpu::deviceName() + ", " + describeMatmuls(compile.matmul, compile.precision) + ")" : "",
      request.repeat, request.warmup,
      gpu ? (request.model.run.graphs ? ", each forward a CUDA graph" : ", direct launches") : "");
}

// What --profile's rows are measured against, in the same run.
struct Ceilings {
  double copyRate = 0; // bytes read plus written per second
  gpu::MatmulCeiling matmul;
};

Ceilings measureCeilings() {
  Ceilings ceilings;
  ceilings.copyRate = gpu::copyBytesPerSecond();
  ceilings.matmul = gpu::measureMatmulCeiling();
  const gpu::MatmulCeiling &matmul = ceilings.matmul;
  std::cout << fmt::format(
      "ceilings measured now: copy {:.0f} GB/s (read + written); matmul {}\n", ceilings.copyRate / 1e9,
      matmul.flopsPerSecond > 0 ? fmt::format("{:.1f} TFLOP/s ({})", matmul.flopsPerSecond / 1e12, matmul.source)
                                : matmul.source);
  return ceilings;
}

// One forward shape on `runner`: compiled (the time by stage kept), run
// directly once (its launches counted), captured as a graph (unless graphs
// are off), warmed up and timed; then, on the GPU, one more forward launched
// directly with every kernel timed (each row kept with --profile).
ShapeReport benchForwardShape(const BenchRequest &request, Gpt2Runner &runner, Gpt2Mode mode,
                              const std::vector<int32_t> &tokens, std::vector<KernelRow> &kernelRows) {
  Target target = request.model.run.compile.target;
  bool gpu = target == Target::Gpu;
  int64_t length = static_cast<int64_t>(tokens.size());
  ShapeReport report;
  report.mode = modeName(mode);
  report.length = length;
  CompileTimings before = runner.timing().stages;
  runner.prepare(length);
  report.compile = runner.timing().stages;
  report.compile.add({-before.traceMs, -before.fuseMs, -before.bufferizeMs, -before.outlineMs, -before.lowerMs,
                      -before.ptxasMs, -before.loadMs, -before.cacheHits});
  if (gpu)
    gpu::resetPeakAllocationBytes();

  // The first forward runs directly: its launches are counted. The second
  // is captured as a graph (unless graphs are off), outside the timing.
  uint64_t launchesBefore = gpu ? gpu::counters().launches : 0;
  int capturesBefore = runner.timing().graphCaptures;
  runner.forward(tokens, false, false);
  if (gpu)
    report.launches = static_cast<int64_t>(gpu::counters().launches - launchesBefore);
  runner.forward(tokens, false, false);
  report.graph = runner.timing().graphCaptures > capturesBefore;
  for (int i = 0; i < request.warmup; ++i)
    runner.forward(tokens, false, false);
  std::vector<double> times;
  for (int i = 0; i < request.repeat; ++i)
    times.push_back(timeOnTarget(target, [&] { runner.forward(tokens, false, false); }));
  report.medianMs = median(times);
  report.minMs = *std::min_element(times.begin(), times.end());

  // One more forward, launched directly with every kernel timed.
  if (gpu) {
    runner.useGraphs(false);
    std::vector<gpu::KernelTime> launches;
    {
      gpu::LaunchProfiler profiler(request.profile ? kProfileReplays : 0);
      runner.forward(tokens, false, false);
      launches = profiler.take();
    }
    runner.useGraphs(request.model.run.graphs);
    report.kernelMs = 0;
    for (const gpu::KernelTime &launch : launches)
      report.kernelMs += launch.microseconds / 1000.0;
    if (request.profile)
      for (KernelRow &row : aggregate(launches, report.mode, length))
        kernelRows.push_back(std::move(row));
    report.peakBytes = gpu::peakAllocationBytes();
  }
  report.module = runner.moduleInfo(length);
  return report;
}

// Every mode at every length, a row printed as each is measured.
std::vector<ShapeReport> benchForwards(const BenchRequest &request, const Gpt2Config &config,
                                       const std::shared_ptr<const TargetWeights> &onTarget, std::mt19937 &generator,
                                       std::vector<KernelRow> &kernelRows) {
  bool gpu = request.model.run.compile.target == Target::Gpu;
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocabSize - 1));
  std::vector<ShapeReport> reports;
  std::cout << fmt::format("{:<9} {:>5} {:>10} {:>10} {:>11} {:>8} {:>9} {:>6} {:>10} {:>10}\n", "mode", "T",
                           "median ms", "min ms", "kernels ms", "launches", "arena MiB", "graph", "peak MiB",
                           "compile ms");
  for (Gpt2Mode mode : request.modes) {
    Gpt2RunOptions options = request.model.run;
    options.mode = mode;
    std::unique_ptr<Gpt2Runner> runner = makeGpt2Runner(config, onTarget, options);
    for (int64_t length : request.lengths) {
      if (length > config.nCtx)
        fail("T={} is longer than the model's context of {}", length, config.nCtx);
      std::vector<int32_t> tokens(static_cast<size_t>(length));
      for (int32_t &id : tokens)
        id = token(generator);
      ShapeReport report = benchForwardShape(request, *runner, mode, tokens, kernelRows);
      std::cout << fmt::format("{:<9} {:>5} {:>10.3f} {:>10.3f} {:>11} {:>8} {:>9.2f} {:>6} {:>10} {:>10.0f}\n",
                               report.mode, length, report.medianMs, report.minMs,
                               report.kernelMs < 0 ? "-" : fmt::format("{:.3f}", report.kernelMs),
                               report.launches < 0 ? "-" : std::to_string(report.launches),
                               double(report.module.arenaBytes) / kMiB, report.graph ? "yes" : "no",
                               gpu ? fmt::format("{:.0f}", double(report.peakBytes) / kMiB) : "-",
                               report.compile.totalMs())
                << std::flush;
      reports.push_back(report);
    }
  }
  return reports;
}

void printForwardAgainstKernels(const std::vector<ShapeReport> &reports) {
  std::cout << "\nforward against its kernels (GPU): the forward's median over the sum of its kernels' own times\n";
  std::cout << fmt::format("{:<9} {:>5} {:>10} {:>11} {:>7} {:>14} {:>16}\n", "mode", "T", "forward ms", "kernels ms",
                           "ratio", "us per launch", "unplanned MiB");
  for (const ShapeReport &report : reports) {
    bool known = report.kernelMs > 0 && report.launches > 0;
    std::cout << fmt::format(
        "{:<9} {:>5} {:>10.3f} {:>11} {:>7} {:>14} {:>16.2f}\n", report.mode, report.length, report.medianMs,
        known ? fmt::format("{:.3f}", report.kernelMs) : "-",
        known ? fmt::format("{:.2f}x", report.medianMs / report.kernelMs) : "-",
        known ? fmt::format("{:.2f}", 1000.0 * (report.medianMs - report.kernelMs) / double(report.launches)) : "-",
        double(report.module.unplannedBytes) / kMiB);
  }
}

void printCompileStages(const std::vector<ShapeReport> &reports, bool gpu) {
  std::cout << "\ncompile ms by stage (a cold compile; 'cached' when the lowered module came from the disk cache)\n";
  std::cout << fmt::format("{:<9} {:>5} {:>7} {:>7} {:>9} {:>8} {:>10} {:>7} {:>7} {:>8}\n", "mode", "T", "trace",
                           "fuse", "bufferize", "outline", gpu ? "lower-nvvm" : "lower-cpu", "ptxas", "load", "total");
  for (const ShapeReport &report : reports) {
    const CompileTimings &c = report.compile;
    std::cout << fmt::format("{:<9} {:>5} {:>7.0f} {:>7.0f} {:>9.0f} {:>8.0f} {:>10.0f} {:>7.0f} {:>7.0f} {:>8.0f}{}\n",
                             report.mode, report.length, c.traceMs, c.fuseMs, c.bufferizeMs, c.outlineMs, c.lowerMs,
                             c.ptxasMs, c.loadMs, c.totalMs(), c.cacheHits > 0 ? "  cached" : "");
  }
}

// --profile's table: one row per kernel against the ceilings, and the same
// rows as CSV in `csvPath` when it is set.
void printKernelProfile(const std::vector<KernelRow> &kernelRows, const Ceilings &ceilings,
                        const std::string &csvPath) {
  double copyRate = ceilings.copyRate;
  std::cout << fmt::format(
      "\nkernels, one forward (and one decode step: mode '-step', T its position) launched directly; each kernel "
      "timed over {} replays of its launch in a graph (library calls: one launch between events); floor: the bytes "
      "at the copy rate ({:.0f} GB/s); 'x copy': against a copy of the same bytes timed the same way\n",
      kProfileReplays, copyRate / 1e9);
  std::cout << fmt::format("{:<13} {:>5} {:<40} {:>6} {:>10} {:>9} {:>12} {:>9} {:>7} {:>8} {:>7}\n", "mode", "T",
                           "kernel", "calls", "us", "us/call", "bytes/call", "GB/s", "floor", "copy us", "x copy");
  std::string csv = "mode,T,kernel,calls,us,us_per_call,bytes_per_call,flops_per_call,gb_per_s,tflop_per_s,"
                    "ratio_to_floor,intensity,copy_gb_per_s,matmul_tflop_per_s,same_bytes_copy_us\n";
  std::map<int64_t, double> copyOfBytes; // replayed copy time by bytes per call
  for (const KernelRow &row : kernelRows) {
    double perCall = row.microseconds / double(row.calls);
    bool known = row.bytes >= 0;
    double bytesPerCall = known ? double(row.bytes) / double(row.calls) : 0;
    double rate = known && row.microseconds > 0 ? double(row.bytes) / (row.microseconds * 1e-6) : 0;
    double floorRatio = known && row.bytes > 0 ? row.microseconds * 1e-6 / (double(row.bytes) / copyRate) : 0;
    double flopRate = row.microseconds > 0 ? double(row.flops) / (row.microseconds * 1e-6) : 0;
    double intensity = known && row.bytes > 0 ? double(row.flops) / double(row.bytes) : 0;
    double copyUs = 0;
    if (known && bytesPerCall >= 2) {
      int64_t half = static_cast<int64_t>(bytesPerCall / 2);
      auto [it, inserted] = copyOfBytes.try_emplace(half, 0.0);
      if (inserted)
        it->second = gpu::replayedCopyMicroseconds(static_cast<size_t>(half), kProfileReplays);
      copyUs = it->second;
    }
    std::cout << fmt::format(
        "{:<13} {:>5} {:<40} {:>6} {:>10.1f} {:>9.2f} {:>12} {:>9} {:>7} {:>8} {:>7}\n", row.mode, row.length,
        row.kernel, row.calls, row.microseconds, perCall, known ? fmt::format("{:.0f}", bytesPerCall) : "?",
        known ? fmt::format("{:.0f}", rate / 1e9) : "?", floorRatio > 0 ? fmt::format("{:.2f}x", floorRatio) : "-",
        copyUs > 0 ? fmt::format("{:.2f}", copyUs) : "-", copyUs > 0 ? fmt::format("{:.2f}x", perCall / copyUs) : "-");
    csv += fmt::format("{},{},{},{},{:.3f},{:.3f},{:.0f},{:.0f},{:.3f},{:.4f},{:.4f},{:.6f},{:.3f},{:.4f},{:.3f}\n",
                       row.mode, row.length, csvField(row.kernel), row.calls, row.microseconds, perCall, bytesPerCall,
                       double(row.flops) / double(row.calls), rate / 1e9, flopRate / 1e12, floorRatio, intensity,
                       copyRate / 1e9, ceilings.matmul.flopsPerSecond / 1e12, copyUs);
  }
  if (!csvPath.empty()) {
    writeOutput(csvPath, csv);
    std::cout << "wrote " << csvPath << "\n";
  }
}

} // namespace

void benchGpt2(const BenchRequest &request) {
  checkBenchRequest(request);
  Gpt2Weights weights = loadGpt2Weights(request.model.weights, request.model.config, request.model.seed);
  const Gpt2Config &config = weights.config();
  bool gpu = request.model.run.compile.target == Target::Gpu;
  if (request.profile && !gpu)
    fail("--profile times kernels on the GPU: use --target gpu");
  printBenchHeader(request, weights);
  Ceilings ceilings = request.profile ? measureCeilings() : Ceilings{};
  std::mt19937 generator(12345);
  // Uploaded once, shared by the runner of each mode.
  std::shared_ptr<const TargetWeights> onTarget = TargetWeights::upload(
      weights, request.model.run.compile.target, request.model.run.execution.memory, request.model.run.dtype);
  std::vector<KernelRow> kernelRows;
  std::vector<ShapeReport> reports = benchForwards(request, config, onTarget, generator, kernelRows);
  printForwardAgainstKernels(reports);
  benchDecoding(request, config, onTarget, generator, kernelRows);
  benchBatchedDecoding(request, config, onTarget, generator);
  printCompileStages(reports, gpu);
  if (request.profile)
    printKernelProfile(kernelRows, ceilings, request.csv);
}

// ---- bench kernels ---------------------------------------------------------------

std::vector<Shape> referenceShapes(const std::string &kernel) {
  static const std::map<std::string, std::vector<Shape>> shapes = {
      {"gelu", {{3072, 4096}}},      {"softmax", {{12288, 1024}}}, {"layernorm", {{16384, 768}}},
      {"transpose", {{4096, 4096}}}, {"colsum", {{16384, 768}}},   {"matmul", {{1024, 768}, {768, 3072}}},
  };
  auto found = shapes.find(kernel);
  return found == shapes.end() ? std::vector<Shape>{} : found->second;
}

namespace {

// One compiled program timed as bench kernels times a unit kernel: its
// launches back to back (in a CUDA graph unless --no-graphs), inputs and
// outputs cycled over more than twice L2. Returns the microseconds per
// launch and sets `bytes` to what one launch reads and writes.
double timeProgram(const fe::Program &program, const KernelBenchRequest &request, size_t &bytes) {
  const fe::Graph &graph = *program.functions.front();
  const std::string &name = graph.name();
  CompileOptions compile;
  compile.target = Target::Gpu;
  compile.chip = request.chip;
  compile.passOptions = request.passOptions;
  Executable executable = Executable::load(compileProgram(program, name + ".mlir", compile));
  const EntrySignature &entry = executable.entry(name);
  gpu::Stream stream;
  gpu::StreamScope current(stream);

  // Inputs and outputs, repeated until they exceed twice L2, so no launch
  // finds its data left in L2 by the one before.
  size_t l2 = gpu::deviceL2Bytes();
  auto inputs = randomInputs(graph, request.seed);
  bytes = 0;
  for (auto &[input, tensor] : inputs)
    bytes += tensor.byteSize();
  for (const TensorSpec &spec : entry.outputs)
    bytes += static_cast<size_t>(byteSize(spec.shape, spec.dtype));
  size_t sets = std::max<size_t>(1, (2 * l2 + bytes - 1) / bytes);
  std::vector<TargetBuffer> buffers;
  std::vector<std::vector<void *>> pointers(sets);
  for (size_t set = 0; set < sets; ++set) {
    for (auto &[input, tensor] : inputs) {
      buffers.emplace_back(Target::Gpu, tensor.byteSize());
      buffers.back().upload(tensor.data(), tensor.byteSize());
      pointers[set].push_back(buffers.back().data());
    }
    for (const TensorSpec &spec : entry.outputs) {
      buffers.emplace_back(Target::Gpu, static_cast<size_t>(byteSize(spec.shape, spec.dtype)));
      pointers[set].push_back(buffers.back().data());
    }
  }
  auto launchAll = [&] {
    for (int i = 0; i < request.repeat; ++i)
      executable.enqueue(entry, pointers[size_t(i) % sets]);
  };
  // At least one launch before any capture, so the kernel is loaded.
  for (int i = 0; i < std::max(1, request.warmup); ++i)
    executable.enqueue(entry, pointers[size_t(i) % sets]);
  gpu::Graph replay;
  bool graphs = request.graphs && executable.capturable();
  if (graphs)
    replay.capture(stream, launchAll);
  std::vector<double> timings;
  for (int round = 0; round < 5; ++round) {
    gpu::EventTimer timer;
    timer.start();
    if (graphs)
      replay.launch(stream);
    else
      launchAll();
    timer.stop();
    timings.push_back(timer.milliseconds() * 1000.0 / request.repeat);
  }
  return median(timings);
}

// The copy floor of `bytes` moved (half read, half written): the better of
// the driver's device-to-device copy and mlpipe's own vectorised copy (a
// loop kernel over f32 that negates, which costs nothing next to its
// memory traffic), both timed now.
double copyFloorMicroseconds(size_t bytes, const KernelBenchRequest &request, const char *&which) {
  double driver = gpu::copyMilliseconds(bytes / 2) * 1000.0;
  fe::Program program;
  fe::Graph &g = program.addFunction("copy", DType::f32);
  int64_t elements = std::max<int64_t>(1, int64_t(bytes / 2 / sizeof(float)));
  g.output("y", -g.input("x", {elements}));
  size_t copyBytes = 0;
  double kernel = timeProgram(program, request, copyBytes) * double(bytes) / double(copyBytes);
  which = kernel < driver ? "kernel" : "driver";
  return std::min(driver, kernel);
}

} // namespace

void benchKernels(const KernelBenchRequest &request) {
  if (request.repeat <= 0 || request.warmup < 0)
    fail("--repeat must be positive and --warmup not negative");
  std::vector<std::string> kernels = request.kernels;
  if (kernels.empty()) {
    for (const char *name : {"gelu", "softmax", "layernorm", "transpose", "colsum", "matmul"}) {
      if (isUnitKernel(name))
        kernels.push_back(name);
      else
        std::cout << fmt::format("(no unit kernel '{}' yet: skipped)\n", name);
    }
  }
  for (const std::string &name : kernels)
    if (!isUnitKernel(name))
      fail("no unit kernel named '{}'", name);
  if (!gpu::available())
    fail("bench kernels times kernels on the GPU, but {}", gpu::unavailableReason());

  size_t l2 = gpu::deviceL2Bytes();
  std::cout << fmt::format("bench kernels on the gpu ({}, compiled for {}), {}; per launch: the median of 5 timings of "
                           "{} back-to-back launches after {}, {}; inputs cycled over more than twice L2 ({:.0f} "
                           "MiB); floor: the best copy of the same bytes timed now (the driver's device-to-device "
                           "copy or mlpipe's vectorised copy kernel)\n",
                           gpu::deviceName(), request.chip, dtypeName(request.options.dtype), request.repeat,
                           request.warmup, request.graphs ? "in a CUDA graph" : "launched directly", double(l2) / kMiB);
  for (const std::string &entry : request.passOptions)
    std::cout << "pass option: " << entry << "\n";
  std::cout << fmt::format("{:<10} {:<24} {:>10} {:>9} {:>10} {:>7} {:>9}  {}\n", "kernel", "shape", "us", "GB/s",
                           "floor us", "ratio", "TFLOP/s", "floor by");
  for (const std::string &name : kernels) {
    KernelOptions options = request.options;
    if (options.shapes.empty())
      options.shapes = referenceShapes(name);
    fe::Program program = traceUnitKernel(name, options);
    const fe::Graph &graph = *program.functions.front();
    std::string shapeText;
    for (int id : graph.inputs())
      shapeText += fmt::format("{}{}", shapeText.empty() ? "" : " ", formatShape(graph.node(id).shape));
    size_t bytes = 0;
    double microseconds = timeProgram(program, request, bytes);
    const char *floorBy = "";
    double floor = copyFloorMicroseconds(bytes, request, floorBy);
    double flops = 0;
    if (name == "matmul") {
      const Shape &a = graph.node(graph.inputs()[0]).shape;
      const Shape &out = graph.node(graph.outputs().begin()->second).shape;
      flops = 2.0 * double(numElements(out)) * double(a.back());
    }
    std::cout << fmt::format("{:<10} {:<24} {:>10.2f} {:>9.0f} {:>10.2f} {:>6.2f}x {:>9}  {}\n", name, shapeText,
                             microseconds, double(bytes) / (microseconds * 1e-6) / 1e9, floor, microseconds / floor,
                             flops > 0 ? fmt::format("{:.2f}", flops / (microseconds * 1e-6) / 1e12) : "-", floorBy)
              << std::flush;
  }
}

} // namespace mlpipe
