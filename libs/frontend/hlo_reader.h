// Reads XLA's HLO text: an HloModule as jax.jit(f).lower(...).as_text(
// dialect="hlo") prints it, or as XLA's dump flags leave it after its passes
// (fusion computations, FileNames/StackFrames sections). Its ENTRY
// computation becomes a front-end Program of one function, which the MLIR
// emitter writes as linalg on tensors and the reference evaluates:
//
//   HloModule jit_f, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}
//   ENTRY main.4 {
//     Arg_0.1 = f32[8,16]{1,0} parameter(0)
//     ROOT tanh.2 = f32[8,16]{1,0} tanh(Arg_0.1)
//   }
//
// gives a function `jit_f` with input "Arg_0.1" and output "y" (a root
// tuple gives y0, y1, ...). `call` and `fusion` are inlined, whatever their
// kind; a `while` whose trip count is a constant is unrolled (its body
// inlined once per trip), and a `conditional` computes every branch and
// selects. The reader is hand-written recursive descent over the grammar of
// XLA's hlo_parser; it accepts what the front end can express (listHloOps
// below, and the README's HLO section) and refuses anything
// else with one "FILE:LINE:COL: error: ..." line naming the instruction.
#pragma once

#include "frontend/graph.h"

#include <string>
#include <string_view>

namespace mlpipe::fe {

// Parses `text` and records its ENTRY computation. `source` names the text in
// diagnostics. Throws DiagnosticError on any bad or unsupported input.
Program readHlo(std::string_view text, const std::string &source);

// Every HLO op the reader reads, one per line with its limits
// ("reduce  one input; add, maximum, ..."): what `trace --list-ops` prints.
std::string listHloOps();

} // namespace mlpipe::fe
