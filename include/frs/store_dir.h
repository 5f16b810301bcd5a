// frs/store_dir.h: the name of every file of a store directory, in one
// place: what a program that backs up, checks, copies or moves a store
// (frsctl verify, grow, handoff) and frsd agree each file is.
//
// A store directory holds the store (frs.N.store), the engine's files beside
// it (stats.frs, denials.frs, rules.history, lease.key, the statistics day
// files under stats/), the server's (frsd.lock, frsd.listen, frsd.running,
// frsd.grpc.listen, frsd.log, envoy.ids, cluster.digest, cluster.list,
// catchup.pending, snapshot.missed, replica-spool.*, replica-parked) and frsctl's
// (handoff.spool).
// What each file holds, and what survives what, is docs/store.md.
//
//   frs::store_dir::In("/var/lib/frs", frs::store_dir::StoreFileName(0))  // "/var/lib/frs/frs.0.store"
//
// Thread safety: plain functions and constants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace frs::store_dir {

// The engine's files.
inline constexpr std::string_view kDailyStats = "stats.frs";       // daily counters per biz
inline constexpr std::string_view kRecentDenials = "denials.frs";  // the keys denied in the last minutes
inline constexpr std::string_view kRuleHistory = "rules.history";  // what each named rule was
inline constexpr std::string_view kLeaseKey = "lease.key";         // the lease ids' secret
inline constexpr std::string_view kFieldStats = "stats";           // stats/<biz id>/<table>/<day files>
// The server's.
inline constexpr std::string_view kStoreLock = "frsd.lock";  // one frsd per store; holds its pid
inline constexpr std::string_view kListen = "frsd.listen";
inline constexpr std::string_view kRunningConfig = "frsd.running";  // the map and zone the live frsd runs
// frsd.running of the last run, kept when it stopped (renamed): the next
// start (and frsd -t meanwhile) warns of what the map's changes since cost.
inline constexpr std::string_view kLastRunConfig = "frsd.last";
inline constexpr std::string_view kGrpcListen = "frsd.grpc.listen";
inline constexpr std::string_view kLog = "frsd.log";
inline constexpr std::string_view kEnvoyIds = "envoy.ids";  // the biz ids of Envoy's descriptors
// With replicas: the digest of the <cluster> whose ring the store's nodes are
// placed for (8 hex digits), written at the first start and when a frsctl
// handoff finishes. A start under another list keeps the handoff pending.
inline constexpr std::string_view kRingDigest = "cluster.digest";
// With replicas: that list itself (Ring::ListText), written before the
// digest: a start under another list takes it for the list before the
// change, as a SIGHUP's would (its links send it, its peers still on it are
// answered). Ignored when its digest is not cluster.digest's.
inline constexpr std::string_view kRingList = "cluster.list";
// With replicas: a new store's catch-up has begun and has not ended.
// Written (synced) before the first node is merged, removed just before the
// shard serves; a start that finds it empties the store (every other shard
// answering) and catches up again.
inline constexpr std::string_view kCatchUpPending = "catchup.pending";
// With replicas: the changes a worker stopped gracefully could not deliver
// to a down link, for the next start to deliver: <prefix><pid>.<ns>.<n>,
// locked (flock) by the worker that delivers it, removed once delivered.
inline constexpr std::string_view kReplicaSpoolPrefix = "replica-spool.";
// With replicas: the changes other shards sent of a biz this map has not
// yet, kept for the reload that brings it (under flock; removed once empty).
inline constexpr std::string_view kReplicaParked = "replica-parked";
// With replicas: the shards a new store's catch-up took no snapshot from
// ("NAME UNIX_S" lines), until the store is replaced or the operator
// removes it (docs/cluster.md, "Both holders lost").
inline constexpr std::string_view kSnapshotMissed = "snapshot.missed";
// frsctl's.
inline constexpr std::string_view kHandoffSpool = "handoff.spool";  // a handoff's nodes until each is taken
// Siblings of the directory, `dir` + suffix, made by frsctl grow: the store
// it builds (and, after its swap, the old one), and the old one where the file
// system cannot exchange two directories in one step.
inline constexpr std::string_view kGrowNewSuffix = ".grow-new";
inline constexpr std::string_view kGrowOldSuffix = ".grow-old";

// `dir`/`name`.
std::string In(const std::string& dir, std::string_view name);

// The store's files: frs.0.store, frs.1.store, ...
std::string StoreFileName(uint32_t index);
// True (and *index) for a name StoreFileName makes.
bool ParseStoreFileName(std::string_view name, uint32_t* index);

// Statistics by key field: the directory of one biz's table, and its files.
// `day` is YYYY-MM-DD.
std::string FieldStatsDir(const std::string& dir, uint16_t biz, std::string_view table);
std::string DayFileName(std::string_view day);  // YYYY-MM-DD.frs: the day's own counts
// YYYY-MM-DD.from-<id>.frs: counts a handoff brought, `id` naming its receipt.
std::string ReceivedDayFileName(std::string_view day, std::string_view id);
enum class DayFile { kNone, kOwn, kReceived };
// What a file name in a table's directory is (the day text is not checked
// beyond its dashes: the caller parses it with ParseDayText).
DayFile KindOfDayFile(std::string_view name);

}  // namespace frs::store_dir
