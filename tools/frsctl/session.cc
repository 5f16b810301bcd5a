// frsctl/session.cc: opening srv.xml, the store and the engine for a command.
#include "session.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format.h"
#include "frs/clock.h"
#include "frs/envoy_map.h"
#include "frs/lock_holders.h"
#include "frs/ring.h"
#include "frs/store_admin.h"
#include "frs/store_dir.h"
#include "frs/unique_fd.h"
#include "store_users.h"

namespace frs::ctl {

int64_t Session::NowMs() const { return SystemClock::Default()->NowMs(); }

namespace {

// A file's bytes, or "" with false: a regular file only (a FIFO named as
// map.xml must not hang frsctl), read without waiting.
bool ReadRegularFile(const std::string& path, std::string* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    out->append(buf, static_cast<size_t>(n));
  }
  return true;
}

// What the frsd running on the store runs (frsd.running), while it runs:
// frsd.lock is held, and names that frsd's pid. (/proc/locks names the
// process that took the lock, which a daemonizing frsd is not: it forked
// since, and wrote its own pid in the file.)
std::optional<RunningConfig> LiveRunningConfig(const ServiceConfig& cfg) {
  Result<RunningConfig> rc = ReadRunningConfig(cfg.store_dir);
  const std::string lock = store_dir::In(cfg.store_dir, store_dir::kStoreLock);
  if (!rc.ok()) {
    // None: no frsd, or one older than the file. A damaged one beside a
    // running frsd is said: what follows is map.xml as it is on disk.
    if (!rc.status().IsNotFound() && !FlockHolders(lock).empty())
      std::fprintf(stderr, "frsctl: %s; showing %s as it is on disk, which the running frsd may not run\n",
                   rc.status().message().c_str(), cfg.map_path.c_str());
    return std::nullopt;
  }
  std::string pid_text;
  if (FlockHolders(lock).empty() || !ReadRegularFile(lock, &pid_text) || std::atoll(pid_text.c_str()) != rc->pid)
    return std::nullopt;
  return std::move(rc).value();
}

// Counts are shown, and changed, under the map and the zone frsd enforces,
// not the files as they are now: a map.xml edited and not reloaded yet, or
// refused at its reload (it kept every command from running), and a
// <timezone> that waits for a restart (windows were shown in the new zone).
// Said when the files differ, once a command.
// What a failure to compose the served map names: map.xml's errors start
// with its path, <grpc config>'s with theirs.
std::string WhatDoesNotLoad(const Session& s, const Status& st) {
  return st.message().rfind(s.cfg.map_path, 0) == 0 ? s.cfg.map_path : std::string("<grpc config>");
}

void TakeRunningConfig(Session* s, RunningConfig rc, bool say, EngineOptions* eo) {
  std::string disk;
  const bool readable = ReadRegularFile(s->cfg.map_path, &disk);
  const bool differs = !readable || MapDigest(disk) != rc.map_digest || rc.map_path != s->cfg.map_path;
  // With <grpc config>, the map as frsd would compose it now: map.xml that
  // does not load is said once, below, as what a reload would refuse (the
  // line here sent the reader to a log in which no reload was tried).
  Result<std::string> served = std::string();
  if (say && s->cfg.grpc) served = ServedMapText(s->cfg.path);
  const bool map_broken = !served.ok() && WhatDoesNotLoad(*s, served.status()) == s->cfg.map_path;
  // Missing, not "cannot be reached": exists() is false for both.
  if (say && !readable && ::access(s->cfg.map_path.c_str(), F_OK) != 0 && errno == ENOENT)
    std::fprintf(stderr,
                 "frsctl: %s is missing (a reload of frsd would fail on it); showing the map frsd (pid %lld) runs, "
                 "%s as it was loaded\n",
                 s->cfg.map_path.c_str(), static_cast<long long>(rc.pid), rc.map_path.c_str());
  else if (say && differs && !map_broken)
    std::fprintf(stderr,
                 "frsctl: %s is not the map frsd (pid %lld) runs (changed since it was loaded, or refused at its "
                 "reload: frsd's log says which); showing the map frsd runs, %s as it was loaded\n",
                 s->cfg.map_path.c_str(), static_cast<long long>(rc.pid), rc.map_path.c_str());
  // Envoy's configuration too: frsd watches it and applies a change in a
  // moment, so one that differs here is one it refused (or has not read).
  if (say && s->cfg.grpc) {
    if (map_broken)
      // map.xml's own fault, not <grpc config>'s: no reload was tried, so
      // frsd's log need not say it.
      std::fprintf(stderr,
                   "frsctl: %s does not load (%s): a reload of frsd (pid %lld) would refuse it; showing the map "
                   "frsd runs, %s as it was loaded\n",
                   s->cfg.map_path.c_str(), served.status().message().c_str(), static_cast<long long>(rc.pid),
                   rc.map_path.c_str());
    else if (!served.ok())
      std::fprintf(stderr,
                   "frsctl: %s does not load (%s): frsd (pid %lld) keeps serving the configuration it "
                   "loaded before (its log says so), which is shown\n",
                   WhatDoesNotLoad(*s, served.status()).c_str(), served.status().message().c_str(),
                   static_cast<long long>(rc.pid));
    // Envoy's part alone: map.xml changed on disk (said above) changes the
    // rest, and a change in its layout only was said here too.
    else if (EnvoyPartOf(*served) != EnvoyPartOf(rc.map_text))
      std::fprintf(stderr,
                   "frsctl: <grpc config> as it is on disk is not what frsd (pid %lld) runs (changed a moment ago, "
                   "or refused: frsd's log says which); showing what frsd runs\n",
                   static_cast<long long>(rc.pid));
  }
  if (say && rc.timezone != s->cfg.timezone)
    std::fprintf(stderr,
                 "frsctl: srv.xml's <timezone> is %s, frsd (pid %lld) runs %s until it is restarted: windows are "
                 "shown in %s\n",
                 s->cfg.timezone.empty() ? "UTC" : s->cfg.timezone.c_str(), static_cast<long long>(rc.pid),
                 rc.timezone.empty() ? "UTC" : rc.timezone.c_str(), rc.timezone.empty() ? "UTC" : rc.timezone.c_str());
  s->cfg.timezone = rc.timezone;
  eo->timezone = rc.timezone;
  eo->map_path = rc.map_path;
  eo->map_text = rc.map_text;
  s->running = std::move(rc);
}

// The descriptor of frsd's process `pid` that holds `path` deleted
// ("PATH (deleted)"), or -1: none, or its /proc not ours to read.
int DeletedFileFd(pid_t pid, const std::string& path, bool* readable) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  *readable = !ec;
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::filesystem::path target = std::filesystem::read_symlink(it->path(), ec);
    if (!ec && target.string() == path + " (deleted)") return std::atoi(it->path().filename().c_str());
    ec.clear();
  }
  return -1;
}

