#include "limit/time_zone.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cctz/civil_time.h>
#include <cctz/time_zone.h>
#include <cctz/zone_info_source.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "os/unique_fd.h"

namespace frs::limit {

struct TimeZone::Cctz {
  cctz::time_zone zone;
};

namespace {

using Instant = cctz::time_point<cctz::seconds>;
Instant InstantOf(int64_t utc_s) { return Instant(cctz::seconds(utc_s)); }
int64_t SecondsOf(Instant t) { return t.time_since_epoch().count(); }

// cctz finds a zone's bytes through a factory the program may replace
// (cctz/zone_info_source.h). FRS hands it the bytes it read itself, so that
// every error names FRS's own path, under a key made of their hash: cctz
// keeps each zone it loads for the life of the process, by key, so loading
// the same file again (another engine, a `frsctl` command) costs no memory.
constexpr std::string_view kBytesKey = "frs-tzif:";
// The bytes of the FromTzif call in progress on this thread: cctz calls the
// factory from the thread that loads.
thread_local const std::string_view* tls_bytes = nullptr;

class BytesSource final : public cctz::ZoneInfoSource {
 public:
  explicit BytesSource(std::string_view bytes) : bytes_(bytes) {}
  std::size_t Read(void* ptr, std::size_t size) override {
    size = std::min(size, bytes_.size() - at_);
    if (size > 0) std::memcpy(ptr, bytes_.data() + at_, size);
    at_ += size;
    return size;
  }
  int Skip(std::size_t offset) override {
    if (offset > bytes_.size() - at_) return -1;
    at_ += offset;
    return 0;
  }

 private:
  std::string_view bytes_;  // outlives the source: cctz drops it before load_time_zone returns
  std::size_t at_ = 0;
};

std::unique_ptr<cctz::ZoneInfoSource> SourceOf(
    const std::string& name, const std::function<std::unique_ptr<cctz::ZoneInfoSource>(const std::string&)>& fallback) {
  if (name.compare(0, kBytesKey.size(), kBytesKey) != 0) return fallback(name);
  if (tls_bytes == nullptr) return nullptr;
  return std::make_unique<BytesSource>(*tls_bytes);
}

}  // namespace
}  // namespace frs::limit

// The definition cctz documents for replacing its factory; names that are not
// FRS's keys still go to cctz's own (files under $TZDIR).
namespace cctz_extension {
ZoneInfoSourceFactory zone_info_source_factory = frs::limit::SourceOf;
}  // namespace cctz_extension

namespace frs::limit {

TimeZone::TimeZone() = default;
TimeZone::~TimeZone() = default;

std::shared_ptr<const TimeZone> TimeZone::Utc() {
  static const std::shared_ptr<const TimeZone> utc = [] {
    std::shared_ptr<TimeZone> z(new TimeZone());
    z->name_ = "UTC";
    return z;
  }();
  return utc;
}

Result<std::shared_ptr<const TimeZone>> TimeZone::Load(std::string_view name) {
  if (name.empty() || name == "UTC") return Utc();
  // IANA names are relative paths of letters, digits, '_', '-', '+' and '/'.
  bool ok = name.front() != '/' && name.find("..") == std::string_view::npos;
  for (char c : name) {
    ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                c == '+' || c == '/');
  }
  if (!ok) return Status::InvalidArgument("time zone '" + std::string(name) + "' is not an IANA name");
  const char* dir = std::getenv("TZDIR");
  std::string path = std::string(dir && *dir ? dir : "/usr/share/zoneinfo") + "/" + std::string(name);
  // A zone is read once per process: a worker respawned after tzdata was
  // upgraded, or one reloading a map that names a zone it ran before, counts
  // in the zone its master and the other workers loaded (the master loads
  // every zone before it forks; a zone a reload names first is read by each
  // process at that reload). A new tzdata takes effect at a restart.
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const TimeZone>> loaded;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  }
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status::NotFound("unknown time zone '" + std::string(name) + "' (no " + path + ")");
    return Status::FromErrno(path, errno);
  }
  std::string bytes;
  char buf[8192];
  for (;;) {
    ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(path, errno);
    }
    if (got == 0) break;
    bytes.append(buf, static_cast<size_t>(got));
    if (bytes.size() > (1u << 20)) return Status::Corruption(path + ": too large for a TZif file");
  }
  auto z = FromTzif(name, bytes);
  if (!z.ok()) return Status::Corruption(path + ": " + z.status().message());
  std::lock_guard<std::mutex> lock(mu);
  return loaded.emplace(path, std::move(z).value()).first->second;
}

namespace {

// What is wrong with TZif bytes cctz refused. The "right/" zones of tzdata
// are TZif files that count leap seconds, which cctz (and POSIX time, which
// windows are counted in) does not: said so, with the zone to use instead.
std::string WhyNotLoaded(std::string_view bytes) {
  if (bytes.size() < 44 || bytes.substr(0, 4) != "TZif") return "not a TZif file";
  // A header: magic, version, 15 reserved bytes, then six big-endian counts
  // (isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt). A file of
  // version 2 or later has a second header after the first block, whose
  // counts a "slim" file (zic -b slim) keeps alone: both are read.
  const auto count = [&](size_t at) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + at;
    return uint64_t{p[0]} << 24 | uint64_t{p[1]} << 16 | uint64_t{p[2]} << 8 | p[3];
  };
  uint64_t leaps = count(28);
  if (bytes[4] >= '2') {
    // The v1 block: 4-byte times and their type indexes, the types, the
    // abbreviations, 8-byte leap records, the two indicator arrays.
    const uint64_t v1 = count(32) * 5 + count(36) * 6 + count(40) + count(28) * 8 + count(24) + count(20);
    if (44 + v1 + 44 <= bytes.size() && bytes.substr(44 + v1, 4) == "TZif") leaps += count(44 + v1 + 28);
  }
  if (leaps != 0)
    return "a zone that counts leap seconds (tzdata's right/...), which windows in POSIX time cannot use: name the "
           "zone without right/";
  return "a damaged TZif file";
}

}  // namespace

