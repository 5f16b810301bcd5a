// frsctl/format.cc: local dates, relative times, numbers and aligned tables.
#include "format.h"
#include <cctype>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace frs::ctl {

std::string LocalTime(int64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000);
  struct tm tm {};
  if (::localtime_r(&t, &tm) == nullptr) return std::to_string(unix_ms / 1000);
  char buf[64];
  size_t n = ::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm);
  return std::string(buf, n);
}

namespace {

bool IsZoneFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char magic[4] = {};
  const bool tzif = std::fread(magic, 1, sizeof magic, f) == sizeof magic && std::memcmp(magic, "TZif", 4) == 0;
  std::fclose(f);
  return tzif;
}

// A POSIX TZ rule begins with its standard time's name (three letters or
// more, or <...>) and that time's offset: "EST5EDT", "CET-1CEST", "<+03>-3".
bool IsPosixRule(std::string_view v) {
  size_t i = 0;
  if (!v.empty() && v[0] == '<') {
    i = v.find('>');
    if (i == std::string_view::npos || i < 4) return false;
    ++i;
  } else {
    while (i < v.size() && std::isalpha(static_cast<unsigned char>(v[i]))) ++i;
    if (i < 3) return false;
  }
  if (i < v.size() && (v[i] == '+' || v[i] == '-')) ++i;
  return i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]));
}

}  // namespace

std::string TimeZoneProblem(const char* tz, const std::string& zoneinfo) {
  if (tz == nullptr || *tz == '\0') return "";
  std::string_view v(tz);
  // ":Europe/Paris" names a file; glibc reads ":CET-1CEST" as a rule when no
  // such file is there, as it does without the colon.
  if (v.front() == ':') v.remove_prefix(1);
  if (v.empty() || v == "UTC" || v == "GMT") return "";
  const std::string path = v.front() == '/' ? std::string(v) : zoneinfo + "/" + std::string(v);
  if (IsZoneFile(path)) return "";
  if (IsPosixRule(v)) return "";
  return "TZ=\"" + std::string(tz) + "\" is no time zone here (no zone file " + path +
         ", and no POSIX rule such as CET-1CEST): times are shown in UTC";
}

std::string Duration(int64_t seconds) {
  if (seconds < 0) seconds = -seconds;
  auto two = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    std::string s = std::to_string(a) + " " + ua;
    if (b != 0) s += " " + std::to_string(b) + " " + ub;
    return s;
  };
  if (seconds < 60) return std::to_string(seconds) + " s";
  if (seconds < 600) return two(seconds / 60, "min", seconds % 60, "s");
  const int64_t minutes = (seconds + 30) / 60;  // rounded, so 3599 s reads "1 h"
  if (minutes < 60) return std::to_string(minutes) + " min";
  const int64_t hours = (seconds + 1800) / 3600;
  if (minutes < 24 * 60) return two(minutes / 60, "h", minutes % 60, "min");
  if (hours < 30 * 24) return two(hours / 24, "d", hours % 24, "h");
  return std::to_string((seconds + 43200) / 86400) + " d";
}

std::string Relative(int64_t when_ms, int64_t now_ms) {
  int64_t diff = when_ms - now_ms;
  // A moment to come is rounded up: "next allowed" 0.4 s away read "now",
  // and a client asking now was denied. A past one is counted in whole
  // seconds elapsed, as the clock shown beside it reads: a use taken at
  // 10:00:51, seen at 10:00:51.6, read "1 s ago", and one at 09:59:48
  // "18 s ago" beside "now 10:00:05" (found from outside).
  int64_t s = diff > 0 ? (diff + 999) / 1000 : diff / 1000;
  if (s == 0) return "now";
  return s > 0 ? "in " + Duration(s) : Duration(-s) + " ago";
}

std::string When(int64_t when_ms, int64_t now_ms) {
  // A moment to come, shown to the second, is the second it is in rounded
  // up (the one from which it holds), as the server's reset is.
  const int64_t shown = when_ms > now_ms ? (when_ms + 999) / 1000 * 1000 : when_ms;
  return LocalTime(shown) + " (" + Relative(when_ms, now_ms) + ")";
}

std::string Grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  int lead = static_cast<int>(digits.size() % 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (static_cast<int>(i) - lead) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Percent(uint64_t part, uint64_t whole) {
  double p = whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  char buf[32];
  std::snprintf(buf, sizeof buf, p != 0 && p < 0.1 ? "%.3f%%" : "%.1f%%", p);
  return buf;
}

std::string PrintableHead(const std::string& bytes) {
  constexpr size_t kShown = 64;
  return bytes.size() <= kShown ? Printable(bytes) : Printable(bytes.substr(0, kShown)) + "...";
}

std::string Printable(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (unsigned char c : bytes) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Display width of UTF-8 text: counts code points, not bytes.
static size_t Width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xc0) != 0x80;
  return w;
}

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::Row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }

void Table::AlignRight(std::vector<size_t> columns) {
  for (size_t c : columns) {
    if (right_.size() <= c) right_.resize(c + 1, false);
    right_[c] = true;
  }
}

void Table::Print(FILE* out, int indent) const {
  std::vector<size_t> width;
  auto measure = [&](const std::vector<std::string>& row) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], Width(row[i]));
  };
  if (!header_.empty()) measure(header_);
  for (const auto& r : rows_) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line(static_cast<size_t>(indent), ' ');
    for (size_t i = 0; i < row.size(); ++i) {
      bool last = i + 1 == row.size();
      size_t pad = width[i] - Width(row[i]);
      bool right = i < right_.size() && right_[i];
      if (right) line.append(pad, ' ');
      line += row[i];
      if (!right && !last) line.append(pad, ' ');
      if (!last) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    line += '\n';
    std::fputs(line.c_str(), out);
  };
  if (!header_.empty()) print(header_);
  for (const auto& r : rows_) print(r);
}

std::string ShownKey(const std::string& key, bool truncated, bool kept, uint64_t fp_lo) {
  if (!kept) {
    char fp[40];
    std::snprintf(fp, sizeof fp, "fp:%016llx (key not kept)", static_cast<unsigned long long>(fp_lo));
    return fp;
  }
  // A space at either end would vanish in a table's column (or read as
  // its padding): written \x20 there, as a control byte is anywhere.
  std::string shown = Printable(key);
  if (!shown.empty() && shown.back() == ' ' && !truncated) shown.replace(shown.size() - 1, 1, "\\x20");
  if (!shown.empty() && shown.front() == ' ') shown.replace(0, 1, "\\x20");
  return shown + (truncated ? "..." : "");
}

std::string WithoutShardName(const std::string& message, const std::string& shard) {
  if (message.size() > shard.size() + 2 && message.compare(0, shard.size(), shard) == 0 &&
      message.compare(shard.size(), 2, ": ") == 0)
    return message.substr(shard.size() + 2);
  return message;
}

}  // namespace frs::ctl
