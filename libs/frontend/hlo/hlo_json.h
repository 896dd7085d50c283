// The JSON of an instruction's backend_config (XLA writes its protos there
// as JSON: a loop's known_trip_count, a cuBLAS call's gemm_backend_config,
// a cuDNN call's cudnn_conv_backend_config), read into a small tree with the
// place of every value in the file.
#pragma once

#include "frontend/hlo/hlo_cursor.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlpipe::fe::hlo {

struct JsonMember;

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  Location loc;
  double number = 0; // Number, and Bool as 0 or 1
  std::string text;  // String, unescaped
  std::vector<Json> items;
  std::vector<JsonMember> members; // in the order written

  // The member named `key` of an object (the last one written), or nullptr.
  const Json *find(std::string_view key) const;
  // A number, or a string holding one (protobuf's JSON writes 64-bit
  // integers as strings: "n":"6"); nullopt for anything else.
  std::optional<double> numeric() const;
};

// One member of an object: its name and value (a struct of its own, not a
// std::pair, which may not hold the still-incomplete Json).
struct JsonMember {
  std::string name;
  Json value;
};

// One JSON value at `in`; fails with the file's position on anything else,
// or on values nested deeper than kMaxNesting.
Json parseJson(Cursor &in, int depth = 0);

} // namespace mlpipe::fe::hlo
