// frsctl grow --keynodes N [--files F] [--chain C]: moves a stopped store to
// a new geometry in place, keeping every node (its state, expiry, last use
// and route position) and the daily statistics (stats.frs).
//
// Only on a stopped store (store_users.h says how a user is found); frsd's
// store lock (DIR/frsd.lock) is held from the check to the end, so no frsd
// starts on the directory meanwhile.
//
// Crash safety: the old store is only read (mapped read-only, without chain
// locks, which nobody else contends for). The new one is built in the
// sibling directory DIR.grow-new (nodes copied with the store's own API, by
// fingerprint; stats.frs copied; every other file of DIR carried by a hard
// link), checked (Store::Verify, and every node compared with the old one),
// synced, and then exchanged with DIR in one renameat2(RENAME_EXCHANGE): a
// kill at any instant leaves DIR holding either the old store or the new one,
// whole. DIR.grow-new then holds whichever DIR does not, and is removed; a
// grow killed before that leaves it behind, and the next grow removes it
// (and a DIR.grow-old, see Swap) once it holds the store lock.
//
// Nobody else may write the old store during a grow (docs/frsctl.md): a
// command that opened it is seen by the checks of its users, but one that
// opened, wrote and closed it between two checks was not, and its write
// stayed in the old store, left behind by the swap (a `set` that said "count
// set" and then read its old value). So the old files are hashed before the
// copy and again under the swap's exclusive locks: any byte written
// meanwhile stops the grow, changing nothing. (An opener blocked on those
// locks maps and locks the new files once they are released:
// MappedFile::Open checks that its path still names the file it locked.)
//
// Last use: Store::Update writes `now_s` as the node's last access, so each
// node is written with now_s = its old last_access_s. Staleness during the
// copy is then judged at a time no later than now, so the copy never counts
// as stale a node that is not stale now.
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <xxhash.h>

#include "commands.h"
#include "format.h"
#include "frs/stop_request.h"
#include "frs/store_admin.h"
#include "frs/store_dir.h"
#include "json_out.h"
#include "store_users.h"

