#include "driver/ptx_check.h"

#include "compiler/compiler.h"
#include "driver/stage_tool.h"
#include "support/output_file.h"

#include <fmt/format.h>

namespace mlpipe {

void runPtxCheck(const std::string &input, const std::string &chip, const std::string &toolkit) {
  MlirModule module = MlirModule::parse(readInput(input), bufferName(input));
  std::vector<KernelReport> reports = checkPtx(module, chip, toolkit);
  std::string table;
  for (const KernelReport &report : reports)
    table += fmt::format(
        "{:<48} {:>4} registers {:>6} B shared {:>5} B stack {:>5} B spill stores {:>5} B spill loads  [{}]\n",
        report.module + "::" + report.kernel, report.registers, report.sharedBytes, report.stackFrameBytes,
        report.spillStoreBytes, report.spillLoadBytes, chip);
  table +=
      fmt::format("ptx-check: {} kernel{} assembled for {}\n", reports.size(), reports.size() == 1 ? "" : "s", chip);
  writeOutput("-", table);
}

} // namespace mlpipe
