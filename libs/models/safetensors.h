// SafetensorsFile: read-only access to Hugging Face .safetensors weights.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
//   {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"key": "value", ...}}
// then the data section; offsets count from its start. The whole header is
// checked when the file is opened, so that read() can only fail on a dtype
// mlpipe does not handle, and nothing is allocated for a tensor whose
// claimed size the file does not hold. The file is memory-mapped.
#pragma once

#include "support/host_tensor.h"
#include "support/tensor_types.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mlpipe {

class SafetensorsFile {
public:
  struct TensorInfo {
    std::string dtype; // as written in the file: "F32", "BF16", ...
    Shape shape;
    uint64_t begin = 0, end = 0; // byte range within the data section
  };

  // Throws mlpipe::Error naming the path if the file is unreadable or malformed.
  static SafetensorsFile open(const std::string &path);
  // The same over bytes in memory; `source` names them in messages.
  static SafetensorsFile fromBytes(std::string bytes, std::string source);

  const std::string &source() const { return source_; }
  bool contains(const std::string &name) const;
  // Tensor names in sorted order ("__metadata__" is not one).
  std::vector<std::string> names() const;
  const TensorInfo &info(const std::string &name) const;
  // The "__metadata__" entries (empty if the file has none).
  const std::map<std::string, std::string> &metadata() const { return metadata_; }

  // The tensor's data: F32 as f32, F16 and BF16 widened to f32, F64 as f64,
  // I32 and I64 as they are. Other dtypes are refused by name.
  HostTensor read(const std::string &name) const;
  // read(), refusing a tensor whose shape is not `expected`.
  HostTensor readExpecting(const std::string &name, const Shape &expected) const;

private:
  struct Header {
    std::map<std::string, TensorInfo> tensors;
    std::map<std::string, std::string> metadata;
    uint64_t dataStart = 0; // 8 + N
  };
  // Parses and checks the header of a whole file held in `bytes`.
  static Header parseHeader(std::string_view bytes, const std::string &source);

  SafetensorsFile(std::shared_ptr<const void> storage, std::string_view bytes, std::string source);

  std::shared_ptr<const void> storage_; // keeps the mapping or buffer alive
  std::string_view data_;               // the data section
  std::string source_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (f32, f64, i32, i64) as a .safetensors file, atomically,
// names in sorted order and each tensor's data 8-byte aligned.
void writeSafetensors(const std::string &path, const std::map<std::string, HostTensor> &tensors);

} // namespace mlpipe