namespace frs::ctl {
namespace {

namespace fs = std::filesystem;

// The store being built (after the swap, the old one), and the old store
// where RENAME_EXCHANGE is unsupported.
const std::string kBuildSuffix(store_dir::kGrowNewSuffix);
const std::string kOldSuffix(store_dir::kGrowOldSuffix);

std::string Geo(const StoreGeometry& g) {
  return std::to_string(g.files) + " x " + Grouped(g.keynodes) + " x " + std::to_string(g.chain);
}

// The <store> line to put in srv.xml at `srv_xml`: its dir relative to
// srv.xml's folder when the store lies under it (as srv.xml names it:
// relative paths are srv.xml's folder's), else the absolute path.
std::string StoreXml(const std::string& srv_xml, const std::string& dir, const StoreGeometry& g) {
  const std::filesystem::path rel =
      std::filesystem::path(dir).lexically_relative(std::filesystem::path(srv_xml).parent_path());
  const bool under = !rel.empty() && *rel.begin() != ".." && rel.is_relative();
  return "<store dir=\"" + (under ? rel.string() : dir) + "\" files=\"" + std::to_string(g.files) + "\" keynodes=\"" +
         std::to_string(g.keynodes) + "\" chain=\"" + std::to_string(g.chain) + "\"/>";
}

bool Expired(const NodeInfo& n, uint32_t now) { return n.expire_s != 0 && n.expire_s <= now; }

// The node's identity as the store needs it to place it anew: by
// fingerprint, with the key bytes it has (a prefix when it was cut).
KeyRef RefOf(const NodeInfo& n) {
  KeyRef k;
  k.biz = n.biz;
  k.fp = n.fp;
  k.bytes = n.key;
  k.key_len = n.key_len;
  k.route_pos = n.route_pos;
  k.route_known = n.route_known;
  // A general node that holds its whole key stays one (a biz with
  // keys="keep"); anything else is placed as the store would place it now.
  // A key that is its own identity (up to 8 bytes, an integer, an IPv4
  // address) is known whole from the node's header whatever the node
  // stores: it is kept only when keeping it fits the node's span, as it
  // does when the node was made to keep it. Kept always, a 5-byte key of a
  // two-rule node (32 bytes of state, 4 left for key bytes) took 3 slots
  // where it had 2.
  k.keep_key = !n.compact && n.key_len > 0 && n.key.size() == n.key_len &&
               NodeSlots(static_cast<uint32_t>(n.state.size()), n.key_len) <= n.span;
  return k;
}

std::string NodeName(const NodeInfo& n) {
  return "biz " + std::to_string(n.biz) + " key \"" + Printable(n.key) + (n.key.size() < n.key_len ? "..." : "") + "\"";
}

bool SameNode(const NodeInfo& a, const NodeInfo& b) {
  return a.biz == b.biz && a.fp == b.fp && a.key_len == b.key_len && a.key == b.key && a.expire_s == b.expire_s &&
         a.last_access_s == b.last_access_s && a.route_pos == b.route_pos && a.route_known == b.route_known &&
         a.state == b.state;
}

// DIR without a trailing slash, through its symlinks (the siblings must be
// on its file system, next to the real directory).
std::string ResolveDir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::path(dir).lexically_normal();
  if (p.has_filename() == false) p = p.parent_path();
  fs::path real = fs::canonical(p, ec);
  return (ec ? p : real).string();
}

// The geometry the store's files say they have (not srv.xml's: the operator
// may have edited srv.xml already). A store of the format before this
// build's is `frsctl upgrade`'s to read: *format says which it is (one of
// format 5, unkeyed placement, this build reads as it is).
Result<StoreGeometry> GeometryOnDisk(const std::string& dir, uint32_t* format) {
  Result<StoreOnDisk> on_disk = InspectStoreFiles(dir);
  if (!on_disk.ok()) return on_disk.status();
  *format = on_disk->format_version;
  return on_disk->geometry;
}

Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return Status::FromErrno(path, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : Status::FromErrno(path + ": fsync", err);
}

// Gives `path` the owner and permission bits of `like` (frsd may run as its
// own user while frsctl runs as root).
Status MatchOwner(const std::string& path, const struct stat& like) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::FromErrno(path, errno);
  if ((st.st_uid != like.st_uid || st.st_gid != like.st_gid) && ::lchown(path.c_str(), like.st_uid, like.st_gid) != 0)
    return Status::FromErrno("cannot give " + path + " the owner of the old store", errno);
  if (!S_ISLNK(st.st_mode) && (st.st_mode & 07777) != (like.st_mode & 07777) &&
      ::chmod(path.c_str(), like.st_mode & 07777) != 0)
    return Status::FromErrno(path + ": chmod", errno);
  return Status::OK();
}

// A whole copy of a regular file, synced, with its owner and mode.
Status CopyFile(const std::string& from, const std::string& to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status::FromErrno(from, errno);
  struct stat st;
  if (::fstat(in, &st) != 0) {
    int err = errno;
    ::close(in);
    return Status::FromErrno(from, err);
  }
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 07777);
  if (out < 0) {
    int err = errno;
    ::close(in);
    return Status::FromErrno(to, err);
  }
  Status result;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result = Status::FromErrno(from, errno);
      break;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        result = Status::FromErrno(to, errno);
        break;
      }
      off += w;
    }
    if (!result.ok()) break;
  }
  if (result.ok() && ::fsync(out) != 0) result = Status::FromErrno(to + ": fsync", errno);
  ::close(in);
  ::close(out);
  if (result.ok()) result = MatchOwner(to, st);
  return result;
}

bool IsStoreFileName(const std::string& name) {
  uint32_t index;
  return name == store_dir::kDailyStats || store_dir::ParseStoreFileName(name, &index);
}

