#include "limit/node_json.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "base/json_escape.h"
#include "limit/json_sax.h"

namespace frs::limit {

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (type != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == key) return &values[i];
  }
  return nullptr;
}

namespace {

// Builds a JsonValue from the library's events, refusing what a node line
// never holds: floats, integers outside int64, duplicate members, nesting
// deeper than kMaxJsonDepth.
class NodeReader : public SaxReader {
 public:
  using Type = JsonValue::Type;

  bool null() { return Put(Type::kNull) != nullptr; }
  bool boolean(bool b) {
    JsonValue* v = Put(Type::kBool);
    if (v != nullptr) v->b = b;
    return v != nullptr;
  }
  bool number_integer(int64_t i) {
    JsonValue* v = Put(Type::kInt);
    if (v != nullptr) v->i = i;
    return v != nullptr;
  }
  bool number_unsigned(uint64_t u) {
    if (u > static_cast<uint64_t>(INT64_MAX)) return Refuse("bad integer");
    return number_integer(static_cast<int64_t>(u));
  }
  // The lexer hands integers beyond 64 bits over as floats too.
  bool number_float(double, const std::string& literal) {
    return Refuse(literal.find_first_of(".eE") != std::string::npos ? "only integers are accepted" : "bad integer");
  }
  // Copied, not moved: the lexer's buffer keeps its capacity for the next
  // string, and the copy is allocated once, at its size.
  bool string(std::string& s) {
    JsonValue* v = Put(Type::kString);
    if (v != nullptr) v->s = s;
    return v != nullptr;
  }
  bool start_object(size_t) { return Open(Type::kObject); }
  bool key(std::string& k) {
    JsonValue& o = *open_.back();
    if (o.Find(k) != nullptr) return Refuse("duplicate member '" + k + "'");
    o.keys.push_back(std::move(k));
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(size_t) { return Open(Type::kArray); }
  bool end_array() { return Close(); }

  JsonValue root;

 private:
  // Places a new value: the root, an array's next item, or the value of the
  // member whose key() came last. A parent's lists only grow once the child
  // is closed, so the pointers in open_ stay valid.
  JsonValue* Put(Type t) {
    if (open_.size() > static_cast<size_t>(kMaxJsonDepth)) {
      Refuse("nested too deeply");
      return nullptr;
    }
    JsonValue* v = &root;
    if (!open_.empty()) {
      JsonValue& parent = *open_.back();
      std::vector<JsonValue>& list = parent.type == Type::kArray ? parent.array : parent.values;
      v = &list.emplace_back();
    }
    v->type = t;
    return v;
  }
  bool Open(Type t) {
    JsonValue* v = Put(t);
    if (v == nullptr) return false;
    // A node line's object has about a dozen members, a rule's three: room
    // for them up front instead of growing (and moving the values) 1, 2, 4...
    if (t == Type::kObject) {
      const size_t room = open_.empty() ? 16 : 4;
      v->keys.reserve(room);
      v->values.reserve(room);
    }
    open_.push_back(v);
    return true;
  }
  bool Close() {
    open_.pop_back();
    return true;
  }

  std::vector<JsonValue*> open_;
};

}  // namespace

Result<JsonValue> ParseJson(std::string_view text) {
  NodeReader r;
  if (Status s = ParseWith(text, &r); !s.ok()) return s;
  return std::move(r.root);
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
  out->reserve(hex.size() / 2);
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
