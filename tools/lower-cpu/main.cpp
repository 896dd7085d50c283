// lower-cpu: bufferized linalg down to LLVM for the host CPU.
#include "driver/stage_tool.h"

int main(int argc, char **argv) {
  return mlpipe::stageToolMain(argc, argv, mlpipe::StageTool::LowerCpu,
                               "Lower a bufferized module to LLVM for the CPU: matmuls become cblas_sgemm/dgemm calls "
                               "where their\nlayouts allow, everything else loops.",
                               "trace gelu | fuse | bufferize | lower-cpu > gelu.cpu.mlir && run gelu.cpu.mlir --input "
                               "x=@x.npy --output y=@y.npy");
}
