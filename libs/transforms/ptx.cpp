#include "transforms/ptx.h"

namespace mlpipe {

llvm::StringRef ptxOf(mlir::gpu::ObjectAttr object) {
  if (object.getFormat() == mlir::gpu::CompilationTarget::Assembly)
    return object.getObject().getValue();
  if (auto properties = object.getProperties())
    if (auto ptx = properties.getAs<mlir::StringAttr>(kPtxProperty))
      return ptx.getValue();
  return {};
}

std::string unresolvedLibdeviceCall(llvm::StringRef text) {
  size_t at = text.find(".extern .func");
  while (at != llvm::StringRef::npos) {
    size_t name = text.find("__nv_", at);
    size_t lineEnd = text.find('\n', at);
    if (name != llvm::StringRef::npos && name < lineEnd) {
      size_t nameEnd = text.find_first_of("( \n", name);
      return text.substr(name, nameEnd - name).str();
    }
    at = text.find(".extern .func", lineEnd);
  }
  return "";
}

} // namespace mlpipe
