// mlpipe's debug output. Heuristics print the choice they made under a debug
// type, shown when the user asks for it with --debug-only=TYPE[,TYPE...]
// (every stage tool and mlpipe-opt take the flag):
//
//   outline --debug-only=mlpipe-emitters gelu.mlir
//   [mlpipe-emitters] gelu_loop: loop emitter, 3145728 elements, vector 4, ...
//
// Debian's LLVM is built without assertions, so LLVM's own -debug-only is
// absent; this is mlpipe's, and works in any LLVM build.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlpipe {

// The debug type of the emitters: each prints its launch configuration.
inline constexpr const char *kDebugEmitters = "mlpipe-emitters";
// The partitioner in fuse: each fusion and why an op started a new one.
inline constexpr const char *kDebugPartitioner = "mlpipe-partitioner";

// Turns on the comma-separated debug types ("all" turns on every one).
void enableDebugTypes(const std::string &commaSeparated);
bool isDebugEnabled(llvm::StringRef type);
// The stream debug output goes to, with "[type] " written first.
llvm::raw_ostream &debugStream(llvm::StringRef type);
// Makes --debug-only an LLVM command-line option (for mlpipe-opt), unless
// this LLVM already has one.
void registerDebugOnlyOption();

} // namespace mlpipe

// MLPIPE_DEBUG(kDebugEmitters, os << "vector width " << width << "\n");
#define MLPIPE_DEBUG(TYPE, STATEMENT)                                                                                  \
  do {                                                                                                                 \
    if (::mlpipe::isDebugEnabled(TYPE)) {                                                                              \
      ::llvm::raw_ostream &os = ::mlpipe::debugStream(TYPE);                                                           \
      STATEMENT;                                                                                                       \
    }                                                                                                                  \
  } while (false)
