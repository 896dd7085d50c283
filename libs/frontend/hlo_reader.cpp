// The HLO text reader. Two passes:
//
// 1. Parse (hlo/hlo_parser.h): a character-level recursive-descent parser
//    turns the text into a small syntax tree (hlo/hlo_syntax.h: ModuleText,
//    computations, instructions with their declared shapes, operand names and
//    the raw text of each attribute), following XLA's hlo_parser grammar.
//    Attributes are kept as text and parsed only when an op needs them, so
//    metadata, backend_config, frontend_attributes and anything else unknown
//    are skipped without being understood.
//
// 2. Build (hlo/hlo_builder.h): the ENTRY computation is walked in
//    dependency order (so operands may be defined after their use, and a
//    cycle is reported as one) and each instruction is recorded into the
//    front-end graph; call and fusion computations are walked the same way
//    with their operands as parameters, which inlines them. Every result is
//    checked against the shape the instruction declares.
//
// Nothing here trusts the input: recursion is bounded (tuple nesting, call
// depth), instruction chains are walked with an explicit stack, numbers and
// sizes are checked for overflow, and the graph is capped in size, so the
// reader can be fuzzed.
#include "frontend/hlo_reader.h"

#include "frontend/hlo/hlo_builder.h"
#include "frontend/hlo/hlo_parser.h"

namespace mlpipe::fe {

Program readHlo(std::string_view text, const std::string &source) {
  hlo::ModuleText module = hlo::parseModule(text, source);
  return hlo::Builder(module, source).build();
}

} // namespace mlpipe::fe
