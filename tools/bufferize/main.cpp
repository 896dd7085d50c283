// bufferize: tensors to memrefs in destination-passing form.
#include "driver/stage_tool.h"

int main(int argc, char **argv) {
  return mlpipe::stageToolMain(
      argc, argv, mlpipe::StageTool::Bufferize,
      "Bufferize a linalg-on-tensors module into destination-passing memrefs (results become named arguments).",
      "trace softmax | fuse | bufferize | outline > softmax.gpu.mlir");
}
