// frsctl/json_out.cc: the JSON text builder behind --json.
#include "json_out.h"

#include <cmath>
#include <cstdio>

namespace frs::ctl {

// Length of a valid UTF-8 sequence starting at s[i], 0 when invalid.
static size_t Utf8Len(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  return n;
}

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = Utf8Len(s, i);
    if (n == 0 || c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
      ++i;
      continue;
    }
    if (c == '"' || c == '\\') out->push_back('\\');
    out->append(s.substr(i, n));
    i += n;
  }
  out->push_back('"');
}

void JsonOut::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_.push_back(',');
    first_.back() = false;
  }
}

JsonOut& JsonOut::Begin() {
  Separate();
  out_.push_back('{');
  first_.push_back(true);
  return *this;
}

JsonOut& JsonOut::End() {
  out_.push_back('}');
  first_.pop_back();
  return *this;
}

JsonOut& JsonOut::BeginArray() {
  Separate();
  out_.push_back('[');
  first_.push_back(true);
  return *this;
}

JsonOut& JsonOut::EndArray() {
  out_.push_back(']');
  first_.pop_back();
  return *this;
}

JsonOut& JsonOut::Key(std::string_view k) {
  Separate();
  AppendJsonString(k, &out_);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonOut& JsonOut::Str(std::string_view v) {
  Separate();
  AppendJsonString(v, &out_);
  return *this;
}

JsonOut& JsonOut::Int(int64_t v) {
  Separate();
  out_ += std::to_string(v);
  return *this;
}

JsonOut& JsonOut::Uint(uint64_t v) {
  Separate();
  out_ += std::to_string(v);
  return *this;
}

JsonOut& JsonOut::Double(double v) {
  Separate();
  if (!std::isfinite(v)) {
    out_ += "null";
    return *this;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out_ += buf;
  return *this;
}

JsonOut& JsonOut::Bool(bool v) {
  Separate();
  out_ += v ? "true" : "false";
  return *this;
}

JsonOut& JsonOut::Null() {
  Separate();
  out_ += "null";
  return *this;
}

JsonOut& JsonOut::Raw(std::string_view json) {
  Separate();
  out_ += json;
  return *this;
}

}  // namespace frs::ctl
