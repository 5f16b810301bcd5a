#include "server/replica_wire.h"

#include <charconv>
#include <iterator>

#include "frs/percent_encode.h"

namespace frs::server {
namespace {

// A key on the stream: printable ASCII but ' ' (the field separator) and
// '%' as itself, every other byte as %XX.
constexpr PercentTable kStreamKey(0x21, 0x7e, "%", PercentHigh::kEscape);

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

template <class T>
bool Number(std::string_view s, T* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// The next space-separated field of *line.
std::string_view Field(std::string_view* line) {
  const size_t sp = line->find(' ');
  std::string_view f = line->substr(0, sp);
  line->remove_prefix(sp == std::string_view::npos ? line->size() : sp + 1);
  return f;
}

constexpr std::string_view kEventWords[] = {"-",         "lease-grant", "lease-release", "lease-renew", "lease-sweep",
                                            "give-back", "res-take",    "res-settle",    "res-sweep"};

}  // namespace

void AppendChangeLine(const Change& c, std::string* out) {
  static constexpr char kKinds[] = {'A', 'S', 'E', 'R', 'V'};
  out->push_back(kKinds[static_cast<size_t>(c.kind)]);
  out->push_back(' ');
  out->append(std::to_string(c.biz_id));
  out->push_back(' ');
  out->append(c.route_known ? std::to_string(c.route_pos) : std::string("-"));
  out->push_back(' ');
  out->append(std::to_string(c.n));
  out->push_back(' ');
  out->append(std::to_string(c.at_ms));
  out->push_back(' ');
  if (c.kind == Change::Kind::kResetBiz) out->push_back('-');
  else AppendPercentEncoded(c.key, kStreamKey, out);
  if (c.kind == Change::Kind::kEvent) {
    out->push_back(' ');
    out->append(kEventWords[static_cast<size_t>(c.event)]);
    out->append(" " + std::to_string(c.item) + " " + std::to_string(c.until) + " " + std::to_string(c.nonce));
  }
  out->push_back('\n');
}

Status DecodeChangeLines(std::string_view body, std::vector<Change>* changes, std::vector<std::string>* keys) {
  changes->clear();
  keys->clear();
  size_t lines = 0;
  for (char c : body) lines += c == '\n';
  keys->reserve(lines);
  size_t no = 0;
  while (!body.empty()) {
    ++no;
    const size_t nl = body.find('\n');
    if (nl == std::string_view::npos) return Status::InvalidArgument("line " + std::to_string(no) + ": no newline");
    std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl + 1);
    const auto bad = [&](const std::string& what) {
      return Status::InvalidArgument("line " + std::to_string(no) + ": " + what);
    };
    // Fields are one space apart: two in a row, or one at an end, is an
    // empty field, said as such (it read as a field too many).
    if (line.find("  ") != std::string_view::npos || line.starts_with(' ') || line.ends_with(' '))
      return bad("an empty field (two spaces in a row, or a space at an end of the line)");
    Change c;
    const std::string_view kind = Field(&line), biz = Field(&line), route = Field(&line), n = Field(&line),
                           at = Field(&line), key = Field(&line);
    if (kind == "V") {
      const std::string_view event = Field(&line), item = Field(&line), until = Field(&line), nonce = Field(&line);
      if (!line.empty() || nonce.empty()) return bad("an event line has ten fields");
      size_t e = 1;
      while (e < std::size(kEventWords) && kEventWords[e] != event) ++e;
      if (e == std::size(kEventWords)) return bad("unknown event \"" + std::string(event.substr(0, 16)) + "\"");
      c.kind = Change::Kind::kEvent;
      c.event = static_cast<Change::Event>(e);
      if (!Number(item, &c.item) || !Number(until, &c.until) || c.until < 0 || !Number(nonce, &c.nonce))
        return bad("an event's item, until and nonce are whole numbers");
    } else if (!line.empty()) {
      return bad("more than six fields");
    }
    if (kind == "A") c.kind = Change::Kind::kAdd;
    else if (kind == "S") c.kind = Change::Kind::kSet;
    else if (kind == "E") c.kind = Change::Kind::kErase;
    else if (kind == "R") c.kind = Change::Kind::kResetBiz;
    else if (kind == "V") c.kind = Change::Kind::kEvent;
    else return bad("the kind is A, S, E, R or V, not \"" + std::string(kind.substr(0, 8)) + "\"");
    if (!Number(biz, &c.biz_id) || c.biz_id == 0) return bad("the biz is a number 1..65535");
    if (route != "-") {
      if (!Number(route, &c.route_pos)) return bad("the route is a ring position (0..4294967295) or -");
      c.route_known = true;
    }
    if (!Number(n, &c.n) || c.n < 0) return bad("n is a whole number");
    if (!Number(at, &c.at_ms)) return bad("the time is unix milliseconds");
    std::string& k = keys->emplace_back();
    if (c.kind != Change::Kind::kResetBiz) {
      for (size_t i = 0; i < key.size(); ++i) {
        if (key[i] != '%') {
          k.push_back(key[i]);
          continue;
        }
        const int hi = i + 2 < key.size() ? HexValue(key[i + 1]) : -1, lo = hi >= 0 ? HexValue(key[i + 2]) : -1;
        if (lo < 0) return bad("a % in the key is not followed by two hex digits");
        k.push_back(static_cast<char>(hi << 4 | lo));
        i += 2;
      }
      if (k.empty()) return bad("the key is empty");
    } else if (key != "-") {
      return bad("a reset's key is -");
    }
    c.key = k;
    changes->push_back(c);
  }
  if (changes->empty()) return Status::InvalidArgument("no change in the body");
  return Status::OK();
}

}  // namespace frs::server
