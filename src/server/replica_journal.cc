#include "server/replica_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>

#include "os/whole_file.h"
#include "server/replica_wire.h"

namespace frs::server {
namespace {

constexpr std::string_view kJournalFirstLine = "frs-replica-spool 2";

void AppendJournalNumber(std::string* out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, end);
}

template <typename T>
bool JournalNumber(std::string_view s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

bool JournalWord(std::string_view w) { return !w.empty() && w.find_first_of(" \t\r\n") == std::string_view::npos; }

// The next space-separated field of *line.
std::string_view JournalField(std::string_view* line) {
  const size_t sp = line->find(' ');
  std::string_view f = line->substr(0, sp);
  line->remove_prefix(sp == std::string_view::npos ? line->size() : sp + 1);
  return f;
}

Status WriteJournalBytes(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t w = ::write(fd, bytes.data(), bytes.size());
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::FromErrno("cannot write " + path, w < 0 ? errno : EIO);
    bytes.remove_prefix(static_cast<size_t>(w));
  }
  return Status::OK();
}

// A link as its journal leaves it: its state, and its queue's lines (each
// with its newline, pointing into the journal's text).
struct JournalLinkState {
  ReplicaSpoolLink link;
  std::deque<std::string_view> lines;
};

}  // namespace

Result<bool> ReplicaJournal::Make(const std::string& path, bool exclusive, os::UniqueFd* fd) {
  std::string text(kJournalFirstLine);
  text += "\nstream " + stream_ + "\ndigest " + digest_ + "\n";
  const uint64_t header = text.size();
  text += buf_;
  // Made under a temporary name, which no taker reads, and locked before it
  // takes its own: a worker that starts never finds it unlocked while this
  // one lives, nor without its header.
  auto placed = os::WriteFileWhole(path, {.exclusive = exclusive}, [&](const std::string& tmp) -> Status {
    *fd = os::UniqueFd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd->valid()) return Status::FromErrno("cannot write " + tmp, errno);
    if (::flock(fd->get(), LOCK_EX | LOCK_NB) != 0) return Status::FromErrno("cannot lock " + tmp, errno);
    return WriteJournalBytes(fd->get(), text, tmp);
  });
  if (!placed.ok()) {
    fd->reset();
    return placed.status();
  }
  if (*placed != os::Placed::kOurs) {
    fd->reset();
    return false;
  }
  written_ = text.size();
  change_bytes_ = written_ - header;  // the queues' lines, and a line per link
  change_lines_ = 0;
  for (size_t at = header; at < text.size();) {
    change_lines_ += text[at] == '+';
    const size_t nl = text.find('\n', at);
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  buf_.clear();
  return true;
}

Status ReplicaJournal::Start(const std::string& dir, std::string_view stream, std::string_view digest) {
  stream_ = std::string(stream);
  digest_ = std::string(digest);
  for (int tries = 0; tries < 100; ++tries) {
    const std::string path = NewReplicaSpoolPath(dir);
    os::UniqueFd fd;
    Result<bool> made = Make(path, /*exclusive=*/true, &fd);
    if (!made.ok()) {
      buf_.clear();
      return made.status();
    }
    if (*made) {
      fd_ = std::move(fd);
      path_ = path;
      return Status::OK();
    }
  }
  buf_.clear();
  return Status::IOError("no free name for a replica journal in " + dir);
}

Status ReplicaJournal::Restart(const std::function<void()>& restate) {
  buf_.clear();
  restate();
  os::UniqueFd fd;
  Result<bool> made = Make(path_, /*exclusive=*/false, &fd);
  buf_.clear();
  if (!made.ok()) return made.status();
  fd_ = std::move(fd);  // the old file's lock goes with its last name
  return Status::OK();
}

void ReplicaJournal::Step(char kind, unsigned i) {
  buf_.push_back(kind);
  AppendJournalNumber(&buf_, i);
}

