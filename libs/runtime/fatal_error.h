// How the runtime's C entry points (mgpu*, mlpipeGemm) fail. They are
// called from JIT-compiled code, which cannot handle an error, and carrying
// on after a failed CUDA or cuBLAS call would compute on corrupt memory; so
// they print one line to stderr ("mlpipe: ...") and end the process with
// exit status 1.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace mlpipe::gpu {

[[noreturn]] inline void die(const char *message) {
  std::fflush(stdout);
  std::fprintf(stderr, "mlpipe: %s\n", message);
  std::fflush(stderr);
  // _Exit: no destructors or atexit handlers, which could touch the GPU
  // again and print a second, misleading error.
  std::_Exit(1);
}

// Runs the body of one C entry point, ending the process on any exception.
template <typename Body> auto orDie(Body &&body) noexcept -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception &e) {
    die(e.what());
  } catch (...) {
    die("unknown error in the GPU runtime");
  }
}

} // namespace mlpipe::gpu
