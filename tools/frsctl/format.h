// frsctl/format.h: what a tired operator reads: local dates, "in 12 min",
// grouped numbers, and tables whose columns line up.
//
// Times are shown in the process's local time zone (TZ), with its
// abbreviation, so `TZ=Europe/Paris frsctl ...` reads in Paris time.
//
// Thread safety: free functions are pure (apart from reading TZ); a Table is
// a value used by one thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace frs::ctl {

// "2026-11-22 14:03:10 UTC" for a unix time in milliseconds.
std::string LocalTime(int64_t unix_ms);
// Why the TZ value `tz` gives no time zone, or "" when it gives one (unset:
// /etc/localtime; empty: UTC). glibc shows a TZ it cannot read (a typo such
// as "Europe/Pari", a zone whose file is not installed) in UTC under the
// name it was given ("Europe"): times that look local and are not. A TZ
// gives a zone when it names a zone file (under `zoneinfo`, the TZDIR, or
// by its absolute path; a leading ':' allowed) or is a POSIX rule
// ("CET-1CEST", "<+03>-3");
// "UTC" and "GMT" read as what they say without their file.
std::string TimeZoneProblem(const char* tz, const std::string& zoneinfo);
// A span of seconds in words: "45 s", "12 min", "1 h 20 min", "3 d 4 h".
std::string Duration(int64_t seconds);
// `when` relative to `now`: "in 12 min", "3 h ago", "now" (a moment to come
// rounded up to the second, never "now"; a past one to the nearer second).
std::string Relative(int64_t when_ms, int64_t now_ms);
// LocalTime plus Relative: "2026-11-22 14:03:10 UTC (in 12 min)"; a moment
// to come shows the second it is in rounded up.
std::string When(int64_t when_ms, int64_t now_ms);
// 1048576 -> "1,048,576".
std::string Grouped(uint64_t v);
// part/whole as "12.5%" ("0.0%" when whole is 0).
std::string Percent(uint64_t part, uint64_t whole);
// Printable form of stored key bytes: control bytes and quotes escaped.
std::string Printable(const std::string& bytes);
// Printable() of the first 64 bytes, "..." after it when `bytes` is longer:
// for a message about a key refused for its length (a 70,000-byte key came
// back whole in its error).
std::string PrintableHead(const std::string& bytes);

// An HTTP client's failure without the server's name it starts with
// ("HOST:PORT: connect: ..."), for a line that names the shard already.
std::string WithoutShardName(const std::string& message, const std::string& shard);
// How a node's key is shown: its printable bytes ("..." after a prefix), or,
// for a node that kept no key text, its fingerprint and that fact.
std::string ShownKey(const std::string& key, bool truncated, bool kept, uint64_t fp_lo);

// Rows of cells printed with aligned columns; numbers right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header = {});
  void Row(std::vector<std::string> cells);
  // Columns listed here are right-aligned (counts, sizes).
  void AlignRight(std::vector<size_t> columns);
  // Prints every row with `indent` leading spaces, columns two spaces apart.
  void Print(FILE* out, int indent = 0) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

}  // namespace frs::ctl
