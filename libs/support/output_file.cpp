#include "support/output_file.h"

#include "support/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <limits.h>
#include <set>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

namespace mlpipe {

namespace {

// Links followed before giving up, as the kernel's own limit (ELOOP).
constexpr int kMaxSymlinkHops = 40;

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseNameOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// How an output reaches its file.
enum class Route {
  Stdout,  // "-": written in one piece on commit
  Replace, // a regular file or a new path: a temporary renamed over it
  Direct,  // a character device, FIFO or socket: written in place on commit
};

struct Target {
  std::string given;    // the path as the user wrote it
  std::string path;     // where the bytes go, symbolic links followed
  std::string identity; // the same for two names of one file
  Route route = Route::Replace;
  bool socket = false;
  bool exists = false;
  mode_t mode = 0; // an existing regular file's permissions, kept
};

// Follows symbolic links from `given` to the path that is finally written.
std::string followLinks(const std::string &given) {
  std::string path = given;
  for (int hop = 0; hop <= kMaxSymlinkHops; ++hop) {
    struct stat status;
    if (::lstat(path.c_str(), &status) != 0 || !S_ISLNK(status.st_mode))
      return path;
    std::vector<char> buffer(static_cast<size_t>(status.st_size > 0 ? status.st_size : PATH_MAX) + 1);
    ssize_t length = ::readlink(path.c_str(), buffer.data(), buffer.size());
    if (length < 0)
      fail("cannot write {}: {}", given, std::strerror(errno));
    std::string target(buffer.data(), static_cast<size_t>(length));
    path = target.starts_with('/') ? target : fmt::format("{}/{}", directoryOf(path), target);
  }
  fail("cannot write {}: too many levels of symbolic links", given);
}

Target resolve(const std::string &given) {
  Target target;
  target.given = given;
  if (given.empty())
    fail("no output file named: give a path, or - for stdout");
  if (given == "-") {
    target.route = Route::Stdout;
    target.identity = "-";
    return target;
  }
  target.path = followLinks(given);
  struct stat status;
  if (::stat(target.path.c_str(), &status) == 0) {
    target.exists = true;
    target.identity = std::to_string(status.st_dev) + ":" + std::to_string(status.st_ino);
    if (S_ISDIR(status.st_mode))
      fail("cannot write {}: it is a directory", given);
    if (S_ISBLK(status.st_mode))
      fail("cannot write {}: it is a block device (outputs go to files, character devices, FIFOs or sockets)", given);
    if (S_ISREG(status.st_mode)) {
      target.mode = status.st_mode & 07777;
      return target;
    }
    target.route = Route::Direct;
    target.socket = S_ISSOCK(status.st_mode);
    return target;
  }
  if (errno != ENOENT)
    fail("cannot write {}: {}", given, std::strerror(errno));
  if (target.path.ends_with('/'))
    fail("cannot write {}: no directory {}", given, target.path);
  std::string directory = directoryOf(target.path);
  struct stat parent;
  if (::stat(directory.c_str(), &parent) != 0)
    fail("cannot write {}: no directory {}", given, directory);
  if (!S_ISDIR(parent.st_mode))
    fail("cannot write {}: {} is not a directory", given, directory);
  char real[PATH_MAX];
  if (::realpath(directory.c_str(), real) == nullptr)
    fail("cannot write {}: {}", given, std::strerror(errno));
  target.identity = std::string(real) + "/" + baseNameOf(target.path);
  return target;
}

// Writes all of `bytes` to `fd`; returns false with errno set on failure.
bool writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

int openSocket(const std::string &path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

void writeInPlace(const Target &target, std::string_view bytes) {
  int fd = target.socket ? openSocket(target.path) : ::open(target.path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot write {}: {}", target.given, std::strerror(errno));
  bool written = writeAll(fd, bytes);
  int saved = errno;
  if (::close(fd) != 0 && written) {
    written = false;
    saved = errno;
  }
  if (!written)
    fail("writing {} failed: {}", target.given, std::strerror(saved));
}

} // namespace

struct OutputFiles::Impl {
  struct Output {
    Target target;
    bool written = false;
    std::string temporary; // Route::Replace
    std::string held;      // Route::Stdout and Route::Direct
  };
  std::vector<Output> outputs;
  std::vector<std::string> madeDirectories; // in the order made
  bool committed = false;

  void removeTemporaries() {
    for (Output &output : outputs)
      if (!output.temporary.empty()) {
        ::unlink(output.temporary.c_str());
        output.temporary.clear();
      }
  }

  std::string writeTemporary(const Target &target, std::string_view bytes) {
    static unsigned counter = 0;
    std::string prefix =
        directoryOf(target.path) + "/." + baseNameOf(target.path) + ".tmp." + std::to_string(::getpid());
    std::string temporary;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
      temporary = prefix + "." + std::to_string(counter++);
      fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST)
        break;
    }
    if (fd < 0)
      fail("cannot write {}: {}", target.given, std::strerror(errno));
    bool written = (!target.exists || ::fchmod(fd, target.mode) == 0) && writeAll(fd, bytes);
    int saved = errno;
    if (::close(fd) != 0 && written) {
      written = false;
      saved = errno;
    }
    if (!written) {
      ::unlink(temporary.c_str());
      fail("writing {} failed: {}", target.given, std::strerror(saved));
    }
    return temporary;
  }
};

OutputFiles::OutputFiles() : impl_(std::make_unique<Impl>()) {}

OutputFiles::~OutputFiles() {
  if (impl_->committed)
    return;
  impl_->removeTemporaries();
  for (auto directory = impl_->madeDirectories.rbegin(); directory != impl_->madeDirectories.rend(); ++directory)
    ::rmdir(directory->c_str()); // only if still empty
}

size_t OutputFiles::add(const std::string &path) {
  Target target = resolve(path);
  for (const Impl::Output &output : impl_->outputs)
    if (output.target.identity == target.identity) {
      if (path == output.target.given)
        fail("{} is named as two outputs", path);
      fail("{} and {} are one file, named as two outputs", output.target.given, path);
    }
  Impl::Output output;
  output.target = std::move(target);
  impl_->outputs.push_back(std::move(output));
  return impl_->outputs.size() - 1;
}

void OutputFiles::write(size_t index, std::string_view contents) {
  Impl::Output &output = impl_->outputs.at(index);
  if (output.target.route == Route::Replace) {
    std::string temporary = impl_->writeTemporary(output.target, contents);
    if (!output.temporary.empty())
      ::unlink(output.temporary.c_str());
    output.temporary = std::move(temporary);
  } else {
    output.held.assign(contents.data(), contents.size());
  }
  output.written = true;
}

void OutputFiles::createDirectories(const std::string &directory) {
  if (directory.empty())
    fail("no directory named");
  std::vector<std::string> missing;
  for (std::string path = directory; !path.empty() && path != "/" && path != ".";) {
    while (path.size() > 1 && path.ends_with('/'))
      path.pop_back();
    struct stat status;
    if (::stat(path.c_str(), &status) == 0) {
      if (!S_ISDIR(status.st_mode))
        fail("cannot make directory {}: {} is not a directory", directory, path);
      break;
    }
    missing.push_back(path);
    std::string parent = directoryOf(path);
    if (parent == path)
      break;
    path = parent;
  }
  for (auto path = missing.rbegin(); path != missing.rend(); ++path) {
    if (::mkdir(path->c_str(), 0777) != 0 && errno != EEXIST)
      fail("cannot make directory {}: {}", *path, std::strerror(errno));
    impl_->madeDirectories.push_back(*path);
  }
}

void OutputFiles::commit() {
  for (const Impl::Output &output : impl_->outputs)
    if (!output.written)
      fail("internal error: output {} was never written", output.target.given);
  // Devices, FIFOs and stdout first: if one fails, no file has been replaced.
  for (const Impl::Output &output : impl_->outputs) {
    if (output.target.route == Route::Direct)
      writeInPlace(output.target, output.held);
    else if (output.target.route == Route::Stdout) {
      std::cout.write(output.held.data(), static_cast<std::streamsize>(output.held.size()));
      std::cout.flush();
      if (!std::cout)
        fail("could not write to stdout");
    }
  }
  for (Impl::Output &output : impl_->outputs) {
    if (output.target.route != Route::Replace)
      continue;
    if (std::rename(output.temporary.c_str(), output.target.path.c_str()) != 0)
      fail("cannot write {}: {}", output.target.given, std::strerror(errno));
    output.temporary.clear();
  }
  impl_->committed = true;
}

void writeOutput(const std::string &path, std::string_view contents) {
  OutputFiles outputs;
  outputs.write(path, contents);
  outputs.commit();
}

std::string readInput(const std::string &path) {
  if (path == "-") {
    std::string text;
    char buffer[1 << 16];
    size_t count;
    while ((count = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0)
      text.append(buffer, count);
    if (std::ferror(stdin))
      fail("cannot read stdin: {}", std::strerror(errno));
    return text;
  }
  if (path.empty())
    fail("no input file named: give a path, or - for stdin");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot read {}: {}", path, std::strerror(errno));
  struct stat status;
  if (::fstat(fd, &status) == 0 && S_ISDIR(status.st_mode)) {
    ::close(fd);
    fail("cannot read {}: it is a directory", path);
  }
  std::string text;
  if (S_ISREG(status.st_mode))
    text.reserve(static_cast<size_t>(status.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t count = ::read(fd, buffer, sizeof(buffer));
    if (count == 0)
      break;
    if (count < 0) {
      if (errno == EINTR)
        continue;
      int saved = errno;
      ::close(fd);
      fail("cannot read {}: {}", path, std::strerror(saved));
    }
    text.append(buffer, static_cast<size_t>(count));
  }
  ::close(fd);
  return text;
}

} // namespace mlpipe
