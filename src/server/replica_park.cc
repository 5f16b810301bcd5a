#include "server/replica_park.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>
#include <utility>

#include "os/store_dir.h"
#include "os/unique_dir.h"
#include "os/unique_fd.h"
#include "os/whole_file.h"
#include "server/metrics.h"
#include "server/replica_wire.h"

namespace frs::server {
namespace {

constexpr std::string_view kParkedMagic = kParkedFirstLine;
constexpr std::string_view kBatchWord = "batch ";
constexpr std::string_view kNodesWord = "nodes ";
// A record's last line: a record cut within its last change line, which
// the next writer's separating line end completed, would read whole
// without it (a key cut short applied as another key: found from outside).
constexpr std::string_view kEndLine = "end\n";

// `path` opened and locked, still the file the name holds: a taker that
// replaced or removed it while this waited for the lock leaves this one
// locking a file no name leads to, whose records nobody would take.
Result<os::UniqueFd> OpenParkLocked(const std::string& path, bool create) {
  for (int tries = 0; tries < 100; ++tries) {
    // Never through a link: one placed there would have a root frsd append
    // what clients name to the file it leads to, or make it.
    const int flags = (create ? O_RDWR | O_APPEND | O_CREAT : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW;
    os::UniqueFd fd(::open(path.c_str(), flags, 0600));
    if (!fd.valid()) {
      if (!create && errno == ENOENT) return os::UniqueFd();
      if (errno == ELOOP)
        return Status::IOError(path + " is a symbolic link: frsd keeps only a file of its own there: remove it");
      return Status::FromErrno("cannot open " + path, errno);
    }
    struct stat held, named;
    if (::fstat(fd.get(), &held) != 0) return Status::FromErrno("cannot stat " + path, errno);
    if (!S_ISREG(held.st_mode)) return Status::IOError(path + " is not a regular file");
    if (::flock(fd.get(), LOCK_EX) != 0) return Status::FromErrno("cannot lock " + path, errno);
    if (::stat(path.c_str(), &named) != 0) {
      if (errno != ENOENT) return Status::FromErrno("cannot stat " + path, errno);
      continue;  // removed by a taker meanwhile
    }
    // A second name (a hard link) is allowed: a backup made with cp -al, or
    // a grow killed before it removed its old directory, gives the file one,
    // and refusing it lost the changes kept there. One planted by the store
    // directory's owner can only name a file that owner may write already
    // (fs.protected_hardlinks), and what frsd did not write is never
    // appended to (ParkChanges).
    if (named.st_ino == held.st_ino && named.st_dev == held.st_dev) return fd;
  }
  return Status::IOError(path + " was replaced 100 times while this process waited for its lock");
}

bool ParkWord(std::string_view w) { return !w.empty() && w.find_first_of(" \t\r\n") == std::string_view::npos; }

template <typename T>
bool ParkNumber(std::string_view s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

// A change a record keeps: a use or a rule's event (ParkChanges).
bool Kept(const Change& c, uint32_t biz) {
  return c.biz_id == biz && (c.kind == Change::Kind::kAdd || c.kind == Change::Kind::kEvent);
}

// What a reading found at the start of the text left.
enum class Read { kRecord, kDamaged };

static_assert(kNodesWord.size() == kBatchWord.size(), "a header's words are read past either the same way");

bool StartsRecord(std::string_view text) { return text.starts_with(kBatchWord) || text.starts_with(kNodesWord); }

// One record from *text into *b (its bytes in *raw). No change or node
// line starts with "batch " or "nodes ", so a record cut short by its
// writer's death ends where the next record's header begins: kDamaged,
// *text left at that header (or its end), so that the records after it are
// still read.
Read ReadParkedRecord(std::string_view* text, ParkedBatch* b, std::string* raw) {
  const std::string_view start = *text;
  auto skip_to_next = [&] {
    const size_t a = text->find("\n" + std::string(kBatchWord)), n = text->find("\n" + std::string(kNodesWord));
    const size_t at = std::min(a, n);
    text->remove_prefix(at == std::string_view::npos ? text->size() : at + 1);
    return Read::kDamaged;
  };
  const size_t nl = text->find('\n');
  const bool nodes = text->starts_with(kNodesWord);
  if (!StartsRecord(*text) || nl == std::string_view::npos) return skip_to_next();
  // batch BIZ SEQ AT_S COUNT STREAM, or nodes BIZ AT_S COUNT RECEIPT
  std::string_view head = text->substr(kBatchWord.size(), nl - kBatchWord.size());
  const int words = nodes ? 4 : 5;
  std::string_view f[5];
  for (int i = 0; i < words - 1; ++i) {
    const size_t sp = head.find(' ');
    if (sp == std::string_view::npos) return skip_to_next();
    f[i] = head.substr(0, sp);
    head.remove_prefix(sp + 1);
  }
  f[words - 1] = head;
  std::string_view* at_s = nodes ? &f[1] : &f[2];
  std::string_view* count_s = nodes ? &f[2] : &f[3];
  size_t count = 0;
  if (!ParkNumber(f[0], &b->biz) || (!nodes && !ParkNumber(f[1], &b->seq)) || !ParkNumber(*at_s, &b->at_s) ||
      !ParkNumber(*count_s, &count) || !ParkWord(f[words - 1]) || count == 0 || count > kMaxParkedBytes)
    return skip_to_next();
  b->stream = std::string(f[words - 1]);
  text->remove_prefix(nl + 1);
  size_t len = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t end = text->find('\n', len);
    if (end == std::string_view::npos || StartsRecord(text->substr(len))) {
      text->remove_prefix(std::min(len, text->size()));
      return StartsRecord(*text) ? Read::kDamaged : skip_to_next();
    }
    len = end + 1;
  }
  bool whole = text->substr(len).starts_with(kEndLine);
  if (whole && nodes) {
    // Each an object on its line (the merge judges the rest, and refuses
    // what is not a node for good).
    for (std::string_view lines = text->substr(0, len); whole && !lines.empty();) {
      const size_t end = lines.find('\n');
      const std::string_view line = lines.substr(0, end);
      whole = line.starts_with('{') && line.ends_with('}');
      if (whole) b->nodes.emplace_back(line);
      lines.remove_prefix(end + 1);
    }
  } else if (whole) {
    // Its changes are those ParkChanges keeps, of its own biz: one of
    // another biz (the file edited) would be applied once that biz comes,
    // to a node its own uses already count.
    whole = DecodeChangeLines(text->substr(0, len), &b->changes, &b->keys).ok() && b->changes.size() == count &&
            std::all_of(b->changes.begin(), b->changes.end(), [&](const Change& c) { return Kept(c, b->biz); });
  }
  if (!whole) {
    text->remove_prefix(len);
    return StartsRecord(*text) || text->empty() ? Read::kDamaged : skip_to_next();
  }
  text->remove_prefix(len + kEndLine.size());
  raw->assign(start.substr(0, start.size() - text->size()));
  return Read::kRecord;
}

// Removes what a killed taker left of its rewrite (os/whole_file.h's
// temporary names). Called under the file's lock (a take), or before any
// worker runs (RemoveParked, at a new store's catch-up): a live taker's
// temporary exists only while it holds the lock of the file the name
// leads to. replica_spool.cc judges a spool's temporaries by their age and
// their own lock instead: no one lock is held over all of a spool's makers,
// as this file's is over its takers.
void RemoveParkTemps(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".";
  if (os::UniqueDir d = os::OpenDir(dir.c_str())) {
    while (dirent* e = ::readdir(d.get())) {
      const std::string_view n(e->d_name);
      if (n.starts_with(name) && os::store_dir::IsTempName(n)) ::unlink((dir + "/" + std::string(n)).c_str());
    }
  }
}

}  // namespace

Result<os::UniqueFd> LockParked(const std::string& path) { return OpenParkLocked(path, true); }

namespace {

// Appends `record` (whole lines) to the file `fd` locked for `path`.
Status AppendRecord(const os::UniqueFd& fd, const std::string& path, const std::string& record) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  const size_t size = static_cast<size_t>(st.st_size);
  if (size + record.size() + 1 > kMaxParkedBytes)
    return Status::IOError(path + " holds " + std::to_string(size) + " bytes already (at most " +
                           std::to_string(kMaxParkedBytes) + ")");
  // A writer killed mid-write left a line without its end: this record
  // starts on a line of its own, so that the reader finds its header.
  char last = '\n';
  if (size > 0 && ::pread(fd.get(), &last, 1, static_cast<off_t>(size - 1)) != 1)
    return Status::FromErrno("cannot read " + path, errno);
  // Appended to only when frsd wrote it (its first line, or a first write
  // cut short within it): records added to another file there would be
  // another's bytes changed.
  if (size > 0) {
    char head[kParkedMagic.size()];
    const size_t want = std::min(size, kParkedMagic.size());
    if (::pread(fd.get(), head, want, 0) != static_cast<ssize_t>(want))
      return Status::FromErrno("cannot read " + path, errno);
    if (std::string_view(head, want) != kParkedMagic.substr(0, want))
      return Status::IOError(path +
                             " does not start with \"frs-replica-parked 1\": not a file frsd wrote, and "
                             "nothing is added to it (the next reload's take reads what records it holds)");
  }
  std::string out = size == 0 ? std::string(kParkedMagic) : last != '\n' ? std::string("\n") : std::string();
  out += record;
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::write(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // What a short write left is a damaged record, which the reader
      // drops (the next append starts on a line of its own).
      return Status::FromErrno("cannot write " + path, n < 0 ? errno : EIO);
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

// The file's text, read whole under the lock `fd` holds.
Result<std::string> ReadParkFile(const os::UniqueFd& fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  if (static_cast<size_t>(st.st_size) > 2 * kMaxParkedBytes)
    return Status::Corruption(path + " is " + std::to_string(st.st_size) + " bytes: not a file frsd wrote");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd.get(), text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("cannot read " + path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

// The records of `rest` taken as TakeParked says into *taken; those left
// (their bytes) appended to *keep. True when any record was taken or
// dropped (the file's text changes).
bool TakeText(std::string_view rest, const std::string& path, const std::function<bool(uint32_t)>& known,
              const std::function<Result<bool>(const ParkedBatch&)>& apply, int64_t now_s, ParkTaken* taken,
              std::string* keep) {
  // The biz and stream of each record refused for now: none of their later
  // records is applied (it would move their receipt past the one kept).
  std::set<std::pair<uint32_t, std::string>> held_back;
  size_t damaged_bytes = 0;
  bool changed = false;
  while (!rest.empty()) {
    ParkedBatch b;
    std::string raw;
    const size_t before = rest.size();
    if (ReadParkedRecord(&rest, &b, &raw) == Read::kDamaged) {
      damaged_bytes += before - rest.size();
      changed = true;
      continue;
    }
    const size_t units = b.nodes.empty() ? b.changes.size() : b.nodes.size();
    const bool old = now_s - b.at_s > kMaxParkedSeconds;
    const bool blocked = held_back.count({b.biz, b.stream}) != 0;
    const bool is_known = known(b.biz);
    if (!blocked && is_known) {
      Result<bool> r = apply(b);
      if (r.ok()) {
        (*r ? taken->applied : taken->duplicates) += units;
        if (std::find(taken->bizzes.begin(), taken->bizzes.end(), b.biz) == taken->bizzes.end())
          taken->bizzes.push_back(b.biz);
        changed = true;
        continue;
      }
      if (r.status().code() == Status::Code::kInvalidArgument) {
        taken->problems.push_back("a record of biz " + std::to_string(b.biz) +
                                  " never applies, dropped: " + r.status().message());
        taken->dropped += units;
        changed = true;
        continue;
      }
      taken->problems.push_back("a record of biz " + std::to_string(b.biz) +
                                " is kept for the next take: " + r.status().message());
      held_back.insert({b.biz, b.stream});
    }
    if (old) {
      taken->dropped += units;
      changed = true;
      continue;
    }
    (is_known ? taken->held : taken->kept) += units;
    *keep += raw;
  }
  if (damaged_bytes > 0)
    taken->problems.push_back(
        std::to_string(damaged_bytes) + " byte(s) of " + path +
        " are no whole record frsd wrote (a writer killed mid-write, or the file edited): dropped");
  return changed;
}

}  // namespace

Status ParkChanges(const os::UniqueFd& fd, const std::string& path, uint32_t biz, std::string_view stream, uint64_t seq,
                   std::span<const Change> changes, int64_t now_s, size_t* kept) {
  *kept = 0;
  if (!ParkWord(stream)) return Status::InvalidArgument("a stream name with a space or a line break is not kept aside");
  std::string lines;
  size_t count = 0;
  for (const Change& c : changes)
    if (Kept(c, biz)) {
      AppendChangeLine(c, &lines);
      ++count;
    }
  if (count == 0) return Status::OK();
  const std::string record = std::string(kBatchWord) + std::to_string(biz) + " " + std::to_string(seq) + " " +
                             std::to_string(now_s) + " " + std::to_string(count) + " " + std::string(stream) + "\n" +
                             lines + std::string(kEndLine);
  if (Status s = AppendRecord(fd, path, record); !s.ok()) return s;
  *kept = count;
  return Status::OK();
}

Status ParkNodes(const os::UniqueFd& fd, const std::string& path, uint32_t biz, std::string_view receipt,
                 std::span<const std::string_view> lines, int64_t now_s) {
  if (!ParkWord(receipt)) return Status::InvalidArgument("a receipt with a space or a line break is not kept aside");
  if (lines.empty()) return Status::OK();
  std::string record = std::string(kNodesWord) + std::to_string(biz) + " " + std::to_string(now_s) + " " +
                       std::to_string(lines.size()) + " " + std::string(receipt) + "\n";
  for (std::string_view l : lines) {
    if (!l.starts_with('{') || !l.ends_with('}') || l.find('\n') != std::string_view::npos)
      return Status::InvalidArgument("a node line is one JSON object on its line");
    record.append(l);
    record += '\n';
  }
  record += kEndLine;
  return AppendRecord(fd, path, record);
}

namespace {

// A change record of `b`'s biz, seq and time under `stream`, its changes
// those `wanted` takes; nothing when none is.
void AppendChangeRecord(const ParkedBatch& b, std::string_view stream, const std::function<bool(const Change&)>& wanted,
                        std::string* out) {
  std::string lines;
  size_t count = 0;
  for (const Change& c : b.changes)
    if (wanted(c)) {
      AppendChangeLine(c, &lines);
      ++count;
    }
  if (count == 0) return;
  *out += std::string(kBatchWord) + std::to_string(b.biz) + " " + std::to_string(b.seq) + " " + std::to_string(b.at_s) +
          " " + std::to_string(count) + " " + std::string(stream) + "\n" + lines + std::string(kEndLine);
}

}  // namespace

Result<std::string> ParkedRecordsFor(const std::string& path, const std::function<bool(const Change&)>& wanted) {
  auto fd = OpenParkLocked(path, false);
  if (!fd.ok()) return fd.status();
  if (!fd->valid()) return std::string();
  auto text = ReadParkFile(*fd, path);
  if (!text.ok()) return text.status();
  std::string_view rest = *text;
  if (rest.starts_with(kParkedMagic)) rest.remove_prefix(kParkedMagic.size());
  std::string out;
  while (!rest.empty()) {
    ParkedBatch b;
    std::string raw;
    if (ReadParkedRecord(&rest, &b, &raw) == Read::kDamaged || b.changes.empty()) continue;
    AppendChangeRecord(b, b.stream, wanted, &out);
  }
  return out;
}

Result<ParkTaken> TakeParkedRecords(std::string_view text, std::string_view from, const std::string& path,
                                    const std::function<bool(uint32_t)>& known,
                                    const std::function<Result<bool>(const ParkedBatch&)>& apply, int64_t now_s) {
  // Each change record under its carrier's name (a node record is never
  // carried: ParkedRecordsFor).
  std::string named;
  size_t damaged_bytes = 0;
  for (std::string_view rest = text; !rest.empty();) {
    ParkedBatch b;
    std::string raw;
    const size_t before = rest.size();
    if (ReadParkedRecord(&rest, &b, &raw) == Read::kDamaged || b.changes.empty()) {
      damaged_bytes += before - rest.size();
      continue;
    }
    const std::string stream = std::string(from) + ">" + b.stream;
    if (ParkWord(stream))
      AppendChangeRecord(
          b, stream, [](const Change&) { return true; }, &named);
  }
  ParkTaken taken;
  if (damaged_bytes > 0)
    taken.problems.push_back(std::to_string(damaged_bytes) + " byte(s) of the records " + std::string(from) +
                             " carried are no whole record: dropped");
  std::string keep;
  TakeText(named, "the records " + std::string(from) + " carried", known, apply, now_s, &taken, &keep);
  if (keep.empty()) return taken;
  auto fd = LockParked(path);
  if (!fd.ok()) {
    // What was applied stands, and is said with the rest.
    taken.dropped += taken.kept + taken.held;
    taken.kept = taken.held = 0;
    taken.problems.push_back("the records " + std::string(from) + " carried that this map cannot apply yet could not " +
                             "be kept aside: " + fd.status().message());
    return taken;
  }
  // One record at a time: the file near its bound takes those it can.
  for (std::string_view rest = keep; !rest.empty();) {
    ParkedBatch b;
    std::string raw;
    if (ReadParkedRecord(&rest, &b, &raw) == Read::kDamaged) continue;
    if (Status s = AppendRecord(*fd, path, raw); !s.ok()) {
      size_t& counted = known(b.biz) ? taken.held : taken.kept;  // as TakeText counted it
      counted -= std::min(counted, b.changes.size());
      taken.dropped += b.changes.size();
      taken.problems.push_back("a record of biz " + std::to_string(b.biz) + " " + std::string(from) +
                               " carried could not be kept aside: " + s.message());
    }
  }
  return taken;
}

std::string ParkReceiptStream(uint32_t biz, std::string_view stream) {
  return "park/" + std::to_string(biz) + "/" + Hex16(StreamHash(stream));
}

Result<ParkTaken> TakeParked(const std::string& path, const std::function<bool(uint32_t)>& known,
                             const std::function<Result<bool>(const ParkedBatch&)>& apply, int64_t now_s) {
  ParkTaken taken;
  auto fd = OpenParkLocked(path, false);
  if (!fd.ok()) return fd.status();
  if (!fd->valid()) return taken;
  RemoveParkTemps(path);
  auto text = ReadParkFile(*fd, path);
  if (!text.ok()) return text.status();
  if (text->empty()) {
    // Its first writer stopped before the first byte (a full disk): no
    // record, and nothing to say at each take.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("cannot remove " + path, errno);
    return taken;
  }
  std::string_view rest = *text;
  if (rest.starts_with(kParkedMagic)) rest.remove_prefix(kParkedMagic.size());
  else taken.problems.push_back(path + " does not start with \"frs-replica-parked 1\": read from its first record");
  std::string keep;
  if (!TakeText(rest, path, known, apply, now_s, &taken, &keep)) return taken;
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

Status RemoveParked(const std::string& path) {
  RemoveParkTemps(path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("cannot remove " + path, errno);
  return Status::OK();
}

}  // namespace frs::server
