// mlpipe-opt: runs any of mlpipe's passes, or an upstream pass its pipelines use, on a .mlir
// file, for tests and debugging:
//
//   mlpipe-opt --mlpipe-fill-per-use input.mlir
//   mlpipe-opt --debug-only=mlpipe-emitters --mlpipe-emit-fusions=chip=sm_90 bufferized.mlir
#include "compiler/compiler.h"

int main(int argc, char **argv) { return mlpipe::mlpipeOptMain(argc, argv); }
