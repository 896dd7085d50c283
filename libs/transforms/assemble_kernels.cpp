// mlpipe-assemble-kernels: every kernel's PTX assembled to cubin by ptxas at
// compile time, in parallel, each distinct PTX once, cached on disk.
// Passes.td holds its description, with IR before and after.
#include "codegen/debug.h"
#include "transforms/passes.h"
#include "transforms/ptx.h"

#include "support/statistics.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace mlpipe {

#define GEN_PASS_DEF_ASSEMBLEKERNELSPASS
#include "transforms/Passes.h.inc"

namespace {

// The debug type: how many kernels, how many distinct, how many from the
// cache, on how many threads.
constexpr const char *kDebugPtxas = "mlpipe-ptxas";

// A file that is removed when this goes out of scope.
struct ScratchFile {
  llvm::SmallString<128> path;
  bool made = false;
  explicit ScratchFile(const char *suffix) {
    made = !llvm::sys::fs::createTemporaryFile("mlpipe-kernel", suffix, path);
  }
  ~ScratchFile() {
    if (made)
      llvm::sys::fs::remove(path);
  }
};

std::string readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

bool writeFile(llvm::StringRef path, llvm::StringRef bytes) {
  std::error_code error;
  llvm::raw_fd_ostream out(path, error, llvm::sys::fs::OF_None);
  if (error)
    return false;
  out << bytes;
  out.close();
  return !out.has_error();
}

// ptxas's (or fatbinary's) complaint, on one line.
std::string oneLine(const std::string &log) {
  std::string line;
  for (char c : log)
    line += c == '\n' ? ' ' : c;
  while (!line.empty() && line.back() == ' ')
    line.pop_back();
  return line;
}

// Runs a toolkit program; its output (stdout and stderr) goes to `log`.
bool runTool(llvm::StringRef program, llvm::ArrayRef<llvm::StringRef> args, std::string &log) {
  ScratchFile output(".log");
  if (!output.made) {
    log = "cannot create a temporary file";
    return false;
  }
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, output.path.str(), output.path.str()};
  std::string executionError;
  int status = llvm::sys::ExecuteAndWait(program, args, std::nullopt, redirects, 0, 0, &executionError);
  log = status < 0 ? "cannot run " + program.str() + ": " + executionError : readFile(output.path);
  return status == 0;
}

// What ptxas reports as its version: part of the cache key, so a new
// toolkit never reuses an old cubin.
std::string ptxasVersion(const std::string &ptxas) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard lock(mutex);
  auto [it, inserted] = versions.try_emplace(ptxas);
  if (inserted) {
    std::string log;
    runTool(ptxas, {ptxas, "--version"}, log);
    it->second = log;
  }
  return it->second;
}

struct Job {
  std::string ptx;
  std::string key;    // the cache file's name
  std::string result; // cubin or fatbin bytes
  std::string error;
  bool cached = false;
};

// One PTX object of a gpu.binary, and the job assembling its text.
struct Use {
  mlir::gpu::BinaryOp binary;
  size_t object;
  size_t job;
};

struct AssembleKernelsPass : impl::AssembleKernelsPassBase<AssembleKernelsPass> {
  using AssembleKernelsPassBase::AssembleKernelsPassBase;

