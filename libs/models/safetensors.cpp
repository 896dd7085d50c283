// .safetensors header checks and tensor reads; see safetensors.h.
#include "models/safetensors.h"

#include "support/output_file.h"

#include "models/json_text.h"
#include "support/error.h"

#include <fmt/ranges.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

namespace mlpipe {
namespace {

// The data section is little-endian and is copied as it is.
static_assert(std::endian::native == std::endian::little, "SafetensorsFile assumes a little-endian host");

// Element sizes of the dtypes the format defines (sub-byte ones excepted).
// Knowing them lets every header entry be checked, even for dtypes read()
// refuses.
std::optional<uint64_t> elementSize(std::string_view dtype) {
  static const std::pair<std::string_view, uint64_t> sizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"I64", 8}, {"U64", 8}, {"F64", 8},     {"C64", 8}};
  for (const auto &[name, size] : sizes)
    if (dtype == name)
      return size;
  return std::nullopt;
}

uint64_t readLittleEndian64(const char *bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  return value;
}

// IEEE half precision to single; every half value is exact in a float.
float halfToFloat(uint16_t half) {
  bool negative = half & 0x8000;
  uint32_t exponent = (half >> 10) & 0x1F;
  uint32_t mantissa = half & 0x3FF;
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
    float value = std::ldexp(static_cast<float>(mantissa), -24);
    return negative ? -value : value;
  }
  uint32_t bits = (negative ? 0x80000000u : 0u) | (mantissa << 13);
  if (exponent == 0x1F)
    bits |= 0x7F800000u; // infinity or NaN, keeping the payload
  else
    bits |= (exponent + 127 - 15) << 23;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// bfloat16 is the top half of a float.
float bfloat16ToFloat(uint16_t bf16) {
  uint32_t bits = static_cast<uint32_t>(bf16) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

template <typename Narrow, typename Convert> void widenToFloat(const char *bytes, HostTensor &tensor, Convert convert) {
  float *out = tensor.as<float>();
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    Narrow value;
    std::memcpy(&value, bytes + i * sizeof(Narrow), sizeof value);
    out[i] = convert(value);
  }
}

// ---- Header entries -----------------------------------------------------------

std::string describeOffsets(uint64_t begin, uint64_t end) { return fmt::format("[{}, {}]", begin, end); }