// A store file missing while frsd runs on the store. Deleted under frsd, it
// still holds it, every count in it: the store's own advice (restore it, or
// start it empty) would lose them, so this says how to copy it out
// (docs/store.md). Moved, or srv.xml naming another directory than frsd
// runs, frsd holds no such file: said too. Empty when frsd does not run or
// no file is missing.
std::string MissingUnderARunningFrsd(const Session& s) {
  // The pid file when srv.xml names one, else the store lock's frsd.
  pid_t pid = LiveFrsdFromPidFile(s.cfg.pidfile);
  if (pid <= 0)
    if (std::optional<RunningConfig> rc = LiveRunningConfig(s.cfg)) pid = static_cast<pid_t>(rc->pid);
  if (pid <= 0) return "";
  for (uint32_t i = 0; i < s.cfg.geometry.files; ++i) {
    const std::string p = store_dir::In(s.cfg.store_dir, store_dir::StoreFileName(i));
    if (::access(p.c_str(), F_OK) == 0 || errno != ENOENT) continue;
    const std::string pids = std::to_string(pid);
    bool readable = false;
    const int fd = DeletedFileFd(pid, p, &readable);
    if (fd >= 0)
      return p + " is missing while frsd (pid " + pids +
             ") runs on this store: it was deleted under frsd, which still holds it, every count in it. Before "
             "stopping frsd, copy it out of the process onto another file system (`cp /proc/" +
             pids + "/fd/" + std::to_string(fd) +
             " ...`), then stop frsd, move the copy to its name, run `frsctl verify` and "
             "start frsd (docs/store.md, \"a store file deleted while serving\")";
    if (readable)
      return p + " is missing while frsd (pid " + pids +
             ") runs on this store, and frsd holds no deleted file of that name: it was moved (put it back), or "
             "srv.xml's <store dir> is not the directory frsd runs (frsd reads it at its start)";
    return p + " is missing while frsd (pid " + pids +
           ") runs on this store: if it was deleted under frsd, frsd still holds it; copy it out before stopping "
           "frsd (`ls -l /proc/" +
           pids + "/fd | grep '(deleted)'` as frsd's user, then `cp /proc/" + pids +
           "/fd/N` onto another file system; docs/store.md, \"a store file deleted while serving\")";
  }
  return "";
}

}  // namespace