  void runOnOperation() final {
    mlir::ModuleOp module = getOperation();
    if (format == "isa")
      return; // PTX stays: the driver's JIT assembles it when it loads
    if (format != "bin" && format != "fatbin") {
      module.emitError() << "mlpipe-assemble-kernels: format must be isa, bin or fatbin, not '" << format << "'";
      return signalPassFailure();
    }
    std::string ptxas = toolkit + "/bin/ptxas", fatbinary = toolkit + "/bin/fatbinary";
    if (!llvm::sys::fs::can_execute(ptxas)) {
      module.emitError() << "mlpipe-assemble-kernels: no ptxas at " << ptxas;
      return signalPassFailure();
    }
    if (format == "fatbin" && !llvm::sys::fs::can_execute(fatbinary)) {
      module.emitError() << "mlpipe-assemble-kernels: no fatbinary at " << fatbinary;
      return signalPassFailure();
    }
    auto start = std::chrono::steady_clock::now();

    std::vector<Use> uses;
    std::vector<Job> jobs;
    if (mlir::failed(collectJobs(module, ptxas, uses, jobs)))
      return signalPassFailure();

    // The disk cache first, then ptxas on the rest, several at a time.
    bool caching = !cacheDir.empty() && !llvm::sys::fs::create_directories(cacheDir);
    std::vector<size_t> pending = readCached(jobs, caching);
    unsigned threads = assembleInParallel(jobs, pending, ptxas, fatbinary);
    for (Use use : uses) {
      Job &job = jobs[use.job];
      if (!job.error.empty()) {
        use.binary.emitError() << "ptxas rejected the PTX of " << use.binary.getName() << " for " << chip << ": "
                               << job.error;
        return signalPassFailure();
      }
    }
    if (caching)
      for (size_t i : pending)
        store(jobs[i]);

    replaceObjects(module, uses, jobs);
    size_t fromCache = jobs.size() - pending.size();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    MLPIPE_DEBUG(kDebugPtxas, os << uses.size() << " kernel objects, " << jobs.size() << " distinct PTX, " << fromCache
                                 << " from the cache" << (caching ? " in " + cacheDir : "") << ", " << pending.size()
                                 << " assembled on " << threads << " threads for " << chip << " in "
                                 << llvm::format("%.1f", ms) << " ms\n");
  }

  // Every PTX object, and each distinct PTX text once.
  mlir::LogicalResult collectJobs(mlir::ModuleOp module, const std::string &ptxas, std::vector<Use> &uses,
                                  std::vector<Job> &jobs) const {
    std::map<std::string, size_t> jobOf;
    std::string toolkitVersion = ptxasVersion(ptxas);
    bool failed = false;
    module.walk([&](mlir::gpu::BinaryOp binary) {
      for (auto [index, attribute] : llvm::enumerate(binary.getObjects())) {
        auto object = mlir::cast<mlir::gpu::ObjectAttr>(attribute);
        if (object.getFormat() != mlir::gpu::CompilationTarget::Assembly)
          continue;
        llvm::StringRef ptx = object.getObject().getValue();
        if (std::string call = unresolvedLibdeviceCall(ptx); !call.empty()) {
          binary.emitError() << "the PTX of " << binary.getName() << " calls " << call
                             << ", which libdevice did not resolve: is the CUDA toolkit complete?";
          failed = true;
          return;
        }
        auto [it, inserted] = jobOf.try_emplace(ptx.str(), jobs.size());
        if (inserted) {
          uint64_t hash = stableHash(ptx.str() + "\n" + chip + "\n" + std::to_string(optLevel) + "\n" + format + "\n" +
                                     toolkitVersion);
          Job job;
          job.ptx = ptx.str();
          job.key = fmt::format("{:016x}.{}", hash, format == "bin" ? "cubin" : "fatbin");
          jobs.push_back(std::move(job));
        }
        uses.push_back({binary, index, it->second});
      }
    });
    return mlir::failure(failed);
  }

