// Registration of every mlpipe pass. Each layer declares its own passes in
// its Passes.td (fusion/, matmul/, emitters/, attention/, transforms/); this
// registers them all, so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
#pragma once

namespace mlpipe {

// Registers every pass of every layer (once; later calls do nothing).
void registerMlpipePasses();

} // namespace mlpipe
