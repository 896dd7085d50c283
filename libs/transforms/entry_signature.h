// An entry function's signature, as trace names it (mlpipe.inputs and
// mlpipe.outputs: each buffer's name and tensor type) against the buffers
// the function really takes. `run` binds files by those attributes, so a
// module whose attributes disagree with its arguments (edited or damaged)
// must be refused, not run past the end of a buffer.
#pragma once

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace mlpipe {

// The attribute mlpipe-record-entry-signature leaves on an entry before
// lowering erases its memref types: the arguments' types, in order.
constexpr const char *kArgumentTypesAttribute = "mlpipe.argument_types";

// "" when `function`'s mlpipe.inputs then mlpipe.outputs describe its first
// arguments exactly (shape and element type; memref or tensor alike), and
// the only argument left is the arena (a 1-D i8 memref, with mlpipe.arena);
// otherwise one sentence saying where they differ.
std::string entrySignatureMismatch(mlir::Operation *function, llvm::ArrayRef<mlir::Type> argumentTypes);

// The same against a lowered llvm.func, which has lost its memref types:
// its recorded mlpipe.argument_types when present, and always the count of
// its arguments (each memref an expanded descriptor of 3 + 2 x rank).
std::string loweredEntrySignatureMismatch(mlir::Operation *function);

} // namespace mlpipe