  // The jobs the disk cache holds are read from it; the others (returned)
  // are pending.
  std::vector<size_t> readCached(std::vector<Job> &jobs, bool caching) const {
    std::vector<size_t> pending;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (caching) {
        llvm::SmallString<256> path(cacheDir);
        llvm::sys::path::append(path, jobs[i].key);
        jobs[i].result = readFile(path);
        jobs[i].cached = !jobs[i].result.empty();
      }
      if (!jobs[i].cached)
        pending.push_back(i);
    }
    return pending;
  }

  // ptxas on the pending jobs, on as many threads as asked (or as the
  // machine has), at most one a job; the threads it used.
  unsigned assembleInParallel(std::vector<Job> &jobs, const std::vector<size_t> &pending, const std::string &ptxas,
                              const std::string &fatbinary) const {
    unsigned threads = jobsOption > 0 ? unsigned(jobsOption) : std::max(1u, std::thread::hardware_concurrency());
    threads = std::min<unsigned>(threads, static_cast<unsigned>(pending.size()));
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t at; (at = next++) < pending.size();)
        assemble(jobs[pending[at]], ptxas, fatbinary);
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < threads; ++t)
      pool.emplace_back(worker);
    worker();
    for (std::thread &thread : pool)
      thread.join();
    return threads;
  }

  // Each PTX object becomes its cubin (or fatbin), keeping the PTX.
  void replaceObjects(mlir::ModuleOp module, const std::vector<Use> &uses, const std::vector<Job> &jobs) const {
    mlir::MLIRContext *context = module.getContext();
    mlir::Builder builder(context);
    for (Use use : uses) {
      llvm::SmallVector<mlir::Attribute> objects(use.binary.getObjects().begin(), use.binary.getObjects().end());
      auto object = mlir::cast<mlir::gpu::ObjectAttr>(objects[use.object]);
      // Kept: what the object said, but for the time serialising took, which
      // would make equal inputs give different outputs.
      llvm::SmallVector<mlir::NamedAttribute> properties;
      if (object.getProperties())
        for (mlir::NamedAttribute property : object.getProperties())
          if (property.getName() != "LLVMIRToISATimeInMs")
            properties.push_back(property);
      properties.push_back(builder.getNamedAttr(kPtxProperty, builder.getStringAttr(jobs[use.job].ptx)));
      objects[use.object] = mlir::gpu::ObjectAttr::get(
          context, object.getTarget(),
          format == "bin" ? mlir::gpu::CompilationTarget::Binary : mlir::gpu::CompilationTarget::Fatbin,
          builder.getStringAttr(jobs[use.job].result), builder.getDictionaryAttr(properties), object.getKernels());
      use.binary.setObjectsAttr(builder.getArrayAttr(objects));
    }
  }

  // ptxas (then fatbinary) on one PTX text.
  void assemble(Job &job, const std::string &ptxas, const std::string &fatbinary) const {
    ScratchFile source(".ptx"), cubin(".cubin");
    if (!source.made || !cubin.made || !writeFile(source.path, job.ptx)) {
      job.error = "cannot write a temporary file";
      return;
    }
    std::string arch = "-arch=" + chip, opt = "-O" + std::to_string(std::clamp<int>(optLevel, 0, 3)), log;
    if (!runTool(ptxas, {ptxas, arch, opt, source.path.str(), "-o", cubin.path.str()}, log)) {
      job.error = oneLine(log);
      return;
    }
    if (format == "bin") {
      job.result = readFile(cubin.path);
      return;
    }
    // A fatbin holds the cubin and the PTX, so newer chips can JIT it.
    ScratchFile fatbin(".fatbin");
    std::string sm = chip.substr(chip.find('_') + 1);
    std::string elf = "--image3=kind=elf,sm=" + sm + ",file=" + cubin.path.str().str();
    std::string ptx = "--image3=kind=ptx,sm=" + sm + ",file=" + source.path.str().str();
    std::string create = "--create=" + fatbin.path.str().str();
    if (!runTool(fatbinary, {fatbinary, "--64", create, elf, ptx}, log)) {
      job.error = oneLine(log);
      return;
    }
    job.result = readFile(fatbin.path);
  }

  // Written to a temporary name first, so a reader never sees half a file.
  void store(const Job &job) const {
    llvm::SmallString<256> path(cacheDir), temporary;
    llvm::sys::path::append(path, job.key);
    temporary = path;
    temporary += fmt::format(".{}.tmp", llvm::sys::Process::getProcessId());
    if (writeFile(temporary, job.result))
      llvm::sys::fs::rename(temporary, path);
    else
      llvm::sys::fs::remove(temporary);
  }
};

} // namespace

} // namespace mlpipe
