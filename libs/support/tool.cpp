#include "support/tool.h"

#include "support/error.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#include <unistd.h>

namespace mlpipe {

namespace {

// The line a crash prints, written before the tool runs: a signal handler
// may only call async-signal-safe functions (write, signal, raise).
char crashLine[160];
size_t crashLineLength = 0;

void reportCrash(int signal) {
  ssize_t written = ::write(STDERR_FILENO, crashLine, crashLineLength);
  (void)written;
  std::signal(signal, SIG_DFL);
  std::raise(signal); // the exit status still says which signal
}

// A crash (a bug in mlpipe, or in code it compiled and ran) ends with one
// line naming the tool and the signal, not silently.
void reportCrashes(const char *tool) {
  int length = std::snprintf(crashLine, sizeof crashLine,
                             "%s: error: crashed (a memory fault or bus error); this is a bug in mlpipe\n", tool);
  crashLineLength = length > 0 ? std::min(sizeof crashLine - 1, static_cast<size_t>(length)) : 0;
  for (int signal : {SIGSEGV, SIGBUS}) {
    // A handler already there (a sanitizer's, with its own report) stays.
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
      std::signal(signal, reportCrash);
  }
}

} // namespace

int runTool(const char *tool, const std::function<void()> &body, int errorStatus) {
  reportCrashes(tool);
  try {
    body();
    return 0;
  } catch (const DiagnosticError &error) {
    std::cerr << error.what() << "\n";
  } catch (const Error &error) {
    std::cerr << tool << ": error: " << error.what() << "\n";
  } catch (const std::bad_alloc &) {
    std::cerr << tool << ": error: out of memory\n";
  } catch (const std::exception &error) {
    std::cerr << tool << ": error: " << error.what() << "\n";
  }
  std::cout.flush();
  return errorStatus;
}

} // namespace mlpipe
