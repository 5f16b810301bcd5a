// server/replica_journal.h: the replica changes a worker queues for a link
// that is down, written to the store directory as they are queued, so that a
// kill -9 of the worker loses none of them (docs/cluster.md, "A worker's
// kill -9").
//
// A graceful stop writes what a worker still queues to a spool
// (replica_spool.h); a killed worker writes nothing. So from the moment one
// of its links goes down (async: or its oldest unacknowledged change waits
// Replicator::kAsyncJournalMs) until that link's queue is empty again (or
// holds only younger changes), the replicator appends each step of that
// link to a journal: a spool file
// (store_dir::kReplicaSpoolPrefix) that the worker holds under flock while it
// lives. A worker that starts takes a dead one's journal as it takes a stop's
// spool (TakeReplicaSpools: the kernel dropped the dead worker's lock) and
// delivers it under the dead worker's stream and batch seqs, so that a batch
// the other holder applied before the kill is applied once.
//
// Text, one step per line, after a spool's header:
//
//   frs-replica-spool 2
//   stream STREAM
//   digest DIGEST
//   link I NAME NEXT_SEQ INFLIGHT INFLIGHT_SEQ FIRST_NO   link I's journal
//                               (re)starts with its state; its queue follows
//   +I CHANGE      a change queued for link I (a replica_wire.h line)
//   >I SEQ COUNT   batch SEQ sent: link I's COUNT oldest changes
//   <I SEQ         batch SEQ acknowledged: its changes are gone
//   xI             link I's oldest change dropped (its backlog was full)
//   -I             link I's journal ends: its queue is empty, or holds
//                  only changes younger than any answered alone
//
// A line is written before what it records is seen outside the worker: a
// change's before any answer the worker writes (Worker::Flush), a batch's
// before it is sent. So a last line that a kill cut short records nothing
// anyone saw, and the reader drops it. The file is not synced: it outlives
// the worker, not the machine (a power cut loses what the page cache held).
// A file that cannot be written is removed, and the changes are in the
// worker's memory only, as before this journal (logged). The file only
// grows while a link is down, and a queue drops its oldest changes past
// Replicator::kMaxBacklog (serve; refuse takes the link down there, and
// refuses its routes, so the queue passes it by a loop turn's changes at
// most): once it holds kRestartSlack bytes more than its
// queues' lines take, it is written again, in its own place, with only
// those (Restart).
//
// Thread safety: none; one per replicator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "frs/change.h"
#include "frs/status.h"
#include "os/unique_fd.h"
#include "server/replica_spool.h"

namespace frs::server {

class ReplicaJournal {
 public:
  static constexpr uint64_t kRestartSlack = uint64_t{64} << 20;

  ReplicaJournal() = default;
  ReplicaJournal(const ReplicaJournal&) = delete;
  ReplicaJournal& operator=(const ReplicaJournal&) = delete;
  // Closes the file and leaves it: what it holds is delivered by the next
  // worker that takes it.
  ~ReplicaJournal() = default;

  bool open() const { return fd_.valid(); }
  const std::string& path() const { return path_; }

  // Makes the file under a new spool name of `dir`, locked, holding its
  // header and the steps buffered so far (a link's state), whole.
  Status Start(const std::string& dir, std::string_view stream, std::string_view digest);

  // Each step, buffered until Flush.
  void Link(unsigned i, std::string_view name, uint64_t next_seq, uint64_t inflight, uint64_t inflight_seq,
            uint64_t first_no);
  void Queued(unsigned i, const Change& c);
  void Sent(unsigned i, uint64_t seq, uint64_t count);
  void Acked(unsigned i, uint64_t seq);
  void Dropped(unsigned i);
  void Ended(unsigned i);

  bool pending() const { return !buf_.empty(); }
  // Writes what is buffered. An error leaves the file for Remove().
  Status Flush();
  // Whether the file holds kRestartSlack bytes more than `queued` changes'
  // lines take (their mean length as written so far).
  bool Oversized(uint64_t queued) const {
    return written_ > kRestartSlack + queued * (change_bytes_ / (change_lines_ ? change_lines_ : 1) + 1);
  }
  // The file made again in its own place (a new file renamed over it, so a
  // reader sees the old one or the new one), holding only the header and
  // what `restate` writes (each link's Link and Queued steps). Nothing
  // buffered may be pending. On an error the old file is left as it was
  // (the replicator then removes it: a journal it cannot write is none).
  Status Restart(const std::function<void()>& restate);
  // Nothing in the file is left to deliver (or it cannot be trusted): it
  // goes, and the lock with it.
  void Remove();
  // Its changes are in a stop's spool now, which took its name: closed.
  void Close();

 private:
  void Step(char kind, unsigned i);

  // Makes the file at `path` (exclusive: never over another) holding the
  // header and buf_, locked; the new descriptor in *fd.
  Result<bool> Make(const std::string& path, bool exclusive, os::UniqueFd* fd);

  os::UniqueFd fd_;
  std::string path_;
  std::string buf_;
  std::string stream_, digest_;
  uint64_t written_ = 0;       // the file's bytes
  uint64_t change_bytes_ = 0;  // of them, the changes' lines
  uint64_t change_lines_ = 0;
};

// Reads a journal back as the spool its last whole line leaves: per link its
// queue, its batch in flight and its seqs. A link whose journal ended, or
// whose queue is empty, is left out. Names the line at fault.
Result<ReplicaSpool> DecodeReplicaJournal(std::string_view text);

}  // namespace frs::server