// Refused while an frsd of another PID namespace serves the store (another
// container on its volume, or the host's frsctl beside a container's frsd):
// the store's lock words name the threads that hold them by their ids in
// frsd's namespace, which this process reads as other threads or none, and
// it would take over a lock a live worker holds and undo that worker's
// write under it (a review of the store's crash safety found it).
namespace {

// Whether a process this one cannot see holds `lock`: /proc/locks leaves
// out the locks of a PID namespace this one does not contain (a frsctl in
// a container beside the host's frsd saw none, found from outside), so it
// is asked of the lock itself. Only for a lock file an frsd wrote (not
// empty: a clean stop removes it), since the probe, however brief, could
// make an frsd starting at that instant take this for a running one.
bool HeldUnseen(const std::string& lock) {
  UniqueFd fd(::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return false;
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0) return false;  // released as fd closes
  return errno == EWOULDBLOCK;
}

// The pid, as this namespace numbers it, of the process of PID namespace
// `ns` that is `inner` there (frsd.lock's first line: the master's pid in
// its own namespace), found by /proc/PID/ns/pid and NSpid's last field; 0
// when this namespace sees none. /proc/locks names a daemonized frsd's lock
// by the process that took it before the fork, long gone, and the lock's
// pid is its namespace's: neither is nsenter's target from here.
pid_t PidHereOf(uint64_t ns, long inner) {
  std::error_code ec;
  // increment(ec): a range-for's ++ throws where /proc cannot be read on.
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::directory_entry& e = *it;
    const std::string name = e.path().filename();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    struct stat st {};
    if (::stat((e.path() / "ns/pid").c_str(), &st) != 0 || static_cast<uint64_t>(st.st_ino) != ns) continue;
    std::ifstream status(e.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (!line.starts_with("NSpid:")) continue;
      const size_t last = line.find_last_of(" \t");
      if (last != std::string::npos && line.substr(last + 1) == std::to_string(inner))
        return static_cast<pid_t>(std::stol(name));
      break;
    }
  }
  return 0;
}

