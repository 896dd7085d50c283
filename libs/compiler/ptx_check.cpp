// ptx-check's core: every PTX object of every gpu.binary is assembled by the
// toolkit's ptxas for the chip, and ptxas -v's resource report is read back
// per kernel (registers, shared memory, stack frame, spills).
#include "compiler/compiler.h"
#include "transforms/ptx.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <regex>
#include <sstream>

namespace mlpipe {
namespace {

// A temporary file removed when this goes out of scope.
struct TemporaryFile {
  llvm::SmallString<128> path;
  TemporaryFile(const char *prefix, const char *suffix) {
    if (llvm::sys::fs::createTemporaryFile(prefix, suffix, path))
      fail("cannot create a temporary file for ptxas");
  }
  ~TemporaryFile() { llvm::sys::fs::remove(path); }
};

int firstNumber(const std::string &line, const std::regex &pattern) {
  std::smatch match;
  return std::regex_search(line, match, pattern) ? std::stoi(match[1]) : 0;
}

// Reads "ptxas info" lines into one report per entry function.
std::vector<KernelReport> parseResourceUsage(const std::string &log, const std::string &module) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex shared(R"((\d+) bytes smem)");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex spillStores(R"((\d+) bytes spill stores)");
  static const std::regex spillLoads(R"((\d+) bytes spill loads)");
  std::vector<KernelReport> reports;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_search(line, match, entry)) {
      reports.push_back({module, match[1]});
      continue;
    }
    if (reports.empty())
      continue;
    KernelReport &report = reports.back();
    if (line.find("bytes stack frame") != std::string::npos) {
      report.stackFrameBytes = firstNumber(line, stack);
      report.spillStoreBytes = firstNumber(line, spillStores);
      report.spillLoadBytes = firstNumber(line, spillLoads);
    } else if (line.find("registers") != std::string::npos) {
      report.registers = firstNumber(line, registers);
      report.sharedBytes = firstNumber(line, shared);
    }
  }
  return reports;
}

std::string readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

// ptxas's complaint, trimmed to its error lines.
std::string quoteErrors(const std::string &log) {
  std::istringstream lines(log);
  std::string line, quoted;
  while (std::getline(lines, line))
    if (line.find("error") != std::string::npos || line.find("fatal") != std::string::npos)
      quoted += (quoted.empty() ? "" : "; ") + line;
  return quoted.empty() ? log : quoted;
}

std::vector<KernelReport> assemble(const std::string &module, llvm::StringRef ptx, const std::string &chip,
                                   const std::string &ptxas) {
  TemporaryFile source("mlpipe-kernel", "ptx"), log("mlpipe-ptxas", "log");
  {
    std::error_code error;
    llvm::raw_fd_ostream out(source.path, error);
    if (error)
      fail("cannot write a temporary PTX file: {}", error.message());
    out << ptx;
  }
  std::string arch = "-arch=" + chip;
  llvm::SmallVector<llvm::StringRef> args = {ptxas, arch, "-v", source.path.str(), "-o", "/dev/null"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(), log.path.str()};
  std::string executionError;
  int status = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &executionError);
  std::string output = readFile(log.path);
  if (status < 0)
    fail("cannot run {}: {}", ptxas, executionError);
  if (status != 0)
    fail("ptxas rejected the PTX of {} for {}: {}", module, chip, quoteErrors(output));
  return parseResourceUsage(output, module);
}

} // namespace

std::vector<KernelReport> checkPtx(const MlirModule &module, const std::string &chip, const std::string &toolkit) {
  checkChip(chip);
  std::string ptxas = (toolkit.empty() ? defaultCudaToolkit() : toolkit) + "/bin/ptxas";
  if (!llvm::sys::fs::can_execute(ptxas))
    fail("no ptxas at {} (pass --toolkit DIR or set CUDA_HOME)", ptxas);
  if (module.stage() != Stage::GpuBinary)
    fail("the input is {}, but ptx-check wants {}", stageName(module.stage()), stageName(Stage::GpuBinary));
  std::vector<KernelReport> reports;
  module.op().walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attribute : binary.getObjects()) {
      auto object = mlir::cast<mlir::gpu::ObjectAttr>(attribute);
      llvm::StringRef ptx = ptxOf(object);
      if (ptx.empty())
        fail("{} holds a binary without its PTX: lower it with lower-nvvm --format isa", binary.getName().str());
      auto found = assemble(binary.getName().str(), ptx, chip, ptxas);
      reports.insert(reports.end(), found.begin(), found.end());
    }
  });
  return reports;
}

} // namespace mlpipe
