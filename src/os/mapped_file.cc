#include "os/mapped_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "os/output_file.h"
#include "os/path_access.h"
#include "os/sigbus_guard.h"
#include "os/store_dir.h"

namespace frs::os {

namespace bip = boost::interprocess;

namespace {

// EFBIG for a new file's size: past RLIMIT_FSIZE (`ulimit -f`, a unit's
// LimitFSIZE=), or past what the file system holds in one file (vfat's and
// exFAT's 4 GiB).
std::string FileSizeLimitWords(const std::string& path, uint64_t size) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < size)
    return path + ": cannot be made " + std::to_string(size) + " bytes long: this process's file size limit " +
           "(ulimit -f, LimitFSIZE=) is " + std::to_string(rl.rlim_cur) + " bytes; raise it, or make the store smaller";
  return path + ": cannot be made " + std::to_string(size) +
         " bytes long: the file system holds no file that large; put the store on another, or make each file "
         "smaller (fewer <store keynodes>, more <store files>)";
}

// No block for a new file's first page: the device full, or the quota.
std::string NoRoomWords(const std::string& path, uint64_t size, int err) {
  struct statvfs vfs {};
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const std::string free_words =
      ::statvfs(dir.empty() ? "." : dir.c_str(), &vfs) == 0
          ? std::to_string(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize) + " bytes are free there"
          : "the free bytes unread";
  return path + ": cannot be made (" + std::strerror(err) + "): the file needs " + std::to_string(size) +
         " bytes, and " + free_words + "; nothing was allocated";
}

}  // namespace

struct MappedFile::Region {
  bip::file_mapping mapping;
  bip::mapped_region region;
};

MappedFile::~MappedFile() { UnregisterGuardedMapping(guard_); }

bool MappedFile::IsAt(const std::string& path) const {
  struct stat mine, there;
  return ::fstat(fd_.get(), &mine) == 0 && ::stat(path.c_str(), &there) == 0 && mine.st_dev == there.st_dev &&
         mine.st_ino == there.st_ino;
}

Status MappedFile::CheckStillThere() const {
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return Status::FromErrno(path_ + ": fstat", errno);
  // Where the path leads now. Only an answer that names another file, or
  // none, is a move: a stat refused (a directory's mode changed) says
  // nothing of where the file is.
  struct stat there;
  const bool found = ::stat(at_.c_str(), &there) == 0;
  const bool elsewhere =
      found ? there.st_dev != st.st_dev || there.st_ino != st.st_ino : errno == ENOENT || errno == ENOTDIR;
  if (st.st_nlink == 0) {
    broken_.store(true, std::memory_order_release);
    if (found && elsewhere)
      return Status::Unavailable(path_ +
                                 " was replaced by another file while in use (one renamed over it): its keys are "
                                 "refused from now on; restart what uses the store to serve the file now there");
    return Status::Unavailable(path_ + " was deleted while in use; counts written to it since are not kept");
  }
  if (static_cast<uint64_t>(st.st_size) < size_) {
    broken_.store(true, std::memory_order_release);
    return Status::Unavailable(path_ + " was truncated while in use (" + std::to_string(st.st_size) + " of " +
                               std::to_string(size_) + " bytes)");
  }
  // No file at the path: a move, unless the path comes back within
  // kAbsentNs (a symbolic link or a directory swapped in two steps, which
  // leave it missing for an instant). Another file there is a move at once.
  const int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t since = absent_since_ns_.load(std::memory_order_relaxed);
  if (!elsewhere || found) absent_since_ns_.store(0, std::memory_order_relaxed);
  else if (since == 0) absent_since_ns_.store(since = now_ns, std::memory_order_relaxed);
  if (elsewhere && (found || now_ns - since >= kAbsentNs)) {
    broken_.store(true, std::memory_order_release);
    return Status::Unavailable(path_ +
                               " no longer names the file in use (it was moved, or another was put in its place): "
                               "its keys are refused from now on, since a restart would not find their counts "
                               "there; move the file back and restart what uses the store");
  }
  return Status::OK();
}

