// frsctl/json_out.h: builds one JSON object (or array) as text, for --json.
//
// Usage: JsonOut j; j.Begin(); j.Key("slots").Int(10); j.End(); j.str().
// Keys and string values are escaped; invalid UTF-8 bytes become \u00XX so
// the output always parses. Doubles are printed with enough digits to
// round-trip.
//
// Thread safety: a value used by one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace frs::ctl {

class JsonOut {
 public:
  JsonOut& Begin();        // {
  JsonOut& End();          // }
  JsonOut& BeginArray();   // [
  JsonOut& EndArray();     // ]
  JsonOut& Key(std::string_view k);
  JsonOut& Str(std::string_view v);
  JsonOut& Int(int64_t v);
  JsonOut& Uint(uint64_t v);
  JsonOut& Double(double v);
  JsonOut& Bool(bool v);
  JsonOut& Null();
  // Inserts already-serialized JSON as one value.
  JsonOut& Raw(std::string_view json);
  const std::string& str() const { return out_; }

 private:
  void Separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no member written yet
  bool after_key_ = false;
};

// Appends `s` as a JSON string literal (with quotes) to `out`.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace frs::ctl
