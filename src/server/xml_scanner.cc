#include "server/xml_scanner.h"

#include <endian.h>

#include <array>
#include <bit>
#include <cstring>

#include "server/request_attrs.h"

namespace frs::server {

namespace {

// XML's whitespace, as pugixml counts it between markup.
inline bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// What a byte of an attribute value is to the scanner. kStop ends the plain
// run: either quote, '&' and '<' (not the scanner's), and every byte that
// starts a control character (C0, DEL, and 0xC2, the lead byte of C1 in
// UTF-8; 0xC2 also leads harmless characters such as U+00A0, which take the
// slow path). kHigh, any other byte above 0x7F, is text but makes the value
// more than printable ASCII (a key is then checked byte by byte). One table
// lookup per byte, and the values the scanner passes on need no HasControl
// pass of their own.
enum ByteClass : uint8_t { kText = 0, kStop = 1, kHigh = 2 };
constexpr auto kValueBytes = [] {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = kStop;
  for (int c = 0x80; c < 0x100; ++c) t[c] = kHigh;
  t['"'] = t['\''] = t['&'] = t['<'] = t[0x7f] = t[0xc2] = kStop;
  return t;
}();

// The bytes of `w` (eight of a value, little-endian) that kValueBytes calls
// kStop or kHigh, each marked by its 0x80 bit. The lowest mark is exact: the
// subtractions borrow only toward higher bytes, so a false mark can only
// follow a true one, and the scan stops at the first.
inline uint64_t StopOrHighBytes(uint64_t w) {
  constexpr uint64_t k01 = 0x0101010101010101, k80 = 0x8080808080808080;
  auto zero = [](uint64_t x) { return (x - k01) & ~x & k80; };
  const uint64_t control = (w - 0x20 * k01) & ~w & k80;  // below 0x20
  return control | (w & k80) | zero(w ^ ('"' * k01)) | zero(w ^ ('\'' * k01)) | zero(w ^ ('&' * k01)) |
         zero(w ^ ('<' * k01)) | zero(w ^ (0x7f * k01));
}

// The three names of nearly every attribute, with their '=', as one
// little-endian word each: recognized by one load and compare.
constexpr uint32_t Word4(const char (&s)[5]) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[0])) | static_cast<uint32_t>(static_cast<uint8_t>(s[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[3])) << 24;
}

