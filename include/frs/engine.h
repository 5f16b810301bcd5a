// frs/engine.h: the rule engine: map.xml businesses applied to store nodes.
//
// An Engine owns the current map (businesses and their rules), decides each
// request against the node the store keeps for (biz, key), and keeps per-biz
// daily statistics and the statistics by key field. These are the verbs a
// server or an in-process caller needs; an operator's verbs on nodes
// (inspect, export, import, merge) are frs/admin_engine.h's. It never throws
// and never blocks except on a chain lock.
//
// Thread safety: Execute/ExecuteBatch may run concurrently from many threads
// and processes. Reload swaps the map atomically for later calls.
//
// What a call holds of the store's shared files: while it writes, one of
// the file's 32 writer entries (undo journals) that every process of the
// store shares, frsd's workers too; it hands it back before it returns
// (StoreOptions::keep_writer_entries false, the default and what
// OpenFromConfig opens), so an idle thread holds nothing and cannot make
// frsd's writes wait. A program that opens its Store with
// keep_writer_entries (a claim less per write) must call
// Store::ReleaseIdleWriters about once a second from each thread that may
// idle, as frsd's workers do, or frsd's writes wait 5 s and answer 503.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/biz_stats.h"
#include "frs/change.h"
#include "frs/clock.h"
#include "frs/decision.h"
#include "frs/group_stats.h"
#include "frs/status.h"

namespace frs {

class Store;

// A biz of the current map, as /metrics names it: its rules' names in
// their order (a Decision's rules[i] is rules[i] here).
struct BizInfo {
  uint16_t id = 0;
  std::string name;
  Mode mode = Mode::kEnforce;
  std::vector<std::string> rules;
  // map.xml's `fields` and `separator`: what the biz's keys are made of
  // (empty when it declares none).
  std::vector<std::string> fields = {};
  char separator = ':';
  std::string unit = {};      // map.xml's unit: what one of a request's n counts ("": requests)
  bool leases = false;        // it has a concurrency rule (grants leases)
  bool reservations = false;  // map.xml names its reservations (reservations="N", N > 0)
  // Its tables of statistics by key field (<stats by="app,iface">), as
  // `by` names them.
  std::vector<std::string> stats_by = {};
};

// The bizzes map.xml at `map_path` declares, as Engine::Bizzes lists them,
// read without a store or an engine (map.xml's errors as Engine::Open says
// them). The bizzes of <grpc>'s Envoy descriptors are frsd's, not listed.
Result<std::vector<BizInfo>> ReadMapBizzes(const std::string& map_path);

struct EngineOptions {
  std::string map_path;          // map.xml
  std::string map_text;          // when not empty: map.xml's bytes, used instead of reading map_path
  std::string timezone = "UTC";  // IANA name, for calendar windows and daily stats
  Store* store = nullptr;        // not owned; must outlive the engine
  std::string stats_dir;         // where the daily statistics file lives (the store dir)
  bool read_only = false;        // never write the statistics file (a read-only store)
  const Clock* clock = nullptr;  // default: SystemClock
  // Called (from the deciding thread) with one sentence when a statistics
  // file was found damaged and set aside, or could not be opened: the
  // engine goes on either way; the caller decides where the sentence goes.
  std::function<void(const std::string& what)> on_problem;
  // For a program that only reads counts (frsctl get, dump, export): a
  // statistics file that does not open (its mode, damage) is reported
  // through on_problem and the engine opens with empty statistics in
  // memory, instead of failing; so is a lease.key that does not read (a
  // directory, a wrong length), the engine then showing lease and
  // reservation ids by serial only, as without the file. frsd never sets
  // it: its statistics are kept, and its ids verify.
  bool statistics_optional = false;
  // <cluster lease_key="FILE">: the 16-byte secret that keys lease ids,
  // the same on every shard so that a route's two holders verify each
  // other's ids (docs/cluster.md, "Leases on replicas"). Empty: the store's
  // own lease.key.
  std::string lease_key_file;
  // <cluster lease_key_also="FILE">: a second such secret, during a key
  // rotation (docs/cluster.md, "The shared secret"): an id made under it
  // releases, renews and settles too; no id is made under it. Empty: none.
  std::string lease_key_also_file{};  // {}: callers that name the fields before it need not name it
  // false: a store without its lease.key is not given one (an inspecting
  // tool: a secret made there would void every id the running frsd gave
  // out at its next start); such an engine shows lease and reservation
  // ids by serial only, and answers Unavailable to a request that would
  // grant or check one.
  bool make_lease_key = true;
  // true: the statistics are kept in memory, never in stats_dir's files
  // (made or written): a tool that writes nodes another store counted
  // (frsctl import) makes no stats.frs, whose presence would say this
  // store served.
  bool statistics_in_memory = false;
  // Never rewrite rules.history (read_only implies it): a program that only
  // reads counts (frsctl get, explain, dump) applies a map frsd may never
  // have installed, and on a full disk each such read warned of a failed
  // write. The rules' pasts are read from the file all the same.
  bool history_read_only = false;
};

class Engine {
 public:
  // Loads map.xml; errors are "file:line: message".
  static Result<std::unique_ptr<Engine>> Open(const EngineOptions& opts);
  virtual ~Engine() = default;

