// limit/node_json.h: the tiny, strict JSON used by node export and import.
//
// Export writes one object per node; import reads it back. Only what that
// needs: objects, arrays, strings, integers, true/false/null. The reader
// rejects anything else (floats, duplicate keys, trailing bytes, nesting
// deeper than kMaxDepth) with a message naming the byte offset.
//
// Thread safety: values; no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frs/json_writer.h"
#include "frs/status.h"

namespace frs::limit {

// The writer is the public one (frs/json_writer.h), under the name export's
// code has always used.
using frs::JsonWriter;

struct JsonValue {
  enum class Type { kNull, kBool, kInt, kString, kArray, kObject };
  Type type = Type::kNull;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::vector<JsonValue> array;
  // An object's members as parallel lists: std::pair of an incomplete type
  // is not portable (clang rejects it), a vector of one is.
  std::vector<std::string> keys;
  std::vector<JsonValue> values;

  // Member lookup; nullptr when absent or not an object.
  const JsonValue* Find(std::string_view key) const;
};

inline constexpr int kMaxJsonDepth = 8;

Result<JsonValue> ParseJson(std::string_view text);

std::string HexEncode(std::string_view bytes);
bool HexDecode(std::string_view hex, std::string* out);

}  // namespace frs::limit
