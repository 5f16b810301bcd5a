// frsctl/json_in.h: JSON (RFC 8259, read by nlohmann::json's parser) for
// import lines and for the tests' checks of --json output.
//
// Every value remembers the byte range it came from, so a caller can splice a
// replacement into the original text without re-serializing the rest (import
// --rename-biz rewrites one member and leaves every other byte as exported).
//
// Thread safety: values; parsing touches no global state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frs/status.h"

namespace frs::ctl {

struct JsonMember;

struct JsonValue {
  enum class Type : uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;              // decoded string, or the number's literal text
  std::vector<JsonValue> items;  // kArray
  // kObject, in order. Not a vector of std::pair: a pair needs JsonValue
  // complete where the vector is declared, and clang's check of that failed
  // every clang build of frsctl (GCC let it through).
  std::vector<JsonMember> members;
  size_t begin = 0, end = 0;  // byte range in the parsed text

  // The member named `key` of an object, or nullptr.
  const JsonValue* Find(std::string_view key) const;
  bool IsString() const { return type == Type::kString; }
  bool IsNumber() const { return type == Type::kNumber; }
  bool IsObject() const { return type == Type::kObject; }
  bool IsArray() const { return type == Type::kArray; }
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// Parses exactly one JSON value (surrounding whitespace allowed). Errors name
// the byte offset and what was expected.
Result<JsonValue> ParseJson(std::string_view text);

// As ParseJson, but stops as soon as the top-level object's members named in
// `wanted` have all been read (the object then ends there, end unset): for a
// caller that needs a line's leading members and leaves the check of the
// whole to another reader (import's biz policy; the engine reads the line).
Result<JsonValue> ParseLeadingMembers(std::string_view text, std::initializer_list<std::string_view> wanted);

}  // namespace frs::ctl
