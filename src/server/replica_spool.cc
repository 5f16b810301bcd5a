#include "server/replica_spool.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/unique_dir.h"
#include "os/whole_file.h"
#include "server/replica_journal.h"
#include "server/replica_wire.h"

namespace frs::server {
namespace {

constexpr std::string_view kMagic = "frs-replica-spool 1";
constexpr std::string_view kJournalMagic = "frs-replica-spool 2\n";
// A spool holds at most what a worker's links may queue (Replicator's
// backlog, a million changes a link, about 60 bytes each): a file past
// this is not one.
constexpr size_t kMaxSpoolBytes = size_t{1} << 30;

bool SpoolWord(std::string_view w) { return !w.empty() && w.find_first_of(" \t\r\n") == std::string_view::npos; }

template <typename T>
bool SpoolNumber(std::string_view s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

// Splits `line` at spaces.
std::vector<std::string_view> SpoolFields(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    const size_t sp = line.find(' ');
    out.push_back(line.substr(0, sp));
    if (sp == std::string_view::npos) break;
    line.remove_prefix(sp + 1);
  }
  return out;
}

}  // namespace

size_t ReplicaSpool::Changes() const {
  size_t n = 0;
  for (const ReplicaSpoolLink& l : links) n += l.changes.size();
  return n;
}

std::string EncodeReplicaSpool(const ReplicaSpool& spool) {
  std::string out(kMagic);
  out += "\nstream " + spool.stream + "\ndigest " + spool.digest + "\n";
  for (const ReplicaSpoolLink& l : spool.links) {
    out += "link " + l.name + " " + std::to_string(l.next_seq) + " " + std::to_string(l.inflight) + " " +
           std::to_string(l.inflight_seq) + " " + std::to_string(l.first_no) + " " + std::to_string(l.changes.size()) +
           "\n";
    for (const Change& c : l.changes) AppendChangeLine(c, &out);
  }
  out += "end\n";
  return out;
}

Result<ReplicaSpool> DecodeReplicaSpool(std::string_view text) {
  ReplicaSpool spool;
  size_t line_no = 0;
  bool cut = false;  // the text ended before its "end" line
  auto next = [&](std::string_view* line) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) {  // nothing left, or a last line without its end
      cut = true;
      return false;
    }
    *line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    return true;
  };
  auto bad = [&](std::string_view why) {
    return Status::Corruption("replica spool, line " + std::to_string(line_no + (cut ? 1 : 0)) + ": " +
                              (cut ? std::string("cut short (no \"end\" line)") : std::string(why)));
  };
  if (text.starts_with(kJournalMagic)) return DecodeReplicaJournal(text);
  std::string_view line;
  if (!next(&line) || line != kMagic) return bad("not a replica spool (its first line is not \"frs-replica-spool 1\")");
  if (!next(&line) || !line.starts_with("stream ") || !SpoolWord(line.substr(7)))
    return bad("expected \"stream NAME\"");
  spool.stream = std::string(line.substr(7));
  if (!next(&line) || !line.starts_with("digest ") || !SpoolWord(line.substr(7))) return bad("expected \"digest HEX\"");
  spool.digest = std::string(line.substr(7));
  for (;;) {
    if (!next(&line)) return bad("");
    if (line == "end") break;
    const std::vector<std::string_view> f = SpoolFields(line);
    ReplicaSpoolLink l;
    size_t count = 0;
    if (f.size() != 7 || f[0] != "link" || !SpoolWord(f[1]) || !SpoolNumber(f[2], &l.next_seq) ||
        !SpoolNumber(f[3], &l.inflight) || !SpoolNumber(f[4], &l.inflight_seq) || !SpoolNumber(f[5], &l.first_no) ||
        !SpoolNumber(f[6], &count))
      return bad("expected \"link NAME NEXT_SEQ INFLIGHT INFLIGHT_SEQ FIRST_NO COUNT\"");
    if (l.inflight > count || (l.inflight > 0 && (l.inflight_seq == 0 || l.inflight_seq >= l.next_seq)) ||
        l.next_seq == 0 || l.first_no == 0)
      return bad("a link's numbers disagree (its batch in flight, its seqs, its first change)");
    l.name = std::string(f[1]);
    // The change lines as one body: the wire's decoder checks each.
    const std::string_view rest = text;
    size_t len = 0;
    for (size_t i = 0; i < count; ++i) {
      const size_t nl = rest.find('\n', len);
      if (nl == std::string_view::npos) {
        line_no += i;
        cut = true;
        return bad("");
      }
      len = nl + 1;
    }
    if (Status s = DecodeChangeLines(rest.substr(0, len), &l.changes, &l.keys); !s.ok())
      return bad("in the changes of link " + l.name + " (their " + s.message() + ")");
    if (l.changes.size() != count) return bad("a link's count is not its changes'");
    text.remove_prefix(len);
    line_no += count;
    spool.links.push_back(std::move(l));
  }
  if (!text.empty()) return bad("text after \"end\"");
  return spool;
}

