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

#include "frs/status.h"

namespace frs::limit {

// Builds JSON text value by value, with no tree in between (export writes a
// million nodes). Not nlohmann's dump(): the bytes are fixed by what readers
// of export lines and of frsctl --json already hold (control bytes as
// \u00XX, 0x7f escaped, doubles as %.17g), which dump() writes otherwise.
//
// Usage: JsonWriter j; j.BeginObject().Key("slots").Int(10).EndObject(); j.str().
class JsonWriter {
 public:
  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }
  JsonWriter& Key(std::string_view k);
  // Escaped as AppendJsonString (base/json_escape.h) does.
  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  // Enough digits to read back the same double; NaN and infinities as null.
  JsonWriter& Double(double v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Inserts already-serialized JSON as one value.
  JsonWriter& Raw(std::string_view json);
  const std::string& str() const { return out_; }

 private:
  void Separate();
  JsonWriter& Open(char bracket);
  JsonWriter& Close(char bracket);
  std::string out_;
  int depth_ = 0;
  bool first_ = true;  // no value yet at this nesting level
  bool after_key_ = false;
};

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
