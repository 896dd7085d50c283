// mlpipe's attention passes. attention/Passes.td declares them (summary,
// before/after IR, options); this header exposes the generated
// create*Pass() functions and option structs.
#pragma once

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlpipe {

#define GEN_PASS_DECL
#include "attention/Passes.h.inc"

} // namespace mlpipe
