// Registration of every mlpipe pass. Each layer declares its own passes in
// its Passes.td (fusion/, matmul/, emitters/, attention/, transforms/); this
// registers them all, so that the text pipelines in pipelines/ and
// mlpipe-opt can name them like any MLIR pass.
#pragma once

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlpipe {

// Registers every pass of every layer (once; later calls do nothing).
void registerMlpipePasses();

// Adds to `registry` the dialects, interface implementations and LLVM IR
// translations the compiler's IR uses, and registers (once) the upstream
// passes its pipelines name and every mlpipe pass (registration.cpp).
void registerCompilerDialectsAndPasses(mlir::DialectRegistry &registry);

} // namespace mlpipe
