// frsctl/session.h: what a command works on: srv.xml, the store it names
// and the rule engine over it, opened only as far as the command needs.
//
// frsctl opens the store with the same API (and so the same chain locks) as
// frsd; every walk holds at most one chain lock at a time, so it is safe on
// a live store.
//
// Thread safety: one Session per command, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "frs/admin_engine.h"
#include "frs/service.h"
#include "frs/status.h"
#include "frs/store.h"
#include "json_out.h"

namespace frs::ctl {

// Exit codes, documented in docs/frsctl.md.
inline constexpr int kExitOk = 0;
inline constexpr int kExitNo = 1;     // the answer is "no": get of an absent key, verify found problems
inline constexpr int kExitUsage = 2;  // bad command line or argument (unknown biz, bad key)
inline constexpr int kExitFail = 3;   // could not do it: missing store, I/O, store of another version

// Walks over the whole store (dump, export, stat, top) use at most about
// half a core: on a live server they must not take the workers' CPU or hold
// their memory bandwidth (a dump raised frsd's p999 from 0.43 to 8 ms).
inline constexpr uint32_t kWalkBusyPercent = 50;

struct Session {
  ServiceConfig cfg;
  std::unique_ptr<Store> store;
  std::unique_ptr<AdminEngine> engine;
  bool json = false;
  // The command only reads: a store this user may not write (a read-only
  // file system) is then opened read-only instead of refused.
  bool reads_only = false;
  // It reads nodes, not the statistics (get, dump, export, explain, top
  // without --denied): a statistics file that does not open is a warning.
  bool reads_nodes_only = false;
  // It writes nothing of the store directory's this run (import
  // --dry-run): its engine makes no side file (stats.frs, lease.key) of a
  // store that has none yet.
  bool writes_nothing = false;
  // It writes nodes another store made (import): its engine never makes
  // lease.key, since the ids those nodes hold were made under the
  // exporting store's, nor stats.frs. A new secret would void them with no
  // one told; left missing, frsd -t, the start and verify say to restore it.
  bool brings_nodes = false;
  bool opened_read_only = false;
  // What the running frsd runs (frsd.running), when the engine was opened
  // on it: a second session of the command (import's scratch store) takes
  // the same map and zone.
  std::optional<RunningConfig> running;

  int64_t NowMs() const;
};

enum class Needs : uint8_t {
  kNothing,   // a file named on the command line only (envoy-config)
  kConfig,    // srv.xml only
  kStoreDir,  // and the store directory, as its owner; the command opens what it needs (verify, grow, ...)
  kStore,     // and the existing store
  kEngine,    // and the rule engine (map.xml) over it
};

// Loads srv.xml and opens what `needs` says. A missing store is NotFound
// with a message saying how to create one; nothing is created.
Status OpenSession(const std::string& config_path, Needs needs, Session* s);

// Run as root on a store directory another user owns: becomes that user for
// good (uid, gid as its only group), so that what frsctl makes there is
// theirs, as frsd needs. Nothing otherwise. OpenSession does it for every
// command that opens the store; import calls it once its input is open.
Status ActAsStoreOwner(const std::string& dir);

// Opens the store of s->cfg (creating it when `create`) and, when `engine`,
// the engine over it. Used by import, which creates the store late.
Status OpenStoreAndEngine(Session* s, bool create, bool engine);

// The shards of srv.xml's <cluster> that hold a key's route: its owner and,
// with replicas, its successor; `self` whether this server is one of them.
// None without a <cluster> (a lone server holds every key).
struct KeyHolders {
  std::string owner;
  std::string successor;  // empty without replicas
  bool self = false;
};
std::optional<KeyHolders> HoldersOfKey(const Session& s, std::string_view key);

// Why `key` has no node: "never counted, or expired and reclaimed", and, on a
// store that has evicted live nodes to make room (docs/store.md), that too,
// with how many: such a key's count started again from zero. On a shard that
// holds no copy of the key's route it names the shards that do: an operator
// who asks the wrong shard must not read "never counted".
std::string WhyNoNode(const Session& s, std::string_view key);
// On a shard of a <cluster replicas="1">, a note on standard error that a
// change frsctl made to this store (`what`: "set", "del") reached neither
// the other holder of `key`'s route (named) nor, for a key this shard holds
// no copy of, its holders; an empty key: a reset, whose biz every shard
// holds part of. Nothing without replicas.
void NoteChangeIsThisShardsOnly(const Session& s, std::string_view key, const char* what);
// --json's form of the same, for a key without a node: "holder" (whether this
// shard holds the key's route), "owner" and, with replicas, "successor";
// nothing without a <cluster>.
void HoldersJson(const Session& s, std::string_view key, JsonOut& j);
// Resolves a biz given on the command line (name or id); the error names it
// and lists the bizs of map.xml.
Result<uint16_t> ResolveBizArg(const Session& s, const std::string& biz);
// `biz` as a biz id (1..65535) when it is written as one: what names the
// nodes of a biz map.xml no longer has (export lists their ids), which
// dump and reset take.
std::optional<uint16_t> BizIdArg(const std::string& biz);

// Exit code for a failed Status.
int ExitCodeFor(const Status& s);

}  // namespace frs::ctl
