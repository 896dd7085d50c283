// ptx-check's body: read a lowered module, assemble its kernels, print the
// report table.
#pragma once

#include <string>

namespace mlpipe {

void runPtxCheck(const std::string &input, const std::string &chip, const std::string &toolkit);

} // namespace mlpipe