Result<std::shared_ptr<const TimeZone>> TimeZone::FromTzif(std::string_view name, std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  char key[80];
  std::snprintf(key, sizeof key, "%.*s%016" PRIx64 "%016" PRIx64 "-%zu", static_cast<int>(kBytesKey.size()),
                kBytesKey.data(), static_cast<uint64_t>(h.high64), static_cast<uint64_t>(h.low64), bytes.size());
  auto cz = std::make_unique<Cctz>();
  tls_bytes = &bytes;
  const bool loaded = cctz::load_time_zone(key, &cz->zone);
  tls_bytes = nullptr;
  if (!loaded) return Status::Corruption(WhyNotLoaded(bytes));

  std::shared_ptr<TimeZone> z(new TimeZone());
  z->name_ = std::string(name);
  const cctz::time_zone& zone = cz->zone;
  const int64_t until =
      SecondsOf(cctz::convert(cctz::civil_second(kTableUntilYear + 1, 1, 1, 0, 0, 0), cctz::utc_time_zone()));
  // cctz also reports changes of abbreviation or of the DST flag alone; the
  // table keeps the changes of offset, which is all a window needs.
  Instant t = Instant::min();
  bool first = true;
  int32_t offset = 0;
  cctz::time_zone::civil_transition change;
  while (zone.next_transition(t, &change)) {
    const Instant next = zone.lookup(change.to).trans;
    if (next <= t) break;  // cctz promises progress; never loop on a broken promise
    t = next;
    if (first) {
      z->initial_offset_ = offset = zone.lookup(t - cctz::seconds(1)).offset;
      first = false;
    }
    if (SecondsOf(t) >= until) {
      z->table_end_ = until;
      break;
    }
    const int32_t after = zone.lookup(t).offset;
    if (after == offset) continue;
    z->transitions_.push_back({SecondsOf(t), after});
    offset = after;
  }
  if (first) z->initial_offset_ = zone.lookup(InstantOf(0)).offset;  // a fixed offset, no change ever
  z->cctz_ = std::move(cz);
  return std::shared_ptr<const TimeZone>(std::move(z));
}

int32_t TimeZone::OffsetAt(int64_t utc_s) const {
  if (utc_s >= table_end_) return cctz_->zone.lookup(InstantOf(utc_s)).offset;
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), utc_s,
                             [](int64_t t, const Transition& tr) { return t < tr.at; });
  return it == transitions_.begin() ? initial_offset_ : std::prev(it)->offset;
}

int64_t TimeZone::LocalToUtc(int64_t local_s) const {
  // Offsets stay within +-26 h, so the answer lies in [local - 26h, local + 26h].
  constexpr int64_t kSpan = 26 * 3600;
  if (local_s >= table_end_ - kSpan) {
    const cctz::time_zone::civil_lookup at = cctz_->zone.lookup(cctz::civil_second(1970, 1, 1, 0, 0, 0) + local_s);
    return SecondsOf(at.kind == cctz::time_zone::civil_lookup::SKIPPED ? at.trans : at.pre);
  }
  // Walk the constant-offset pieces overlapping that span; the first piece
  // that contains its own candidate wins (the earlier of a repeated time).
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), local_s - kSpan,
                             [](int64_t t, const Transition& tr) { return t < tr.at; });
  int64_t piece_begin = INT64_MIN;
  int32_t offset = it == transitions_.begin() ? initial_offset_ : std::prev(it)->offset;
  for (;; ++it) {
    int64_t piece_end = it == transitions_.end() ? INT64_MAX : it->at;
    int64_t candidate = local_s - offset;
    if (candidate >= piece_begin && candidate < piece_end) return candidate;
    // In a gap the local time never happens: the gap ends at this transition.
    if (candidate >= piece_end && it != transitions_.end() && local_s - it->offset < piece_end) {
      return piece_end;
    }
    if (it == transitions_.end() || piece_end > local_s + kSpan) return candidate;
    piece_begin = piece_end;
    offset = it->offset;
  }
}

bool TimeZone::TransitionAtOrBefore(int64_t utc_s, int64_t* at, int32_t* offset_before) const {
  if (utc_s >= table_end_) {
    // cctz's previous transition is strictly before its argument.
    cctz::time_zone::civil_transition change;
    if (!cctz_->zone.prev_transition(InstantOf(std::min(utc_s, INT64_MAX - 1) + 1), &change)) return false;
    const Instant t = cctz_->zone.lookup(change.to).trans;
    *at = SecondsOf(t);
    *offset_before = cctz_->zone.lookup(t - cctz::seconds(1)).offset;
    return true;
  }
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), utc_s,
                             [](int64_t t, const Transition& tr) { return t < tr.at; });
  if (it == transitions_.begin()) return false;
  --it;
  *at = it->at;
  *offset_before = it == transitions_.begin() ? initial_offset_ : std::prev(it)->offset;
  return true;
}

int64_t TimeZone::LocalDay(int64_t utc_s) const {
  int64_t local = ToLocal(utc_s);
  return local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
}

}  // namespace frs::limit