void ReplicaJournal::Link(unsigned i, std::string_view name, uint64_t next_seq, uint64_t inflight,
                          uint64_t inflight_seq, uint64_t first_no) {
  buf_ += "link ";
  AppendJournalNumber(&buf_, i);
  buf_ += ' ';
  buf_ += name;
  for (uint64_t v : {next_seq, inflight, inflight_seq, first_no}) {
    buf_ += ' ';
    AppendJournalNumber(&buf_, v);
  }
  buf_ += '\n';
}

void ReplicaJournal::Queued(unsigned i, const Change& c) {
  const size_t before = buf_.size();
  Step('+', i);
  buf_ += ' ';
  AppendChangeLine(c, &buf_);
  change_bytes_ += buf_.size() - before;
  ++change_lines_;
}

void ReplicaJournal::Sent(unsigned i, uint64_t seq, uint64_t count) {
  Step('>', i);
  buf_ += ' ';
  AppendJournalNumber(&buf_, seq);
  buf_ += ' ';
  AppendJournalNumber(&buf_, count);
  buf_ += '\n';
}

void ReplicaJournal::Acked(unsigned i, uint64_t seq) {
  Step('<', i);
  buf_ += ' ';
  AppendJournalNumber(&buf_, seq);
  buf_ += '\n';
}

void ReplicaJournal::Dropped(unsigned i) {
  Step('x', i);
  buf_ += '\n';
}

void ReplicaJournal::Ended(unsigned i) {
  Step('-', i);
  buf_ += '\n';
}

Status ReplicaJournal::Flush() {
  Status s = WriteJournalBytes(fd_.get(), buf_, path_);
  if (s.ok()) written_ += buf_.size();
  buf_.clear();
  return s;
}

void ReplicaJournal::Remove() {
  // Unlinked while locked: a taker that opened it meanwhile finds it gone
  // (no link left) once it has the lock.
  if (fd_.valid() && !path_.empty()) ::unlink(path_.c_str());
  Close();
}

void ReplicaJournal::Close() {
  fd_.reset();
  path_.clear();
  buf_.clear();
  written_ = change_bytes_ = change_lines_ = 0;
}

namespace {

// One step line (not a header line) applied to *links.
Status ApplyJournalStep(std::string_view line, std::string_view with_newline,
                        std::map<unsigned, JournalLinkState>* links) {
  if (line.starts_with("link ")) {
    std::string_view rest = line.substr(5);
    unsigned i = 0;
    JournalLinkState st;
    ReplicaSpoolLink& l = st.link;
    const std::string_view idx = JournalField(&rest), name = JournalField(&rest), next = JournalField(&rest),
                           inflight = JournalField(&rest), inflight_seq = JournalField(&rest),
                           first = JournalField(&rest);
    if (!rest.empty() || !JournalNumber(idx, &i) || !JournalWord(name) || !JournalNumber(next, &l.next_seq) ||
        !JournalNumber(inflight, &l.inflight) || !JournalNumber(inflight_seq, &l.inflight_seq) ||
        !JournalNumber(first, &l.first_no))
      return Status::Corruption("expected \"link I NAME NEXT_SEQ INFLIGHT INFLIGHT_SEQ FIRST_NO\"");
    if (l.next_seq == 0 || l.first_no == 0 || (l.inflight > 0 && (l.inflight_seq == 0 || l.inflight_seq >= l.next_seq)))
      return Status::Corruption("a link's numbers disagree (its batch in flight, its seqs, its first change)");
    l.name = std::string(name);
    (*links)[i] = std::move(st);
    return Status::OK();
  }
  if (line.empty()) return Status::Corruption("an empty line");
  const char kind = line[0];
  std::string_view rest = line.substr(1);
  unsigned i = 0;
  if (!JournalNumber(JournalField(&rest), &i))
    return Status::Corruption("expected a link's number after '" + std::string(1, kind) + "'");
  auto it = links->find(i);
  if (it == links->end()) return Status::Corruption("link " + std::to_string(i) + " has no \"link\" line before");
  ReplicaSpoolLink& l = it->second.link;
  std::deque<std::string_view>& q = it->second.lines;
  switch (kind) {
    case '+':
      // The change's own text is checked when the queue is decoded.
      q.push_back(with_newline.substr(with_newline.size() - rest.size() - 1));
      return Status::OK();
    case '>': {
      uint64_t seq = 0, count = 0;
      const std::string_view s = JournalField(&rest), c = JournalField(&rest);
      if (!rest.empty() || !JournalNumber(s, &seq) || !JournalNumber(c, &count))
        return Status::Corruption("expected \">I SEQ COUNT\"");
      if (l.inflight != 0 || seq != l.next_seq || count == 0 || count > q.size())
        return Status::Corruption("a batch sent that its link's state does not allow");
      l.inflight = count;
      l.inflight_seq = seq;
      l.next_seq = seq + 1;
      return Status::OK();
    }
    case '<': {
      uint64_t seq = 0;
      const std::string_view s = JournalField(&rest);
      if (!rest.empty() || !JournalNumber(s, &seq)) return Status::Corruption("expected \"<I SEQ\"");
      // A batch whose changes a full backlog dropped meanwhile (x) may be
      // acknowledged with none left in it.
      if (seq == 0 || seq != l.inflight_seq || l.inflight > q.size())
        return Status::Corruption("an acknowledgement of no batch in flight");
      q.erase(q.begin(), q.begin() + static_cast<long>(l.inflight));
      l.first_no += l.inflight;
      l.inflight = 0;
      return Status::OK();
    }
    case 'x':
      if (!rest.empty() || q.empty()) return Status::Corruption("a change dropped from an empty queue");
      if (l.inflight > 0) --l.inflight;
      q.pop_front();
      ++l.first_no;
      return Status::OK();
    case '-':
      // Ended with changes queued: young ones, whose answers a sync link
      // still held (the writer's bound for async).
      if (!rest.empty()) return Status::Corruption("expected \"-I\"");
      links->erase(it);
      return Status::OK();
    default: return Status::Corruption("an unknown step '" + std::string(1, kind) + "'");
  }
}

}  // namespace

