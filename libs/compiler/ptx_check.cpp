// ptx-check's core: every PTX object of every gpu.binary is assembled by the
// toolkit's ptxas for the chip, and ptxas -v's resource report is read back
// per kernel (registers, shared memory, stack frame, spills).
//
// ptxas costs some 70 ms of CPU a run before it assembles anything, more
// than most kernels take, so every object goes to one ptxas run: ptxas
// takes several PTX files as one program and reports each entry function
// by name. Only the objects' own global variables can clash there (each
// lower-nvvm module defines mlpipe_programmatic_launch); a clashing one is
// renamed in the later files, which changes no entry's code. When the
// objects' entry names clash, when ptxas rejects the program, or when its
// report misses an entry, each object is assembled on its own as before,
// so a rejection names the object and quotes ptxas on that object alone.
#include "compiler/compiler.h"
#include "transforms/ptx.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <regex>
#include <set>
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
  TemporaryFile(const TemporaryFile &) = delete;
  TemporaryFile &operator=(const TemporaryFile &) = delete;
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

// ptxas -v on the PTX files: its exit status and what it printed.
int runPtxas(const std::string &ptxas, const std::string &chip, const std::deque<TemporaryFile> &sources,
             std::string &output) {
  TemporaryFile log("mlpipe-ptxas", "log");
  std::string arch = "-arch=" + chip;
  llvm::SmallVector<llvm::StringRef> args = {ptxas, arch, "-v"};
  for (const TemporaryFile &source : sources)
    args.push_back(source.path.str());
  args.append({"-o", "/dev/null"});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.path.str(), log.path.str()};
  std::string executionError;
  int status = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &executionError);
  output = readFile(log.path);
  if (status < 0)
    fail("cannot run {}: {}", ptxas, executionError);
  return status;
}

void writeFile(const TemporaryFile &file, llvm::StringRef text) {
  std::error_code error;
  llvm::raw_fd_ostream out(file.path, error);
  if (error)
    fail("cannot write a temporary PTX file: {}", error.message());
  out << text;
}

std::vector<KernelReport> assemble(const std::string &module, llvm::StringRef ptx, const std::string &chip,
                                   const std::string &ptxas) {
  std::deque<TemporaryFile> sources;
  sources.emplace_back("mlpipe-kernel", "ptx");
  writeFile(sources.back(), ptx);
  std::string output;
  if (runPtxas(ptxas, chip, sources, output) != 0)
    fail("ptxas rejected the PTX of {} for {}: {}", module, chip, quoteErrors(output));
  return parseResourceUsage(output, module);
}

struct PtxObject {
  std::string module; // the gpu.binary symbol
  llvm::StringRef ptx;
};

bool identifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

// The names a PTX text declares at its top level with `prefix` (".entry",
// ".global"...): the identifier before the parameter list, array bound,
// initialiser or semicolon.
std::vector<std::string> declaredNames(llvm::StringRef ptx, llvm::StringRef prefix) {
  std::vector<std::string> names;
  llvm::SmallVector<llvm::StringRef> lines;
  ptx.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (!line.starts_with(prefix))
      continue;
    llvm::StringRef head = line.take_until([](char c) { return c == '(' || c == '[' || c == '=' || c == ';'; });
    head = head.rtrim();
    size_t start = head.size();
    while (start > 0 && identifierChar(head[start - 1]))
      --start;
    if (start < head.size())
      names.push_back(head.substr(start).str());
  }
  return names;
}

// `text` with every whole-word `from` replaced by `to`.
std::string renameIdentifier(llvm::StringRef text, llvm::StringRef from, llvm::StringRef to) {
  std::string renamed;
  size_t at = 0;
  for (size_t found; (found = text.find(from, at)) != llvm::StringRef::npos; at = found + from.size()) {
    bool whole = (found == 0 || !identifierChar(text[found - 1])) &&
                 (found + from.size() == text.size() || !identifierChar(text[found + from.size()]));
    renamed += text.slice(at, found).str();
    renamed += whole ? to.str() : from.str();
  }
  renamed += text.substr(at).str();
  return renamed;
}

