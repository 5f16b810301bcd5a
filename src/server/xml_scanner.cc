#include "server/xml_scanner.h"

#include <array>
#include <cstring>

#include "server/request_attrs.h"

namespace frs::server {

namespace {

// XML's whitespace, as pugixml counts it between markup.
inline bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// The bytes that end the plain run of an attribute value: either quote,
// '&' and '<' (not the scanner's), and every byte that starts a control
// character (C0, DEL, and 0xC2, the lead byte of C1 in UTF-8; 0xC2 also
// leads harmless characters such as U+00A0, which take the slow path).
// One table lookup per byte, and the values the scanner passes on need no
// HasControl pass of their own.
constexpr auto kValueStops = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  t['"'] = t['\''] = t['&'] = t['<'] = t[0x7f] = t[0xc2] = true;
  return t;
}();

class Scanner {
 public:
  explicit Scanner(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  bool AtEnd() const { return p_ == end_; }
  // Skips whitespace; true when there was some.
  bool SkipWs() {
    const char* p = p_;
    while (p < end_ && IsWs(*p)) ++p;
    const bool some = p != p_;
    p_ = p;
    return some;
  }
  template <size_t N>
  bool Eat(const char (&lit)[N]) {
    constexpr size_t n = N - 1;
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, lit, n) != 0) return false;
    p_ += n;
    return true;
  }
  // `name="value"` or `name='value'` right here: a lowercase name, '='
  // with no space around it, a value without '&' (no entity to decode),
  // '<' (which XML forbids there) or a control character. The loops cost
  // ~6 instructions a byte (callgrind); a word-at-a-time scan could do better.
  bool Attr(std::string_view* name, std::string_view* value) {
    const char* p = p_;
    const char* const end = end_;
    const char* const n = p;
    while (p < end && *p >= 'a' && *p <= 'z') ++p;
    if (p == n || end - p < 2 || *p != '=') return false;
    *name = std::string_view(n, static_cast<size_t>(p - n));
    const char quote = *++p;
    if (quote != '"' && quote != '\'') return false;
    const char* const v = ++p;
    for (;;) {
      while (p < end && !kValueStops[static_cast<unsigned char>(*p)]) ++p;
      if (p == end) return false;
      if (*p == quote) break;
      if (*p != '"' && *p != '\'') return false;  // the other quote is text
      ++p;
    }
    *value = std::string_view(v, static_cast<size_t>(p - v));
    p_ = p + 1;  // past the closing quote
    return true;
  }

  // The rest of an element whose `<request` was just read: attributes,
  // then "/>". Fills `r`.
  bool RequestRest(WireRequest* r) {
    RequestAttrs attrs(r);
    ProtocolError ignored;  // any error: pugixml's path words it
    for (;;) {
      const bool ws = SkipWs();
      if (Eat("/>")) return attrs.Finish(&ignored);
      std::string_view name, value;
      if (!ws || !Attr(&name, &value) || !attrs.AddPlain(name, value, &ignored)) return false;
    }
  }

  // `<batch` was read: its one optional attribute and '>'.
  bool BatchRest(bool* compact) {
    if (Eat(">")) return true;
    if (!SkipWs()) return false;
    if (!Eat(">")) {
      std::string_view name, value;
      if (!Attr(&name, &value) || name != "answer") return false;
      if (value == "compact") *compact = true;
      else if (value != "full") return false;
      SkipWs();
      if (!Eat(">")) return false;
    }
    return true;
  }

  // The next byte is one that may follow an element name.
  bool NameEnds() const { return p_ < end_ && (IsWs(*p_) || *p_ == '/'); }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace

bool ScanSimpleBody(std::string_view body, uint32_t max_batch, std::vector<WireRequest>* out, bool* is_batch,
                    bool* compact) {
  out->clear();
  *is_batch = false;
  *compact = false;
  Scanner s(body);
  s.SkipWs();
  if (s.Eat("<request")) {
    WireRequest r;
    if (!s.NameEnds() || !s.RequestRest(&r)) return false;
    s.SkipWs();
    if (!s.AtEnd()) return false;
    out->push_back(r);
    return true;
  }
  if (!s.Eat("<batch") || !s.BatchRest(compact)) return false;
  *is_batch = true;
  for (;;) {
    s.SkipWs();
    if (s.Eat("</batch>")) break;
    if (!s.Eat("<request") || !s.NameEnds()) return false;
    if (out->size() >= max_batch) return false;
    WireRequest r;
    if (!s.RequestRest(&r) || r.cmd == Cmd::kStats) return false;
    out->push_back(r);
  }
  s.SkipWs();
  return s.AtEnd() && !out->empty();
}

}  // namespace frs::server
