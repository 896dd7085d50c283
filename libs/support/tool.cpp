#include "support/tool.h"

#include "support/error.h"

#include <cstdio>
#include <exception>
#include <iostream>

namespace mlpipe {

int runTool(const char *tool, const std::function<void()> &body, int errorStatus) {
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