Status SamePidNamespaceAsFrsd(const std::string& dir) {
  const std::string lock = store_dir::In(dir, store_dir::kStoreLock);
  const uint64_t theirs = PidNamespaceNamedIn(lock), ours = OwnPidNamespace();
  std::string how;
  if (FlockHeld(lock)) {
    // A holder shown here is of this namespace, or of one this one
    // contains (the host's frsctl beside a container's frsd): the
    // namespace it names tells (an frsd of 0.3.0 names none).
    if (theirs == 0 || ours == 0 || theirs == ours) return Status::OK();
    how = "its lock names pidns " + std::to_string(theirs) + ", this frsctl runs in " + std::to_string(ours);
  } else if (!FlockHeldBySelf(lock) && HeldUnseen(lock)) {  // this frsctl's own (verify --repair, grow)
    // Held by a process /proc/locks does not show: a daemonized frsd of
    // this very namespace (other than the first, where the lock's taker
    // is credited with it after the fork) names it in its lock.
    if (theirs != 0 && theirs == ours) return Status::OK();
    how = "this frsctl cannot see the process that holds its lock";
  } else {
    return Status::OK();
  }
  // nsenter's target: frsd's master as this namespace sees it, when it
  // does (the host's frsctl beside a container's frsd); else a word for it.
  long inner = 0;
  std::ifstream(lock) >> inner;
  const pid_t here = theirs != 0 && inner > 0 ? PidHereOf(theirs, inner) : 0;
  const std::string target = here != 0 ? std::to_string(here) + " --pid --mount"
                                       : "FRSD_PID --pid --mount, FRSD_PID frsd's as the host sees it";
  return Status::Busy("frsd serves " + dir + " from another PID namespace (" + how +
                      ": another container on its volume, or a container's frsd seen from the host): the store's "
                      "locks name frsd's threads by their ids there, which frsctl here would read as dead and take "
                      "over; run frsctl in frsd's namespace (docker exec, kubectl exec, or nsenter --target " +
                      target + ")");
}

}  // namespace

