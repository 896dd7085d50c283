// mlpipe's own passes. Passes.td declares them (summary, before/after IR,
// options); this header exposes the generated create*Pass() functions and
// registers them all, so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
#pragma once

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlpipe {

#define GEN_PASS_DECL
#include "compiler/Passes.h.inc"

// Registers every pass of Passes.td (once; later calls do nothing).
void registerMlpipePasses();

struct DeviceDescription;
// The device description of `chip` for a pass running on `op`; null after
// an error on `op` (`prefix` first) that names the chips mlpipe knows.
const DeviceDescription *passDeviceDescription(mlir::Operation *op, const std::string &chip,
                                               const std::string &prefix = "");

} // namespace mlpipe