// Every other entry of the old directory (frsd.lock, frsd.log, ...) goes
// into the new one: regular files by a hard link (the old directory is about
// to go, and a link carries frsd.lock's flock too), the rest copied.
Result<std::vector<std::string>> CarryOthers(const std::string& from, const std::string& to) {
  std::vector<std::string> carried;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(from, ec)) {
    const std::string name = e.path().filename().string();
    if (IsStoreFileName(name)) continue;
    const std::string src = e.path().string(), dst = to + "/" + name;
    fs::file_status st = e.symlink_status(ec);
    if (ec) return Status::IOError(src + ": " + ec.message());
    if (fs::is_regular_file(st)) {
      if (::link(src.c_str(), dst.c_str()) != 0) {
        if (errno != EXDEV && errno != EPERM && errno != EMLINK) return Status::FromErrno("cannot link " + src, errno);
        if (Status s = CopyFile(src, dst); !s.ok()) return s;
      }
    } else if (fs::is_symlink(st) || fs::is_directory(st)) {
      fs::copy(src, dst, fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
      if (ec) return Status::IOError("cannot copy " + src + " to " + dst + ": " + ec.message());
    } else {
      continue;  // a socket or a fifo: nothing to keep
    }
    carried.push_back(name);
  }
  if (ec) return Status::IOError(from + ": " + ec.message());
  return carried;
}

// Removes what an interrupted grow left beside DIR.
std::vector<std::string> RemoveLeftovers(const std::string& dir) {
  std::vector<std::string> removed;
  for (const std::string& suffix : {kBuildSuffix, kOldSuffix}) {
    const std::string p = dir + suffix;
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    fs::remove_all(p, ec);
    removed.push_back(p);
  }
  return removed;
}

// Removes the directory being built unless disarmed.
class BuildDir {
 public:
  explicit BuildDir(std::string path) : path_(std::move(path)) {}
  ~BuildDir() {
    std::error_code ec;
    if (armed_) fs::remove_all(path_, ec);
  }
  BuildDir(const BuildDir&) = delete;
  BuildDir& operator=(const BuildDir&) = delete;
  void Disarm() { armed_ = false; }

 private:
  std::string path_;
  bool armed_ = true;
};

struct Survey {
  uint64_t nodes = 0, live = 0, expired = 0, live_slots = 0;
  uint32_t max_span = 0;
  std::string max_span_node;
};

Result<Survey> SurveyNodes(Store& store, uint32_t now) {
  Survey s;
  Status st = store.ForEach(Store::Filter{}, [&](const NodeInfo& n) {
    ++s.nodes;
    if (Expired(n, now)) {
      ++s.expired;
    } else {
      ++s.live;
      s.live_slots += n.span;
    }
    if (n.span > s.max_span) {
      s.max_span = n.span;
      s.max_span_node = NodeName(n);
    }
  });
  if (!st.ok()) return st;
  return s;
}

// Copies the nodes that are (`expired`) or are not expired now. The live
// ones go first: any eviction among them means the new geometry has no room
// for them, and the grow stops. Expired nodes (every window ended: the same
// as no node) may then lose their place for want of room; the check counts
// those.
Status CopyNodes(Store& from, Store& to, uint32_t now, bool expired, const StoreGeometry& g, uint64_t* copied) {
  Status failed;
  Status walk = from.ForEach(Store::Filter{}, [&](const NodeInfo& n) {
    if (!failed.ok() || Expired(n, now) != expired) return;
    UpdateResult r;
    Status st = to.Update(
        RefOf(n), static_cast<uint32_t>(n.state.size()), n.last_access_s,
        [&](NodeRef& ref) {
      if (!n.state.empty()) std::memcpy(ref.state, n.state.data(), n.state.size());
      ref.expire_s = n.expire_s;
      return Commit::kWrite;
        },
        &r);
    if (!st.ok()) {
      failed = Status::IOError("cannot write " + NodeName(n) + " into the new store: " + st.message());
      return;
    }
    if (r.found) {
      failed = Status::Corruption("two nodes of one identity (" + NodeName(n) +
                                  ") in the old store: run `frsctl verify --repair` first");
      return;
    }
    if (!expired && (r.evicted_live || r.evicted_stale)) {
      failed =
          Status::InvalidArgument("the new geometry " + Geo(g) + " has no room for every live node: placing " +
                                  NodeName(n) + " evicted another from its two key-nodes (" + std::to_string(g.chain) +
                                  " slots each); choose more key-nodes or a longer chain (nothing changed)");
      return;
    }
    ++*copied;
  });
  return walk.ok() ? failed : walk;
}

struct Check {
  uint64_t compared = 0, dropped_expired = 0;
};

