// server/replica_park.h: replica changes of a biz this shard's map has not
// yet, kept aside in the store directory until a reload (or a start) brings
// that biz (docs/cluster.md, "Every shard runs the same map.xml").
//
// A map edit reaches the shards one after another. A holder that receives a
// batch naming a biz its map lacks applies the rest of the batch (refused
// whole, the link would stop for every biz) and, before this, dropped those
// changes: its copy then stayed short of that biz's uses until their windows
// ended, and a failover after the rollout granted them again (10 of 5 from
// outside). Now the receiving worker appends them here, one record per biz
// and batch, and every worker after a reload (and at its start) applies the
// records whose biz its map now has, each under a receipt of its own
// ("park/BIZ/HASH" at the batch's seq), so a record applied and then taken
// again (its taker killed before it rewrote the file) counts once. A record
// whose biz never comes (a biz taken out of the map) goes after a day.
//
// Text, one change per line as on the wire (replica_wire.h):
//
//   frs-replica-parked 1
//   batch BIZ SEQ AT_S COUNT STREAM
//   <COUNT change lines>
//   ...
//
// AT_S the unix second it was kept; STREAM the sender's stream (no space or
// line break: one that has either is not kept). Every append and the taking
// hold an flock on the file; the taker writes what it keeps as a new file
// (rename) or removes it, and a writer that locked the file it replaced
// opens the name again.
//
// Thread safety: plain functions; processes share the file under its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/change.h"
#include "frs/status.h"

namespace frs::server {

// The file takes no record past this size (about 250,000 changes): a map
// left without a biz for good must not fill the disk.
inline constexpr size_t kMaxParkedBytes = size_t{16} << 20;
// A record whose biz no reload brought within this is dropped.
inline constexpr int64_t kMaxParkedSeconds = 86400;

struct ParkedBatch {
  uint32_t biz = 0;
  uint64_t seq = 0;
  int64_t at_s = 0;
  std::string stream;
  std::vector<Change> changes;  // their keys point into `keys`
  std::vector<std::string> keys;
};

// Appends the changes of `biz` among `changes` (in their order) as one
// record of the batch `stream`/`seq`. Nothing of that biz: nothing written.
// An error (the file full, or I/O: IOError; a stream name with a space or
// a line break: InvalidArgument) writes nothing.
[[nodiscard]] Status ParkChanges(const std::string& path, uint32_t biz, std::string_view stream, uint64_t seq,
                                 std::span<const Change> changes, int64_t now_s);

struct ParkTaken {
  size_t applied = 0;            // changes of records applied (or found applied before)
  size_t dropped = 0;            // changes of records kept past kMaxParkedSeconds
  size_t kept = 0;               // changes of records still waiting for their biz
  std::vector<uint32_t> bizzes;  // the bizzes applied, each once
  std::string problem;           // a damaged tail dropped, or an apply refused (the record stays)
};

// Applies the records whose biz `known` says this map has (`apply` each; an
// error keeps the record for the next time), drops those older than
// kMaxParkedSeconds, and leaves the rest: the file rewritten with them, or
// removed when none is left. No file: nothing taken.
[[nodiscard]] Result<ParkTaken> TakeParked(const std::string& path, const std::function<bool(uint32_t)>& known,
                                           const std::function<Status(const ParkedBatch&)>& apply, int64_t now_s);

}  // namespace frs::server
