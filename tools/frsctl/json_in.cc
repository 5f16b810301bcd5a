// frsctl/json_in.cc: JsonValue built from nlohmann::json's SAX parser, with
// the byte range of every value (frsctl's own reader of what it reads).
#include "json_in.h"

#include <cstdint>
#include <exception>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "frs/read_position.h"

namespace frs::ctl {

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

namespace {

constexpr size_t kMaxDepth = 64;

// nlohmann::json's SAX events, with the byte range of every value. The
// library reports a value once its last byte has been read (a number's,
// once the byte after it has been read too); the handler works out where it
// began from the text itself.
class RangeReader {
 public:
  using Type = JsonValue::Type;

  RangeReader(std::string_view text, std::span<const std::string_view> wanted = {})
      : text_(text), read_(text.data()), wanted_(wanted) {}

  // Runs the parse. A syntax error and a refusal alike are InvalidArgument
  // naming the byte offset; nothing thrown leaves it.
  Status Parse() {
    try {
      if (nlohmann::json::sax_parse(ReadPositionIterator(text_.data(), &read_),
                                    ReadPositionIterator(text_.data() + text_.size(), &read_), this))
        return Status::OK();
    } catch (const std::exception& e) {
      // Only bad_alloc or a library surprise: syntax errors reach parse_error.
      return Status::InvalidArgument(std::string("JSON could not be read: ") + e.what());
    }
    return Status::InvalidArgument("JSON at byte " + std::to_string(at_) + ": " + why_);
  }
  // True when the parse stopped because every wanted member had been read.
  bool stopped() const { return stopped_; }

  bool null() { return Scalar(Type::kNull, 4) != nullptr && !Done(); }
  bool boolean(bool b) {
    JsonValue* v = Scalar(Type::kBool, b ? 4 : 5);
    if (v == nullptr) return false;
    v->boolean = b;
    return !Done();
  }
  bool number_integer(int64_t) { return Number(); }
  bool number_unsigned(uint64_t) { return Number(); }
  bool number_float(double, const std::string&) { return Number(); }
  bool string(std::string& s) {
    size_t end = ReadTo(), begin = end - 1;
    // The opening quote: the first '"' back from the closing one that no
    // backslash escapes (an escaped one has an odd run of them before it).
    for (;;) {
      begin = text().rfind('"', begin - 1);
      size_t run = 0;
      while (run < begin && text()[begin - 1 - run] == '\\') ++run;
      if (run % 2 == 0) break;
    }
    JsonValue* v = Put(Type::kString, begin, end);
    if (v == nullptr) return false;
    v->text = s;  // a copy: the lexer's buffer keeps its capacity
    return !Done();
  }
  bool start_object(size_t) { return Open(Type::kObject); }
  bool key(std::string& k) {
    open_.back()->members.push_back(JsonMember{std::move(k), JsonValue{}});
    return true;
  }
  bool end_object() { return Close() && !Done(); }
  bool start_array(size_t) { return Open(Type::kArray); }
  bool end_array() { return Close() && !Done(); }
  bool binary(nlohmann::json::binary_t&) { return Refuse("binary values are not JSON"); }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 8:
    // syntax error ...": what follows the column is the message.
    std::string_view what = e.what();
    size_t column = what.find("column ");
    size_t colon = column == std::string_view::npos ? column : what.find(": ", column);
    why_ = std::string(colon == std::string_view::npos ? what : what.substr(colon + 2));
    at_ = position > 0 ? position - 1 : 0;
    return false;
  }

  JsonValue root;

 private:
  // Stops the parse, naming what is wrong at the byte just read.
  bool Refuse(std::string why) {
    why_ = std::move(why);
    at_ = ReadTo() > 0 ? ReadTo() - 1 : 0;
    return false;
  }
  // How many bytes of the text the lexer has read. A number's event comes
  // after the lexer has also read the byte that ended it (when there is one).
  size_t ReadTo() const { return static_cast<size_t>(read_ - text_.data()); }
  std::string_view text() const { return text_; }

  JsonValue* Put(Type t, size_t begin, size_t end) {
    if (open_.size() > kMaxDepth) {
      Refuse("nesting deeper than 64");
      return nullptr;
    }
    JsonValue* v = &root;
    if (!open_.empty()) {
      JsonValue& parent = *open_.back();
      if (parent.type == Type::kArray) {
        parent.items.emplace_back();
        v = &parent.items.back();
      } else {
        v = &parent.members.back().value;  // the member key() opened
      }
    }
    v->type = t;
    v->begin = begin;
    v->end = end;
    return v;
  }
  JsonValue* Scalar(Type t, size_t len) { return Put(t, ReadTo() - len, ReadTo()); }
  bool Number() {
    size_t end = ReadTo();
    auto in_number = [&](size_t i) {
      return std::string_view("0123456789+-.eE").find(text()[i]) != std::string_view::npos;
    };
    if (!in_number(end - 1)) --end;  // the byte that ended it
    size_t begin = end;
    while (begin > 0 && in_number(begin - 1)) --begin;
    JsonValue* v = Put(Type::kNumber, begin, end);
    if (v == nullptr) return false;
    v->text = std::string(text().substr(begin, end - begin));
    v->number = std::strtod(v->text.c_str(), nullptr);
    return !Done();
  }
  bool Open(Type t) {
    JsonValue* v = Put(t, ReadTo() - 1, 0);
    if (v != nullptr) open_.push_back(v);
    return v != nullptr;
  }
  bool Close() {
    open_.back()->end = ReadTo();
    open_.pop_back();
    return true;
  }

  // After a value: whether it completed the last wanted member of the
  // top-level object (which then stops the parse).
  bool Done() {
    if (wanted_.empty() || open_.size() != 1 || root.type != Type::kObject) return false;
    const std::string& name = root.members.back().key;
    for (std::string_view w : wanted_) found_ += w == name && root.Find(name) == &root.members.back().value;
    stopped_ = found_ == wanted_.size();
    return stopped_;
  }

  std::string_view text_;
  const char* read_;
  std::string why_;
  size_t at_ = 0;
  std::vector<JsonValue*> open_;
  std::span<const std::string_view> wanted_;
  size_t found_ = 0;
  bool stopped_ = false;
};

}  // namespace

Result<JsonValue> ParseJson(std::string_view text) {
  RangeReader r(text);
  if (Status s = r.Parse(); !s.ok()) return s;
  return std::move(r.root);
}

Result<JsonValue> ParseLeadingMembers(std::string_view text, std::initializer_list<std::string_view> wanted) {
  RangeReader r(text, std::span<const std::string_view>(wanted.begin(), wanted.size()));
  if (Status s = r.Parse(); !s.ok() && !r.stopped()) return s;
  return std::move(r.root);
}

}  // namespace frs::ctl
