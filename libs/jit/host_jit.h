// The JIT that turns a lowered module's host code into native code in this
// process: LLVM's ORC (LLJIT with RuntimeDyld) over the module's LLVM IR
// translation, each entry reachable through a packed wrapper that takes
// its arguments as an array of pointers.
//
// It registers no unwind frames with the C++ unwinder. The code it compiles
// never unwinds (the runtime's entry points end the process rather than
// throw: runtime/fatal_error.h), so its functions are compiled without
// unwind tables; the few the JIT adds itself (the module's constructors
// and destructors) keep theirs, which the memory manager does not register.
// Registering them bought nothing and cost every later throw in the process
// a search through them; with GCC 14.2's unwinder (Ubuntu 24.04), frames
// registered and then deregistered left the next throw anywhere in the
// process crashing inside _Unwind_Find_FDE.
#pragma once

#include "llvm/Support/CodeGen.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mlir {
class ModuleOp;
}

namespace mlpipe {

class HostJit {
public:
  struct Options {
    // The LLVM IR optimisation level (0-3) and the code generator's.
    unsigned optLevel = 3;
    llvm::CodeGenOptLevel codeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  };
  // A function that takes its arguments as pointers to their values.
  using PackedFunction = void (*)(void **);

  // Translates `module` (LLVM dialect, with `_mlir_ciface_` functions) and
  // adds it to a new JIT; `entries` are the C-interface functions to wrap.
  // Throws Error when the module cannot be translated.
  static std::unique_ptr<HostJit> create(mlir::ModuleOp module, const std::vector<std::string> &entries,
                                         const Options &options);
  ~HostJit();
  HostJit(const HostJit &) = delete;
  HostJit &operator=(const HostJit &) = delete;

  // Symbols the compiled code calls, resolved before the process's own.
  void defineSymbols(const std::vector<std::pair<std::string, void *>> &symbols);
  // The packed wrapper of C-interface function `name` (compiles the module
  // on first use). Throws Error when it is missing.
  PackedFunction packed(const std::string &name);
  // Runs the module's constructors (for a GPU module: loading its
  // kernels); the destructor runs its destructors.
  void initialize();

private:
  struct Impl;
  explicit HostJit(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace mlpipe
