#include "limit/side_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "limit/lease_id.h"
#include "limit/rule_history.h"
#include "os/only_zeros.h"
#include "os/path_access.h"
#include "os/store_dir.h"
#include "os/unique_fd.h"
#include "stats/daily_stats.h"
#include "stats/group_table.h"
#include "stats/recent_denials.h"
#include "store/store_check.h"

namespace frs::limit {
namespace {

namespace names = os::store_dir;

SideFileReport Report(std::string path, AtStart at, Status status) {
  SideFileReport r;
  // A directory this user may not search hides whether the file is there:
  // said as such (its owner and mode), not as "absent: frsd creates it".
  Result<bool> there = os::PathExists(path);
  r.exists = !there.ok() || there.value();
  r.path = std::move(path);
  r.at_start = at;
  r.status = !there.ok() ? there.status() : r.exists ? std::move(status) : Status::OK();
  return r;
}

// Whether the file at `path` holds no byte but zeros (or none): what a
// creation cut short leaves (os/only_zeros.h). Such a file holds no count.
bool HoldsNothing(const std::string& path) {
  // A regular file only: a FIFO is not waited on, a device not read.
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return false;
  Result<bool> zeros = os::HoldsOnlyZeros(fd.get());
  return zeros.ok() && zeros.value();
}

}  // namespace

// The checks frsd's engine makes when it opens each file.
std::vector<SideFileReport> CheckStartFiles(const std::string& dir) {
  std::vector<SideFileReport> out;
  // Read-only opens check exactly what a writing open checks, and keep
  // empty tables in memory for a missing file (nothing is created).
  auto daily = stats::DailyStats::Open(dir, /*read_only=*/true);
  const std::string daily_path = names::In(dir, names::kDailyStats);
  Status daily_status = daily.status();
  AtStart daily_at = AtStart::kRefuse;
  // Refused when damaged since it holds today's counters; one that holds
  // nothing has none to restore, and refusing it kept a machine that lost
  // power in its first minute from starting at all.
  if (daily_status.code() == Status::Code::kCorruption && HoldsNothing(daily_path)) {
    daily_at = AtStart::kSetAside;
    daily_status = Status::Corruption(daily_status.message() +
                                      ", and every byte is zero: a creation cut short (a kill, or a power loss "
                                      "before its header reached the disk), holding no count");
  }
  out.push_back(Report(daily_path, daily_at, daily_status));
  auto denials = stats::RecentDenials::Open(dir, /*read_only=*/true);
  out.push_back(Report(names::In(dir, names::kRecentDenials), AtStart::kSetAside, denials.status()));
  out.push_back(Report(names::In(dir, names::kRuleHistory), AtStart::kSetAside, RuleHistory::Check(dir)));
  // The lease ids' secret: frsd refuses to start on one that is not 16
  // bytes (a new one would void every lease and reservation id given out).
  out.push_back(
      Report(names::In(dir, names::kLeaseKey), AtStart::kRefuse, LoadLeaseSecret(dir, /*create=*/false).status()));
  return out;
}

std::vector<SideFileReport> CheckSideFiles(const std::string& dir) {
  std::vector<SideFileReport> out = CheckStartFiles(dir);
  // The checks read, and a read follows a link; frsd, which writes them,
  // never does (os/store_dir.h): a file that is one is said as such, not
  // "clean" (found from outside). The start and frsd -t say it their way.
  // (Those two are written in place; rules.history and lease.key are
  // replaced whole, by a rename over whatever is there.)
  for (SideFileReport& r : out) {
    const bool in_place =
        r.path == names::In(dir, names::kDailyStats) || r.path == names::In(dir, names::kRecentDenials);
    struct stat ls {};
    if (!in_place || ::lstat(r.path.c_str(), &ls) != 0 || !S_ISLNK(ls.st_mode)) continue;
    r.link = r.exists = true;
    r.status = Status::IOError(names::LinkRefusedWords(r.path));
    if (r.path == names::In(dir, names::kRecentDenials)) r.at_start = AtStart::kGoesWithout;
  }
  std::error_code ec;
  std::vector<std::string> days, links;
  const std::string stats_dir = names::In(dir, names::kFieldStats);
  if (struct stat ls{}; ::lstat(stats_dir.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode)) links.push_back(stats_dir);
  // (A link at stats/ itself is not walked through: links is not empty.)
  for (auto it = links.empty() ? std::filesystem::recursive_directory_iterator(stats_dir, ec)
                               : std::filesystem::recursive_directory_iterator();
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    // Folders and day files alike: frsd counts nothing by field below a link.
    if (it->is_symlink(ec)) links.push_back(it->path().string());
    else if (it->is_regular_file(ec) && names::KindOfDayFile(it->path().filename().string()) != names::DayFile::kNone)
      days.push_back(it->path().string());
  }
  // A statistics directory (or one below it) that cannot be walked is not
  // "no day files": frsd counts nothing by field there until it can.
  if (ec && ec != std::errc::no_such_file_or_directory)
    out.push_back(Report(stats_dir, AtStart::kSetAsideLater,
                         Status::IOError(stats_dir + ": cannot read the statistics by key field: " + ec.message())));
  std::sort(links.begin(), links.end());
  for (std::string& l : links) {
    Status s = Status::IOError(names::LinkRefusedWords(l));
    SideFileReport r = Report(std::move(l), AtStart::kSetAsideLater, std::move(s));
    r.link = true;
    out.push_back(std::move(r));
  }
  std::sort(days.begin(), days.end());
  for (std::string& d : days) {
    Status s = stats::CheckDayFile(d);
    out.push_back(Report(std::move(d), AtStart::kSetAsideLater, std::move(s)));
  }
  return out;
}

std::string LeaseKeyModeWarning(const std::string& dir) {
  const std::string path = names::In(dir, names::kLeaseKey);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return ReadableSecretWords(path, static_cast<unsigned>(st.st_mode));
}

bool StoreNeverServed(const std::string& dir) {
  return ::access(names::In(dir, names::kDailyStats).c_str(), F_OK) != 0 && errno == ENOENT &&
         !store::StoreMayHoldNodes(dir);
}

std::string LeaseKeyMissingWarning(const std::string& dir) {
  const std::string path = names::In(dir, names::kLeaseKey);
  if (::access(path.c_str(), F_OK) == 0 || errno != ENOENT) return "";
  // A store that never served (frsctl init's) has given out no id: its
  // engine, which makes stats.frs and lease.key alike, never opened there.
  // Its nodes say so too: a store that lost both side files (a restore
  // that missed them) is still one whose ids a new secret would void.
  if (StoreNeverServed(dir)) return "";
  return path +
         " is missing beside an existing store: frsd makes a new secret, and every lease and reservation id given "
         "out before answers 409 (their places and estimates are freed at their expiry); restore the file from a "
         "backup to keep them";
}

Result<std::vector<std::string>> PrepareSideFiles(const std::string& dir) {
  std::vector<std::string> said;
  if (std::string w = LeaseKeyModeWarning(dir); !w.empty()) said.push_back("warning: " + w);
  for (const SideFileReport& r : CheckStartFiles(dir)) {
    if (r.status.ok()) continue;
    const bool damaged = r.status.code() == Status::Code::kCorruption || r.status.code() == Status::Code::kMismatch;
    // A file that cannot be read (permissions, its type, I/O) is not damage:
    // moving it aside would not help; the start says what does, as frsd -t
    // and verify do (AtStartText).
    if (!damaged) return Status::IOError(r.status.message() + ": " + r.AtStartText());
    if (r.RefusesStart()) {
      const bool lease_key = r.path == names::In(dir, names::kLeaseKey);
      return Status::Corruption(
          r.status.message() + ": frsd will not start on a damaged " + r.path + ": restore it from a backup, or " +
          (lease_key ? "remove it (a new secret is made: every lease and reservation id given out is then unknown, "
                       "409, and their places and estimates are freed at their expiry)"
                     : "move it aside (its daily counters then start from zero)") +
          "; frsctl verify lists every damaged file");
    }
    const std::string aside = names::DamagedPath(r.path, std::to_string(::time(nullptr)));
    // A stats.frs of zeros is moved only while no process holds its lock (a
    // creator holding it is writing the header now). A creator that made
    // the file and has not locked it yet finds it moved once it has, and
    // makes it again (os::MappedFile::Open).
    os::UniqueFd held;
    if (r.path == names::In(dir, names::kDailyStats)) {
      held.reset(::open(r.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
      if (!held.valid() || ::flock(held.get(), LOCK_EX | LOCK_NB) != 0 || !HoldsNothing(r.path))
        return Status::Busy(r.path +
                            ": another process is making it (it holds its lock): start frsd again once "
                            "that is done");
    }
    if (::rename(r.path.c_str(), aside.c_str()) != 0)
      return Status::FromErrno(r.status.message() + ": cannot move it aside to " + aside, errno);
    said.push_back(r.status.message() + ": moved aside to " + aside + "; a new one is started");
  }
  return said;
}

}  // namespace frs::limit

namespace frs {

namespace {
bool IsDamage(const Status& s) { return s.code() == Status::Code::kCorruption || s.code() == Status::Code::kMismatch; }
}  // namespace

bool SideFileReport::RefusesStart() const {
  if (status.ok() || at_start == SideFileAtStart::kSetAsideLater || at_start == SideFileAtStart::kGoesWithout)
    return false;
  return !IsDamage(status) || at_start == SideFileAtStart::kRefuse;
}

std::string SideFileReport::AtStartText() const {
  if (status.ok()) return exists ? "frsd uses it" : "frsd creates it";
  if (link) {
    switch (at_start) {
      case SideFileAtStart::kGoesWithout:
        return "frsd serves, but keeps no recent denials (frsctl top --denied) while it is a link";
      case SideFileAtStart::kSetAsideLater:
        return "frsd serves, but counts no statistics by key field there while it is a link";
      default: return "frsd refuses to start while it is a link";
    }
  }
  // A file that cannot be read (permission, I/O) is not damage, and moving
  // it aside would not help; for lease.key it would unmake every lease id.
  // Day files (and their directory) are not read at start: their statistics
  // go uncounted meanwhile, each time logged.
  if (!IsDamage(status) && at_start == SideFileAtStart::kSetAsideLater)
    return "frsd starts, but counts no statistics by key field here until it can read it: fix its owner, mode or "
           "type (or the disk)";
  if (!IsDamage(status))
    return "frsd refuses to start until it can read it: fix its owner, mode or type (or the disk); it is not damaged, "
           "so do not move it aside";
  switch (at_start) {
    case SideFileAtStart::kRefuse: return "frsd refuses to start until it is moved aside or restored";
    case SideFileAtStart::kSetAside: return "frsd moves it aside at start and starts a new one";
    case SideFileAtStart::kSetAsideLater:
      // A handoff's received file is never written again, so never moved:
      // each read leaves out what is damaged and counts the file in lost.
      if (os::store_dir::KindOfDayFile(std::filesystem::path(path).filename().string()) ==
          os::store_dir::DayFile::kReceived)
        return "frsd never writes it: GET /stats sums what of it is readable and counts it in lost, at every read; "
               "move it aside (what it held is lost either way) or restore it";
      return "frsd moves it aside when it next counts that day, and starts the day anew";
    case SideFileAtStart::kGoesWithout: return "frsd serves without it";
  }
  return "";
}

std::vector<SideFileReport> CheckStoreSideFiles(const std::string& dir) { return limit::CheckSideFiles(dir); }
std::string LeaseKeyMissingWarning(const std::string& dir) { return limit::LeaseKeyMissingWarning(dir); }
std::string RuleHistoryUnreadableWarning(const std::string& dir) {
  // A damaged line is not this (the rest of the file is read): no line is.
  const Status h = limit::RuleHistory::Readable(dir);
  return h.ok() ? std::string() : h.message();
}
bool StoreNeverServed(const std::string& dir) { return limit::StoreNeverServed(dir); }
std::string LeaseKeyModeWarning(const std::string& dir) { return limit::LeaseKeyModeWarning(dir); }

}  // namespace frs