Status OpenStoreAndEngine(Session* s, bool create, bool engine) {
  if (Status st = SamePidNamespaceAsFrsd(s->cfg.store_dir); !st.ok()) return st;
  StoreOptions so = StoreOptionsFor(s->cfg, create);
  // What the store recovers or passes over (a dead holder's lock taken
  // over, a long wait on a live one, a damaged node ignored) is said, as
  // frsd logs it: an export or a dump that passed a damaged node over said
  // nothing, and the backup lacked it unseen.
  so.on_recovery = [](const std::string& what) { std::fprintf(stderr, "frsctl: store: %s\n", what.c_str()); };
  // Reading commands work on a store that cannot be written here (a
  // read-only file system, a backup mounted read-only): without locks, see
  // StoreOptions::read_only.
  const std::string first = store_dir::In(s->cfg.store_dir, store_dir::StoreFileName(0));
  if (s->reads_only && ::access(first.c_str(), F_OK) == 0 &&
      (::access(first.c_str(), W_OK) != 0 || ::access(s->cfg.store_dir.c_str(), W_OK) != 0)) {
    so.read_only = true;
    so.create_if_missing = false;
    s->opened_read_only = true;
    std::fprintf(stderr, "frsctl: %s cannot be written here; reading it without locks\n", s->cfg.store_dir.c_str());
  }
  Result<std::unique_ptr<Store>> store = Store::Open(so);
  if (!store.ok()) {
    const Status& st = store.status();
    if (st.IsNotFound())
      if (std::string held = MissingUnderARunningFrsd(*s); !held.empty()) return Status::NotFound(held);
    if (st.IsNotFound())
      return Status::NotFound(st.message() + (st.message().find("frsctl init") != std::string::npos
                                                  ? std::string()
                                                  : ": start frsd, or create the store with `frsctl init`"));
    return st;
  }
  s->store = std::move(store).value();
  if (!engine) return Status::OK();
  EngineOptions eo = EngineOptionsFor(s->cfg, s->store.get());
  eo.read_only = s->opened_read_only || s->writes_nothing;
  eo.history_read_only = s->reads_only;
  // A command that only reads nodes runs without the statistics when their
  // files do not open (their mode, damage): `verify` names those.
  if (s->reads_only && s->reads_nodes_only) {
    eo.statistics_optional = true;
    eo.on_problem = [](const std::string& what) { std::fprintf(stderr, "frsctl: warning: %s\n", what.c_str()); };
  }
  // frsd makes the store's lease secret at its start, with stats.frs: one
  // made here beside a store that served would void, at frsd's next start,
  // every id the running frsd gave out. The first engine of a store that
  // never served (no stats.frs and no node yet: the first command after
  // frsctl init) makes both, as frsd would: else its stats.frs made the
  // store look as one that lost its secret, and frsd -t and the start
  // warned of ids voided that never existed. Not an import's (Session::
  // brings_nodes): its nodes' ids are the exporting store's.
  eo.make_lease_key = !s->brings_nodes && StoreNeverServed(eo.stats_dir);
  // Nor its stats.frs: a new store an import fills is then one whose
  // nodes say it served and whose secret is missing, as it is (frsd -t,
  // the start and verify say to restore it); one the import left empty is
  // still a new store, whose first frsd makes both.
  eo.statistics_in_memory = s->brings_nodes;
  // A second session of one command (import's scratch store) takes what
  // the first found, and does not say it again.
  const bool found_before = s->running.has_value();
  if (std::optional<RunningConfig> rc = found_before ? s->running : LiveRunningConfig(s->cfg)) {
    TakeRunningConfig(s, std::move(*rc), /*say=*/!found_before, &eo);
  } else if (s->cfg.grpc) {
    // The map frsd runs: map.xml with <grpc config>'s descriptors in it, under
    // the ids the running frsd gave them (envoy.ids, read, never written), so
    // every command names an Envoy descriptor's biz as frsd counts it.
    // Envoy's configuration broken (a ConfigMap pushed with an error, which
    // frsd refuses and keeps serving the one it loaded before) must not take
    // away the counts an operator looks at then: a command that only reads
    // sees map.xml's bizzes alone, and says so. One that writes is refused:
    // it would act on a map without the bizzes frsd serves. A map.xml that
    // is broken too fails below.
    Result<std::string> served = ServedMapText(s->cfg.path);
    if (served.ok()) {
      eo.map_text = std::move(served).value();
    } else if (WhatDoesNotLoad(*s, served.status()) == s->cfg.map_path) {
      // map.xml itself: the engine's open below names its fault.
    } else if (s->reads_only) {
      std::fprintf(stderr,
                   "frsctl: warning: <grpc config> does not load (%s): this command sees map.xml's bizzes only, "
                   "not Envoy's descriptors (a running frsd keeps serving the configuration it loaded before)\n",
                   served.status().message().c_str());
    } else {
      return Status::InvalidArgument(served.status().message() +
                                     " (a running frsd keeps serving the configuration it loaded before; the commands "
                                     "that only read, get, explain, "
                                     "dump, stat, top and export, still run on map.xml's bizzes)");
    }
  }
  Result<std::unique_ptr<AdminEngine>> e = AdminEngine::Open(eo);
  if (!e.ok()) {
    // A damaged file beside the store (stats.frs, lease.key, ...) stops
    // every command that reads nodes: say where the way out is.
    const Status& st = e.status();
    const std::string hint =
        " (`frsctl verify` names each damaged file of the store and what frsd's start does with it; the commands "
        "that only read nodes, get, explain, dump, top and export, read around it)";
    // Only for a file of the store directory (a map.xml error is not one):
    // a fault of the store, not of the command line (exit 3, not 2).
    const bool store_file = st.message().rfind(s->cfg.store_dir + "/", 0) == 0;
    if (store_file && st.code() == Status::Code::kCorruption) return Status::Corruption(st.message() + hint);
    if (store_file && st.code() == Status::Code::kInvalidArgument) return Status::IOError(st.message() + hint);
    return st;
  }
  s->engine = std::move(e).value();
  // A rules.history that cannot be read (a FIFO, a device, its mode): the
  // engine ran without the rules' pasts, so a rule whose interval changed
  // since its keys counted shows them at 0. frsd refuses to start or reload
  // so; a command still runs, saying it.
  if (const std::string h = RuleHistoryUnreadableWarning(s->cfg.store_dir); !h.empty())
    std::fprintf(stderr, "frsctl: warning: %s; a rule whose interval changed shows its keys' counts as 0 here\n",
                 h.c_str());
  return Status::OK();
}

