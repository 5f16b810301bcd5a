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
// and batch, before it applies the batch (and takes them out again when it
// does not apply it: Handler::KeepChangesOfNoBiz), and every worker after a reload (and at its start) applies the
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
//   end
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
#include "os/unique_fd.h"

namespace frs::server {

// The file's first line; in a replica snapshot's answer, the line after
// its nodes that the records kept aside for the asker follow
// (ParkedRecordsFor).
inline constexpr std::string_view kParkedFirstLine = "frs-replica-parked 1\n";

// The file takes no record past this size: a map left without a biz for
// good must not fill the disk (a biz taken out here first fills it too, and
// a biz added meanwhile then finds it full).
inline constexpr size_t kMaxParkedBytes = size_t{16} << 20;
// A record whose biz no reload brought within this is dropped (by the
// first take after it: a reload, a worker's start).
inline constexpr int64_t kMaxParkedSeconds = 86400;

// Its changes' keys point into `keys`: neither copied nor moved (a moved
// short string moves its bytes, and the keys would point at the old ones).
struct ParkedBatch {
  ParkedBatch() = default;
  ParkedBatch(const ParkedBatch&) = delete;
  ParkedBatch& operator=(const ParkedBatch&) = delete;

  uint32_t biz = 0;
  uint64_t seq = 0;
  int64_t at_s = 0;
  std::string stream;           // a record of nodes: its receipt
  std::vector<Change> changes;  // their keys point into `keys`
  std::vector<std::string> keys;
  // A record of nodes (ParkNodes): a snapshot's, ExportNode's lines; seq 0
  // and no changes.
  std::vector<std::string> nodes;
};

// The file opened and locked (an flock) for one batch's records: taken
// before they are written and held until the batch is applied (or they are
// taken out again: it was not). A take applies the records in file order, each biz and stream under one
// receipt that keeps the highest seq applied, so the records of a stream
// must be in the file in the order their batches were applied: one written
// after a later one of its stream (its worker slow between the two steps)
// would read as applied before, and its uses be lost. Waits while another
// process holds the lock: a take of a whole file (docs/store.md gives its
// time), or another batch's apply.
[[nodiscard]] Result<os::UniqueFd> LockParked(const std::string& path);

// Appends to the file `fd` (LockParked's, for `path`) the uses and rule
// events of `biz` among `changes` (in their order) as one record of the
// batch `stream`/`seq`; *kept says how many. A set, an erase or a reset of
// the biz is not kept: applied after the uses that followed it (a worker
// that reloaded first applies those directly), it would undo them; left
// out, the copy counts more than its sender, never less. Nothing to keep:
// nothing written. An error (the file full, or I/O: IOError; a stream name
// with a space or a line break: InvalidArgument) writes nothing.
[[nodiscard]] Status ParkChanges(const os::UniqueFd& fd, const std::string& path, uint32_t biz, std::string_view stream,
                                 uint64_t seq, std::span<const Change> changes, int64_t now_s, size_t* kept);

// Appends to the file `fd` (LockParked's, for `path`) a record of a
// replica snapshot's nodes of `biz`, a biz this map lacks (ExportNode's
// lines, as the snapshot carried them): merged under `receipt` (no space
// or line break) by the take after a reload that brings it. A shard on a
// new store whose map is a step of a rollout behind its peer's left them
// out, and its copy was short of that biz's uses for good.
//
//   nodes BIZ AT_S COUNT RECEIPT
//   <COUNT node lines>
//   end
[[nodiscard]] Status ParkNodes(const os::UniqueFd& fd, const std::string& path, uint32_t biz, std::string_view receipt,
                               std::span<const std::string_view> lines, int64_t now_s);

// The change records of the file at `path`, each with only the changes
// `wanted` takes (a record left with none is left out), in the file's
// order and format without its first line: what a snapshot carries to a
// shard on a new store, since the uses a shard kept aside are in none of
// its nodes. No file: empty. Read under the file's lock.
[[nodiscard]] Result<std::string> ParkedRecordsFor(const std::string& path,
                                                   const std::function<bool(const Change&)>& wanted);

struct ParkTaken {
  size_t applied = 0;                 // changes of records applied
  size_t duplicates = 0;              // changes of records applied before (a take killed before its rewrite)
  size_t dropped = 0;                 // changes kept past kMaxParkedSeconds, refused for good, or damaged
  size_t kept = 0;                    // changes of records still waiting for their biz
  size_t held = 0;                    // changes of records of a known biz held back (an apply refused for now)
  std::vector<uint32_t> bizzes;       // the bizzes applied, each once
  std::vector<std::string> problems;  // damaged records dropped, applies refused
};

// Applies the records whose biz `known` says this map has (`apply` each:
// true applied, false applied before), drops those older than
// kMaxParkedSeconds, and leaves the rest: the file rewritten with them, or
// removed when none is left. An apply refused as InvalidArgument is dropped
// (it would never apply); another error keeps the record and every later
// one of its biz and stream (a later batch would move their receipt past
// it), the others going on. A record that is not whole (its writer killed
// mid-write) is dropped and the reading goes on at the next one. No file,
// or an empty one (its first writer stopped before the first byte):
// nothing taken, and an empty file removed.
[[nodiscard]] Result<ParkTaken> TakeParked(const std::string& path, const std::function<bool(uint32_t)>& known,
                                           const std::function<Result<bool>(const ParkedBatch&)>& apply, int64_t now_s);

// As TakeParked, of the change records in `text` (ParkedRecordsFor's)
// instead of a file's, each record's stream named `from` + ">" + its own
// (the shard that carried it: two shards keep the same sender stream's
// batches under numbers of their own link, and one receipt for both took
// the second shard's as applied): those not applied and not dropped are
// appended to the file at `path`, so named, one record at a time, for the
// takes after the reloads to come. A damaged record, and one the file does
// not take (full), is dropped and said in `problems`.
[[nodiscard]] Result<ParkTaken> TakeParkedRecords(std::string_view text, std::string_view from, const std::string& path,
                                                  const std::function<bool(uint32_t)>& known,
                                                  const std::function<Result<bool>(const ParkedBatch&)>& apply,
                                                  int64_t now_s);

// The receipt stream a take applies a change record under: one per biz and
// sender's stream, at the batch's seq (so a record taken twice, its taker
// killed before it rewrote the file, counts once).
std::string ParkReceiptStream(uint32_t biz, std::string_view stream);

// Removes the file and what a killed taker left of its rewrite (the
// temporary names of os/whole_file.h): a new store's catch-up begun again
// empties the store and takes every snapshot anew, which carry what the
// first attempt kept aside here.
[[nodiscard]] Status RemoveParked(const std::string& path);

}  // namespace frs::server
