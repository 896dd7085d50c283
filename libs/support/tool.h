// The shared frame of every tool's main(): run the body, and turn a failure
// into one line on stderr ("fuse: error: ...", or an MLIR diagnostic as it
// is) and exit status 1; a crash, in one line naming the tool.
#pragma once

#include <functional>

namespace mlpipe {

// `errorStatus` is the exit status for a failure (verify uses 2, keeping 1
// for a comparison that fails).
int runTool(const char *tool, const std::function<void()> &body, int errorStatus = 1);

} // namespace mlpipe
