#include "limit/node_json.h"

#include <charconv>

namespace frs::limit {

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_) out_ += ',';
  first_ = false;
}

JsonWriter& JsonWriter::BeginObject() {
  Separate();
  out_ += '{';
  first_ = true;
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  first_ = false;
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Separate();
  out_ += '[';
  first_ = true;
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  first_ = false;
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
  out_ += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out_ += '\\';
      out_ += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out_ += "\\u00";
      out_ += kHex[c >> 4];
      out_ += kHex[c & 15];
    } else {
      out_ += static_cast<char>(c);
    }
  }
  out_ += '"';
  return *this;
}
JsonWriter& JsonWriter::Int(int64_t v) {
  Separate();
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::Bool(bool v) {
  Separate();
  out_ += v ? "true" : "false";
  return *this;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (type != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == key) return &values[i];
  }
  return nullptr;
}

namespace {

class Reader {
 public:
  explicit Reader(std::string_view t) : t_(t) {}

  Result<JsonValue> Run() {
    JsonValue v;
    Status s = Value(&v, 0);
    if (!s.ok()) return s;
    Ws();
    if (i_ != t_.size()) return Fail("unexpected bytes after the value");
    return v;
  }

 private:
  Status Fail(const std::string& what) const {
    return Status::InvalidArgument("JSON at byte " + std::to_string(i_) + ": " + what);
  }
  void Ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool Lit(std::string_view w) {
    if (t_.substr(i_, w.size()) != w) return false;
    i_ += w.size();
    return true;
  }

  Status Value(JsonValue* v, int depth) {
    if (depth > kMaxJsonDepth) return Fail("nested too deeply");
    Ws();
    if (i_ >= t_.size()) return Fail("unexpected end");
    char c = t_[i_];
    if (c == '{') return Object(v, depth);
    if (c == '[') return Array(v, depth);
    if (c == '"') {
      v->type = JsonValue::Type::kString;
      return Str(&v->s);
    }
    if (Lit("true")) {
      v->type = JsonValue::Type::kBool;
      v->b = true;
      return Status::OK();
    }
    if (Lit("false")) {
      v->type = JsonValue::Type::kBool;
      return Status::OK();
    }
    if (Lit("null")) return Status::OK();
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t begin = i_;
      if (c == '-') ++i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
      if (i_ < t_.size() && (t_[i_] == '.' || t_[i_] == 'e' || t_[i_] == 'E')) return Fail("only integers are accepted");
      auto [p, ec] = std::from_chars(t_.data() + begin, t_.data() + i_, v->i);
      if (ec != std::errc() || p != t_.data() + i_) return Fail("bad integer");
      v->type = JsonValue::Type::kInt;
      return Status::OK();
    }
    return Fail(std::string("unexpected '") + c + "'");
  }

  Status Object(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kObject;
    ++i_;
    Ws();
    if (i_ < t_.size() && t_[i_] == '}') {
      ++i_;
      return Status::OK();
    }
    for (;;) {
      Ws();
      if (i_ >= t_.size() || t_[i_] != '"') return Fail("expected a member name");
      std::string key;
      Status s = Str(&key);
      if (!s.ok()) return s;
      if (v->Find(key)) return Fail("duplicate member '" + key + "'");
      Ws();
      if (i_ >= t_.size() || t_[i_] != ':') return Fail("expected ':'");
      ++i_;
      JsonValue member;
      s = Value(&member, depth + 1);
      if (!s.ok()) return s;
      v->keys.push_back(std::move(key));
      v->values.push_back(std::move(member));
      Ws();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == '}') {
        ++i_;
        return Status::OK();
      }
      return Fail("expected ',' or '}'");
    }
  }

  Status Array(JsonValue* v, int depth) {
    v->type = JsonValue::Type::kArray;
    ++i_;
    Ws();
    if (i_ < t_.size() && t_[i_] == ']') {
      ++i_;
      return Status::OK();
    }
    for (;;) {
      JsonValue item;
      Status s = Value(&item, depth + 1);
      if (!s.ok()) return s;
      v->array.push_back(std::move(item));
      Ws();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == ']') {
        ++i_;
        return Status::OK();
      }
      return Fail("expected ',' or ']'");
    }
  }

  bool Hex4(uint32_t* out) {
    if (i_ + 4 > t_.size()) return false;
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = t_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else return false;
    }
    *out = v;
    return true;
  }

  static void PutUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xc0 | cp >> 6);
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xe0 | cp >> 12);
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      *out += static_cast<char>(0xf0 | cp >> 18);
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  Status Str(std::string* out) {
    ++i_;  // opening quote
    for (;;) {
      if (i_ >= t_.size()) return Fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(t_[i_++]);
      if (c == '"') return Status::OK();
      if (c < 0x20) return Fail("control byte in a string");
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (i_ >= t_.size()) return Fail("unterminated escape");
      char e = t_[i_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return Fail("bad \\u escape");
          if (cp >= 0xd800 && cp < 0xdc00) {
            uint32_t lo;
            if (!Lit("\\u") || !Hex4(&lo) || lo < 0xdc00 || lo >= 0xe000) return Fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return Fail("unpaired surrogate");
          }
          PutUtf8(cp, out);
          break;
        }
        default: return Fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

Result<JsonValue> ParseJson(std::string_view text) { return Reader(text).Run(); }

std::string_view Utf8Prefix(std::string_view s) {
  size_t i = 0, good = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) break;
    bool ok = true;
    for (size_t k = 1; k < len; ++k) ok = ok && (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (!ok) break;
    i += len;
    good = i;
  }
  return s.substr(0, good);
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool HexDecode(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

}  // namespace frs::limit
