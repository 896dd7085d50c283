#include "compiler/diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

#include <fmt/format.h>

namespace mlpipe {

std::string formatLocation(mlir::Location location) {
  if (auto fileLoc = location->findInstanceOf<mlir::FileLineColLoc>())
    return fmt::format("{}:{}:{}", fileLoc.getFilename().str(), fileLoc.getLine(), fileLoc.getColumn());
  return "<unknown>";
}

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext &context) : context_(context) {
  handler_ = context_.getDiagEngine().registerHandler([this](mlir::Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error)
      errors_.push_back(fmt::format("{}: error: {}", formatLocation(diagnostic.getLocation()), diagnostic.str()));
    return mlir::success();
  });
}

DiagnosticCollector::~DiagnosticCollector() { context_.getDiagEngine().eraseHandler(handler_); }

void DiagnosticCollector::fail(const std::string &fallback) const {
  if (errors_.empty())
    throw Error(fallback);
  std::string text;
  for (size_t i = 0; i < errors_.size(); ++i)
    text += (i ? "\n" : "") + errors_[i];
  throw DiagnosticError(text);
}

} // namespace mlpipe
