#include "server/request_decoder.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <charconv>
#include <cstring>

#include "frs/key.h"
#include "server/request_attrs.h"
#include "server/xml_scanner.h"

namespace frs::server {

namespace {

inline bool IsXmlWs(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

constexpr size_t kNpos = std::string_view::npos;

// The query string's scans, 16 bytes a step where SSE2 is (every x86-64):
// a settle's or a release's query carries a 24-digit id, and byte loops
// were a tenth of such a request's instructions. The last bytes, fewer than
// 16, go one at a time: a load never reads past the string.

// Where the pair that starts at `p` ends (its '&', or `end`), and its first
// '=' in *eq (left as it is when the pair has none).
inline const char* PairEnd(const char* p, const char* end, const char** eq) {
#if defined(__SSE2__)
  const __m128i amp = _mm_set1_epi8('&'), equals = _mm_set1_epi8('=');
  for (; end - p >= 16; p += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const unsigned amps = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, amp)));
    unsigned eqs = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, equals)));
    if (amps != 0) eqs &= (amps & (0u - amps)) - 1;  // only the '='s before the '&'
    if (*eq == nullptr && eqs != 0) *eq = p + __builtin_ctz(eqs);
    if (amps != 0) return p + __builtin_ctz(amps);
  }
#endif
  for (; p < end && *p != '&'; ++p)
    if (*p == '=' && *eq == nullptr) *eq = p;
  return p;
}

// The offset of the first '%' or '+' of `in`, or in.size().
inline size_t FirstEscape(std::string_view in) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i pct = _mm_set1_epi8('%'), plus = _mm_set1_epi8('+');
  for (; in.size() - i >= 16; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
    const unsigned hits =
        static_cast<unsigned>(_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, pct), _mm_cmpeq_epi8(v, plus))));
    if (hits != 0) return i + static_cast<size_t>(__builtin_ctz(hits));
  }
#endif
  while (i < in.size() && in[i] != '%' && in[i] != '+') ++i;
  return i;
}

// Where the markup that starts at `from` ends: its closing '>' outside quotes
// (for a DOCTYPE, also outside its [...] internal subset), the '<' that
// starts the next markup when a tag lacks its '>', or body.size(). The first
// '<' inside quotes goes to *quoted_lt (kNpos: none).
size_t MarkupEnd(std::string_view body, size_t from, bool doctype, size_t* quoted_lt) {
  char quote = 0;
  int depth = 0;
  *quoted_lt = kNpos;
  size_t j = from;
  for (; j < body.size(); ++j) {
    const char c = body[j];
    if (quote != 0) {
      if (c == quote) quote = 0;
      else if (c == '<' && *quoted_lt == kNpos) *quoted_lt = j;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (doctype && (c == '[' || c == ']')) {
      depth += c == '[' ? 1 : -1;
    } else if (c == '>' && depth <= 0) {
      break;
    } else if (!doctype && c == '<') {
      break;
    }
  }
  return j;
}

// The value of encoding="..." (or '...') in an XML declaration's body; ""
// when it names none, or its value is not quoted.
std::string_view DeclaredEncoding(std::string_view decl, bool* named) {
  const size_t at = decl.find("encoding");
  *named = at != kNpos;
  if (at == kNpos) return {};
  size_t v = at + 8;
  while (v < decl.size() && IsXmlWs(decl[v])) ++v;
  if (v < decl.size() && decl[v] == '=') ++v;
  while (v < decl.size() && IsXmlWs(decl[v])) ++v;
  const char q = v < decl.size() ? decl[v] : 0;
  const size_t close = q == '"' || q == '\'' ? decl.find(q, v + 1) : kNpos;
  return close == kNpos ? std::string_view() : decl.substr(v + 1, close - v - 1);
}

// What pugixml lets through and XML does not: a raw '<' inside an attribute
// value (pugixml keeps it as text), and an XML declaration naming another
// encoding than the UTF-8 the body is read as. The body is walked markup by
// markup; comments, CDATA, processing instructions and a DOCTYPE are stepped
// over whole, and what is malformed otherwise is left to pugixml to report.
bool CheckMarkup(std::string_view body, ProtocolError* err) {
  for (size_t i = body.find('<'); i != kNpos; i = body.find('<', i)) {
    const std::string_view rest = body.substr(i);
    auto skip_to = [&](std::string_view from_here, std::string_view end_mark) {
      const size_t e = body.find(end_mark, i + from_here.size());
      return e == kNpos ? body.size() : e + end_mark.size();
    };
    size_t quoted_lt = kNpos;
    if (rest.starts_with("<!--")) {
      i = skip_to("<!--", "-->");
    } else if (rest.starts_with("<![CDATA[")) {
      i = skip_to("<![CDATA[", "]]>");
    } else if (rest.starts_with("<?")) {
      const size_t end = body.find("?>", i + 2);
      const std::string_view pi = body.substr(i + 2, (end == kNpos ? body.size() : end) - i - 2);
      bool named = false;
      const std::string_view enc =
          pi.starts_with("xml") && pi.size() > 3 && IsXmlWs(pi[3]) ? DeclaredEncoding(pi, &named) : std::string_view();
      const bool utf8 = enc.size() == 5 && (enc[0] | 0x20) == 'u' && (enc[1] | 0x20) == 't' && (enc[2] | 0x20) == 'f' &&
                        enc[3] == '-' && enc[4] == '8';
      if (named && !utf8)
        return Fail(err, 400,
                    "the XML declaration says encoding=\"" + std::string(enc.substr(0, 32)) +
                        "\"; frsd reads UTF-8 only (say UTF-8, or leave the encoding out)");
      i = end == kNpos ? body.size() : end + 2;
    } else if (rest.starts_with("<!")) {
      // A DOCTYPE: its internal subset may hold '<' in quoted literals; what
      // it declares is pugixml's to judge.
      i = MarkupEnd(body, i + 2, /*doctype=*/true, &quoted_lt) + 1;
    } else {
      i = MarkupEnd(body, i + 1, /*doctype=*/false, &quoted_lt);
      if (quoted_lt != kNpos)
        return Fail(err, 400,
                    "a '<' inside an attribute value at byte " + std::to_string(quoted_lt) +
                        " (XML forbids it there: write &lt;)");
    }
  }
  return true;
}

// The first bytes (at most 16, printable ASCII, else "?") of a body whose
// first byte but whitespace and a UTF-8 byte order mark is not '<'; "" for
// a body that starts as XML does (or holds whitespace only).
std::string NotXmlStartText(std::string_view body) {
  if (body.starts_with("\xEF\xBB\xBF")) body.remove_prefix(3);
  const size_t first = body.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || body[first] == '<') return "";
  std::string out;
  for (char c : body.substr(first, 16)) out.push_back(c >= 0x20 && c < 0x7f && c != '\'' ? c : '?');
  return out;
}