namespace {}  // namespace

// frsctl run as root (sudo frsctl stat) on a store directory its service
// user owns: every file it creates there (the side tables a mere read
// opens: stats.frs, denials.frs, rules.history) must be that user's, or
// frsd, running as that user, cannot open them at its next start (a root
// `frsctl get` stopped the next start). So it becomes the directory's owner
// from here on, its group too; what it reads (map.xml, lease.key) that user
// reads as well.
Status ActAsStoreOwner(const std::string& dir) {
  struct stat st;
  if (::geteuid() != 0 || ::stat(dir.c_str(), &st) != 0 || st.st_uid == 0) return Status::OK();
  // For good (real, effective and saved ids, and the group list): nothing
  // after the store is opened needs root, and a process half root would be
  // no one's to trace, LeakSanitizer's scan at exit of its own threads
  // included.
  const gid_t group = st.st_gid;
  if (::setgroups(1, &group) != 0 || ::setresgid(group, group, group) != 0 ||
      ::setresuid(st.st_uid, st.st_uid, st.st_uid) != 0)
    return Status::FromErrno("cannot act as the owner of the store directory " + dir, errno);
  // The kernel made the process undumpable with the change (a debugger, a
  // core file, that scan): it is that user's own process now.
  ::prctl(PR_SET_DUMPABLE, 1);
  return Status::OK();
}

Status OpenSession(const std::string& config_path, Needs needs, Session* s) {
  if (needs == Needs::kNothing) return Status::OK();
  Result<ServiceConfig> cfg = ReadServiceConfig(config_path);
  if (!cfg.ok()) return cfg.status();
  s->cfg = std::move(cfg).value();
  if (needs == Needs::kConfig) return Status::OK();
  if (Status st = ActAsStoreOwner(s->cfg.store_dir); !st.ok()) return st;
  if (needs == Needs::kStoreDir) return Status::OK();
  return OpenStoreAndEngine(s, /*create=*/false, needs == Needs::kEngine);
}

std::optional<KeyHolders> HoldersOfKey(const Session& s, std::string_view key) {
  if (s.cfg.cluster_shards.empty()) return std::nullopt;
  Result<Ring> ring = Ring::Make(s.cfg.cluster_shards);
  if (!ring.ok()) return std::nullopt;  // srv.xml's check refuses such a list before a store opens
  const uint32_t hash = Ring::HashRoute(Ring::RouteOf(key, ""));
  KeyHolders h;
  h.owner = ring->shards()[ring->OwnerOfHash(hash)].name;
  if (s.cfg.cluster_replicas != 0) {
    const long succ = ring->SuccessorOfHash(hash);
    if (succ >= 0) h.successor = ring->shards()[static_cast<size_t>(succ)].name;
  }
  h.self = h.owner == s.cfg.cluster_self || (!h.successor.empty() && h.successor == s.cfg.cluster_self);
  return h;
}

void NoteChangeIsThisShardsOnly(const Session& s, std::string_view key, const char* what) {
  if (s.cfg.cluster_shards.empty()) return;
  if (s.cfg.cluster_replicas == 0) {
    // One holder, the route's owner: a node changed on another shard is one
    // the proxies never send the key to (it changed nothing they see).
    if (key.empty()) return;
    if (std::optional<KeyHolders> h = HoldersOfKey(s, key); h && !h->self)
      std::fprintf(stderr,
                   "frsctl: note: %s changed this shard's store (%s), which does not own the key's route: its owner "
                   "%s serves it and keeps its own node: run the command there\n",
                   what, s.cfg.cluster_self.c_str(), h->owner.c_str());
    return;
  }
  std::string others;
  if (key.empty()) {
    others = "the other shards keep theirs";
  } else if (std::optional<KeyHolders> h = HoldersOfKey(s, key)) {
    const std::string& other = h->owner == s.cfg.cluster_self ? h->successor : h->owner;
    const std::string both = h->owner + (h->successor.empty() ? "" : " and " + h->successor);
    if (!h->self) others = "this shard holds no copy of the key's route: its holders " + both + " keep theirs";
    else if (other.empty()) others = "no other shard holds the key's route";
    else others = "the key's other holder " + other + " keeps its node as it was";
  }
  // A key's command over HTTP changes its two holders; a biz's reset (no
  // key) clears the biz on every shard.
  std::fprintf(stderr,
               "frsctl: note: %s changed this shard's store only (%s); %s. frsd's admin command over HTTP "
               "changes %s (docs/cluster.md, \"What replicas do not carry\")\n",
               what, s.cfg.cluster_self.c_str(), others.c_str(), key.empty() ? "every shard" : "both holders");
}

