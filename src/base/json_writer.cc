// base/json_writer.cc: frs::JsonWriter (include/frs/json_writer.h).
#include "frs/json_writer.h"

#include <cmath>
#include <cstdio>

#include "base/decimal.h"

namespace frs {

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_) out_ += ',';
  first_ = depth_ == 0;  // values side by side at the top level are not a list
}

JsonWriter& JsonWriter::Open(char bracket) {
  Separate();
  out_ += bracket;
  first_ = true;
  ++depth_;
  return *this;
}

JsonWriter& JsonWriter::Close(char bracket) {
  out_ += bracket;
  first_ = --depth_ == 0;
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view k) {
  String(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  Separate();
  AppendJsonString(s, &out_);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  char buf[kMaxDecimalChars];
  return Raw(std::string_view(buf, static_cast<size_t>(WriteDecimal(buf, v) - buf)));
}
JsonWriter& JsonWriter::Uint(uint64_t v) {
  char buf[kMaxDecimalChars];
  return Raw(std::string_view(buf, static_cast<size_t>(WriteDecimal(buf, v) - buf)));
}

JsonWriter& JsonWriter::Double(double v) {
  if (!std::isfinite(v)) return Null();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return Raw(buf);
}

JsonWriter& JsonWriter::Bool(bool v) { return Raw(v ? "true" : "false"); }
JsonWriter& JsonWriter::Null() { return Raw("null"); }

JsonWriter& JsonWriter::Raw(std::string_view json) {
  Separate();
  out_ += json;
  return *this;
}

}  // namespace frs
