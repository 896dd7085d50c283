// The HLO text parser: character-level recursive descent that turns the text
// into the syntax tree of hlo_syntax.h, following XLA's hlo_parser grammar:
//   module      ::= ('HloModule' name (',' attribute)*)? stack_frames? computation+
//   computation ::= 'ENTRY'? name ('(' param (',' param)* ')' '->' shape)? '{' instruction+ '}'
//   instruction ::= 'ROOT'? name '=' shape? opcode '(' operands ')' (',' attribute)*
//   operand     ::= shape? name
//   shape       ::= type '[' dims ']' layout? | '(' shape (',' shape)* ')'
// Comments (/*index=5*/, //...) are skipped like whitespace. Attributes are
// kept as text and parsed only when an op needs them (hlo_builder.h), so
// metadata, backend_config, frontend_attributes and anything else unknown
// are skipped without being understood.
#pragma once

#include "frontend/hlo/hlo_cursor.h"
#include "frontend/hlo/hlo_syntax.h"

#include <string>
#include <string_view>

namespace mlpipe::fe::hlo {

// The whole module. `source` names the text in diagnostics. Without the
// 'HloModule' header (a fragment, as XLA's emitter tests and single-fusion
// dumps write one) the module is named after its entry computation; without
// 'ENTRY' the last computation is the entry.
ModuleText parseModule(std::string_view text, const std::string &source);

// shape ::= type '[' dims ']' layout? | '(' shape (',' shape)* ')'
ShapeText parseShape(Cursor &in, int depth = 0);

} // namespace mlpipe::fe::hlo
