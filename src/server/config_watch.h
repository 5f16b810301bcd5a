// server/config_watch.h: <grpc config>'s directory watched with inotify, so
// that frsd's master reloads the Envoy configuration when it changes, as
// envoyproxy/ratelimit's runtime loader does.
//
// Watched: the directory and every subdirectory whose name does not start
// with '.' (the files ReadEnvoyDir reads), for files written, created,
// removed, renamed or re-linked in them (a name starting with one '.' is
// no change: the loader reads none); the directory's own entries starting
// with ".." too, so that a Kubernetes ConfigMap's update (a new
// "..2024_..." directory, then "..data" renamed over the old link) is one
// change; and the directory's parent, for the directory itself replaced
// (a symbolic link such as envoyproxy/ratelimit's RUNTIME_ROOT "current"
// swapped to another version), and the parent of every symbolic link on
// the directory's path, for that link swapped (upstream's RUNTIME_ROOT
// "current" is the link in <grpc config>="ROOT/current/ratelimit", two
// levels up). The master drains the events, waits until the directory has
// been quiet for kQuietMs (an editor's or kubelet's several steps are one
// reload), kMaxWaitMs at most from the first change (a file written there
// every 100 ms held a changed limit back for as long as it went on, found
// from outside), then reloads as SIGHUP does and calls Rearm(): the set of
// directories may have changed. Directories frsd writes in (its log's, the
// store) are never watched, even when a link in the tree leads to one: each
// reload refused would write a line there, and the line reload it again.
//
// Thread safety: the master's thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "frs/status.h"

namespace frs::server {

class ConfigWatch {
 public:
  static constexpr int64_t kQuietMs = 200;
  static constexpr int64_t kMaxWaitMs = 2000;

  ConfigWatch() = default;
  ~ConfigWatch();
  ConfigWatch(const ConfigWatch&) = delete;
  ConfigWatch& operator=(const ConfigWatch&) = delete;

  // Watches `dir` (and what is said above) from now on, dropping any
  // earlier watch; "" stops watching. `unwatched`: directories never
  // watched (frsd's own, where it writes). A directory that cannot be
  // watched (inotify's limits) is an error; the watch then covers what it
  // could.
  Status Rearm(const std::string& dir, const std::vector<std::string>& unwatched = {});
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

  // Watches the parents of the links on the directory's path, and on the
  // paths those links lead to (`hops` of them followed so far): a change
  // there is ours when it names the link (link_parents_).
  void WatchLinksOnPath(const std::string& dir, int hops = 0);

  int fd_ = -1;
  std::string dir_;
  std::string base_;  // the directory's own name, in its parent's events
  int parent_wd_ = -1;
  std::map<int, std::set<std::string>> link_parents_;  // watch -> the link names it reports
  // The directory itself could not be watched (missing, or a link to a
  // directory not made yet): every change of its parent is then one to
  // look at, since the link's target may be made there under another name.
  bool dir_unwatched_ = false;
};

}  // namespace frs::server