Result<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path, Mode mode, uint64_t create_size) {
  std::unique_ptr<MappedFile> f(new MappedFile());  // private constructor: make_unique cannot reach it
  f->path_ = path;

  f->read_only_ = mode == Mode::kReadOnly;
  // O_NONBLOCK: a FIFO opened read-only would wait for a writer (refused
  // below as not a regular file); a regular file's reads and writes do not
  // heed it.
  // Never written through a link (O_NOFOLLOW): one placed at a day file's,
  // stats.frs's or a store file's name had a root frsd count into, or mark
  // as damaged, the file it led to (found from outside). Read-only, a link
  // is followed: nothing is written.
  const int write_flags = O_RDWR | O_NOFOLLOW;
  UniqueFd fd(::open(path.c_str(), (f->read_only_ ? O_RDONLY : write_flags) | O_CLOEXEC | O_NONBLOCK));
  for (int again = 0; !fd.valid() && errno == ENOENT && mode == Mode::kCreateIfMissing && again < 8; ++again) {
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.valid()) {
      // We created it: hold it exclusively until the header is written.
      if (::flock(fd.get(), LOCK_EX) != 0) return Status::FromErrno(path + ": flock", errno);
      // Empty and unlocked until here, it may have been moved aside since
      // (frsd's start sets aside a side file that holds nothing, a
      // creation cut short): then it is no longer the file at `path`, and
      // the mapping (of the path) would be another's. Made again.
      struct stat held, named;
      if (::fstat(fd.get(), &held) != 0) return Status::FromErrno(path + ": fstat", errno);
      const bool there = ::stat(path.c_str(), &named) == 0;
      if (!there && errno != ENOENT && errno != ENOTDIR) return Status::FromErrno(path + ": stat", errno);
      if (!there || held.st_dev != named.st_dev || held.st_ino != named.st_ino) {
        fd.reset();
        errno = ENOENT;
        continue;
      }
      if (::ftruncate(fd.get(), static_cast<off_t>(create_size)) != 0) {
        int err = errno;
        ::unlink(path.c_str());
        if (err == EFBIG) return Status::IOError(FileSizeLimitWords(path, create_size));
        return Status::FromErrno(path + ": ftruncate", err);
      }
      // Its header is written through the mapping before the store reserves
      // the rest: on a disk with no block free that first write was a
      // SIGBUS that ended the start unsaid, the file left behind. Its first
      // page is allocated now, so a full disk is this error.
      const off_t head = static_cast<off_t>(
          std::min<uint64_t>(create_size, std::max<uint64_t>(4096, static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)))));
      if (int err = ::posix_fallocate(fd.get(), 0, head); err == ENOSPC || err == EDQUOT) {
        ::unlink(path.c_str());
        return Status::Unavailable(NoRoomWords(path, create_size, err));
      }
      f->created_ = true;
    } else if (errno == EEXIST) {
      fd.reset(::open(path.c_str(), write_flags | O_CLOEXEC));  // lost the race: open theirs
      if (!fd.valid() && errno == ENOENT) continue;             // theirs was moved aside since: make it
    }
    break;
  }
  if (!fd.valid()) {
    // A dangling link is a link, not a lost file (found from outside: it
    // was said lost, its counts gone, and frsctl init --recreate-missing
    // advised).
    if (struct stat ls{}; errno == ENOENT && ::lstat(path.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode)) errno = ELOOP;
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    if (errno == ELOOP) return Status::IOError(store_dir::LinkRefusedWords(path));
    if (errno == EACCES || errno == EPERM) return Status::IOError(PermissionWords(path));
    return Status::FromErrno(path, errno);
  }
  if (!f->created_) {
    // Waits while a creator is still writing the header, or while frsctl
    // grow swaps the store for a new one: the path then names another file
    // than the one this fd locked, and the mapping (of the path) would be
    // of a file this process holds no lock on, which a later grow's
    // exclusive lock would not see. Opened again, up to a few times.
    if (::flock(fd.get(), LOCK_SH) != 0) return Status::FromErrno(path + ": flock", errno);
    for (int again = 0; again < 8; ++again) {
      struct stat held, named;
      if (::fstat(fd.get(), &held) != 0 || ::stat(path.c_str(), &named) != 0 ||
          (held.st_dev == named.st_dev && held.st_ino == named.st_ino))
        break;
      fd.reset(::open(path.c_str(), (f->read_only_ ? O_RDONLY : write_flags) | O_CLOEXEC | O_NONBLOCK));
      if (!fd.valid()) return Status::FromErrno(path, errno);
      if (::flock(fd.get(), LOCK_SH) != 0) return Status::FromErrno(path + ": flock", errno);
    }
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(path + ": fstat", errno);
  // A directory opens read-only, and its map would fail as "No such device".
  if (!S_ISREG(st.st_mode)) return Status::IOError(NotRegularWords(path, st.st_mode));
  // A creator that has opened the file but not yet taken its lock leaves it
  // empty for an instant; wait for it rather than call the file damaged.
  for (int i = 0; st.st_size == 0 && !f->created_ && i < 100; ++i) {
    ::flock(fd.get(), LOCK_UN);
    ::usleep(10 * 1000);
    if (::flock(fd.get(), LOCK_SH) != 0) return Status::FromErrno(path + ": flock", errno);
    if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(path + ": fstat", errno);
  }
  if (st.st_size == 0) return Status::Corruption(path + ": file is empty");

  try {
    auto r = std::make_unique<Region>();
    const bip::mode_t m = f->read_only_ ? bip::read_only : bip::read_write;
    r->mapping = bip::file_mapping(path.c_str(), m);
    r->region = bip::mapped_region(r->mapping, m, 0, static_cast<size_t>(st.st_size));
    f->data_ = static_cast<uint8_t*>(r->region.get_address());
    f->size_ = r->region.get_size();
    f->region_ = std::move(r);
  } catch (const std::exception& e) {
    return Status::IOError(path + ": cannot map: " + e.what());
  }
  f->fd_ = std::move(fd);
  std::error_code ec;
  f->at_ = std::filesystem::absolute(path, ec).string();
  if (ec) f->at_ = path;
  f->guard_ = RegisterGuardedMapping(f->data_, f->size_, &f->broken_);
  return f;
}

