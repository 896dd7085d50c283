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

namespace {

// The op a diagnostic is about, from the "see current operation: ..." note
// MLIR attaches (printed in generic form: %0 = "math.tanh"(%arg0) ...);
// empty when there is none.
std::string currentOperationName(mlir::Diagnostic &diagnostic) {
  for (mlir::Diagnostic &note : diagnostic.getNotes()) {
    std::string text = note.str();
    if (text.rfind("see current operation:", 0) != 0)
      continue;
    size_t open = text.find('"');
    size_t close = open == std::string::npos ? open : text.find('"', open + 1);
    if (close != std::string::npos)
      return text.substr(open + 1, close - open - 1);
  }
  return "";
}

// MLIR's message, with what it leaves out where a user needs it.
std::string explained(mlir::Diagnostic &diagnostic) {
  std::string message = diagnostic.str();
  if (message == "op was not bufferized") {
    std::string op = currentOperationName(diagnostic);
    return fmt::format("{} on tensors was not bufferized: bufferization knows linalg, tensor, arith, scf and func "
                       "ops on tensors (as trace and fuse write them), not this op; express it as a linalg op",
                       op.empty() ? std::string("an op") : "'" + op + "'");
  }
  return message;
}

} // namespace

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext &context) : context_(context) {
  handler_ = context_.getDiagEngine().registerHandler([this](mlir::Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == mlir::DiagnosticSeverity::Error)
      errors_.push_back(fmt::format("{}: error: {}", formatLocation(diagnostic.getLocation()), explained(diagnostic)));
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
