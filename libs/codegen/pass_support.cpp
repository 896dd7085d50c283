#include "codegen/pass_support.h"

#include <exception>

namespace mlpipe {

const DeviceDescription *passDeviceDescription(mlir::Operation *op, const std::string &chip,
                                               const std::string &prefix) {
  try {
    return &deviceDescription(chip);
  } catch (const std::exception &error) {
    op->emitError(prefix + error.what());
    return nullptr;
  }
}

} // namespace mlpipe