Shape parseShapeEntry(const llvm::json::Value &value, const std::string &source, const std::string &name) {
  const llvm::json::Array *dims = value.getAsArray();
  if (!dims)
    fail("{}: tensor '{}' has a shape that is {}, not an array", source, name, jsonKindName(value));
  Shape shape;
  for (const llvm::json::Value &dim : *dims) {
    std::optional<uint64_t> size = jsonUnsigned(dim);
    if (!size || *size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: tensor '{}' has a shape dimension that is not a non-negative 64-bit integer", source, name);
    shape.push_back(static_cast<int64_t>(*size));
  }
  return shape;
}

std::pair<uint64_t, uint64_t> parseOffsetsEntry(const llvm::json::Value &value, const std::string &source,
                                                const std::string &name) {
  const llvm::json::Array *offsets = value.getAsArray();
  std::optional<uint64_t> begin, end;
  if (offsets && offsets->size() == 2)
    begin = jsonUnsigned((*offsets)[0]), end = jsonUnsigned((*offsets)[1]);
  if (!begin || !end)
    fail("{}: tensor '{}' has data_offsets that are not two non-negative integers", source, name);
  return {*begin, *end};
}

SafetensorsFile::TensorInfo parseTensorEntry(const llvm::json::Value &value, const std::string &source,
                                             const std::string &name, uint64_t dataSize) {
  const llvm::json::Object *entry = value.getAsObject();
  if (!entry)
    fail("{}: entry '{}' is {}, not an object", source, name, jsonKindName(value));
  auto field = [&](const char *key) -> const llvm::json::Value & {
    const llvm::json::Value *found = entry->get(key);
    if (!found)
      fail("{}: tensor '{}' has no {}", source, name, key);
    return *found;
  };

  SafetensorsFile::TensorInfo info;
  const llvm::json::Value &dtype = field("dtype");
  if (!dtype.getAsString())
    fail("{}: tensor '{}' has a dtype that is {}, not a string", source, name, jsonKindName(dtype));
  info.dtype = dtype.getAsString()->str();
  info.shape = parseShapeEntry(field("shape"), source, name);
  std::tie(info.begin, info.end) = parseOffsetsEntry(field("data_offsets"), source, name);

  std::optional<uint64_t> size = elementSize(info.dtype);
  if (!size)
    fail("{}: tensor '{}' has unknown dtype '{}'", source, name, info.dtype);
  if (info.end < info.begin)
    fail("{}: tensor '{}' has data_offsets {}, which end before they begin", source, name,
         describeOffsets(info.begin, info.end));
  if (info.end > dataSize)
    fail("{}: tensor '{}' has data_offsets {} beyond the data section of {} bytes", source, name,
         describeOffsets(info.begin, info.end), dataSize);

  // The element count cannot overflow once checked by numElements; the byte
  // count is checked here because the element size is the file's, not a DType's.
  int64_t count;
  try {
    count = numElements(info.shape);
  } catch (const Error &) {
    fail("{}: tensor '{}' has shape {}, with more elements than fit in 64 bits", source, name, formatShape(info.shape));
  }
  uint64_t elements = static_cast<uint64_t>(count);
  if (elements > std::numeric_limits<uint64_t>::max() / *size || elements * *size != info.end - info.begin)
    fail("{}: tensor '{}' of shape {} and dtype {} needs {} bytes, but its data_offsets {} hold {}", source, name,
         formatShape(info.shape), info.dtype,
         elements > std::numeric_limits<uint64_t>::max() / *size ? std::string("more than 2^64")
                                                                 : std::to_string(elements * *size),
         describeOffsets(info.begin, info.end), info.end - info.begin);
  return info;
}

std::map<std::string, std::string> parseMetadata(const llvm::json::Value &value, const std::string &source) {
  const llvm::json::Object *object = value.getAsObject();
  if (!object)
    fail("{}: __metadata__ is {}, not an object", source, jsonKindName(value));
  std::map<std::string, std::string> metadata;
  for (const auto &[key, entry] : *object) {
    std::optional<llvm::StringRef> text = entry.getAsString();
    if (!text)
      fail("{}: __metadata__ entry '{}' is {}, not a string", source, key.str(), jsonKindName(entry));
    metadata.emplace(key.str(), text->str());
  }
  return metadata;
}

// The format requires the tensors' data_offsets to tile the data section:
// in offset order each begins where the one before ends, from 0 to its
// size, with no byte shared and none left over.
void checkTiling(const std::map<std::string, SafetensorsFile::TensorInfo> &tensors, uint64_t dataSize,
                 const std::string &source) {
  std::vector<std::pair<const std::string *, const SafetensorsFile::TensorInfo *>> ordered;
  for (const auto &[name, info] : tensors)
    ordered.emplace_back(&name, &info);
  std::sort(ordered.begin(), ordered.end(), [](const auto &a, const auto &b) {
    return std::tie(a.second->begin, a.second->end) < std::tie(b.second->begin, b.second->end);
  });
  // Overlaps first (two tensors sharing bytes), then gaps and what is left.
  for (size_t i = 1; i < ordered.size(); ++i) {
    const auto &[previous, before] = ordered[i - 1];
    const auto &[name, info] = ordered[i];
    if (info->begin < before->end)
      fail("{}: tensors '{}' and '{}' overlap: their data_offsets are {} and {}", source, *previous, *name,
           describeOffsets(before->begin, before->end), describeOffsets(info->begin, info->end));
  }
  uint64_t end = 0;
  const std::string *previous = nullptr;
  for (const auto &[name, info] : ordered) {
    if (info->begin > end)
      fail("{}: bytes {} to {} of the data section belong to no tensor ({}); the tensors must cover it without gaps",
           source, end, info->begin, previous ? "after '" + *previous + "'" : "before '" + *name + "'");
    end = info->end;
    previous = name;
  }
  if (end != dataSize)
    fail("{}: the data section holds {} bytes, but its tensors cover {}; the tensors must cover it exactly", source,
         dataSize, end);
}

} // namespace

SafetensorsFile::Header SafetensorsFile::parseHeader(std::string_view bytes, const std::string &source) {
  if (bytes.size() < 8)
    fail("{}: file holds {} bytes, too few for the 8-byte header length", source, bytes.size());
  uint64_t headerSize = readLittleEndian64(bytes.data());
  uint64_t afterLength = bytes.size() - 8;
  if (headerSize > afterLength)
    fail("{}: header claims {} bytes but the file holds {} after the length", source, headerSize, afterLength);

  Header header;
  header.dataStart = 8 + headerSize;
  uint64_t dataSize = bytes.size() - header.dataStart;
  llvm::json::Value root = parseJson(bytes.substr(8, headerSize), source + " header");
  const llvm::json::Object *entries = root.getAsObject();
  if (!entries)
    fail("{}: header is {}, not a JSON object", source, jsonKindName(root));
  // JSON objects keep one value per key: a name written twice would
  // silently lose a tensor.
  std::set<std::string> seen;
  for (const std::string &key : topLevelKeys(bytes.substr(8, headerSize)))
    if (!seen.insert(key).second)
      fail("{}: the header names {} twice", source, key == "__metadata__" ? key : "tensor '" + key + "'");
  for (const auto &[key, value] : *entries) {
    std::string name = key.str();
    if (name == "__metadata__")
      header.metadata = parseMetadata(value, source);
    else
      header.tensors.emplace(name, parseTensorEntry(value, source, name, dataSize));
  }
  checkTiling(header.tensors, dataSize, source);
  return header;
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<const void> storage, std::string_view bytes, std::string source)
    : storage_(std::move(storage)), source_(std::move(source)) {
  Header header = parseHeader(bytes, source_);
  data_ = bytes.substr(header.dataStart);
  tensors_ = std::move(header.tensors);
  metadata_ = std::move(header.metadata);
}

