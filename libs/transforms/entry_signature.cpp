#include "transforms/entry_signature.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

namespace mlpipe {

namespace {

std::string typeText(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

struct DeclaredBuffer {
  std::string attribute; // mlpipe.inputs or mlpipe.outputs
  std::string name;
  mlir::ShapedType type;
};

// The buffers the attributes declare, inputs then outputs; sets `problem`
// when an attribute is malformed.
std::vector<DeclaredBuffer> declaredBuffers(mlir::Operation *function, std::string &problem) {
  std::vector<DeclaredBuffer> buffers;
  for (const char *attribute : {"mlpipe.inputs", "mlpipe.outputs"}) {
    auto array = function->getAttrOfType<mlir::ArrayAttr>(attribute);
    if (!array)
      continue;
    for (mlir::Attribute element : array) {
      auto dictionary = mlir::dyn_cast<mlir::DictionaryAttr>(element);
      auto name = dictionary ? dictionary.getAs<mlir::StringAttr>("name") : nullptr;
      auto type = dictionary ? dictionary.getAs<mlir::TypeAttr>("type") : nullptr;
      auto shaped = type ? mlir::dyn_cast<mlir::ShapedType>(type.getValue()) : nullptr;
      if (!name || !shaped || !shaped.hasStaticShape()) {
        problem = fmt::format("its {} attribute is malformed", attribute);
        return {};
      }
      buffers.push_back({attribute, name.str(), shaped});
    }
  }
  return buffers;
}

std::string functionName(mlir::Operation *function) {
  auto symbol = function->getAttrOfType<mlir::StringAttr>(mlir::SymbolTable::getSymbolAttrName());
  return symbol ? fmt::format("@{}", symbol.str()) : std::string("the entry");
}

// mlpipe-buffer-plan passes an arena as the last argument when the entry
// has temporaries (mlpipe.arena's bytes above 0).
bool hasArenaArgument(mlir::Operation *function) {
  auto arena = function->getAttrOfType<mlir::DictionaryAttr>("mlpipe.arena");
  auto bytes = arena ? arena.getAs<mlir::IntegerAttr>("bytes") : nullptr;
  return bytes && bytes.getInt() > 0;
}

bool isArena(mlir::Type type) {
  auto memref = mlir::dyn_cast<mlir::MemRefType>(type);
  return memref && memref.getRank() == 1 && memref.getElementType().isInteger(8);
}

} // namespace

std::string entrySignatureMismatch(mlir::Operation *function, llvm::ArrayRef<mlir::Type> argumentTypes) {
  std::string problem;
  std::vector<DeclaredBuffer> buffers = declaredBuffers(function, problem);
  std::string name = functionName(function);
  if (!problem.empty())
    return name + ": " + problem;
  size_t extra = hasArenaArgument(function) ? 1 : 0;
  if (argumentTypes.size() != buffers.size() + extra || (extra && !isArena(argumentTypes.back())))
    return fmt::format("{} takes {} arguments, but its mlpipe.inputs and mlpipe.outputs declare {} buffers{}", name,
                       argumentTypes.size(), buffers.size(), extra ? " and the arena" : "");
  for (size_t i = 0; i < buffers.size(); ++i) {
    auto actual = mlir::dyn_cast<mlir::ShapedType>(argumentTypes[i]);
    const DeclaredBuffer &buffer = buffers[i];
    if (!actual || !actual.hasStaticShape() || actual.getShape() != buffer.type.getShape() ||
        actual.getElementType() != buffer.type.getElementType())
      return fmt::format("{} declares '{}' in {} as {}, but its argument {} is {}", name, buffer.name, buffer.attribute,
                         typeText(buffer.type), i, typeText(argumentTypes[i]));
  }
  return "";
}

std::string loweredEntrySignatureMismatch(mlir::Operation *function) {
  if (auto recorded = function->getAttrOfType<mlir::ArrayAttr>(kArgumentTypesAttribute)) {
    llvm::SmallVector<mlir::Type> types;
    for (mlir::Attribute element : recorded) {
      auto type = mlir::dyn_cast<mlir::TypeAttr>(element);
      if (!type)
        return functionName(function) + ": its " + kArgumentTypesAttribute + " attribute is malformed";
      types.push_back(type.getValue());
    }
    if (std::string mismatch = entrySignatureMismatch(function, types); !mismatch.empty())
      return mismatch;
  }
  auto functionType = mlir::dyn_cast<mlir::FunctionOpInterface>(function);
  if (!functionType)
    return "";
  std::string problem;
  std::vector<DeclaredBuffer> buffers = declaredBuffers(function, problem);
  if (!problem.empty())
    return functionName(function) + ": " + problem;
  // Each memref argument is expanded to {allocated, aligned, offset,
  // sizes[rank], strides[rank]}; the arena is one more, of rank 1.
  size_t expected = hasArenaArgument(function) ? 5 : 0;
  for (const DeclaredBuffer &buffer : buffers)
    expected += 3 + 2 * static_cast<size_t>(buffer.type.getRank());
  size_t actual = functionType.getNumArguments();
  if (actual != expected)
    return fmt::format("{} takes {} arguments, but the buffers its mlpipe.inputs and mlpipe.outputs declare would "
                       "pass {}",
                       functionName(function), actual, expected);
  return "";
}

} // namespace mlpipe
