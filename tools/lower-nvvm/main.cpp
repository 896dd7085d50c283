// lower-nvvm: outlined GPU kernels down to gpu.binary (PTX by default) and
// LLVM host code; libdevice comes from the CUDA toolkit.
#include "driver/stage_tool.h"

int main(int argc, char **argv) {
  return mlpipe::stageToolMain(
      argc, argv, mlpipe::StageTool::LowerNvvm,
      "Lower outlined GPU kernels to NVVM and PTX (or cubin), and the host code to LLVM. libdevice is\nlinked from the "
      "CUDA toolkit (--toolkit, else $CUDA_HOME, else the one found at build time).",
      "trace gelu | fuse | bufferize | outline | lower-nvvm --chip sm_90 > gelu.mlir && ptx-check --chip sm_90 "
      "gelu.mlir");
}
