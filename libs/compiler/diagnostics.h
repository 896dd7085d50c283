// Collects MLIR's error diagnostics while it is alive, in the one-line
// "file:line:col: error: message" form, so a failure reaches the user as a
// DiagnosticError naming the place in their input. Notes (such as the op
// dumps a failing pass attaches) are dropped: one clear line per error.
#pragma once

#include "compiler/compiler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <string>
#include <vector>

namespace mlpipe {

mlir::MLIRContext &compilerContext();

class DiagnosticCollector {
public:
  explicit DiagnosticCollector(mlir::MLIRContext &context);
  ~DiagnosticCollector();
  DiagnosticCollector(const DiagnosticCollector &) = delete;
  DiagnosticCollector &operator=(const DiagnosticCollector &) = delete;

  bool empty() const { return errors_.empty(); }
  // Throws DiagnosticError with what was collected, or Error(fallback) when
  // MLIR said nothing.
  [[noreturn]] void fail(const std::string &fallback) const;

private:
  mlir::MLIRContext &context_;
  mlir::DiagnosticEngine::HandlerID handler_;
  std::vector<std::string> errors_;
};

// "file:line:col" for a location, looking inside fused and named locations.
std::string formatLocation(mlir::Location location);

} // namespace mlpipe
