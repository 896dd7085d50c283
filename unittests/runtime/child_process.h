// Runs this test executable again as a child process in a named "scenario",
// for checking behaviour that ends the process (the mgpu* C functions print
// one line and exit 1 on any error, so they cannot be tested in-process).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace mlpipe::test {

// The flag that selects a scenario in the child: TEST --scenario=NAME.
inline constexpr std::string_view kScenarioFlag = "--scenario=";

// The scenario named on the command line, or empty for a normal test run.
inline std::string scenarioFrom(int argc, char **argv) {
  if (argc < 2)
    return {};
  std::string_view arg = argv[1];
  return arg.starts_with(kScenarioFlag) ? std::string(arg.substr(kScenarioFlag.size())) : std::string();
}

struct ChildResult {
  int exitCode = -1; // -1 when the child did not exit normally (signal)
  std::string stderrText;
};

// Runs this executable with --scenario=NAME; returns its exit code and what
// it wrote to stderr (its stdout is discarded). `environment` is prefixed to
// the shell command, e.g. "LD_LIBRARY_PATH='/tmp/x'".
inline ChildResult runScenario(const std::string &name, const std::string &environment = {}) {
  char self[4096] = {};
  ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0)
    return {};
  std::string command = environment + " '" + std::string(self, size_t(length)) + "' " + std::string(kScenarioFlag) +
                        name + " 2>&1 >/dev/null";
  ChildResult result;
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    return result;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    result.stderrText.append(buffer, n);
  int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status))
    result.exitCode = WEXITSTATUS(status);
  return result;
}

} // namespace mlpipe::test