// A batch member's bytes from just after `<request` to just past its key's
// opening quote, and what those bytes had made of it (see RequestRest).
struct KeyPrefix {
  const char* at = nullptr;
  size_t len = 0;  // 0: none yet
  char quote = '"';
  WireRequest req;
  RequestAttrs attrs{&req};
};

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
  // `name="` or `name='` right here: a lowercase name, then '=' and a quote
  // with no space around them. Leaves the scanner on the value's first byte.
  [[gnu::always_inline]] bool AttrStart(AttrName* which, std::string_view* name, char* quote) {
    const char* p = p_;
    const char* const end = end_;
    const char* const n = p;
    uint32_t w = 0;
    if (end - p >= 4) std::memcpy(&w, p, 4);  // little-endian, as Word4 builds
    if (w == Word4("cmd=")) *which = AttrName::kCmd;
    else if (w == Word4("biz=")) *which = AttrName::kBiz;
    else if (w == Word4("key=")) *which = AttrName::kKey;
    else *which = AttrName::kOther;
    if (*which != AttrName::kOther) {
      p += 3;
    } else {
      while (p < end && *p >= 'a' && *p <= 'z') ++p;
      if (p == n || end - p < 2 || *p != '=') return false;
      *which = AttrNameOf(std::string_view(n, static_cast<size_t>(p - n)));
    }
    *name = std::string_view(n, static_cast<size_t>(p - n));
    if (end - p < 2) return false;
    *quote = *++p;
    if (*quote != '"' && *quote != '\'') return false;
    p_ = p + 1;
    return true;
  }

  // A value up to its closing `quote`, and past it: no '&' (no entity to
  // decode), no '<' (which XML forbids there), no control character.
  // `ascii`: the value is printable ASCII.
  [[gnu::always_inline]] bool Value(char quote, std::string_view* value, bool* ascii) {
    const char* p = p_;
    const char* const end = end_;
    const char* const v = p;
    uint8_t seen = kText;
    for (;;) {
      // To the next byte that is not plain text: eight at a time while
      // eight remain (keys are often longer than a word), then one by one.
      if (end - p >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        const uint64_t marks = StopOrHighBytes(le64toh(w));
        if (marks == 0) {
          p += 8;
          continue;
        }
        p += std::countr_zero(marks) / 8;
      } else {
        while (p < end && kValueBytes[static_cast<unsigned char>(*p)] == kText) ++p;
        if (p == end) return false;
      }
      const uint8_t c = kValueBytes[static_cast<unsigned char>(*p)];
      if (c == kHigh) {
        seen = kHigh;
        ++p;
        continue;
      }
      if (*p == quote) break;
      if (*p != '"' && *p != '\'') return false;  // the other quote is text
      ++p;
    }
    *value = std::string_view(v, static_cast<size_t>(p - v));
    *ascii = seen == kText;
    p_ = p + 1;  // past the closing quote
    return true;
  }

  // The rest of an element whose `<request` was just read: attributes,
  // then "/>". Fills `r`. With `memo` (a batch's members, in order): a
  // member whose bytes up to its key's value are the previous member's
  // takes that member's attributes before the key as they were, and only
  // its key and what follows it are read. The members of a batch mostly
  // differ in their keys alone, and the bytes before a key decide
  // everything read before it (each scan stops inside them), so the result
  // is the one reading them again would give.
  bool RequestRest(WireRequest* r, KeyPrefix* memo) {
    const char* const start = p_;
    RequestAttrs attrs(r);
    ProtocolError ignored;  // any error: pugixml's path words it
    if (memo != nullptr && memo->len > 0 && static_cast<size_t>(end_ - p_) >= memo->len &&
        std::memcmp(p_, memo->at, memo->len) == 0) {
      *r = memo->req;
      attrs = RequestAttrs(memo->attrs, r);
      p_ += memo->len;
      std::string_view value;
      bool ascii;
      if (!Value(memo->quote, &value, &ascii) || !attrs.AddPlain(AttrName::kKey, "key", value, ascii, &ignored))
        return false;
    }
    for (;;) {
      const bool ws = SkipWs();
      if (Eat("/>")) return attrs.Finish(&ignored);
      AttrName which;
      std::string_view name, value;
      char quote;
      bool ascii;
      if (!ws || !AttrStart(&which, &name, &quote)) return false;
      if (which == AttrName::kKey && memo != nullptr) {
        memo->at = start;
        memo->len = static_cast<size_t>(p_ - start);
        memo->quote = quote;
        memo->req = *r;
        memo->attrs = RequestAttrs(attrs, &memo->req);
      }
      if (!Value(quote, &value, &ascii) || !attrs.AddPlain(which, name, value, ascii, &ignored)) return false;
    }
  }

  // `<batch` was read: its one optional attribute and '>'.
  bool BatchRest(bool* compact) {
    if (Eat(">")) return true;
    if (!SkipWs()) return false;
    if (!Eat(">")) {
      AttrName which;
      std::string_view name, value;
      char quote;
      bool ascii;
      if (!AttrStart(&which, &name, &quote) || name != "answer" || !Value(quote, &value, &ascii)) return false;
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
    if (!s.NameEnds() || !s.RequestRest(&r, nullptr)) return false;
    s.SkipWs();
    if (!s.AtEnd()) return false;
    out->push_back(r);
    return true;
  }
  if (!s.Eat("<batch") || !s.BatchRest(compact)) return false;
  *is_batch = true;
  KeyPrefix memo;
  for (;;) {
    s.SkipWs();
    if (s.Eat("</batch>")) break;
    if (!s.Eat("<request") || !s.NameEnds()) return false;
    if (out->size() >= max_batch) return false;
    // Filled where it stays (a failure discards the whole vector).
    WireRequest& r = out->emplace_back();
    if (!s.RequestRest(&r, &memo) || r.cmd == Cmd::kStats) return false;
  }
  s.SkipWs();
  return s.AtEnd() && !out->empty();
}

}  // namespace frs::server
