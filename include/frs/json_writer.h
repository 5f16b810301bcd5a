// frs/json_writer.h: JSON text as FRS writes it (export lines, frsctl
// --json, the decision log), value by value, with no tree in between.
//
//   frs::JsonWriter j;
//   j.BeginObject().Key("biz").String("login").Key("slots").Int(10).EndObject();
//   std::puts(j.str().c_str());  // {"biz":"login","slots":10}
//
// Strings are escaped once for every writer: '"' and '\' as \" and \\, a
// control character (below 0x20, and DEL) and every byte that is not part of
// well-formed UTF-8 as \u00XX, one escape a byte, so the output is valid
// UTF-8 JSON whatever the input holds. Such a byte reads back as the code
// point of its value (0xFF as U+00FF): a writer that must give bytes back
// exactly writes them as hex beside the text (export's key_hex). Doubles are
// written with enough digits (%.17g) to read back the same value; NaN and
// infinities as null. The bytes are fixed: readers of export lines and of
// frsctl --json already hold them.
//
// Thread safety: a JsonWriter is a value used by one thread; the functions
// are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace frs {

// Appends `s` escaped, without quotes.
void AppendJsonEscaped(std::string_view s, std::string* out);

// Appends `s` escaped, between quotes: a JSON string value.
void AppendJsonString(std::string_view s, std::string* out);

class JsonWriter {
 public:
  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }
  JsonWriter& Key(std::string_view k);
  JsonWriter& String(std::string_view s);  // escaped as AppendJsonString does
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Double(double v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // Inserts already-serialized JSON as one value.
  JsonWriter& Raw(std::string_view json);
  const std::string& str() const { return out_; }
  // The text, moved out without a copy; the writer is spent after it.
  std::string Take() { return std::move(out_); }
  // Room for `bytes` of text, made once: a writer whose length is known
  // about (an export line) grows without copies.
  void Reserve(size_t bytes) { out_.reserve(bytes); }

 private:
  void Separate();
  JsonWriter& Open(char bracket);
  JsonWriter& Close(char bracket);
  std::string out_;
  int depth_ = 0;
  bool first_ = true;  // no value yet at this nesting level
  bool after_key_ = false;
};

}  // namespace frs