Status MappedFile::FinishCreate() {
  if (!created_) return Status::OK();
  if (::flock(fd_.get(), LOCK_SH) != 0) return Status::FromErrno(path_ + ": flock", errno);
  return Status::OK();
}

Result<uint64_t> MappedFile::BytesToReserve() const {
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return Status::FromErrno(path_ + ": fstat", errno);
  const uint64_t have = static_cast<uint64_t>(st.st_blocks) * 512;
  return have >= size_ ? 0 : size_ - have;
}

Status MappedFile::Reserve() const {
  if (read_only_) return Status::Unavailable(path_ + " is open read-only");
  struct stat st;
  if (::fstat(fd_.get(), &st) != 0) return Status::FromErrno(path_ + ": fstat", errno);
  const bool had_holes = static_cast<uint64_t>(st.st_blocks) * 512 < size_;
  int err = ::posix_fallocate(fd_.get(), 0, static_cast<off_t>(size_));
  if (err == ENOSPC)
    return Status::Unavailable(path_ + ": no space left on the device for its " + std::to_string(size_) + " bytes");
  if (err != 0 && err != EOPNOTSUPP && err != EINVAL) return Status::FromErrno(path_ + ": fallocate", err);
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  // A store that had holes is new or mostly so: fault it in writable now, so
  // requests do not pay the first write of each page. A store already backed
  // is only read in: faulting it writable would dirty every page and make
  // each restart write the whole store back to disk.
  // Best effort: kernels before 5.14 answer EINVAL and fault pages on demand.
  int advice = had_holes ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  if (::madvise(data_, size_, advice) != 0 && errno != EINVAL && errno != EOPNOTSUPP)
    return Status::FromErrno(path_ + ": madvise(MADV_POPULATE)", errno);
  return Status::OK();
}

Status MappedFile::Sync(bool sync) const {
  // msync(MS_ASYNC) starts nothing on Linux (dirty pages are tracked anyway):
  // the periodic flush used it, and an OS crash could lose what the kernel's
  // writeback had not reached, 30 s and more, not one flush interval.
  if (sync) {
    if (::msync(data_, size_, MS_SYNC) != 0) return Status::FromErrno(path_ + ": msync", errno);
    return Status::OK();
  }
  if (::sync_file_range(fd_.get(), 0, 0, SYNC_FILE_RANGE_WRITE) != 0)
    return Status::FromErrno(path_ + ": sync_file_range", errno);
  return Status::OK();
}

}  // namespace frs::os
