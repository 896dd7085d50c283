// PTX inside gpu.binary objects, shared by ptx-check, lower-nvvm's checks
// and mlpipe-assemble-kernels.
#pragma once

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlpipe {

// The object property where mlpipe-assemble-kernels keeps each kernel's PTX
// beside its cubin, so ptx-check still works on lower-nvvm's default output.
inline constexpr const char *kPtxProperty = "mlpipe.ptx";

// The PTX of an object: the object itself when it is PTX, else the copy in
// its properties; empty when there is none.
llvm::StringRef ptxOf(mlir::gpu::ObjectAttr object);

// The first libdevice function (__nv_...) the PTX declares .extern, i.e.
// calls without defining; empty when there is none.
std::string unresolvedLibdeviceCall(llvm::StringRef ptx);

} // namespace mlpipe
