// fuse: elementwise fusion of linalg on tensors.
#include "driver/stage_tool.h"

int main(int argc, char **argv) {
  return mlpipe::stageToolMain(argc, argv, mlpipe::StageTool::Fuse,
                               "Fuse elementwise linalg ops of a linalg-on-tensors module.",
                               "trace gelu | fuse | bufferize > gelu.buffers.mlir");
}