// Checks the raw body before pugixml sees it. pugixml keeps values as C
// strings: a NUL byte, or a reference that decodes to one (&#0;), would cut
// a value short, so that key="alice&#0;x" counted on "alice". It also keeps
// an unknown entity (&foo;) as literal text. Both are refused here, as are
// references to characters XML forbids.
bool CheckRawBody(std::string_view body, ProtocolError* err) {
  if (body.find('\0') != std::string_view::npos) return Fail(err, 400, "the body contains a NUL byte");
  for (size_t i = body.find('&'); i != std::string_view::npos; i = body.find('&', i + 1)) {
    const size_t semi = body.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12)
      return Fail(err, 400, "an '&' at byte " + std::to_string(i) + " starts no entity or character reference");
    const std::string_view name = body.substr(i + 1, semi - i - 1);
    if (name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos") continue;
    if (name.empty() || name[0] != '#')
      return Fail(err, 400,
                  "undefined entity &" + std::string(name) +
                      "; (only &amp; &lt; &gt; &quot; &apos; and "
                      "character references are allowed)");
    // XML writes a hexadecimal reference &#x only: pugixml keeps &#X41; as
    // literal text, so key="alice&#X41;" counted on those very bytes.
    const bool hex = name.size() > 1 && name[1] == 'x';
    const std::string_view digits = name.substr(hex ? 2 : 1);
    uint32_t cp = 0;
    auto r = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
    if (digits.empty() || r.ec != std::errc() || r.ptr != digits.data() + digits.size())
      return Fail(err, 400, "bad character reference &" + std::string(name) + ";");
    const bool xml_char = cp == 0x9 || cp == 0xa || cp == 0xd || (cp >= 0x20 && cp <= 0xd7ff) ||
                          (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
    if (!xml_char) return Fail(err, 400, "character reference &" + std::string(name) + "; is not an XML character");
  }
  return CheckMarkup(body, err);
}

// Fills `r` from the attributes of one <request>.
// `*saw_cmd`: the request named its cmd (r->cmd), even when it fails.
bool DecodeOne(const pugi::xml_node& node, WireRequest* r, ProtocolError* err, bool* saw_cmd = nullptr) {
  RequestAttrs attrs(r);
  bool ok = true;
  for (pugi::xml_attribute a = node.first_attribute(); a && ok; a = a.next_attribute())
    ok = attrs.Add(a.name(), a.value(), err);
  ok = ok && attrs.Finish(err);
  if (saw_cmd != nullptr) *saw_cmd = attrs.have_cmd();
  return ok;
}

bool HasStrayContent(const pugi::xml_node& node) {
  for (pugi::xml_node c = node.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_comment) continue;
    if (c.type() == pugi::node_cdata) return true;  // even an empty or blank CDATA section
    if (c.type() == pugi::node_pcdata) {
      for (const char* p = c.value(); *p; ++p)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') return true;
      continue;
    }
    return true;
  }
  return false;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool XmlRequestDecoder::Decode(char* body, size_t len, uint32_t max_batch, std::vector<WireRequest>* out,
                               bool* is_batch, ProtocolError* err) {
  // The common shapes first; anything else, every error included, the
  // long way below (see xml_scanner.h).
  last_was_fast_ = fast_path_ && ScanSimpleBody(std::string_view(body, len), max_batch, out, is_batch, &compact_);
  if (last_was_fast_) return true;
  failed_cmd_.reset();
  out->clear();
  *is_batch = false;
  compact_ = false;
  if (len == 0) return Fail(err, 400, "the request body is empty: send <request cmd=\"...\" .../> or <batch>");
  // A body that does not start with markup is no XML at all (a form's
  // biz=...&key=..., JSON, plain text): said so, before the checks below
  // name some character of it as if it were XML gone wrong.
  if (const std::string start = NotXmlStartText(std::string_view(body, len)); !start.empty())
    return Fail(err, 400,
                "the body is not XML (it starts with '" + std::string(start) +
                    "'): POST /frs takes <request cmd=\"...\" .../> or <batch>; a query string goes to the GET "
                    "forms (/acquire?biz=...&key=...), Envoy's JSON to POST /json");
  if (!CheckRawBody(std::string_view(body, len), err)) return false;
  // Entity references decode; whitespace in attribute values stays as sent
  // (a key is compared byte for byte). CDATA, comments, processing
  // instructions and, as a fragment, text outside the root are all kept in
  // the tree so that the checks below see them instead of pugixml dropping
  // them silently.
  // A document ends with its root's end, or a comment or processing
  // instruction after it: its last byte but whitespace is a '>'. pugixml
  // keeps no text node for text after the root ("<request .../>x"), which
  // the checks of the tree below would then never see. Judged now (the
  // parse below writes into the body), said after it, so that a body that
  // is no XML at all gets the parser's words.
  const std::string_view raw(body, len);
  const size_t last = raw.find_last_not_of(" \t\r\n");
  const bool ends_in_markup = last == std::string_view::npos || raw[last] == '>';
  constexpr unsigned kFlags = pugi::parse_escapes | pugi::parse_cdata | pugi::parse_comments | pugi::parse_pi |
                              pugi::parse_declaration | pugi::parse_fragment;
  pugi::xml_parse_result pr = doc_.load_buffer_inplace(body, len, kFlags, pugi::encoding_utf8);
  if (!pr)
    return Fail(err, 400,
                std::string("the body is not well-formed XML (") + pr.description() + " at byte " +
                    std::to_string(pr.offset) + ")");
  if (!ends_in_markup) return Fail(err, 400, "the body holds text outside its root element");
  // One element, with nothing but an XML declaration, comments and
  // whitespace around it.
  pugi::xml_node root;
  for (pugi::xml_node c = doc_.first_child(); c; c = c.next_sibling()) {
    switch (c.type()) {
      case pugi::node_element:
        if (root) return Fail(err, 400, "the body holds more than one root element");
        root = c;
        break;
      case pugi::node_comment:
      case pugi::node_declaration: break;
      case pugi::node_pcdata:
        for (const char* p = c.value(); *p; ++p)
          if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
            return Fail(err, 400, "the body holds text outside its root element");
        break;
      default: return Fail(err, 400, "the body holds CDATA or a processing instruction outside its root element");
    }
  }
  if (!root) return Fail(err, 400, "the body holds no element: send <request cmd=\"...\" .../> or <batch>");
  std::string_view rname = root.name();
  if (rname == "request") {
    if (HasStrayContent(root)) return Fail(err, 400, "<request> must be empty");
    WireRequest r;
    bool saw_cmd = false;
    if (!DecodeOne(root, &r, err, &saw_cmd)) {
      if (saw_cmd) failed_cmd_ = r.cmd;
      return false;
    }
    out->push_back(r);
    return true;
  }
  if (rname != "batch")
    return Fail(err, 400,
                "the root element must be <request> or <batch>, not <" + std::string(rname.substr(0, 64)) + ">");
  for (pugi::xml_attribute a = root.first_attribute(); a; a = a.next_attribute()) {
    const std::string_view name = a.name(), value = a.value();
    if (name != "answer") return Fail(err, 400, "<batch> takes one attribute, answer=\"full|compact\"");
    if (value == "compact") compact_ = true;
    else if (value != "full") return Fail(err, 400, "<batch answer> is full or compact");
    if (a.next_attribute()) return Fail(err, 400, "<batch> takes one attribute, answer=\"full|compact\"");
  }
  *is_batch = true;
  for (pugi::xml_node c = root.first_child(); c; c = c.next_sibling()) {
    if (c.type() == pugi::node_comment) continue;
    if (c.type() == pugi::node_cdata) return Fail(err, 400, "<batch> holds CDATA; it takes <request> elements only");
    if (c.type() == pugi::node_pcdata) {
      for (const char* p = c.value(); *p; ++p)
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
          return Fail(err, 400, "<batch> holds text; it takes <request> elements only");
      continue;
    }
    if (c.type() != pugi::node_element || std::string_view(c.name()) != "request")
      return Fail(err, 400, "<batch> takes <request> elements only");
    if (out->size() >= max_batch)
      return Fail(err, 400,
                  "batch member " + std::to_string(max_batch + 1) + ": a batch holds at most " +
                      std::to_string(max_batch) + " members (<limits batch> in srv.xml)");
    if (HasStrayContent(c)) return Fail(err, 400, "<request> must be empty");
    // Said before the member's attributes are judged: a stats member with a
    // biz was told "takes no biz attribute", and without it, only then, why.
    if (std::string_view(c.attribute("cmd").value()) == "stats")
      return Fail(err, 400,
                  "batch member " + std::to_string(out->size() + 1) + ": cmd=\"stats\" cannot be part of a batch");
    WireRequest r;
    if (!DecodeOne(c, &r, err)) {
      err->msg = "batch member " + std::to_string(out->size() + 1) + ": " + err->msg;
      return false;
    }
    out->push_back(r);
  }
  if (out->empty()) return Fail(err, 400, "the batch is empty");
  return true;
}

bool NextQueryParam(std::string_view* query, std::string_view* name, std::string_view* value) {
  const char* p = query->data();
  const char* const end = p + query->size();
  while (p < end) {
    const char* start = p;
    const char* eq = nullptr;
    p = PairEnd(p, end, &eq);
    const char* stop = p;
    if (p < end) ++p;  // the '&'
    if (stop == start) continue;
    *query = std::string_view(p, static_cast<size_t>(end - p));
    if (eq == nullptr) {
      *name = std::string_view(start, static_cast<size_t>(stop - start));
      *value = std::string_view();
    } else {
      *name = std::string_view(start, static_cast<size_t>(eq - start));
      *value = std::string_view(eq + 1, static_cast<size_t>(stop - eq - 1));
    }
    return true;
  }
  *query = std::string_view();
  return false;
}

bool DecodePostQuery(std::string_view query, std::string_view* route, ProtocolError* err) {
  std::string_view name, value;
  while (NextQueryParam(&query, &name, &value)) {
    if (name != "route")
      return Fail(err, 400,
                  "unknown query parameter \"" + std::string(name.substr(0, 64)) +
                      "\" on POST /frs: only route is allowed");
    if (!route->empty()) return Fail(err, 400, "query parameter \"route\" appears twice");
    if (value.empty()) return Fail(err, 400, "query parameter \"route\" is empty");
    *route = value;  // hashed as sent, not decoded
  }
  return true;
}

bool DecodeQuery(std::string_view query, Cmd cmd, std::string* biz_buf, std::string* key_buf, std::string* id_buf,
                 WireRequest* out, ProtocolError* err) {
  *out = WireRequest{};
  out->cmd = cmd;
  bool have_biz = false, have_key = false, have_n = false, have_route = false;
  std::string n_buf, reserve_buf;  // only for an n or a reserve that holds a %-escape
  std::string_view n_text;
  std::string_view name, value;
  while (NextQueryParam(&query, &name, &value)) {
    std::string* buf = nullptr;
    std::string_view* dest = nullptr;
    bool* seen = nullptr;
    if (name == "biz") {
      buf = biz_buf;
      dest = &out->biz;
      seen = &have_biz;
    } else if (name == "key") {
      buf = key_buf;
      dest = &out->key;
      seen = &have_key;
      out->route_key = value;
    } else if (name == "n") {
      buf = &n_buf;
      dest = &n_text;
      seen = &have_n;
    } else if ((name == "lease" && (cmd == Cmd::kRelease || cmd == Cmd::kRenew)) ||
               (name == "reservation" && cmd == Cmd::kSettle)) {
      // Hex digits as answered, decoded like every value (a client or a
      // proxy may escape any byte); the engine checks what they are.
      std::string_view* id = name == "lease" ? &out->lease : &out->reservation;
      if (!id->empty()) return Fail(err, 400, "query parameter \"" + std::string(name) + "\" appears twice");
      if (!PercentDecode(value, id_buf, id))
        return Fail(err, 400, "query parameter \"" + std::string(name) + "\" has a bad %-escape");
      if (id->empty()) return Fail(err, 400, "query parameter \"" + std::string(name) + "\" is empty");
      continue;
    } else if (name == "reserve" && cmd == Cmd::kAcquire) {
      if (out->reserve != 0) return Fail(err, 400, "query parameter \"reserve\" appears twice");
      std::string_view text;
      if (!PercentDecode(value, &reserve_buf, &text) || !ParseCount(text, &out->reserve) || out->reserve < 1 ||
          out->reserve > 65534)
        return Fail(err, 400, "reserve must be a whole number of seconds from 1 to 65534");
      continue;
    } else if (name == "route") {
      if (have_route) return Fail(err, 400, "query parameter \"route\" appears twice");
      if (value.empty()) return Fail(err, 400, "query parameter \"route\" is empty");
      have_route = true;
      out->route = value;  // hashed as sent, not decoded
      continue;
    } else {
      // A parameter of another request (reserve on /query) is named as one,
      // not as unknown: the client sent it to the wrong door.
      const bool elsewhere = name == "reserve" || name == "lease" || name == "reservation";
      return Fail(err, 400,
                  (elsewhere ? "query parameter \"" + std::string(name) + "\" is not one this request takes"
                             : "unknown query parameter \"" + std::string(name.substr(0, 64)) + "\"") +
                      ": use biz, key, n and route (reserve on /acquire, lease on /release and /renew, reservation "
                      "on /settle)");
    }
    if (*seen) return Fail(err, 400, "query parameter \"" + std::string(name) + "\" appears twice");
    *seen = true;
    if (!PercentDecode(value, buf, dest))
      return Fail(err, 400, "query parameter \"" + std::string(name) + "\" has a bad %-escape");
  }
  if (!have_biz || out->biz.empty()) return Fail(err, 400, "the query needs biz=NAME");
  if (!have_key) return Fail(err, 400, "the query needs key=KEY");
  if (!CheckProtocolKey(out->key, err)) return false;
  const bool lease_cmd = cmd == Cmd::kRelease || cmd == Cmd::kRenew;
  if (lease_cmd && out->lease.empty()) return Fail(err, 400, "the query needs lease=ID (the id an acquire answered)");
  if (lease_cmd && have_n) return Fail(err, 400, std::string("/") + CmdName(cmd) + " takes no n");
  if (cmd == Cmd::kSettle) {
    if (out->reservation.empty() || !have_n)
      return Fail(err, 400, "the query needs reservation=ID (the id an acquire answered) and n (the real amount)");
    if (!ParseCount(n_text, &out->n)) return Fail(err, 400, "n must be a whole number from 0 to 2147483647");
    return true;
  }
  if (have_n && (!ParseCount(n_text, &out->n) || out->n < 1))
    return Fail(err, 400, "n must be a whole number from 1 to 2147483647");
  return true;
}

// `in` with %XX and '+' decoded: `in` itself when it holds neither (a biz
// name, a plain key: no copy), else decoded into `buf`.
bool PercentDecode(std::string_view in, std::string* buf, std::string_view* out) {
  const size_t first = FirstEscape(in);
  if (first == in.size()) {
    *out = in;
    return true;
  }
  buf->assign(in.data(), first);
  for (size_t i = first; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      buf->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+') {
      buf->push_back(' ');
    } else {
      buf->push_back(c);
    }
  }
  *out = *buf;
  return true;
}

}  // namespace frs::server
