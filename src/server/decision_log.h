// server/decision_log.h: the decision log: one JSON line per recorded
// decision (server/decision_line.h), appended to <decisions file> by every
// worker.
//
// Why it looks like this: writing a line must never delay an answer, and a
// write to a regular file can block for as long as the disk likes (a slow,
// remote or full disk). So the request thread only copies a formatted line
// into a bounded in-memory buffer (no system call, and the lock it takes is
// never held across I/O); a line that does not fit is dropped and counted
// (frs_decision_log_dropped_total). A writer thread of the worker swaps
// the buffer for an empty one and writes the full one out with write(2),
// off the request path. Each write(2) carries whole lines only and at most
// kMaxWriteBytes: on Linux, a write to a regular file opened O_APPEND on a
// local filesystem is atomic (the offset is taken and the data placed under
// the inode's lock), so the lines of different workers never interleave. A
// failed or short write (ENOSPC, EIO) loses the lines it did not write and
// counts them; nothing is retried, so a broken disk cannot back lines up.
//
// Reopen() (SIGUSR1, after logrotate renamed the file) makes the writer
// write out what it holds to the old file, then open the path again: no
// line is lost or written twice across a rotation. Every open(2) of the
// file is the writer thread's, the first one too: an open can wait (a FIFO
// no one reads, a hung NFS mount), and a request thread must not.
//
// Thread safety: Wants, Record, SetOptions, Reopen and Flush are called by
// the worker's one request thread; the writer thread is internal. The
// counters are written as described in server/metrics.h.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "frs/status.h"
#include "os/unique_fd.h"
#include "server/decision_line.h"
#include "server/metrics.h"

namespace frs::server {

struct DecisionLogOptions {
  std::string file;                // absolute path
  bool record_all = false;         // false: denied decisions only
  double sample = 1.0;             // 0..1: the share of recorded decisions written
  size_t buffer_bytes = 4u << 20;  // lines held between writes, per worker
  int64_t flush_every_ms = 50;     // the writer's pace when the buffer fills slowly
};

class DecisionLog {
 public:
  // The most bytes of one write(2): whole lines up to this size.
  static constexpr size_t kMaxWriteBytes = 64 * 1024;

  // Starts the writer thread, whose first work is to open the file
  // (os::OpenForAppend: a regular file or a character device, O_APPEND,
  // 0640). Never opens anything on the caller's (request) thread: open(2)
  // can wait (a FIFO, a hung NFS mount). A file that cannot be opened is
  // logged; its lines are counted lost until a reload or Reopen() opens one.
  // `counters` must outlive the log.
  static std::unique_ptr<DecisionLog> Start(const DecisionLogOptions& opts, DecisionLogCounters* counters);
  // Opens and closes the file: can frsd write it? (frsd's start before
  // forking, and the master's reload: a FIFO or a directory is refused
  // there, with its name, before any worker is told.)
  static Status CheckFile(const std::string& path);

  // For tests only: a log writing to `fd` as it is (a socket of
  // SOCK_SEQPACKET shows each write(2) apart; a socket no one reads, a
  // stalled disk). Reopen() then opens opts.file.
  static std::unique_ptr<DecisionLog> OpenFdForTesting(const DecisionLogOptions& opts, DecisionLogCounters* counters,
                                                       os::UniqueFd fd);

  struct Key {
   private:
    Key() = default;
    friend class DecisionLog;
  };
  DecisionLog(Key, const DecisionLogOptions& opts, DecisionLogCounters* counters, os::UniqueFd fd);
  // Writes out every line recorded, then stops the writer.
  ~DecisionLog();
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;

  // Is a decision (`denied`: denied, or what shadow mode would have denied)
  // one to write? record="denied" keeps denials only, then the sample.
  bool Wants(bool denied) {
    if (!denied && !record_all_) return false;
    if (sample_threshold_ == kAlways) return true;
    return NextRandom() < sample_threshold_;
  }
  // Formats the line and appends it to the buffer, or counts it dropped.
  void Record(const DecisionRecord& r);
  // Appends one whole line ('\n' included), or counts it dropped.
  void Append(std::string_view line);