  virtual Decision Execute(const Request& req) = 0;
  // The same into `*out` (its fields as Execute's answer would have them):
  // a server that keeps one Decision per worker writes it in place instead
  // of copying the answer's 664 bytes in on every request.
  virtual void ExecuteInto(const Request& req, Decision* out) { *out = Execute(req); }
  // A batch: acquires are all-or-nothing (nothing is recorded unless every
  // member is allowed); other commands run one by one, in order, each
  // answering as it would alone in its place. Returns overall allowed.
  // Every out[i] for i < reqs.size() is written (the caller need not clear
  // them); every member resolves its biz in one map, even across a Reload.
  // `out` shorter than `reqs`: nothing is done, each out[i] InvalidArgument.
  virtual bool ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) = 0;
  // What Execute would refuse before it reads the store (an unknown biz, a
  // bad key, n or count, a lease or reservation id that is not one, a
  // command the biz's rules do not take), without running it: OK when it
  // would run. A server refuses a whole batch with it when one member is
  // bad, before any member is counted.
  virtual Status CheckRequest(const Request& req) const = 0;

  // Re-reads map.xml (or `path` when given); on error the old map stays and
  // the error is returned as "file:line: message".
  virtual Status Reload(const std::string& path = "") = 0;
  // The same from map.xml's bytes, already read (errors name `path`): a
  // server that reads and validates the file once hands every process the
  // very bytes it checked.
  virtual Status ReloadText(std::string_view map_xml, const std::string& path) = 0;

  // Resolves a name or numeric id; NotFound names the biz.
  virtual Result<uint16_t> ResolveBiz(std::string_view biz) const = 0;
  virtual std::vector<BizInfo> Bizzes() const = 0;

  // Per-biz counters of the last days (frs/biz_stats.h).
  virtual std::vector<BizStats> DailyStats() const = 0;
  // Statistics by key field (map.xml <stats>) of one day. NotFound names
  // the biz or the `by` it lacks; a day with no file answers no groups.
  virtual Result<GroupStats> StatsBy(const GroupStatsQuery& q) const = 0;
  // Today's day number (days since 1970-01-01 in the engine's time zone).
  virtual uint32_t Today() const = 0;

  // Every change this engine makes to a node from now on is told to `sink`
  // (frs/change.h), from the deciding thread, after the node's lock is
  // released; null stops it. Not thread-safe against Execute: set it before
  // serving (a server sets one per process).
  virtual void SetChangeSink(ChangeSink* sink) { (void)sink; }
  // A check of the lease key named by EngineOptions::lease_key_file (a
  // keyed hash of a constant: it tells two keys apart and reveals neither);
  // 0 when the engine keys lease ids with its store's own lease.key.
  virtual uint64_t LeaseKeyCheck() const { return 0; }
  // The same of EngineOptions::lease_key_also_file (0: none).
  virtual uint64_t LeaseKeyAlsoCheck() const { return 0; }
  // Decisions of this process whose statistics by key field could not be
  // stored (a day file that could not be made: a full disk, permissions).
  virtual uint64_t FieldStatsUnstored() const { return 0; }

 protected:
  Engine() = default;
};

}  // namespace frs
