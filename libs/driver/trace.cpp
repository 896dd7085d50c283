#include "driver/trace.h"

#include "compiler/compiler.h"
#include "frontend/mlir_emitter.h"

namespace mlpipe {

std::string trace(const TraceRequest &request) {
  fe::Program program = traceUnitKernel(request.program, request.kernel);
  MlirModule module = MlirModule::parse(fe::emitMlir(program), request.program + ".traced.mlir");
  return module.print();
}

} // namespace mlpipe
