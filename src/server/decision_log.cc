#include "server/decision_log.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include "os/output_file.h"
#include "server/clock_util.h"
#include "server/logger.h"

namespace frs::server {

namespace {

Result<os::UniqueFd> OpenForAppend(const std::string& path) { return os::OpenForAppend(path, "decision log"); }

size_t CountLines(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

std::unique_ptr<DecisionLog> DecisionLog::Start(const DecisionLogOptions& opts, DecisionLogCounters* counters) {
  auto log = std::make_unique<DecisionLog>(Key{}, opts, counters, os::UniqueFd());
  log->Reopen();  // the writer's first work: open the file, off the request thread
  return log;
}

std::unique_ptr<DecisionLog> DecisionLog::OpenFdForTesting(const DecisionLogOptions& opts,
                                                           DecisionLogCounters* counters, os::UniqueFd fd) {
  return std::make_unique<DecisionLog>(Key{}, opts, counters, std::move(fd));
}

Status DecisionLog::CheckFile(const std::string& path) {
  auto fd = OpenForAppend(path);
  return fd.ok() ? Status::OK() : fd.status();
}

DecisionLog::DecisionLog(Key, const DecisionLogOptions& opts, DecisionLogCounters* counters, os::UniqueFd fd)
    : opts_(opts),
      record_all_(opts.record_all),
      sample_threshold_(ThresholdFor(opts.sample)),
      // Seeded apart per process and per start: workers sample independently.
      rng_((static_cast<uint64_t>(::getpid()) << 32) ^ static_cast<uint64_t>(std::time(nullptr)) ^
           reinterpret_cast<uintptr_t>(this) ^ 0x9E3779B97F4A7C15ULL),
      counters_(counters),
      capacity_(opts.buffer_bytes),
      pace_ms_(opts.flush_every_ms),
      line_(std::make_unique<char[]>(kMaxDecisionLineBytes)),
      path_(opts.file),
      fd_(std::move(fd)) {
  if (rng_ == 0) rng_ = 1;
  active_.reserve(capacity_);
  spare_.reserve(capacity_);
  writer_ = std::thread([this] { WriterLoop(); });
}

DecisionLog::~DecisionLog() {
  {
    MutexLock lk(&mu_);
    stop_ = true;
  }
  wake_.notify_one();
  writer_.join();
  // No log, no failing file: a reload that drops <decisions> ends the alarm.
  if (counters_) CounterSet(counters_->open_failed, 0);
}

uint64_t DecisionLog::ThresholdFor(double sample) {
  if (!(sample < 1.0)) return kAlways;
  if (!(sample > 0.0)) return 0;
  // sample * 2^64, below 2^64 since sample < 1.
  return static_cast<uint64_t>(std::ldexp(sample, 64));
}

void DecisionLog::Record(const DecisionRecord& r) {
  const size_t len = FormatDecisionLine(r, std::span<char>(line_.get(), kMaxDecisionLineBytes));
  if (len == 0) {
    CounterAdd(counters_->dropped_full);
    return;
  }
  Append(std::string_view(line_.get(), len));
}

void DecisionLog::Append(std::string_view line) {
  bool kept = false, wake = false;
  {
    MutexLock lk(&mu_);
    // Full: the writer is behind (a slow disk). Dropping keeps the answer
    // on time; the line is counted.
    if (active_.size() + line.size() <= capacity_) {
      // Counted before the writer can take it (under the lock), so `lines`
      // never passes `kept`: a kill between the two costs at most one line
      // counted lost that was never there.
      CounterAdd(counters_->kept);
      active_.append(line);
      kept = true;
      // Woken early only as a quarter fills; otherwise the writer's own pace
      // (flush_every_ms) takes the lines, with no system call here.
      wake = active_.size() >= capacity_ / 4 && active_.size() - line.size() < capacity_ / 4;
    }
  }
  if (!kept) CounterAdd(counters_->dropped_full);
  if (wake) wake_.notify_one();
}

uint64_t DecisionLog::CountLost(DecisionLogCounters* counters) {
  const uint64_t kept = CounterGet(counters->kept);
  const uint64_t out = CounterGet(counters->lines) + CounterGet(counters->dropped_failed);
  if (kept <= out) return 0;
  CounterAdd(counters->dropped_failed, kept - out);
  return kept - out;
}

void DecisionLog::SetOptions(const DecisionLogOptions& opts) {
  record_all_ = opts.record_all;
  sample_threshold_ = ThresholdFor(opts.sample);
  if (opts.file != opts_.file) {
    MutexLock lk(&mu_);
    path_ = opts.file;
    reopen_ = true;
  }
  opts_ = opts;  // the buffers' size and the writer's pace stay as they were made
  wake_.notify_one();
}

void DecisionLog::Reopen() {
  {
    MutexLock lk(&mu_);
    reopen_ = true;
  }
  wake_.notify_one();
}

void DecisionLog::Flush() {
  MutexLock lk(&mu_);
  const uint64_t ticket = ++flush_asked_;
  wake_.notify_one();
  done_.wait(mu_, [&]() FRS_REQUIRES(mu_) { return flush_done_ >= ticket; });
}

void DecisionLog::WriterLoop() {
  const auto pace = std::chrono::milliseconds(pace_ms_);
  MutexLock lk(&mu_);
  for (;;) {
    wake_.wait_for(mu_, pace, [&]() FRS_REQUIRES(mu_) {
      return stop_ || reopen_ || flush_asked_ != flush_done_ || active_.size() >= capacity_ / 4;
    });
    // Swapped under the lock, written without it: the request thread
    // appends to the other buffer meanwhile.
    active_.swap(spare_);
    const bool retry_due = reopen_retry_ns_ >= 0 && MonoNs() >= reopen_retry_ns_;
    const bool reopen = std::exchange(reopen_, false) || retry_due;
    const bool stop = stop_;
    const uint64_t flush_ticket = flush_asked_;
    const std::string path = reopen ? path_ : std::string();
    mu_.Unlock();
    // The first open (Start) comes before the lines it was started for.
    const bool open_first = reopen && !fd_.valid();
    if (open_first) OpenFile(path);
    if (!spare_.empty()) WriteOut(spare_);
    spare_.clear();
    if (reopen && !open_first) OpenFile(path);
    mu_.Lock();
    if (flush_ticket > flush_done_) {
      flush_done_ = flush_ticket;
      done_.notify_all();
    }
    if (stop && active_.empty()) return;
  }
}

void DecisionLog::WriteOut(const std::string& lines) {
  size_t off = 0;
  while (off < lines.size()) {
    // Whole lines, at most kMaxWriteBytes (a line is far shorter).
    size_t len = std::min(kMaxWriteBytes, lines.size() - off);
    if (off + len < lines.size()) {
      const size_t nl = lines.rfind('\n', off + len - 1);
      len = nl == std::string::npos || nl < off ? len : nl + 1 - off;
    }
    std::string_view piece(lines.data() + off, len);
    off += len;
    // After a short write the file ends in a partial line: a newline in
    // front of the next piece, in the same writev(2) (one O_APPEND write, so
    // no other worker's line lands between them), keeps the next lines whole;
    // the fragment becomes a line of its own, which a reader skips as not JSON.
    char newline = '\n';
    iovec iov[2] = {{&newline, 1}, {const_cast<char*>(piece.data()), piece.size()}};
    const size_t lead = torn_ ? 1 : 0;
    ssize_t w;
    do {
      w = ::writev(fd_.get(), iov + (1 - lead), static_cast<int>(1 + lead));
    } while (w < 0 && errno == EINTR);
    if (w > 0 && lead == 1) {
      torn_ = false;
      --w;  // the newline
    }
    if (w >= 0 && static_cast<size_t>(w) == piece.size()) {
      CounterAdd(counters_->lines, CountLines(piece));
      // Once a minute too: a disk that flips between full and not would
      // otherwise say both lines at every flip, into a log on that disk.
      if (const int64_t now_s = std::time(nullptr);
          lost_since_failing_ != 0 && (resumed_logged_s_ == 0 || now_s - resumed_logged_s_ >= 60)) {
        FRS_LOG("decision log: writing again; %llu line(s) lost in all since the writes began to fail",
                static_cast<unsigned long long>(lost_since_failing_));
        lost_since_failing_ = 0;
        lost_unlogged_ = 0;
        resumed_logged_s_ = now_s;
      }
      continue;
    }
    // ENOSPC, EIO, EFBIG...: what was not written is lost, and counted.
    const int err = w < 0 ? errno : ENOSPC;  // a short write: the file system took no more
    const size_t done = w > 0 ? static_cast<size_t>(w) : 0;
    const size_t whole = CountLines(piece.substr(0, done));
    CounterAdd(counters_->lines, whole);
    CounterAdd(counters_->dropped_failed, CountLines(piece) - whole);
    lost_unlogged_ += CountLines(piece) - whole;
    lost_since_failing_ += CountLines(piece) - whole;
    if (const int64_t now_s = std::time(nullptr); failure_logged_s_ == 0 || now_s - failure_logged_s_ >= 60) {
      FRS_LOG(
          "decision log: a write failed (%s): %llu line(s) lost since the last such line "
          "(frs_decision_log_dropped_total counts each)",
          std::strerror(err), static_cast<unsigned long long>(lost_unlogged_));
      failure_logged_s_ = now_s;
      lost_unlogged_ = 0;
    }
    if (done > 0 && piece[done - 1] != '\n') torn_ = true;
  }
}

void DecisionLog::OpenFile(const std::string& path) {
  const bool retrying = reopen_retry_ns_ >= 0;
  auto fd = OpenForAppend(path);
  if (counters_) CounterSet(counters_->open_failed, fd.ok() ? 0 : 1);
  if (!fd.ok()) {
    reopen_retry_ns_ = MonoNs() + kReopenRetryNs;
    if (retrying) return;  // said when it first failed
    if (fd_.valid())
      FRS_LOG("%s; writing decisions to the file already open, and trying again every %lld s",
              fd.status().message().c_str(), static_cast<long long>(kReopenRetryNs / 1'000'000'000));
    else
      FRS_LOG("%s; decisions are not logged until it opens (tried again every %lld s)", fd.status().message().c_str(),
              static_cast<long long>(kReopenRetryNs / 1'000'000'000));
    return;
  }
  if (retrying) FRS_LOG("decision log %s opened", path.c_str());
  reopen_retry_ns_ = -1;
  fd_ = std::move(fd.value());
  torn_ = false;
}

}  // namespace frs::server