// Every object in one ptxas run; nothing when that cannot stand for the
// objects assembled one by one (see the top of this file).
std::optional<std::vector<KernelReport>> assembleTogether(const std::vector<PtxObject> &objects,
                                                          const std::string &chip, const std::string &ptxas) {
  std::map<std::string, size_t> ownerOfEntry;
  std::vector<std::set<std::string>> entriesOf(objects.size());
  std::set<std::string> globals;
  std::deque<TemporaryFile> sources;
  for (size_t i = 0; i < objects.size(); ++i) {
    for (const std::string &entry : declaredNames(objects[i].ptx, ".visible .entry")) {
      if (!ownerOfEntry.try_emplace(entry, i).second)
        return std::nullopt;
      entriesOf[i].insert(entry);
    }
    std::string ptx = objects[i].ptx.str();
    for (const std::string &global : declaredNames(objects[i].ptx, ".visible .global"))
      if (!globals.insert(global).second)
        ptx = renameIdentifier(ptx, global, fmt::format("{}_mlpipe_object{}", global, i));
    sources.emplace_back("mlpipe-kernel", "ptx");
    writeFile(sources.back(), ptx);
  }
  std::string output;
  if (runPtxas(ptxas, chip, sources, output) != 0)
    return std::nullopt;
  // ptxas reports a program's entries in an order of its own; each
  // object's keep the order ptxas gives them alone.
  std::vector<std::vector<KernelReport>> reportsOf(objects.size());
  for (KernelReport &report : parseResourceUsage(output, "")) {
    auto owner = ownerOfEntry.find(report.kernel);
    if (owner == ownerOfEntry.end())
      return std::nullopt;
    report.module = objects[owner->second].module;
    reportsOf[owner->second].push_back(std::move(report));
  }
  std::vector<KernelReport> reports;
  for (size_t i = 0; i < objects.size(); ++i) {
    std::set<std::string> reported;
    for (const KernelReport &report : reportsOf[i])
      reported.insert(report.kernel);
    if (reported != entriesOf[i] || reported.size() != reportsOf[i].size())
      return std::nullopt;
    reports.insert(reports.end(), reportsOf[i].begin(), reportsOf[i].end());
  }
  return reports;
}

} // namespace

std::vector<KernelReport> checkPtx(const MlirModule &module, const std::string &chip, const std::string &toolkit) {
  checkChip(chip);
  std::string ptxas = (toolkit.empty() ? defaultCudaToolkit() : toolkit) + "/bin/ptxas";
  if (!llvm::sys::fs::can_execute(ptxas))
    fail("no ptxas at {} (pass --toolkit DIR or set CUDA_HOME)", ptxas);
  if (module.stage() != Stage::GpuBinary)
    fail("the input is {}, but ptx-check wants {}", stageName(module.stage()), stageName(Stage::GpuBinary));
  std::vector<PtxObject> objects;
  bool complete = true;
  module.op().walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attribute : binary.getObjects()) {
      llvm::StringRef ptx = ptxOf(mlir::cast<mlir::gpu::ObjectAttr>(attribute));
      complete &= !ptx.empty();
      objects.push_back({binary.getName().str(), ptx});
    }
  });
  if (complete && !objects.empty())
    if (auto reports = assembleTogether(objects, chip, ptxas))
      return *reports;
  std::vector<KernelReport> reports;
  for (const PtxObject &object : objects) {
    if (object.ptx.empty())
      fail("{} holds a binary without its PTX: lower it with lower-nvvm --format isa", object.module);
    auto found = assemble(object.module, object.ptx, chip, ptxas);
    reports.insert(reports.end(), found.begin(), found.end());
  }
  return reports;
}

} // namespace mlpipe
