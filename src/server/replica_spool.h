// server/replica_spool.h: the replica changes a worker could not deliver
// before a graceful stop, kept in the store directory for the next start
// (docs/cluster.md, "A shard's stop").
//
// A link that is down queues its changes in the worker's memory. A stopping
// worker writes what each of its replicators still queues to a file of its
// own (store_dir::kReplicaSpoolPrefix); a starting worker takes such files
// (an flock held while it delivers: one taker, and a dead taker's lock goes
// with it, whatever pid comes next) and delivers each as its writer would
// have: under the writer's stream name, digest and batch seqs, so that a
// batch the other holder applied before the stop, its acknowledgement lost,
// is applied once. The file goes when its last change is acknowledged; a
// stop before then leaves it whole for the next start, which delivers it
// again from its start (the batches taken already are applied once).
//
// Text, one change per line as on the wire (replica_wire.h):
//
//   frs-replica-spool 1
//   stream STREAM
//   digest DIGEST
//   link NAME NEXT_SEQ INFLIGHT INFLIGHT_SEQ FIRST_NO COUNT
//   <COUNT change lines>
//   ...
//   end
//
// STREAM and NAME as they are (neither holds a space or a line break:
// srv.xml refuses such a shard name). A kill -9 writes nothing; what a link
// that is down queues is in a journal meanwhile (replica_journal.h: the same
// header, "frs-replica-spool 2", then the steps as they came), which is taken
// and delivered as a spool is.
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/change.h"
#include "frs/status.h"
#include "os/unique_fd.h"

namespace frs::server {

struct ReplicaSpoolLink {
  std::string name;  // the other shard's host:port
  uint64_t next_seq = 1;
  // changes[0, inflight) were sent as batch `inflight_seq`, unacknowledged:
  // they go again as that batch, whole (the receiver's watermark is a seq).
  uint64_t inflight = 0;
  uint64_t inflight_seq = 0;
  uint64_t first_no = 1;  // changes[0]'s number in the stream
  std::vector<Change> changes;
  std::vector<std::string> keys;  // what changes[i].key points into (decoded spools)
};

struct ReplicaSpool {
  std::string stream;
  std::string digest;
  std::vector<ReplicaSpoolLink> links;
  // Read from a killed worker's journal (replica_journal.h), not written
  // by a stop.
  bool journal = false;

  size_t Changes() const;
};

std::string EncodeReplicaSpool(const ReplicaSpool& spool);
// Names the line at fault; a file cut short (no `end`) is an error. A
// journal (replica_journal.h) reads as the spool its steps leave.
Result<ReplicaSpool> DecodeReplicaSpool(std::string_view text);

// A name for a new spool file of `dir` that no file of this or an earlier
// run has had (the writer's pid, the clock's ns, a sequence); made with
// `exclusive` all the same.
std::string NewReplicaSpoolPath(const std::string& dir);

// Writes `spool` to a new file of `dir` (synced: a spool is what a power cut
// after the stop must not lose); *path its name.
Status WriteReplicaSpool(const std::string& dir, const ReplicaSpool& spool, std::string* path);
// The same at `path`, in the place of the file there in one step (a
// journal, whose changes `spool` holds).
Status ReplaceReplicaSpool(const std::string& path, const ReplicaSpool& spool);

// The names of the spool files in `dir` (taken or not; not temporary or
// damaged ones).
std::vector<std::string> ReplicaSpoolNames(const std::string& dir);

// Takes up to `max` spool files of `dir` that no live process holds, and
// were written under the shard list of `digest`: each locked (flock, held
// by `lock` until it is closed) and read. One that cannot be read is moved
// aside (store_dir::DamagedPath), one of another list left where it is;
// both are named in *problems.
struct TakenReplicaSpool {
  std::string path;  // remove it, while `lock` is held, once delivered
  ReplicaSpool spool;
  os::UniqueFd lock;
};
std::vector<TakenReplicaSpool> TakeReplicaSpools(const std::string& dir, size_t max, std::string_view digest,
                                                 std::vector<std::string>* problems);

}  // namespace frs::server
