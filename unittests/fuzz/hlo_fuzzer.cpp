// Fuzzes the HLO text reader: any bytes are either read into a program or
// refused with one "fuzz.hlo:LINE:COL: error: ..." line. What is read must
// emit as MLIR text and, when small, evaluate on the float64 reference, so
// every graph the reader can build is one the rest of the front end takes.
#include "frontend/hlo_reader.h"
#include "frontend/mlir_emitter.h"
#include "reference/evaluator.h"
#include "support/error.h"

#include <cstdint>
#include <string_view>

namespace {

// Programs up to this many elements, over all their ops, are evaluated.
constexpr int64_t kEvaluatedElements = int64_t(1) << 16;

void evaluateWhenSmall(const mlpipe::fe::Graph &graph) {
  int64_t total = 0;
  for (const mlpipe::fe::Node &node : graph.nodes()) {
    // A loop run at run time ends when its data say so, which for fuzzed
    // text may be never: such programs are read and emitted, not run.
    if (node.kind == mlpipe::fe::OpKind::While)
      return;
    total += mlpipe::numElements(node.shape);
    if (total > kEvaluatedElements)
      return;
  }
  mlpipe::ref::Values inputs;
  for (int id : graph.inputs()) {
    const mlpipe::fe::Node &node = graph.node(id);
    auto array = std::make_shared<mlpipe::ref::Array>();
    array->shape = node.shape;
    // Row ids stay inside their table; everything else is a small value.
    double value = node.ints.empty() ? 0.75 : static_cast<double>(node.ints[0] - 1);
    array->data.assign(static_cast<size_t>(mlpipe::numElements(node.shape)), mlpipe::storedValue(node.dtype, value));
    inputs[node.name] = array;
  }
  mlpipe::ref::evaluate(graph, inputs);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  mlpipe::fe::Program program;
  try {
    program = mlpipe::fe::readHlo(text, "fuzz.hlo");
  } catch (const mlpipe::DiagnosticError &error) {
    std::string_view message = error.what();
    if (!message.starts_with("fuzz.hlo:") || message.find('\n') != std::string_view::npos)
      __builtin_trap();
    return 0;
  }
  // Anything the reader accepts, the emitter and the reference must take.
  mlpipe::fe::emitMlir(program);
  evaluateWhenSmall(*program.functions.front());
  return 0;
}