// Every node of the old store, looked up in the new one: the same state,
// expiry, last use, key and route. Only an expired node may be missing.
Result<Check> CompareNodes(Store& from, Store& to, uint32_t now) {
  Check c;
  Status failed;
  Status walk = from.ForEach(Store::Filter{}, [&](const NodeInfo& n) {
    if (!failed.ok()) return;
    Result<NodeInfo> got = to.Get(RefOf(n));
    if (!got.ok()) {
      if (got.status().IsNotFound() && Expired(n, now)) {
        ++c.dropped_expired;
        return;
      }
      // Every live node was placed by the first pass without evicting one;
      // an expired node placed after it at its own last use can still have
      // pushed it out (the least recent of its two chains): the geometry is
      // too tight once the expired nodes take room, not a damaged copy.
      failed = got.status().IsNotFound()
                   ? Status::InvalidArgument("the new geometry is too tight: the live " + NodeName(n) +
                                             " was pushed out of its two key-nodes by the expired nodes copied "
                                             "after it; choose more key-nodes or a longer chain (nothing changed)")
                   : got.status();
      return;
    }
    if (!SameNode(n, got.value())) {
      failed = Status::Corruption(NodeName(n) + " differs in the new store");
      return;
    }
    ++c.compared;
  });
  if (!walk.ok()) return walk;
  if (!failed.ok()) return failed;
  return c;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// DIR <-> DIR.grow-new in one step. Where the file system cannot exchange
// (no RENAME_EXCHANGE), two renames: DIR -> DIR.grow-old, DIR.grow-new ->
// DIR; a kill between them leaves no DIR (and both leftovers), which the
// next grow refuses to guess about (see RunGrow); a DIR.grow-old alone is
// the old store after a completed swap, and is removed. Returns where the
// old store is now.
Result<std::string> Swap(const std::string& dir, const std::string& build) {
  if (::renameat2(AT_FDCWD, build.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) return build;
  if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
    return Status::FromErrno("cannot exchange " + build + " and " + dir, errno);
  const std::string old = dir + kOldSuffix;
  if (::rename(dir.c_str(), old.c_str()) != 0) return Status::FromErrno("cannot rename " + dir, errno);
  if (::rename(build.c_str(), dir.c_str()) != 0) {
    int err = errno;
    if (::rename(old.c_str(), dir.c_str()) != 0)
      return Status::FromErrno("cannot rename " + build + " to " + dir + ", nor put " + old + " back: move " + old +
                                   " to " + dir + " by hand",
                               err);
    return Status::FromErrno("cannot rename " + build + " to " + dir, err);
  }
  return old;
}

// XXH3 of the bytes of `paths`, in order, each read whole (1 MiB at a time).
Result<uint64_t> HashOfFiles(const std::vector<std::string>& paths) {
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return Status::IOError("cannot hash the store files: out of memory");
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> owned(state, XXH3_freeState);
  XXH3_64bits_reset(state);
  std::vector<char> buf(1 << 20);
  for (const std::string& p : paths) {
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno(p, errno);
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(fd.get(), buf.data(), buf.size(), at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno(p, errno);
      if (n == 0) break;
      XXH3_64bits_update(state, buf.data(), static_cast<size_t>(n));
      at += n;
    }
  }
  return static_cast<uint64_t>(XXH3_64bits_digest(state));
}

// FRS_TEST_GROW_BEFORE_SWAP=PATH (the tests): before the swap's locks, the
// grow writes PATH.ready and waits until PATH exists, so that a test can
// write the store at that instant.
void TestPauseBeforeSwap() {
  const char* at = std::getenv("FRS_TEST_GROW_BEFORE_SWAP");
  if (at == nullptr || *at == '\0') return;
  std::ofstream(std::string(at) + ".ready") << "ready\n";
  for (int i = 0; i < 3000 && ::access(at, F_OK) != 0; ++i) ::usleep(10 * 1000);
}

}  // namespace

Result<int> RunGrow(Session& s, const GrowArgs& a) {
  const uint32_t now = static_cast<uint32_t>(std::time(nullptr));
  const std::string dir = ResolveDir(s.cfg.store_dir);
  const std::string build = dir + kBuildSuffix;

  uint32_t format_from = kStoreFormatVersion;
  Result<StoreGeometry> on_disk = GeometryOnDisk(dir, &format_from);
  const bool format4 = format_from == kPreviousStoreFormatVersion;
  // Format 5 is read as it is; upgraded (or grown), it becomes a keyed store.
  const bool older = format_from != kStoreFormatVersion;
  {
    // Killed between the two renames of Swap's fallback: the old store is in
    // DIR.grow-old, the new one (checked) in DIR.grow-new, and DIR is missing,
    // or was created since by an frsd start. Only the operator can choose.
    std::error_code ec;
    const bool old_left = fs::exists(dir + kOldSuffix, ec), build_left = fs::exists(build, ec);
    if (old_left && (build_left || on_disk.status().IsNotFound()))
      return Status::Unavailable("an interrupted grow left " + dir + kOldSuffix + " (the store from before it)" +
                                 (build_left ? " and " + build + " (the grown store, complete and checked)" : "") +
                                 ", and " + dir +
                                 (on_disk.ok() ? " holds a store created since (by a start of frsd?)" : " is missing") +
                                 ": move the one to keep to " + dir +
                                 ", make srv.xml's <store> geometry match it, remove the rest, then "
                                 "start frsd");
  }
  if (!on_disk.ok()) return on_disk.status();
  const StoreGeometry from = on_disk.value();
  if (a.upgrade && !older)
    return Status::InvalidArgument(dir + " is a store of format " + std::to_string(kStoreFormatVersion) +
                                   " already: nothing to upgrade");
  const StoreGeometry to{a.files ? a.files : from.files, a.keynodes ? a.keynodes : from.keynodes,
                         a.chain ? a.chain : from.chain};
  if (to.files < 1 || to.files > 256) return Status::InvalidArgument("--files must be 1..256");
  if (to.keynodes < 1 || to.keynodes > (1u << 26)) return Status::InvalidArgument("--keynodes must be 1..67108864");
  if (to.chain < 1 || to.chain > 64) return Status::InvalidArgument("--chain must be 1..64");
  if (to == from && !older)
    return Status::InvalidArgument(dir + " already has the geometry " + Geo(to) +
                                   " (files x keynodes x chain): give --keynodes, --files or --chain of another one");

  // A stopped store only. The store lock is held to the end: no frsd starts.
  if (pid_t pid = LiveFrsdFromPidFile(s.cfg.pidfile))
    return Status::Busy("frsd (pid " + std::to_string(pid) + ", pid file " + s.cfg.pidfile +
                        ") is running on this store: stop it first (e.g. systemctl stop frsd); grow works on a "
                        "stopped store only");
  Result<UniqueFd> store_lock = TakeFrsdStoreLock(dir);
  if (!store_lock.ok()) return store_lock.status();
  std::vector<std::string> paths;
  for (uint32_t i = 0; i < from.files; ++i) paths.push_back(store_dir::In(dir, store_dir::StoreFileName(i)));
  const std::string stats_path = store_dir::In(dir, store_dir::kDailyStats);
  std::error_code ec;
  const bool have_stats = fs::exists(stats_path, ec);
  if (have_stats) paths.push_back(stats_path);
  auto refuse_users = [&]() -> Status {
    std::vector<StoreUser> users = ProcessesMapping(paths);
    // One entry per file a process maps: one process is "it", whatever it maps.
    std::set<pid_t> pids;
    for (const StoreUser& u : users) pids.insert(u.pid);
    const bool one = pids.size() == 1;
    if (!users.empty())
      return Status::Busy(DescribeUsers(users) + (one ? " has " : " have ") + users.front().file + " mapped: stop " +
                          (one ? "it" : "them") +
                          " first (frsd, frsctl or a program linking libfrs); grow works on a stopped store only");
    Result<ExclusiveLocks> probe = ExclusiveLocks::Take(paths);
    return probe.status();
  };
  if (Status st = refuse_users(); !st.ok()) return st;
  const std::vector<std::string> removed = RemoveLeftovers(dir);
  Result<uint64_t> hash_before = HashOfFiles(paths);
  if (!hash_before.ok()) return hash_before.status();

  // The old store, checked and surveyed. Read-only, so without chain locks
  // (nobody else has it open, see above, and no frsd can start): a grow
  // killed mid-walk leaves no lock of a dead owner in it, only its files
  // exactly as they were.
  StoreOptions oo;
  oo.dir = dir;
  oo.geometry = from;
  oo.create_if_missing = false;
  oo.read_only = true;
  Result<std::unique_ptr<Store>> old_r = format4 ? OpenPreviousFormatStore(dir) : Store::Open(oo);
  if (!old_r.ok()) return old_r.status();
  std::unique_ptr<Store> old = std::move(old_r).value();
  Result<Store::VerifyReport> before = old->Verify(false);
  if (!before.ok()) return before.status();
  // A damaged node of a format-4 store is one that format 4 already ignored
  // (its key counted as absent): the upgrade leaves it behind, and says so.
  // This build cannot repair a format-4 store, so refusing would leave no
  // way forward but the old version.
  if (!before->problems.empty() && !format4)
    return Status::Corruption(dir + " has " + std::to_string(before->problems.size()) + " problem(s), the first: " +
                              before->problems.front() + "; run `frsctl verify --repair` first (nothing changed)");
  // The engine's files too, as frsctl verify checks them: a grown store
  // carries them over as they are, so a damaged stats.frs would still stop
  // frsd's start after a grow that said it kept it.
  if (!format4)
    for (const SideFileReport& f : CheckStoreSideFiles(dir))
      if (!f.status.ok())
        return Status::Corruption(f.status.message() + " (" + f.AtStartText() +
                                  "): the store directory has a problem frsctl verify lists; fix it first (nothing "
                                  "changed)");
  const std::vector<std::string> damaged_left = format4 ? before->problems : std::vector<std::string>{};
  Result<Survey> survey = SurveyNodes(*old, now);
  if (!survey.ok()) return survey.status();
  const Survey& sv = survey.value();
  if (sv.max_span > GroupSlots(to))
    return Status::InvalidArgument("--chain " + std::to_string(to.chain) + " and --keynodes " +
                                   std::to_string(to.keynodes) + " make key-node groups of " +
                                   std::to_string(GroupSlots(to)) + " slots, too few: " + sv.max_span_node + " takes " +
                                   std::to_string(sv.max_span) + " slots");
  if (sv.live_slots > to.slots())
    return Status::InvalidArgument("cannot shrink " + dir + " to " + Geo(to) + " = " + Grouped(to.slots()) +
                                   " slots: it holds " + Grouped(sv.live) + " live nodes taking " +
                                   Grouped(sv.live_slots) + " slots (and " + Grouped(sv.expired) +
                                   " expired ones); give a geometry of more slots, with room to spare (key-node groups "
                                   "fill to about 98 %, not to the last slot)");
  const uint64_t new_bytes = uint64_t{to.files} * StoreFileBytes(to);
  {
    struct statvfs vfs;
    const std::string parent = fs::path(dir).parent_path().string();
    if (::statvfs(parent.c_str(), &vfs) == 0) {
      const uint64_t free_bytes = uint64_t{vfs.f_bavail} * vfs.f_frsize;
      if (free_bytes < new_bytes + (1u << 20))
        return Status::Unavailable("the file system of " + dir + " has " + Grouped(free_bytes) +
                                   " bytes free; the grown store needs " + Grouped(new_bytes) +
                                   " beside the old one until the swap (nothing changed)");
    }
  }

  // The new store, beside the old one, owned like it.
  struct stat dir_st, file_st;
  if (::stat(dir.c_str(), &dir_st) != 0) return Status::FromErrno(dir, errno);
  if (::stat(paths.front().c_str(), &file_st) != 0) return Status::FromErrno(paths.front(), errno);
  if (::mkdir(build.c_str(), 0700) != 0) return Status::FromErrno("cannot create " + build, errno);
  BuildDir cleanup(build);
  if (Status st = MatchOwner(build, dir_st); !st.ok()) return st;
  StoreOptions no;
  no.dir = build;
  no.geometry = to;
  no.create_if_missing = true;
  Result<std::unique_ptr<Store>> fresh_r = Store::Open(no);
  if (!fresh_r.ok()) return fresh_r.status();
  std::unique_ptr<Store> fresh = std::move(fresh_r).value();
  if (Status st = fresh->Reserve(); !st.ok()) return st;
  for (uint32_t i = 0; i < to.files; ++i)
    if (Status st = MatchOwner(store_dir::In(build, store_dir::StoreFileName(i)), file_st); !st.ok()) return st;

  uint64_t copied = 0;
  if (Status st = CopyNodes(*old, *fresh, now, /*expired=*/false, to, &copied); !st.ok()) return st;
  if (Status st = CopyNodes(*old, *fresh, now, /*expired=*/true, to, &copied); !st.ok()) return st;
  if (have_stats)
    if (Status st = CopyFile(stats_path, store_dir::In(build, store_dir::kDailyStats)); !st.ok()) return st;

  // The check: the store's own, then node by node, then the statistics.
  Result<Store::VerifyReport> after = fresh->Verify(false);
  if (!after.ok()) return after.status();
  if (!after->problems.empty())
    return Status::Corruption("the grown store failed its check (" + after->problems.front() + "); nothing changed");
  Result<Check> check = CompareNodes(*old, *fresh, now);
  if (!check.ok() && check.status().code() == Status::Code::kInvalidArgument) return check.status();
  if (!check.ok())
    return Status::Corruption("the grown store differs from the old one: " + check.status().message() +
                              "; nothing changed");
  const uint64_t kept = check->compared;
  if (fresh->Stats().total.nodes_used != kept || after->nodes != kept)
    return Status::Corruption("the grown store holds " + Grouped(fresh->Stats().total.nodes_used) + " nodes, " +
                              Grouped(kept) + " expected; nothing changed");
  if (have_stats && ReadWhole(stats_path) != ReadWhole(store_dir::In(build, store_dir::kDailyStats)))
    return Status::Corruption("the copy of " + stats_path + " differs from it; nothing changed");
  const uint64_t slots_used = fresh->Stats().total.slots_used;
  // The old store's events, said once here: the new store counts its own
  // from 0 (stat's hint to grow is about the geometry it names, and
  // /metrics counters restart as at any restart), but live evictions are
  // what called for the grow, and an operator may want them on record.
  const FileStats history = old->Stats().total;
  if (Status st = fresh->Flush(true); !st.ok()) return st;
  fresh.reset();
  old.reset();  // our own mapping of the old files ends here

  Result<std::vector<std::string>> carried = CarryOthers(dir, build);
  if (!carried.ok()) return carried.status();
  if (Status st = FsyncPath(build, true); !st.ok()) return st;
  if (StopRequested()) return Status::Unavailable("interrupted before the swap; nothing changed");

  // Nobody may have opened the old store meanwhile (their writes would be
  // lost): checked again, and the files held exclusively through the swap.
  std::vector<StoreUser> late = ProcessesMapping(paths);
  if (!late.empty())
    return Status::Busy(DescribeUsers(late) + " opened " + late.front().file +
                        " during the grow: stop it and run grow again (nothing changed)");
  TestPauseBeforeSwap();
  Result<ExclusiveLocks> hold = ExclusiveLocks::Take(paths);
  if (!hold.ok())
    return Status::Busy(hold.status().message() + " (it opened the store during the grow; nothing changed)");
  Result<uint64_t> hash_after = HashOfFiles(paths);
  if (!hash_after.ok()) return hash_after.status();
  if (hash_after.value() != hash_before.value())
    return Status::Busy(
        "the store was written during the grow (a frsctl command, or a program linking libfrs, "
        "opened it, wrote and closed it): its writes are in the old store, which stays; nothing "
        "changed: run grow again with nothing else using the store");

  Result<std::string> old_at = Swap(dir, build);
  if (!old_at.ok()) return old_at.status();
  // From here DIR holds the grown store.
  cleanup.Disarm();
  Status synced = FsyncPath(fs::path(dir).parent_path().string(), true);
  std::error_code rm_ec;
  fs::remove_all(old_at.value(), rm_ec);
  hold->Release();

  const bool srv_matches = s.cfg.geometry == to;
  const double occupancy = static_cast<double>(slots_used) / static_cast<double>(to.slots());
  if (s.json) {
    JsonOut j;
    j.BeginObject();
    j.Key("store_dir").String(dir);
    j.Key("format_from").Uint(format_from);
    j.Key("format_to").Uint(kStoreFormatVersion);
    auto geo = [&](const char* key, const StoreGeometry& g) {
      j.Key(key).BeginObject();
      j.Key("files").Uint(g.files).Key("keynodes").Uint(g.keynodes).Key("chain").Uint(g.chain);
      j.Key("slots").Uint(g.slots());
      j.EndObject();
    };
    geo("from", from);
    geo("to", to);
    j.Key("nodes").Uint(kept);
    j.Key("live_nodes").Uint(sv.live);
    j.Key("expired_nodes").Uint(sv.expired);
    j.Key("expired_dropped").Uint(check->dropped_expired);
    j.Key("damaged_left").Uint(damaged_left.size());
    j.Key("occupancy").Double(occupancy);
    j.Key("stats_file").Bool(have_stats);
    j.Key("carried").BeginArray();
    for (const std::string& n : carried.value()) j.String(n);
    j.EndArray();
    j.Key("removed_leftovers").BeginArray();
    for (const std::string& n : removed) j.String(n);
    j.EndArray();
    j.Key("old_store").BeginObject();
    j.Key("evictions_live").Uint(history.evictions_live);
    j.Key("evictions_stale").Uint(history.evictions_stale);
    j.Key("cuckoo_moves").Uint(history.cuckoo_moves);
    j.Key("lock_recoveries").Uint(history.lock_recoveries);
    j.EndObject();
    j.Key("srv_xml").String(s.cfg.path);
    j.Key("srv_xml_store").String(StoreXml(s.cfg.path, s.cfg.store_dir, to));
    j.Key("srv_xml_matches").Bool(srv_matches);
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    for (const std::string& r : removed) std::printf("removed %s, left by an interrupted grow\n", r.c_str());
    if (older)
      std::printf("upgraded %s from store format %u to %u, %s -> %s (files x key-nodes x chain): %s -> %s slots\n",
                  dir.c_str(), format_from, kStoreFormatVersion, Geo(from).c_str(), Geo(to).c_str(),
                  Grouped(from.slots()).c_str(), Grouped(to.slots()).c_str());
    else
      std::printf("%s %s from %s to %s (files x key-nodes x chain): %s -> %s slots\n",
                  to.slots() < from.slots() ? "shrank" : "grew", dir.c_str(), Geo(from).c_str(), Geo(to).c_str(),
                  Grouped(from.slots()).c_str(), Grouped(to.slots()).c_str());
    Table t;
    t.Row({"nodes", Grouped(kept) + " (each checked: state, expiry, last use)"});
    if (check->dropped_expired)
      t.Row({"dropped", Grouped(check->dropped_expired) + " expired nodes (every window ended) found no room"});
    if (!damaged_left.empty())
      t.Row({"left behind", Grouped(damaged_left.size()) +
                                " damaged node(s) that format 4 ignored too, the first: " + damaged_left.front()});
    t.Row({"occupancy", Percent(slots_used, to.slots()) + " of the slots"});
    t.Row({"daily stats", have_stats ? "kept (stats.frs)" : "none yet"});
    if (history.evictions_live + history.evictions_stale + history.lock_recoveries != 0)
      t.Row({"old store", Grouped(history.evictions_live) + " live and " + Grouped(history.evictions_stale) +
                              " stale evictions, " + Grouped(history.lock_recoveries) +
                              " lock recoveries (the grown store counts its own from 0)"});
    std::string others;
    for (const std::string& n : carried.value()) others += (others.empty() ? "" : ", ") + n;
    if (!others.empty()) t.Row({"also kept", others});
    t.Print(stdout, 2);
    if (srv_matches) {
      std::printf("%s already says %s: frsd can start\n", s.cfg.path.c_str(),
                  StoreXml(s.cfg.path, s.cfg.store_dir, to).c_str());
    } else {
      std::printf("now set in %s, before starting frsd (it refuses this store until then):\n  %s\n", s.cfg.path.c_str(),
                  StoreXml(s.cfg.path, s.cfg.store_dir, to).c_str());
    }
  }
  if (!synced.ok()) std::fprintf(stderr, "frsctl: warning: %s\n", synced.message().c_str());
  if (std::string w = KeynodeGroupWarning(to); !w.empty()) std::fprintf(stderr, "frsctl: warning: %s\n", w.c_str());
  if (rm_ec)
    std::fprintf(stderr, "frsctl: warning: could not remove the old store %s (the next grow removes it): %s\n",
                 old_at->c_str(), rm_ec.message().c_str());
  return kExitOk;
}

}  // namespace frs::ctl