Result<ReplicaSpool> DecodeReplicaJournal(std::string_view text) {
  // A last line without its newline was cut by the kill: nothing outside
  // the worker saw what it records.
  text = text.substr(0, text.rfind('\n') + 1);
  ReplicaSpool spool;
  spool.journal = true;
  size_t line_no = 0;
  auto bad = [&](std::string_view why) {
    return Status::Corruption("replica journal, line " + std::to_string(line_no) + ": " + std::string(why));
  };
  auto next = [&](std::string_view* line, std::string_view* with_newline) {
    const size_t nl = text.find('\n');
    if (nl == std::string_view::npos) return false;
    *with_newline = text.substr(0, nl + 1);
    *line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    ++line_no;
    return true;
  };
  std::string_view line, whole;
  if (!next(&line, &whole) || line != kJournalFirstLine) return bad("not a replica journal");
  if (!next(&line, &whole) || !line.starts_with("stream ") || !JournalWord(line.substr(7)))
    return bad("expected \"stream NAME\"");
  spool.stream = std::string(line.substr(7));
  if (!next(&line, &whole) || !line.starts_with("digest ") || !JournalWord(line.substr(7)))
    return bad("expected \"digest HEX\"");
  spool.digest = std::string(line.substr(7));
  std::map<unsigned, JournalLinkState> links;
  while (next(&line, &whole))
    if (Status s = ApplyJournalStep(line, whole, &links); !s.ok()) return bad(s.message());
  for (auto& [i, st] : links) {
    if (st.lines.empty()) continue;
    // A link's state restated into an open journal by a write the kill cut
    // short: its queue's lines whole up to the cut, and the batch in flight
    // no more than those (sent again under its seq, applied once). The
    // changes past the cut are lost, as they were before any journal.
    st.link.inflight = std::min<uint64_t>(st.link.inflight, st.lines.size());
    std::string body;
    for (std::string_view l : st.lines) body += l;
    ReplicaSpoolLink& l = st.link;
    if (Status s = DecodeChangeLines(body, &l.changes, &l.keys); !s.ok())
      return Status::Corruption("replica journal: in the changes queued for link " + l.name + " (their " + s.message() +
                                ")");
    spool.links.push_back(std::move(l));
  }
  return spool;
}

}  // namespace frs::server
