// What mlpipe's passes share to read their options: the device
// description of the chip a pass compiles for.
#pragma once

#include "codegen/device_description.h"

#include "mlir/IR/Operation.h"

#include <string>

namespace mlpipe {

// The device description of `chip` for a pass running on `op`; null after
// an error on `op` (`prefix` first) that names the chips mlpipe knows.
const DeviceDescription *passDeviceDescription(mlir::Operation *op, const std::string &chip,
                                               const std::string &prefix = "");

} // namespace mlpipe
