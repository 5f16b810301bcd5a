#include "frs/ring.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <unordered_set>

#include <boost/crc.hpp>

#include "frs/key.h"

namespace frs {
namespace {

// nginx splits a server string at its last ':' when only digits follow it
// (the port); "unix:" paths and names without a port hash as all host.
void SplitHostPort(std::string_view s, std::string_view* host, std::string_view* port) {
  if (s.size() >= 5 && (s.substr(0, 5) == "unix:" || s.substr(0, 5) == "UNIX:")) {
    *host = s.substr(5);
    *port = {};
    return;
  }
  for (size_t j = 0; j < s.size(); ++j) {
    char c = s[s.size() - j - 1];
    if (c == ':') {
      *host = s.substr(0, s.size() - j - 1);
      *port = s.substr(s.size() - j);
      return;
    }
    if (c < '0' || c > '9') break;
  }
  *host = s;
  *port = {};
}

}  // namespace

Status Ring::CheckAddress(std::string_view name) {
  const size_t colon = name.rfind(':');
  if (colon == std::string_view::npos) return Status::InvalidArgument("it has no :port");
  const std::string_view host = name.substr(0, colon), port = name.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    return Status::InvalidArgument("its port \"" + std::string(port) + "\" is not a number 1..65535");
  uint32_t p = 0;
  for (char c : port) p = p * 10 + static_cast<uint32_t>(c - '0');
  if (p < 1 || p > 65535) return Status::InvalidArgument("its port " + std::string(port) + " is outside 1..65535");
  if (host.empty()) return Status::InvalidArgument("its host is empty");
  if (host.front() == '[') {
    IpAddress ip;
    if (host.size() < 3 || host.back() != ']' || !IpAddress::Parse(host.substr(1, host.size() - 2), &ip) || !ip.v6)
      return Status::InvalidArgument("its host \"" + std::string(host) + "\" is not an IPv6 address in brackets");
    return Status::OK();
  }
  // A DNS name or dotted IPv4: anything else (a second ':', a ',', a '/', a
  // byte beyond ASCII such as a no-break space) names no server.
  for (char c : host) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!ok)
      return Status::InvalidArgument(
          "its host \"" + std::string(host) +
          "\" is not a DNS name or IP address (an IPv6 address goes in brackets: [::1]:8300)");
  }
  if (host.size() > 253) return Status::InvalidArgument("its host is longer than a DNS name can be (253 bytes)");
  return Status::OK();
}

uint32_t Ring::HashRoute(std::string_view route) {
  boost::crc_32_type crc;
  crc.process_bytes(route.data(), route.size());
  return crc.checksum();
}

std::string_view Ring::RouteOf(std::string_view key, std::string_view route_param) {
  if (!route_param.empty()) return route_param;
  size_t open = key.find('{');
  if (open != std::string_view::npos) {
    size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) return key.substr(open + 1, close - open - 1);
  }
  return key;
}

Result<Ring> Ring::Make(std::vector<RingShard> shards) {
  if (shards.empty()) return Status::InvalidArgument("a cluster needs at least one shard");
  if (shards.size() > kMaxShards)
    return Status::InvalidArgument("a cluster holds at most " + std::to_string(kMaxShards) + " shards");
  std::unordered_set<std::string_view> seen;
  size_t total_points = 0;
  for (const RingShard& s : shards) {
    if (s.name.empty()) return Status::InvalidArgument("a shard's name is empty");
    if (s.weight == 0 || s.weight > kMaxRingWeight)
      return Status::InvalidArgument("shard " + s.name + ": weight " + std::to_string(s.weight) + " is outside 1.." +
                                     std::to_string(kMaxRingWeight));
    if (!seen.insert(s.name).second) return Status::InvalidArgument("shard " + s.name + " is listed twice");
    total_points += size_t{s.weight} * kPointsPerWeight;
  }
  Ring ring;
  ring.shards_ = std::move(shards);
  ring.points_.reserve(total_points);
  for (uint32_t i = 0; i < ring.shards_.size(); ++i) {
    std::string_view host, port;
    SplitHostPort(ring.shards_[i].name, &host, &port);
    boost::crc_32_type base;
    base.process_bytes(host.data(), host.size());
    base.process_byte(0);
    base.process_bytes(port.data(), port.size());
    uint32_t prev = 0;
    const uint32_t n = ring.shards_[i].weight * kPointsPerWeight;
    for (uint32_t j = 0; j < n; ++j) {
      boost::crc_32_type c = base;
      const unsigned char le[4] = {static_cast<unsigned char>(prev), static_cast<unsigned char>(prev >> 8),
                                   static_cast<unsigned char>(prev >> 16), static_cast<unsigned char>(prev >> 24)};
      c.process_bytes(le, 4);
      prev = c.checksum();
      ring.points_.push_back({prev, i});
    }
  }
  // nginx sorts with glibc's qsort (a merge sort, so stable) and keeps the
  // first of equal hashes: the earlier server line wins a tie.
  std::stable_sort(ring.points_.begin(), ring.points_.end(),
                   [](const Point& a, const Point& b) { return a.hash < b.hash; });
  ring.points_.erase(std::unique(ring.points_.begin(), ring.points_.end(),
                                 [](const Point& a, const Point& b) { return a.hash == b.hash; }),
                     ring.points_.end());
  return ring;
}

size_t Ring::OwnerOfHash(uint32_t hash) const {
  auto it =
      std::lower_bound(points_.begin(), points_.end(), hash, [](const Point& p, uint32_t h) { return p.hash < h; });
  if (it == points_.end()) it = points_.begin();
  return it->shard;
}

long Ring::SuccessorOfHash(uint32_t hash) const {
  auto it =
      std::lower_bound(points_.begin(), points_.end(), hash, [](const Point& p, uint32_t h) { return p.hash < h; });
  if (it == points_.end()) it = points_.begin();
  const uint32_t owner = it->shard;
  for (size_t step = 1; step < points_.size(); ++step) {
    ++it;
    if (it == points_.end()) it = points_.begin();
    if (it->shard != owner) return it->shard;
  }
  return -1;
}

uint32_t Ring::Digest() const {
  boost::crc_32_type crc;
  for (const RingShard& s : shards_) {
    crc.process_bytes(s.name.data(), s.name.size());
    const std::string w = "\0" + std::to_string(s.weight) + "\n";
    crc.process_bytes(w.data(), w.size());
  }
  return crc.checksum();
}

std::string Ring::DigestText() const {
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", Digest());
  return std::string(hex, 8);
}

std::string Ring::ListText() const {
  std::string text;
  for (const RingShard& s : shards_) text += std::to_string(s.weight) + " " + s.name + "\n";
  return text;
}

Result<Ring> Ring::ParseList(std::string_view text) {
  std::vector<RingShard> shards;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    if (eol == std::string_view::npos) return Status::InvalidArgument("the shard list's last line has no newline");
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    ++line_no;
    const size_t sp = line.find(' ');
    RingShard s;
    const char* end = sp == std::string_view::npos ? nullptr : line.data() + sp;
    if (end == nullptr || std::from_chars(line.data(), end, s.weight).ptr != end || sp + 1 >= line.size())
      return Status::InvalidArgument("line " + std::to_string(line_no) + " of the shard list is not WEIGHT NAME");
    s.name = std::string(line.substr(sp + 1));
    shards.push_back(std::move(s));
  }
  return Make(std::move(shards));
}

long Ring::Find(std::string_view name) const {
  for (size_t i = 0; i < shards_.size(); ++i)
    if (shards_[i].name == name) return static_cast<long>(i);
  return -1;
}

}  // namespace frs
