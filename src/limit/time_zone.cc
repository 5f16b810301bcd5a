#include "limit/time_zone.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "os/unique_fd.h"

namespace frs::limit {
namespace {

// Proleptic Gregorian day number of a civil date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

int64_t YearOf(int64_t utc_s) {
  int64_t z = (utc_s >= 0 ? utc_s : utc_s - 86399) / 86400 + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return static_cast<int64_t>(yoe) + era * 400 + (m <= 2);
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

uint32_t Be32(const unsigned char* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
int64_t Be64(const unsigned char* p) { return static_cast<int64_t>(uint64_t{Be32(p)} << 32 | Be32(p + 4)); }

// The POSIX TZ string of a TZif footer, e.g. "EST5EDT,M3.2.0,M11.1.0".
struct PosixRule {
  int32_t std_offset = 0;  // seconds east of UTC
  int32_t dst_offset = 0;
  bool has_dst = false;
  struct Date {
    char kind = 'M';  // 'J' (1..365, no leap day), 'N' (0..365), 'M' (month.week.day)
    int day = 0, week = 0, month = 0;
    int32_t time = 7200;  // local seconds after midnight, may be negative or > 24 h
  } start, end;
};

class RuleParser {
 public:
  explicit RuleParser(std::string_view s) : s_(s) {}

  bool Parse(PosixRule* r) {
    if (!Name()) return false;
    int32_t off;
    if (!Offset(&off)) return false;
    r->std_offset = -off;  // POSIX offsets are west-positive
    if (AtEnd()) return true;
    if (!Name()) return false;
    r->has_dst = true;
    r->dst_offset = r->std_offset + 3600;
    if (!AtEnd() && Peek() != ',') {
      if (!Offset(&off)) return false;
      r->dst_offset = -off;
    }
    if (AtEnd()) {  // no rule: the US rules are POSIX's default
      r->start = {'M', 0, 2, 3, 7200};
      r->end = {'M', 0, 1, 11, 7200};
      return true;
    }
    if (!Eat(',') || !DateRule(&r->start) || !Eat(',') || !DateRule(&r->end)) return false;
    return AtEnd();
  }

 private:
  bool AtEnd() const { return i_ >= s_.size(); }
  char Peek() const { return AtEnd() ? '\0' : s_[i_]; }
  bool Eat(char c) {
    if (Peek() != c) return false;
    ++i_;
    return true;
  }
  bool Name() {
    if (Eat('<')) {
      size_t close = s_.find('>', i_);
      if (close == std::string_view::npos) return false;
      i_ = close + 1;
      return true;
    }
    size_t begin = i_;
    while (!AtEnd() && ((Peek() >= 'A' && Peek() <= 'Z') || (Peek() >= 'a' && Peek() <= 'z'))) ++i_;
    return i_ - begin >= 3;
  }
  bool Number(int* out, int max) {
    size_t begin = i_;
    int v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > max) return false;
      ++i_;
    }
    *out = v;
    return i_ > begin;
  }
  // [+-]hh[:mm[:ss]]
  bool Offset(int32_t* out) {
    int sign = 1;
    if (Eat('-')) sign = -1;
    else Eat('+');
    int h = 0, m = 0, s = 0;
    if (!Number(&h, 167)) return false;
    if (Eat(':')) {
      if (!Number(&m, 59)) return false;
      if (Eat(':') && !Number(&s, 59)) return false;
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return true;
  }
  bool DateRule(PosixRule::Date* d) {
    if (Eat('J')) {
      d->kind = 'J';
      if (!Number(&d->day, 365) || d->day < 1) return false;
    } else if (Eat('M')) {
      d->kind = 'M';
      if (!Number(&d->month, 12) || d->month < 1 || !Eat('.') || !Number(&d->week, 5) || d->week < 1 || !Eat('.') ||
          !Number(&d->day, 6)) {
        return false;
      }
    } else {
      d->kind = 'N';
      if (!Number(&d->day, 365)) return false;
    }
    d->time = 7200;
    if (Eat('/')) return Offset(&d->time);
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// Local seconds since the epoch (in the zone's then-current offset) of `d`
// in year `y`.
int64_t RuleLocalTime(const PosixRule::Date& d, int64_t y) {
  int64_t day;
  if (d.kind == 'J') {
    day = DaysFromCivil(y, 1, 1) + d.day - 1;
    if (IsLeap(y) && d.day >= 60) ++day;  // Jn never counts February 29
  } else if (d.kind == 'N') {
    day = DaysFromCivil(y, 1, 1) + d.day;
  } else {
    int64_t first = DaysFromCivil(y, static_cast<unsigned>(d.month), 1);
    int dow_first = static_cast<int>(((first % 7) + 11) % 7);  // 1970-01-01 was a Thursday (4)
    int mday = 1 + (d.day - dow_first + 7) % 7 + (d.week - 1) * 7;
    while (mday > static_cast<int>(DaysInMonth(y, static_cast<unsigned>(d.month)))) mday -= 7;
    day = first + mday - 1;
  }
  return day * 86400 + d.time;
}

}  // namespace

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
  return z;
}

Result<std::shared_ptr<const TimeZone>> TimeZone::FromTzif(std::string_view name, std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t size = bytes.size();
  constexpr size_t kHeader = 44;
  if (size < kHeader || std::memcmp(p, "TZif", 4) != 0) return Status::Corruption("not a TZif file");
  auto counts = [&](size_t at, uint32_t c[6]) {
    for (int i = 0; i < 6; ++i) c[i] = Be32(p + at + 20 + 4 * i);
  };
  // counts: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  uint32_t c[6];
  counts(0, c);
  size_t v1_len = size_t{c[3]} * 5 + size_t{c[4]} * 6 + c[5] + size_t{c[2]} * 8 + c[1] + c[0];
  if (p[4] < '2') return Status::Corruption("TZif version 1 is not supported (no 64-bit data)");
  size_t at = kHeader + v1_len;
  if (size < at + kHeader || std::memcmp(p + at, "TZif", 4) != 0) {
    return Status::Corruption("truncated TZif file");
  }
  counts(at, c);
  at += kHeader;
  const uint32_t timecnt = c[3], typecnt = c[4];
  size_t data_len = size_t{timecnt} * 9 + size_t{typecnt} * 6 + c[5] + size_t{c[2]} * 12 + c[1] + c[0];
  if (typecnt == 0 || size < at + data_len) return Status::Corruption("truncated TZif data");
  const unsigned char* times = p + at;
  const unsigned char* idx = times + size_t{timecnt} * 8;
  const unsigned char* types = idx + timecnt;

  std::shared_ptr<TimeZone> z(new TimeZone());
  z->name_ = std::string(name);
  auto type_offset = [&](unsigned i) { return static_cast<int32_t>(Be32(types + size_t{i} * 6)); };
  z->initial_offset_ = type_offset(0);
  for (uint32_t i = 0; i < timecnt; ++i) {
    if (idx[i] >= typecnt) return Status::Corruption("TZif transition names a missing type");
    int64_t t = Be64(times + size_t{i} * 8);
    if (!z->transitions_.empty() && t <= z->transitions_.back().at) {
      return Status::Corruption("TZif transitions out of order");
    }
    z->transitions_.push_back({t, type_offset(idx[i])});
  }

  // The footer rule governs every instant after the last transition.
  size_t footer = at + data_len;
  if (footer < size && p[footer] == '\n') {
    size_t nl = bytes.find('\n', footer + 1);
    std::string_view tz =
        bytes.substr(footer + 1, nl == std::string_view::npos ? std::string_view::npos : nl - footer - 1);
    if (!tz.empty()) {
      PosixRule rule;
      if (!RuleParser(tz).Parse(&rule)) return Status::Corruption("bad TZ rule '" + std::string(tz) + "'");
      int64_t last = z->transitions_.empty() ? INT64_MIN : z->transitions_.back().at;
      int32_t last_offset = z->transitions_.empty() ? z->initial_offset_ : z->transitions_.back().offset;
      if (!rule.has_dst) {
        if (z->transitions_.empty()) z->initial_offset_ = rule.std_offset;
        else if (rule.std_offset != last_offset) z->transitions_.push_back({last + 1, rule.std_offset});
      } else {
        int64_t first_year = z->transitions_.empty() ? 1970 : YearOf(last);
        for (int64_t y = first_year; y <= kExpandUntilYear; ++y) {
          // The switch to DST happens at standard local time, the switch back at DST local time.
          Transition on{RuleLocalTime(rule.start, y) - rule.std_offset, rule.dst_offset};
          Transition off{RuleLocalTime(rule.end, y) - rule.dst_offset, rule.std_offset};
          if (off.at < on.at) std::swap(on, off);
          for (const Transition& t : {on, off}) {
            if (t.at <= last) continue;
            int32_t prev = z->transitions_.empty() ? z->initial_offset_ : z->transitions_.back().offset;
            if (t.offset == prev) continue;
            z->transitions_.push_back(t);
            last = t.at;
          }
        }
      }
    }
  }
  return std::shared_ptr<const TimeZone>(std::move(z));
}

int32_t TimeZone::OffsetAt(int64_t utc_s) const {
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), utc_s,
                             [](int64_t t, const Transition& tr) { return t < tr.at; });
  return it == transitions_.begin() ? initial_offset_ : std::prev(it)->offset;
}

int64_t TimeZone::LocalToUtc(int64_t local_s) const {
  // Offsets stay within +-26 h, so the answer lies in [local - 26h, local + 26h].
  // Walk the constant-offset pieces overlapping that span; the first piece
  // that contains its own candidate wins (the earlier of a repeated time).
  constexpr int64_t kSpan = 26 * 3600;
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
