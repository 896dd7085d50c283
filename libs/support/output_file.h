// Atomic outputs: nothing lost or half-written.
//
// A tool writes its whole result through writeOutput(), which goes to a
// temporary beside the target and is renamed over it only when complete, so
// a failed run leaves no output file (and an old one untouched). "-" means
// stdout, written in one piece at the end.
#pragma once

#include <string>
#include <string_view>

namespace mlpipe {

// Writes `contents` to `path` ("-" = stdout) atomically; throws mlpipe::Error.
void writeOutput(const std::string &path, std::string_view contents);

// Reads a whole file ("-" = stdin); throws mlpipe::Error naming the path.
std::string readInput(const std::string &path);

} // namespace mlpipe