void HoldersJson(const Session& s, std::string_view key, JsonOut& j) {
  std::optional<KeyHolders> h = HoldersOfKey(s, key);
  if (!h) return;
  j.Key("holder").Bool(h->self).Key("owner").String(h->owner);
  if (!h->successor.empty()) j.Key("successor").String(h->successor);
}

std::string WhyNoNode(const Session& s, std::string_view key) {
  const uint64_t evicted = s.store->Stats().total.evictions_live;
  std::string why = "never counted, or expired and reclaimed";
  if (evicted != 0)
    why += ", or evicted to make room: this store evicted " + Grouped(evicted) +
           " live node(s); frsctl stat shows how full it is";
  if (std::optional<KeyHolders> h = HoldersOfKey(s, key); h && !h->self)
    why += "; and this shard (" + s.cfg.cluster_self + ") holds no copy of the key's route under " + s.cfg.path +
           "'s <cluster>: ask its owner " + h->owner +
           (h->successor.empty() ? "" : " or its successor " + h->successor);
  return why;
}

Result<uint16_t> ResolveBizArg(const Session& s, const std::string& biz) {
  Result<uint16_t> id = s.engine->ResolveBiz(biz);
  if (id.ok()) return id;
  std::string known;
  for (const BizInfo& b : s.engine->Bizzes()) {
    if (!known.empty()) known += ", ";
    known += b.name + " (" + std::to_string(b.id) + ")";
  }
  // An Envoy descriptor as its metrics label it (envoy.DOMAIN.path_/files/*):
  // its biz name has '_' for every byte but [A-Za-z0-9_.-]
  // (docs/integrations.md). Named as a hint, not taken: two paths that
  // differ in such bytes only are two bizzes, told apart otherwise.
  std::string hint;
  if (biz.starts_with("envoy.")) {
    std::string named = biz;
    for (char& c : named)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '_';
    if (named != biz && s.engine->ResolveBiz(named).ok())
      hint = " (an Envoy descriptor's biz name has '_' for each character but letters, digits, '_', '.' and '-': " +
             named + "?)";
  }
  // The bizzes are the map's and, with <grpc config>, Envoy's descriptors'
  // (envoy.DOMAIN...), which come from the YAML files, not from map.xml;
  // beside a running frsd, those of the map it runs, which a map.xml edited
  // since (a biz added, not reloaded yet) does not name.
  const std::string map =
      s.running ? "the map the running frsd runs (" + s.cfg.map_path + " as it last loaded it)" : s.cfg.map_path;
  const std::string from = s.cfg.grpc ? map + " and the <grpc config> files have " : map + " has ";
  return Status::InvalidArgument("unknown biz \"" + PrintableHead(biz) + "\"" + hint + ": " + from +
                                 (known.empty() ? "none" : known));
}

std::optional<uint16_t> BizIdArg(const std::string& biz) {
  if (biz.empty() || biz.size() > 5 || biz.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const unsigned long id = std::stoul(biz);
  if (id < 1 || id > 65535) return std::nullopt;
  return static_cast<uint16_t>(id);
}

int ExitCodeFor(const Status& s) { return s.code() == Status::Code::kInvalidArgument ? kExitUsage : kExitFail; }

}  // namespace frs::ctl
