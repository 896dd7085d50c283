// mlpipe's debug types and the --debug-only option.
#include "codegen/debug.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"

#include <mutex>
#include <optional>

namespace mlpipe {

namespace {

llvm::StringSet<> &enabledTypes() {
  static llvm::StringSet<> types;
  return types;
}

} // namespace

void enableDebugTypes(const std::string &commaSeparated) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(commaSeparated).split(parts, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef part : parts)
    enabledTypes().insert(part.trim());
}

bool isDebugEnabled(llvm::StringRef type) {
  return !enabledTypes().empty() && (enabledTypes().contains(type) || enabledTypes().contains("all"));
}

llvm::raw_ostream &debugStream(llvm::StringRef type) { return llvm::errs() << "[" << type << "] "; }

void registerDebugOnlyOption() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (llvm::cl::getRegisteredOptions().count("debug-only"))
      return;
    // Lives until exit: LLVM's option registry keeps a pointer to it.
    static std::optional<llvm::cl::opt<std::string>> option;
    option.emplace("debug-only", llvm::cl::desc("Print the choices of these mlpipe debug types (mlpipe-emitters, ...)"),
                   llvm::cl::value_desc("type[,type...]"),
                   llvm::cl::cb<void, const std::string &>([](const std::string &types) { enableDebugTypes(types); }));
  });
}

} // namespace mlpipe