SafetensorsFile SafetensorsFile::open(const std::string &path) {
  // Mapped, not read: GPT-2's weights are hundreds of megabytes and only the
  // tensors asked for are touched.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    fail("cannot read {}: {}", path, buffer.getError().message());
  std::shared_ptr<const llvm::MemoryBuffer> storage = std::move(*buffer);
  std::string_view bytes(storage->getBufferStart(), storage->getBufferSize());
  return SafetensorsFile(storage, bytes, path);
}

SafetensorsFile SafetensorsFile::fromBytes(std::string bytes, std::string source) {
  auto storage = std::make_shared<const std::string>(std::move(bytes));
  std::string_view view(*storage);
  return SafetensorsFile(storage, view, std::move(source));
}

bool SafetensorsFile::contains(const std::string &name) const { return tensors_.count(name) != 0; }

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  for (const auto &entry : tensors_)
    names.push_back(entry.first);
  return names;
}

const SafetensorsFile::TensorInfo &SafetensorsFile::info(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    fail("{} has no tensor '{}'", source_, name);
  return it->second;
}

HostTensor SafetensorsFile::read(const std::string &name) const {
  const TensorInfo &tensorInfo = info(name);
  // The header check guarantees [begin, end) lies in the data section and
  // holds exactly the shape's elements.
  const char *bytes = data_.data() + tensorInfo.begin;
  const std::string &dtype = tensorInfo.dtype;
  auto copied = [&](DType type) {
    HostTensor tensor(type, tensorInfo.shape);
    if (tensor.byteSize())
      std::memcpy(tensor.data(), bytes, tensor.byteSize());
    return tensor;
  };
  if (dtype == "F32")
    return copied(DType::f32);
  if (dtype == "F64")
    return copied(DType::f64);
  if (dtype == "I32")
    return copied(DType::i32);
  if (dtype == "I64")
    return copied(DType::i64);
  if (dtype == "F16" || dtype == "BF16") {
    HostTensor tensor(DType::f32, tensorInfo.shape);
    if (dtype == "F16")
      widenToFloat<uint16_t>(bytes, tensor, halfToFloat);
    else
      widenToFloat<uint16_t>(bytes, tensor, bfloat16ToFloat);
    return tensor;
  }
  fail("{}: tensor '{}' has dtype {}, which mlpipe cannot read (it reads F32, F16, BF16, F64, I32 and I64)", source_,
       name, dtype);
}

HostTensor SafetensorsFile::readExpecting(const std::string &name, const Shape &expected) const {
  const TensorInfo &tensorInfo = info(name);
  if (tensorInfo.shape != expected)
    fail("{}: tensor '{}' has shape {}, expected {}", source_, name, formatShape(tensorInfo.shape),
         formatShape(expected));
  return read(name);
}

namespace {

const char *safetensorsDtype(DType dtype) {
  switch (dtype) {
  case DType::f32:
    return "F32";
  case DType::f64:
    return "F64";
  case DType::i32:
    return "I32";
  case DType::i64:
    return "I64";
  case DType::f16:
    return "F16";
  case DType::bf16:
    return "BF16";
  case DType::i1:
    return "BOOL";
  case DType::i8:
    return "I8";
  case DType::i16:
    return "I16";
  case DType::u8:
    return "U8";
  case DType::u16:
    return "U16";
  case DType::u32:
    return "U32";
  case DType::u64:
    return "U64";
  }
  return "";
}

} // namespace

void writeSafetensors(const std::string &path, const std::map<std::string, HostTensor> &tensors) {
  // The tensors tile the data section with no gaps, as the format requires;
  // written widest element first (then by name), each stays aligned to its
  // element size.
  std::vector<const std::pair<const std::string, HostTensor> *> order;
  for (const auto &entry : tensors)
    order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(),
                   [](auto *a, auto *b) { return dtypeSize(a->second.dtype()) > dtypeSize(b->second.dtype()); });
  std::string header = "{";
  uint64_t offset = 0;
  for (auto *entry : order) {
    const auto &[name, tensor] = *entry;
    std::string shape = fmt::format("{}", fmt::join(tensor.shape(), ","));
    header += fmt::format("{}\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", name, safetensorsDtype(tensor.dtype()), shape, offset,
                          offset + tensor.byteSize());
    offset += tensor.byteSize();
  }
  header += "}";
  // Spaces pad the header so the data section starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  file += header;
  file.reserve(file.size() + offset);
  for (auto *entry : order)
    file.append(static_cast<const char *>(entry->second.data()), entry->second.byteSize());
  writeOutput(path, file);
}

} // namespace mlpipe