  // A reload: record and sample apply to the next decision; a new file is
  // opened by the writer after it has written what it holds to the old one.
  void SetOptions(const DecisionLogOptions& opts);
  // SIGUSR1: write out what is held, then reopen the file (its path may now
  // name a new file).
  void Reopen();
  // Waits until every line appended so far is written or counted lost (tests;
  // a clean stop).
  void Flush();

  // The master, for a worker that died (kill -9, a crash, the stall watch):
  // the lines its buffer held, never written, counted in dropped_failed;
  // returns how many. A kill during a write(2) may count lines that reached
  // the file: it errs towards saying lines may be missing.
  static uint64_t CountLost(DecisionLogCounters* counters);

  const std::string& file() const { return opts_.file; }

 private:
  static constexpr uint64_t kAlways = ~uint64_t{0};
  static uint64_t ThresholdFor(double sample);
  uint64_t NextRandom() {
    // xorshift64*: a few cycles; the sample needs no better.
    rng_ ^= rng_ >> 12;
    rng_ ^= rng_ << 25;
    rng_ ^= rng_ >> 27;
    return rng_ * 0x2545F4914F6CDD1DULL;
  }
  void WriterLoop();
  // Writes `lines` (whole lines) in pieces of at most kMaxWriteBytes.
  void WriteOut(const std::string& lines);
  // Opens `path`; on failure keeps the current file and says why.
  void OpenFile(const std::string& path);

  // Request thread only.
  DecisionLogOptions opts_;  // as last set (its buffer size and pace unused after construction)
  bool record_all_ = false;
  uint64_t sample_threshold_ = kAlways;
  uint64_t rng_;
  DecisionLogCounters* counters_;
  const size_t capacity_;         // of each buffer (both threads read it)
  const int64_t pace_ms_;         // the writer's wait between rounds
  std::unique_ptr<char[]> line_;  // kMaxDecisionLineBytes, for Record

  // Shared, under mu_. The condition variables wait on mu_ itself (a
  // Mutex, which std::condition_variable does not take).
  Mutex mu_;
  std::condition_variable_any wake_;        // the writer: work to do
  std::condition_variable_any done_;        // Flush: a round is written
  std::string active_ FRS_GUARDED_BY(mu_);  // lines appended since the last swap
  std::string path_ FRS_GUARDED_BY(mu_);    // the file the writer keeps open
  bool reopen_ FRS_GUARDED_BY(mu_) = false;
  bool stop_ FRS_GUARDED_BY(mu_) = false;
  uint64_t flush_asked_ FRS_GUARDED_BY(mu_) = 0;
  uint64_t flush_done_ FRS_GUARDED_BY(mu_) = 0;

  // Writer thread only.
  std::string spare_;
  os::UniqueFd fd_;
  bool torn_ = false;  // a short write left a partial line: start the next write on a new line
  // An open that failed (after a rotation: the directory gone, its
  // permissions) is tried again from then on, every kReopenRetryNs, until one
  // succeeds: the lines go on into the renamed file meanwhile.
  static constexpr int64_t kReopenRetryNs = 5'000'000'000;
  int64_t reopen_retry_ns_ = -1;  // CLOCK_MONOTONIC; -1: none due
  // A failing file (a full disk, an I/O error) is said in frsd's log, with
  // its error and the lines lost since the last such line, at most once a
  // minute: the counter alone would leave an audit log that stopped unseen.
  int64_t failure_logged_s_ = 0;
  uint64_t lost_unlogged_ = 0;
  // Lines lost since writes began to fail; the first whole write after
  // them says the file takes lines again, and how many went in all (an
  // episode of a full disk was said by its first line alone).
  uint64_t lost_since_failing_ = 0;
  int64_t resumed_logged_s_ = 0;  // that line, at most once a minute as the failure's

  std::thread writer_;
};

}  // namespace frs::server
