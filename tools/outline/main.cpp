// outline: bufferized linalg to GPU kernels launched from host code.
#include "driver/stage_tool.h"

int main(int argc, char **argv) {
  return mlpipe::stageToolMain(
      argc, argv, mlpipe::StageTool::Outline,
      "Turn bufferized linalg into GPU kernels launched from host code, with managed allocations.",
      "trace matmul | fuse | bufferize | outline | lower-nvvm > matmul.mlir\n"
      "  trace matmul | fuse | bufferize | outline --matmul generated    # kernels instead of cuBLAS");
}
