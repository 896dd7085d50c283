// The shared frame of every tool's main(): run the body, and turn a failure
// into one line on stderr ("fuse: error: ...", or an MLIR diagnostic as it
// is) and exit status 1.
#pragma once

#include <functional>

namespace mlpipe {

int runTool(const char *tool, const std::function<void()> &body);

} // namespace mlpipe
