#include "server/replica_park.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "os/unique_fd.h"
#include "os/whole_file.h"
#include "server/replica_wire.h"

namespace frs::server {
namespace {

constexpr std::string_view kParkedMagic = "frs-replica-parked 1\n";

// `path` opened and locked, still the file the name holds: a taker that
// replaced or removed it while this waited for the lock leaves this one
// locking a file no name leads to, whose records nobody would take.
Result<os::UniqueFd> OpenParkLocked(const std::string& path, bool create) {
  for (int tries = 0; tries < 100; ++tries) {
    const int flags = (create ? O_WRONLY | O_APPEND | O_CREAT : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    os::UniqueFd fd(::open(path.c_str(), flags, 0600));
    if (!fd.valid()) {
      if (!create && errno == ENOENT) return os::UniqueFd();
      return Status::FromErrno("cannot open " + path, errno);
    }
    struct stat held, named;
    if (::fstat(fd.get(), &held) != 0) return Status::FromErrno("cannot stat " + path, errno);
    if (!S_ISREG(held.st_mode)) return Status::IOError(path + " is not a regular file");
    if (::flock(fd.get(), LOCK_EX) != 0) return Status::FromErrno("cannot lock " + path, errno);
    if (::stat(path.c_str(), &named) == 0 && named.st_ino == held.st_ino && named.st_dev == held.st_dev) return fd;
  }
  return Status::IOError(path + " was replaced 100 times while this process waited for its lock");
}

bool ParkWord(std::string_view w) { return !w.empty() && w.find_first_of(" \t\r\n") == std::string_view::npos; }

template <typename T>
bool ParkNumber(std::string_view s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

// The next line of *text without its '\n' (false: none whole is left).
bool ParkNextLine(std::string_view* text, std::string_view* line) {
  const size_t nl = text->find('\n');
  if (nl == std::string_view::npos) return false;
  *line = text->substr(0, nl);
  text->remove_prefix(nl + 1);
  return true;
}

// One record from *text: false when what is left is not one whole (a
// writer's process gone mid-write, a damaged file).
bool ReadParkedRecord(std::string_view* text, ParkedBatch* b, std::string* raw) {
  const std::string_view start = *text;
  std::string_view head;
  if (!ParkNextLine(text, &head) || !head.starts_with("batch ")) return false;
  head.remove_prefix(6);
  std::string_view f[5];
  for (int i = 0; i < 4; ++i) {
    const size_t sp = head.find(' ');
    if (sp == std::string_view::npos) return false;
    f[i] = head.substr(0, sp);
    head.remove_prefix(sp + 1);
  }
  f[4] = head;
  size_t count = 0;
  if (!ParkNumber(f[0], &b->biz) || !ParkNumber(f[1], &b->seq) || !ParkNumber(f[2], &b->at_s) ||
      !ParkNumber(f[3], &count) || !ParkWord(f[4]) || count == 0 || count > kMaxParkedBytes)
    return false;
  b->stream = std::string(f[4]);
  size_t len = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t nl = text->find('\n', len);
    if (nl == std::string_view::npos) return false;
    len = nl + 1;
  }
  if (!DecodeChangeLines(text->substr(0, len), &b->changes, &b->keys).ok() || b->changes.size() != count) return false;
  text->remove_prefix(len);
  raw->assign(start.substr(0, start.size() - text->size()));
  return true;
}

}  // namespace

Status ParkChanges(const std::string& path, uint32_t biz, std::string_view stream, uint64_t seq,
                   std::span<const Change> changes, int64_t now_s) {
  if (!ParkWord(stream)) return Status::InvalidArgument("a stream name with a space or a line break is not kept aside");
  std::string lines;
  size_t count = 0;
  for (const Change& c : changes)
    if (c.biz_id == biz) {
      AppendChangeLine(c, &lines);
      ++count;
    }
  if (count == 0) return Status::OK();
  const std::string record = "batch " + std::to_string(biz) + " " + std::to_string(seq) + " " + std::to_string(now_s) +
                             " " + std::to_string(count) + " " + std::string(stream) + "\n" + lines;
  auto fd = OpenParkLocked(path, true);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size + record.size() > kMaxParkedBytes)
    return Status::IOError(path + " holds " + std::to_string(size) + " bytes already (at most " +
                           std::to_string(kMaxParkedBytes) + ")");
  // One write, the header first in a new file: a record is whole or, its
  // writer killed mid-write, a tail the taker drops.
  const std::string out = size == 0 ? std::string(kParkedMagic) + record : record;
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd->get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      // What a short write left is cut off again: the next record starts
      // on a line of its own.
      const int cut = ::ftruncate(fd->get(), static_cast<off_t>(size));
      (void)cut;
      return Status::FromErrno("cannot write " + path, err);
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Result<ParkTaken> TakeParked(const std::string& path, const std::function<bool(uint32_t)>& known,
                             const std::function<Status(const ParkedBatch&)>& apply, int64_t now_s) {
  ParkTaken taken;
  auto fd = OpenParkLocked(path, false);
  if (!fd.ok()) return fd.status();
  if (!fd->valid()) return taken;
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  if (static_cast<size_t>(st.st_size) > 2 * kMaxParkedBytes)
    return Status::Corruption(path + " is " + std::to_string(st.st_size) + " bytes: not a file frsd wrote");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd->get(), text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("cannot read " + path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  std::string_view rest = text;
  if (!rest.starts_with(kParkedMagic)) {
    taken.problem =
        path + " does not start with \"frs-replica-parked 1\": its " + std::to_string(got) + " bytes are dropped";
    rest = {};
  } else {
    rest.remove_prefix(kParkedMagic.size());
  }
  std::string keep;
  // After a refused apply, no later record is applied: a later batch of the
  // same stream would move its receipt past the one kept.
  bool refused = false;
  while (!rest.empty()) {
    ParkedBatch b;
    std::string raw;
    if (!ReadParkedRecord(&rest, &b, &raw)) {
      taken.problem = "the last " + std::to_string(rest.size()) + " byte(s) of " + path +
                      " are no whole record (a writer killed mid-write?): dropped";
      break;
    }
    if (known(b.biz) && !refused) {
      if (Status s = apply(b); !s.ok()) {
        refused = true;
        taken.problem = "a record of biz " + std::to_string(b.biz) + " is kept for the next reload: " + s.message();
        taken.kept += b.changes.size();
        keep += raw;
        continue;
      }
      taken.applied += b.changes.size();
      if (std::find(taken.bizzes.begin(), taken.bizzes.end(), b.biz) == taken.bizzes.end())
        taken.bizzes.push_back(b.biz);
    } else if (!refused && now_s - b.at_s > kMaxParkedSeconds) {
      taken.dropped += b.changes.size();
    } else {
      taken.kept += b.changes.size();
      keep += raw;
    }
  }
  if (taken.applied == 0 && taken.dropped == 0 && taken.problem.empty()) return taken;  // nothing changed
  // Still under the lock: a writer that waits for it finds the name leads
  // elsewhere and opens it again.
  if (keep.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("cannot remove " + path, errno);
    return taken;
  }
  auto placed = os::WriteFileWhole(path, std::string(kParkedMagic) + keep, {.mode = 0600});
  if (!placed.ok()) return placed.status();
  return taken;
}

}  // namespace frs::server
