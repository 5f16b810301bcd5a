// server/config_watch.h: <grpc config>'s directory watched with inotify, so
// that frsd's master reloads the Envoy configuration when it changes, as
// envoyproxy/ratelimit's runtime loader does.
//
// Watched: the directory and every subdirectory whose name does not start
// with '.' (the files ReadEnvoyDir reads), for files written, created,
// removed, renamed or re-linked in them; the directory's own entries
// starting with '.' too, so that a Kubernetes ConfigMap's update (a new
// "..2024_..." directory, then "..data" renamed over the old link) is one
// change; and the directory's parent, for the directory itself replaced
// (a symbolic link such as envoyproxy/ratelimit's RUNTIME_ROOT "current"
// swapped to another version). The master drains the events, waits until
// the directory has been quiet for kQuietMs (an editor's or kubelet's
// several steps are one reload), then reloads as SIGHUP does and calls
// Rearm(): the set of directories may have changed.
//
// Thread safety: the master's thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "frs/status.h"

namespace frs::server {

class ConfigWatch {
 public:
  static constexpr int64_t kQuietMs = 200;

  ConfigWatch() = default;
  ~ConfigWatch();
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // Watches `dir` (and what is said above) from now on, dropping any
  // earlier watch; "" stops watching. A directory that cannot be watched
  // (inotify's limits) is an error; the watch then covers what it could.
  Status Rearm(const std::string& dir);
  // The inotify descriptor to poll for POLLIN; -1 when not watching.
  int fd() const { return fd_; }
  // Reads every pending event (non-blocking): true when one of them is a
  // change to the configuration.
  bool Drain();

 private:
  void Close();
  // `seen`: the directories watched so far (device, inode), so that one
  // reached by several links, or a link to an ancestor, is walked once.
  Status AddTree(const std::string& dir, int depth, std::set<std::pair<dev_t, ino_t>>* seen);

  int fd_ = -1;
  std::string dir_;
  std::string base_;  // the directory's own name, in its parent's events
  int parent_wd_ = -1;
  // The directory itself could not be watched (missing, or a link to a
  // directory not made yet): every change of its parent is then one to
  // look at, since the link's target may be made there under another name.
  bool dir_unwatched_ = false;
};

}  // namespace frs::server
