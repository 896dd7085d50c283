// Outputs: nothing lost, nothing half-written, nothing replaced that is not
// a regular file.
//
// A tool writes its results through OutputFiles (or writeOutput for one):
//   - a regular file, or a path that does not exist yet, is written to a
//     temporary beside it and renamed over it only when every output of the
//     set is complete, so a failed run leaves no output file and old ones
//     untouched (all outputs or none);
//   - a symbolic link is followed: its final target is written the same way,
//     in the target's directory, and the link stays a link;
//   - a character device (/dev/null), FIFO or socket is written to directly,
//     and only once every regular output of the set is complete;
//   - a directory, a block device or an empty path is refused in one line,
//     and so is one file named twice in a set;
//   - "-" means stdout, written in one piece on commit.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace mlpipe {

class OutputFiles {
public:
  OutputFiles();
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;
  // Removes every temporary and every directory made for a set that was not
  // committed.
  ~OutputFiles();

  // Checks that `path` can be written and is not already in the set (the same
  // file through another name counts); returns its index. Throws
  // mlpipe::Error naming the path.
  size_t add(const std::string &path);
  // Writes output `index` (to its temporary; a device, FIFO, socket or stdout
  // keeps the bytes until commit).
  void write(size_t index, std::string_view contents);
  // Adds `path` and writes it.
  void write(const std::string &path, std::string_view contents) { write(add(path), contents); }
  // Makes `directory` and its missing parents; those made are removed again
  // if the set is not committed.
  void createDirectories(const std::string &directory);
  // Moves every output into place; each must have been written.
  void commit();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `contents` to `path` ("-" = stdout) as a set of one; throws
// mlpipe::Error.
void writeOutput(const std::string &path, std::string_view contents);

// Reads a whole file ("-" = stdin); throws mlpipe::Error naming the path (a
// directory is refused as one).
std::string readInput(const std::string &path);

} // namespace mlpipe
