#include "server/snapshot_missed.h"

#include <fcntl.h>
#include <sys/file.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <functional>
#include <string_view>

#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/unique_fd.h"
#include "os/whole_file.h"

namespace frs::server {

Result<std::vector<MissedSnapshot>> ReadMissedSnapshots(const std::string& store_dir, size_t* unread) {
  std::vector<MissedSnapshot> out;
  size_t skipped = 0;
  auto text = os::ReadTextFile(os::store_dir::In(store_dir, os::store_dir::kSnapshotMissed), 1 << 20);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return out;
    return text.status();
  }
  std::string_view rest = *text;
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    const std::string_view name = line.substr(0, sp);
    const bool printable = std::all_of(name.begin(), name.end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
    MissedSnapshot m{std::string(name), 0};
    const std::string_view t = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), m.at_s);
    if (sp != 0 && sp <= 255 && printable && !t.empty() && ec == std::errc() && p == t.data() + t.size() && m.at_s > 0)
      out.push_back(std::move(m));
    else ++skipped;
  }
  if (unread != nullptr) *unread = skipped;
  return out;
}

Status WriteMissedSnapshots(const std::string& store_dir, const std::vector<MissedSnapshot>& missed) {
  const std::string path = os::store_dir::In(store_dir, os::store_dir::kSnapshotMissed);
  if (missed.empty()) return os::RemoveFileSynced(path);
  std::string text;
  for (const MissedSnapshot& m : missed) text += m.shard + " " + std::to_string(m.at_s) + "\n";
  auto placed = os::WriteFileWhole(path, text, {.sync_file = true, .sync_dir = true});
  return placed.ok() ? Status::OK() : placed.status();
}

namespace {

// The store directory locked (an flock) while the file is read and
// written again: two shards asking at once (a new cluster's start) on two
// workers each read both lines and wrote back the other's, which stayed;
// the catch-up's own writing takes it too. A file system that takes no
// flock of a directory (NFS: EBADF) goes on unlocked, as before.
Result<os::UniqueFd> LockDir(const std::string& store_dir) {
  os::UniqueFd dir(::open(store_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return Status::FromErrno("cannot open " + store_dir, errno);
  if (::flock(dir.get(), LOCK_EX) != 0) {
    if (errno == EBADF || errno == ENOLCK || errno == EINVAL || errno == EOPNOTSUPP) return os::UniqueFd();
    return Status::FromErrno("cannot lock " + store_dir, errno);
  }
  return dir;
}

}  // namespace

Result<bool> ForgetMissedSnapshot(const std::string& store_dir, const std::string& shard) {
  auto lock = LockDir(store_dir);
  if (!lock.ok()) return lock.status();
  auto missed = ReadMissedSnapshots(store_dir);
  if (!missed.ok()) return missed.status();
  const size_t before = missed->size();
  std::erase_if(*missed, [&](const MissedSnapshot& m) { return m.shard == shard; });
  if (missed->size() == before) return false;
  if (Status w = WriteMissedSnapshots(store_dir, *missed); !w.ok()) return w;
  return true;
}

Status NoteMissedSnapshotsLocked(const std::string& store_dir,
                                 const std::function<std::vector<MissedSnapshot>()>& list) {
  auto lock = LockDir(store_dir);
  if (!lock.ok()) return lock.status();
  return WriteMissedSnapshots(store_dir, list());
}

std::string MissedSnapshotWords(const std::string& store_dir, const MissedSnapshot& m, int64_t now_s) {
  char date[32] = "?";
  const time_t t = static_cast<time_t>(m.at_s);
  struct tm tm;
  if (gmtime_r(&t, &tm) != nullptr) strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const int64_t ago = now_s > m.at_s ? now_s - m.at_s : 0;
  return "this store took no snapshot from " + m.shard + " at its first start (" + date + ", " +
         (ago < 7200 ? std::to_string(ago / 60) + " min" : std::to_string(ago / 3600) + " h") +
         " ago): what that shard held then of the routes the two share is counted there but not here, until those "
         "windows end; once it answers, stop this shard, move " +
         store_dir + " aside and start it to take that snapshot (docs/cluster.md, \"Both holders lost\"), or remove " +
         os::store_dir::In(store_dir, os::store_dir::kSnapshotMissed) + " if the windows open then have ended";
}

}  // namespace frs::server
