// frsctl/json_in.cc: recursive-descent JSON reader with byte ranges.
#include "json_in.h"

#include <cstdlib>

namespace frs::ctl {

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  Status Value(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting deeper than 64");
    SkipSpace();
    if (p_ >= t_.size()) return Fail("a value");
    out->begin = p_;
    Status s;
    char c = t_[p_];
    if (c == '{') {
      s = Object(out, depth);
    } else if (c == '[') {
      s = Array(out, depth);
    } else if (c == '"') {
      out->type = JsonValue::Type::kString;
      s = String(&out->text);
    } else if (c == 't' || c == 'f' || c == 'n') {
      s = Literal(out);
    } else {
      s = Number(out);
    }
    out->end = p_;
    return s;
  }

  Status Finish() {
    SkipSpace();
    return p_ == t_.size() ? Status::OK() : Fail("end of input");
  }

 private:
  Status Fail(const char* expected) const {
    return Status::InvalidArgument("bad JSON at byte " + std::to_string(p_) + ": expected " + expected);
  }
  void SkipSpace() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }

  Status Object(JsonValue* out, int depth) {
    out->type = JsonValue::Type::kObject;
    ++p_;
    if (Eat('}')) return Status::OK();
    do {
      SkipSpace();
      if (p_ >= t_.size() || t_[p_] != '"') return Fail("a member name");
      std::string key;
      if (Status s = String(&key); !s.ok()) return s;
      if (!Eat(':')) return Fail("':'");
      JsonValue v;
      if (Status s = Value(&v, depth + 1); !s.ok()) return s;
      out->members.push_back(JsonMember{std::move(key), std::move(v)});
    } while (Eat(','));
    return Eat('}') ? Status::OK() : Fail("',' or '}'");
  }

  Status Array(JsonValue* out, int depth) {
    out->type = JsonValue::Type::kArray;
    ++p_;
    if (Eat(']')) return Status::OK();
    do {
      JsonValue v;
      if (Status s = Value(&v, depth + 1); !s.ok()) return s;
      out->items.push_back(std::move(v));
    } while (Eat(','));
    return Eat(']') ? Status::OK() : Fail("',' or ']'");
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  bool Hex4(uint32_t* v) {
    if (p_ + 4 > t_.size()) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = t_[p_++];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(d);
    }
    return true;
  }

  Status String(std::string* out) {
    ++p_;  // opening quote
    while (p_ < t_.size()) {
      char c = t_[p_++];
      if (c == '"') return Status::OK();
      if (static_cast<unsigned char>(c) < 0x20) return Fail("no control character inside a string");
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (p_ >= t_.size()) break;
      char e = t_[p_++];
      switch (e) {
        case '"': case '\\': case '/': out->push_back(e); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return Fail("four hex digits after \\u");
          if (cp >= 0xd800 && cp < 0xdc00) {
            uint32_t lo;
            if (p_ + 2 > t_.size() || t_[p_] != '\\' || t_[p_ + 1] != 'u') return Fail("a low surrogate");
            p_ += 2;
            if (!Hex4(&lo) || lo < 0xdc00 || lo > 0xdfff) return Fail("a low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default: return Fail("a valid escape");
      }
    }
    return Fail("closing '\"'");
  }

  Status Literal(JsonValue* out) {
    auto take = [&](std::string_view word) {
      if (t_.substr(p_, word.size()) != word) return false;
      p_ += word.size();
      return true;
    };
    if (take("true")) {
      out->type = JsonValue::Type::kBool;
      out->boolean = true;
    } else if (take("false")) {
      out->type = JsonValue::Type::kBool;
    } else if (take("null")) {
      out->type = JsonValue::Type::kNull;
    } else {
      return Fail("a value");
    }
    return Status::OK();
  }

  Status Number(JsonValue* out) {
    size_t start = p_;
    auto digits = [&] {
      size_t d = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      return p_ > d;
    };
    if (p_ < t_.size() && t_[p_] == '-') ++p_;
    if (p_ < t_.size() && t_[p_] == '0') {
      ++p_;
    } else if (!digits()) {
      return Fail("a value");
    }
    if (p_ < t_.size() && t_[p_] == '.') {
      ++p_;
      if (!digits()) return Fail("digits after '.'");
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      if (!digits()) return Fail("exponent digits");
    }
    out->type = JsonValue::Type::kNumber;
    out->text = std::string(t_.substr(start, p_ - start));
    out->number = std::strtod(out->text.c_str(), nullptr);
    return Status::OK();
  }

  std::string_view t_;
  size_t p_ = 0;
};

}  // namespace

Result<JsonValue> ParseJson(std::string_view text) {
  Parser p(text);
  JsonValue v;
  if (Status s = p.Value(&v, 0); !s.ok()) return s;
  if (Status s = p.Finish(); !s.ok()) return s;
  return v;
}

}  // namespace frs::ctl
