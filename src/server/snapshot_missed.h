// server/snapshot_missed.h: the shards a new store's catch-up took no
// snapshot from, kept in the store directory (snapshot.missed) so that
// every later start, the link that first reaches such a shard again and
// /metrics can say that the remedy of docs/cluster.md ("Both holders lost")
// is due.
//
// A new store (a lost disk) takes each other shard's snapshot of the nodes
// it holds. One that cannot be reached then (both holders of some routes
// lost at once) is served without: what only it held of the routes the two
// share is counted there but not here, and no later change brings it (a
// snapshot is the only thing that carries a node whole). Once that shard
// answers again, the operator can make this store take its snapshot after
// all (stop, move the store directory aside, start): this file says when.
//
// Text, one line per shard: "NAME UNIX_S" (the start that missed it).
// Written whole (synced) by the catch-up of a new store, before it serves;
// removed by that catch-up when it missed none. A shard's line goes when it
// asks for a snapshot (Handler::ForgetMissedSnapshotOf: it is on a new
// store then, and what was missed went with its old one). An operator who
// decides the remedy is not wanted (the windows open then have ended)
// removes it.
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frs/status.h"

namespace frs::server {

struct MissedSnapshot {
  std::string shard;  // its name in the ring
  int64_t at_s = 0;   // unix second of the start that missed it
};

// The file's lines; no file: none. A line that is not "NAME UNIX_S" (a
// name of at most 255 printable bytes, a time after 1970) is skipped and
// counted in *unread when given: the file is the operator's to edit.
Result<std::vector<MissedSnapshot>> ReadMissedSnapshots(const std::string& store_dir, size_t* unread = nullptr);

// The file made whole with `missed`, or removed when it is empty.
[[nodiscard]] Status WriteMissedSnapshots(const std::string& store_dir, const std::vector<MissedSnapshot>& missed);

// Removes `shard`'s line, under an flock of the store directory (workers
// answering two shards at once); true when there was one.
Result<bool> ForgetMissedSnapshot(const std::string& store_dir, const std::string& shard);
// The file made whole with what `list` answers, called under the same lock
// (the catch-up's: a shard that asked meanwhile is left out by `list`).
[[nodiscard]] Status NoteMissedSnapshotsLocked(const std::string& store_dir,
                                               const std::function<std::vector<MissedSnapshot>()>& list);

// What is due, in words: "this store took no snapshot from SHARD at its
// first start (DATE, N h ago): ...; to take it, ..."
std::string MissedSnapshotWords(const std::string& store_dir, const MissedSnapshot& m, int64_t now_s);

}  // namespace frs::server
