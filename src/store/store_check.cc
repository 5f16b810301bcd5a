#include "store/store_check.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string_view>

#include "frs/store_dir.h"
#include "os/only_zeros.h"
#include "os/output_file.h"
#include "os/path_access.h"
#include "os/unique_fd.h"
#include "os/whole_file.h"
#include "store/store_file.h"

namespace frs::store {
namespace {

// The engine never opened beside the store: it makes stats.frs, lease.key
// and rules.history at its first open, before a request is served, and
// frsd's start opens it after the store is made. stats.frs of zeros is a
// power loss in a store's first minute; it counts as absent.
bool EngineNeverOpened(const std::string& dir) {
  for (std::string_view name : {store_dir::kLeaseKey, store_dir::kRuleHistory})
    if (::access(store_dir::In(dir, name).c_str(), F_OK) == 0 || errno != ENOENT) return false;
  const std::string stats = store_dir::In(dir, store_dir::kDailyStats);
  os::UniqueFd fd(::open(stats.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return errno == ENOENT;
  Result<bool> zeros = os::HoldsOnlyZeros(fd.get());
  return zeros.ok() && zeros.value();
}

// The file open at `fd`, as ClassifyZeros says; `fd` is left holding the
// file's lock, which a caller that removes the file keeps while it does.
ZerosFile Classify(const std::string& dir, int fd) {
  // Its creator holds the lock until the header is written: a lock held is
  // a making under way (Open waits for it) or a file in use. Taken before
  // the bytes are read, so that a making that ends meanwhile is not read
  // as zeros it no longer is.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return ZerosFile::kNo;
  Result<bool> zeros = os::HoldsOnlyZeros(fd);
  if (!zeros.ok() || !zeros.value()) return ZerosFile::kNo;
  return StoreNeverServedHere(dir) ? ZerosFile::kCutShort : ZerosFile::kDamage;
}

// No store header there: fewer bytes than one, or a magic of 0 (a header
// of zeros; any other is the usual checks' to name).
bool NoHeader(ssize_t read, const FileHeader& h) { return read < static_cast<ssize_t>(sizeof h) || h.magic == 0; }

}  // namespace

bool StoreNeverServedHere(const std::string& dir) { return EngineNeverOpened(dir) && !StoreMayHoldNodes(dir); }

bool FilesNeverMade(const std::string& dir, uint32_t files) {
  int64_t last_there = -1, first_missing = -1;
  for (uint32_t i = 0; i < files; ++i) {
    if (::access(StoreFile::PathFor(dir, i).c_str(), F_OK) == 0) last_there = i;
    else if (errno != ENOENT) return false;  // not ours to see: not "never made"
    else if (first_missing < 0) first_missing = i;
  }
  return last_there >= 0 && first_missing > last_there && StoreNeverServedHere(dir);
}

ZerosFile ClassifyZeros(const std::string& dir, const std::string& path) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return ZerosFile::kNo;
  return Classify(dir, fd.get());
}

Status ZerosDamage(const std::string& path) {
  struct stat st {};
  const std::string size = ::stat(path.c_str(), &st) == 0 ? std::to_string(st.st_size) + " bytes" : "its size unread";
  return Status::Corruption(path + ": holds no byte but zeros (" + size + "), and this store served (its " +
                            std::string(store_dir::kDailyStats) +
                            " holds counters, or its other files nodes): a file zeroed by damage or made by hand, its "
                            "counts lost; restore it from a backup, or remove it and run `frsctl init "
                            "--recreate-missing` with frsd stopped (its keys start again from zero)");
}

Result<std::vector<uint32_t>> RemoveCutShortFiles(const std::string& dir, uint32_t files,
                                                  const std::function<void(const std::string&)>& said) {
  std::vector<uint32_t> removed;
  for (uint32_t i = 0; i < files; ++i) {
    const std::string path = StoreFile::PathFor(dir, i);
    // Missing, or not ours to read: Open's usual checks say what it is.
    os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
    if (!fd.valid()) continue;
    FileHeader h{};
    if (!NoHeader(::pread(fd.get(), &h, sizeof h, 0), h) || Classify(dir, fd.get()) != ZerosFile::kCutShort) continue;
    // Removed only while `path` still names the file checked, under its lock.
    struct stat held, named;
    if (::fstat(fd.get(), &held) != 0 || ::stat(path.c_str(), &named) != 0 || held.st_dev != named.st_dev ||
        held.st_ino != named.st_ino)
      continue;
    if (Status s = os::RemoveFileSynced(path); !s.ok()) return s;
    if (said)
      said(path + ": held no byte but zeros (" + std::to_string(held.st_size) +
           " bytes) and no lock, in a store that never served: a store file whose making was cut short "
           "(a kill, a file size limit, a power loss before its header reached the disk), holding no count; "
           "removed, and made again");
    removed.push_back(i);
  }
  return removed;
}

Status GoneStoreProblem(const std::string& dir, uint32_t files) {
  const std::string stats = store_dir::In(dir, store_dir::kDailyStats);
  Result<bool> served = os::PathExists(stats);
  if (!served.ok()) return served.status();
  // One of zeros kept no count: the power lost in a store's first minute.
  if (!served.value() || EngineNeverOpened(dir)) return Status::OK();
  return Status::NotFound(
      "the store in " + dir + " is gone: none of its files (" + StoreFile::PathFor(dir, 0) +
      (files > 1 ? ", ..." : "") + ") is there, but " + stats +
      " shows a store that served here (its counts are lost unless you restore the files from a "
      "backup); restore them, or start it empty with `frsctl init --recreate-missing` (then `frsctl "
      "import` puts an export back into it)");
}

bool StoreMayHoldNodes(const std::string& dir) {
  // Every store file the directory holds, not frs.0.store on until the
  // first one missing or damaged: a store that lost frs.0.store (or whose
  // header is damaged) keeps its nodes in the others. What cannot be read
  // may hold nodes: the answer "none" makes a new secret beside them.
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return ec != std::errc::no_such_file_or_directory;
  for (const std::filesystem::directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return true;
    uint32_t index = 0;
    if (!store_dir::ParseStoreFileName(it->path().filename().string(), &index)) continue;
    os::UniqueFd fd(::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;  // gone since the listing
      return true;
    }
    FileHeader h{};
    const ssize_t n = ::pread(fd.get(), &h, sizeof h, 0);
    // A file of zeros holds no node (a making cut short, or damage that
    // left nothing).
    if (NoHeader(n, h))
      if (Result<bool> zeros = os::HoldsOnlyZeros(fd.get()); zeros.ok() && zeros.value()) continue;
    if (n != static_cast<ssize_t>(sizeof h) || h.magic != kMagic || h.nodes_used != 0) return true;
  }
  return ec.value() != 0;
}

Result<StoreCheck> CheckStoreFiles(const std::string& dir, const StoreGeometry& g) {
  StoreCheck out;
  std::string missing;
  uint64_t id = 0;
  std::string first;  // the file `id` was read from
  std::vector<std::string> missing_paths;
  for (uint32_t i = 0; i < g.files; ++i) {
    const std::string path = StoreFile::PathFor(dir, i);
    // O_NONBLOCK: a FIFO in a store file's place opens at once, and is
    // refused below, where a plain open waited for a writer for good.
    os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!fd.valid()) {
      if (errno == EACCES || errno == EPERM) return Status::IOError(os::PermissionWords(path));
      if (errno != ENOENT) return Status::FromErrno(path, errno);
      missing += (missing.empty() ? "" : ", ") + path;
      missing_paths.push_back(path);
      continue;
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(path, errno);
    if (!S_ISREG(st.st_mode)) return Status::IOError(os::NotRegularWords(path, st.st_mode));
    FileHeader h{};
    ssize_t n = ::pread(fd.get(), &h, sizeof h, 0);
    if (n < 0) return Status::FromErrno(path, errno);
    if (NoHeader(n, h)) {
      const ZerosFile z = Classify(dir, fd.get());
      if (z == ZerosFile::kDamage) return ZerosDamage(path);
      if (z == ZerosFile::kCutShort) {
        out.cut_short.push_back(path);
        continue;
      }
    }
    if (static_cast<size_t>(n) < sizeof h)
      return Status::Corruption(path + ": shorter than a store file header (" + std::to_string(n) + " bytes)");
    if (Status s = StoreFile::CheckHeader(path, h, g, i, static_cast<uint64_t>(st.st_size)); !s.ok()) return s;
    if (id == 0) {
      id = h.store_id;
      first = path;
    } else if (h.store_id != id) {
      return Status::Mismatch(StoreFile::ForeignFileWords(first, id, path, h.store_id));
    }
    ++out.files_found;
  }
  // A making cut short at one file never made the files after it, nor one
  // killed between two files the next: in a store that never served here
  // they are made (Store::Open), not missing with counts lost.
  if (!missing.empty() && (!out.cut_short.empty() || FilesNeverMade(dir, g.files))) {
    out.never_made = std::move(missing_paths);
    missing.clear();
  }
  if (out.files_found > 0 && !missing.empty())
    return Status::NotFound("the store in " + dir + " is incomplete: missing " + missing +
                            " (the counts it held are lost unless you restore it from a backup); restore it, or start "
                            "it empty with `frsctl init --recreate-missing` (then `frsctl import` puts an export back "
                            "into it)");
  if (out.files_found == 0)
    if (Status gone = GoneStoreProblem(dir, g.files); !gone.ok()) return gone;
  out.exists = out.files_found > 0;
  return out;
}

}  // namespace frs::store