std::string NewReplicaSpoolPath(const std::string& dir) {
  // Whatever pids an earlier run had (a container gives its workers the
  // same pids at each start): the clock's ns, and a sequence.
  static std::atomic<uint32_t> seq{0};
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return os::store_dir::In(dir, std::string(os::store_dir::kReplicaSpoolPrefix) + std::to_string(getpid()) + "." +
                                    std::to_string(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec) + "." +
                                    std::to_string(seq.fetch_add(1)));
}

Status WriteReplicaSpool(const std::string& dir, const ReplicaSpool& spool, std::string* path) {
  // `exclusive` never replaces a file already there.
  const std::string text = EncodeReplicaSpool(spool);
  for (int tries = 0; tries < 100; ++tries) {
    *path = NewReplicaSpoolPath(dir);
    auto placed =
        os::WriteFileWhole(*path, text, {.sync_file = true, .sync_dir = true, .exclusive = true, .mode = 0600});
    if (!placed.ok()) return placed.status();
    if (*placed == os::Placed::kOurs) return Status::OK();
  }
  return Status::IOError("no free name for a replica spool in " + dir);
}

Status ReplaceReplicaSpool(const std::string& path, const ReplicaSpool& spool) {
  auto placed =
      os::WriteFileWhole(path, EncodeReplicaSpool(spool), {.sync_file = true, .sync_dir = true, .mode = 0600});
  return placed.ok() ? Status::OK() : placed.status();
}

std::vector<std::string> ReplicaSpoolNames(const std::string& dir) {
  std::vector<std::string> names;
  if (os::UniqueDir d = os::OpenDir(dir.c_str())) {
    while (dirent* e = ::readdir(d.get())) {
      std::string_view n(e->d_name);
      if (n.starts_with(os::store_dir::kReplicaSpoolPrefix) && !os::store_dir::IsTempName(n) &&
          n.find(".damaged-") == std::string_view::npos)
        names.emplace_back(n);
    }
  }
  return names;
}

namespace {

// A spool or journal being made has a temporary name until it is whole
// (os/whole_file.h). A process killed meanwhile leaves it: redundant (a
// journal it was to replace, or the memory of a killed worker whose
// journal had not started), and named like a spool. Removed once a minute
// old and not locked (a journal's maker holds its lock).
void RemoveLeftTemporaries(const std::string& dir, std::vector<std::string>* problems) {
  const os::UniqueDir d = os::OpenDir(dir.c_str());
  if (d == nullptr) return;
  const time_t minute_ago = ::time(nullptr) - 60;
  while (dirent* e = ::readdir(d.get())) {
    const std::string_view n(e->d_name);
    if (!n.starts_with(os::store_dir::kReplicaSpoolPrefix) || !os::store_dir::IsTempName(n)) continue;
    const std::string path = os::store_dir::In(dir, std::string(n));
    os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));  // a FIFO: never waited on
    struct stat st;
    if (!fd.valid() || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || ::fstat(fd.get(), &st) != 0 ||
        st.st_mtime > minute_ago)
      continue;
    if (::unlink(path.c_str()) == 0)
      problems->push_back(std::string(n) + ": a temporary file a killed process left while making a spool; removed");
  }
}

}  // namespace

std::vector<TakenReplicaSpool> TakeReplicaSpools(const std::string& dir, size_t max, std::string_view digest,
                                                 std::vector<std::string>* problems) {
  RemoveLeftTemporaries(dir, problems);
  std::vector<TakenReplicaSpool> out;
  for (const std::string& n : ReplicaSpoolNames(dir)) {
    if (out.size() >= max) break;
    const std::string path = os::store_dir::In(dir, n);
    os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));  // a FIFO: never waited on
    if (!fd.valid()) continue;  // delivered and removed meanwhile
    // Held by a live worker, of this start or of one still stopping: not
    // ours. The kernel drops a dead one's lock, whatever pid comes next.
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    struct stat st;
    if (::fstat(fd.get(), &st) != 0 || st.st_nlink == 0) continue;  // removed by the worker that delivered it
    Result<std::string> text = os::ReadTextFile(path, kMaxSpoolBytes);
    Result<ReplicaSpool> spool = text.ok() ? DecodeReplicaSpool(*text) : Result<ReplicaSpool>(text.status());
    if (!spool.ok()) {
      const std::string aside = os::store_dir::DamagedPath(path, std::to_string(getpid()));
      ::rename(path.c_str(), aside.c_str());
      problems->push_back(n + ": " + spool.status().message() + " (moved aside as " + aside + ")");
      continue;
    }
    if (spool->Changes() == 0) {
      // A killed worker's journal whose every change had been delivered.
      ::unlink(path.c_str());
      continue;
    }
    if (spool->digest != digest) {
      // Its receivers, on this list, refuse it (409): kept for an operator.
      problems->push_back(n + ": written under another <cluster> (digest " + spool->digest + ", this one " +
                          std::string(digest) +
                          "): not delivered; its receivers refuse it. Delete it once the list change's handoff is "
                          "done");
      continue;
    }
    out.push_back(TakenReplicaSpool{path, std::move(*spool), std::move(fd)});
  }
  return out;
}

}  // namespace frs::server
