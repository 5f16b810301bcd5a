#include "server/config_watch.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "os/unique_dir.h"

namespace frs::server {

namespace {

constexpr uint32_t kDirEvents = IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
// The parent: only its entries created, removed or renamed (the directory
// or its link replaced); its other files' writes are none of ours.
constexpr uint32_t kParentEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR;

}  // namespace

ConfigWatch::~ConfigWatch() { Close(); }

void ConfigWatch::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  parent_wd_ = -1;
  link_parents_.clear();
  dir_unwatched_ = false;
}

void ConfigWatch::WatchLinksOnPath(const std::string& dir, int hops) {
  // Each prefix of the path, as written: a link among them swapped
  // replaces the directory as surely as the directory's own link (one that
  // cannot be watched is left: its own path's watches still see most). A
  // link's target is a path too, whose links count the same: the rest is
  // walked through it (a link to /srv/rl/current/ratelimit with "current"
  // swapped reloaded nothing: found by a review). As many hops as the
  // kernel follows (40) end a loop.
  if (hops > 40) return;
  for (size_t end = dir.find('/', 1);; end = dir.find('/', end + 1)) {
    const std::string prefix = end == std::string::npos ? dir : dir.substr(0, end);
    struct stat st {};
    if (prefix.empty() || ::lstat(prefix.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      if (end == std::string::npos) return;
      continue;
    }
    const size_t slash = prefix.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : prefix.substr(0, slash);
    // The directory's own link as written: its parent's watch (Rearm).
    if (end != std::string::npos || hops > 0) {
      const int wd = ::inotify_add_watch(fd_, parent.c_str(), kParentEvents | IN_MASK_ADD);
      if (wd >= 0) link_parents_[wd].insert(slash == std::string::npos ? prefix : prefix.substr(slash + 1));
    }
    char target[PATH_MAX];
    const ssize_t n = ::readlink(prefix.c_str(), target, sizeof target);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof target) return;
    std::string through(target, static_cast<size_t>(n));
    if (through[0] != '/') through = parent + "/" + through;
    WatchLinksOnPath(through + (end == std::string::npos ? std::string() : dir.substr(end)), hops + 1);
    return;
  }
}

Status ConfigWatch::AddTree(const std::string& dir, int depth, std::set<std::pair<dev_t, ino_t>>* seen) {
  struct stat self {};
  if (::stat(dir.c_str(), &self) == 0 && !seen->emplace(self.st_dev, self.st_ino).second) return Status::OK();
  // inotify_add_watch follows a symbolic link: a directory reached through
  // one (a ConfigMap's "..data") is watched where it really is.
  if (::inotify_add_watch(fd_, dir.c_str(), kDirEvents) < 0)
    return Status::FromErrno("cannot watch " + dir + " (inotify)", errno);
  if (depth >= 16) return Status::OK();  // ReadEnvoyDir refuses deeper trees
  const os::UniqueDir d = os::OpenDir(dir.c_str());
  if (d == nullptr) return Status::OK();  // gone meanwhile: its parent's event says so
  Status first;
  while (dirent* e = ::readdir(d.get())) {
    const std::string_view n = e->d_name;
    if (n.starts_with(".")) continue;
    const std::string path = dir + "/" + std::string(n);
    // stat, not lstat: a link to a directory (a ConfigMap item under a
    // "/": team-a -> ..data/team-a) is read through (ReadEnvoyDir), and
    // watched where it leads, each directory once.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (Status s = AddTree(path, depth + 1, seen); !s.ok() && first.ok()) first = s;
  }
  return first;
}

Status ConfigWatch::Rearm(const std::string& dir, const std::vector<std::string>& unwatched) {
  Close();
  dir_ = dir;
  if (dir.empty()) return Status::OK();
  fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0) return Status::FromErrno("inotify_init1", errno);
  const size_t slash = dir.find_last_of('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  base_ = slash == std::string::npos ? dir : dir.substr(slash + 1);
  parent_wd_ = ::inotify_add_watch(fd_, parent.c_str(), kParentEvents);
  if (parent_wd_ < 0) return Status::FromErrno("cannot watch " + parent + " (inotify)", errno);
  WatchLinksOnPath(dir);
  // The directory's own dot entries (a ConfigMap's "..data" link) count as
  // changes too: the watch on the directory itself reports them. frsd's
  // own directories count as walked already: never watched.
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const std::string& own : unwatched) {
    struct stat st {};
    if (!own.empty() && ::stat(own.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) seen.emplace(st.st_dev, st.st_ino);
  }
  Status s = AddTree(dir, 0, &seen);
  // The directory itself, not one of its subdirectories (inotify's watch
  // limit): only a directory that does not resolve makes every change of
  // its parent one to look at.
  struct stat st;
  dir_unwatched_ = !s.ok() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode));
  return s;
}

bool ConfigWatch::Drain() {
  if (fd_ < 0) return false;
  bool changed = false;
  alignas(inotify_event) char buf[16 * (sizeof(inotify_event) + NAME_MAX + 1)];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {
        changed = true;  // events lost: reload to be sure
      } else if (const auto link = link_parents_.find(ev->wd); link != link_parents_.end() || ev->wd == parent_wd_) {
        if (ev->wd == parent_wd_ && (dir_unwatched_ || (ev->len > 0 && base_ == ev->name))) changed = true;
        if (link != link_parents_.end() && ev->len > 0 && link->second.count(ev->name) != 0) changed = true;
      } else if (!(ev->mask & IN_IGNORED)) {
        // A hidden file's change is not one of the configuration's (the
        // loader reads none): an editor's swap file, a sidecar's heartbeat
        // reloaded everything each time. A ConfigMap's "..data" and
        // "..2024_..." entries are: their names start with "..".
        const bool hidden = ev->len > 0 && ev->name[0] == '.' && ev->name[1] != '.';
        if (!hidden) changed = true;
      }
    }
  }
  return changed;
}

}  // namespace frs::server
