// frs/admin_engine.h: an engine with the operator's verbs on nodes.
//
// What frsctl and the server's admin commands do beside deciding requests:
// look at a node as rules see it (explain, get, dump, top), carry nodes
// between stores as portable text (export, import), fold another shard's
// nodes and statistics into this one's (handoff). A caller that only decides
// requests holds an Engine (frs/engine.h) and never sees these.
//
// Thread safety: as frs/engine.h; every verb here may run beside requests.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "frs/engine.h"
#include "frs/store.h"

namespace frs {

// Biz id 0 is no business of map.xml's: the store keeps handoff receipts
// under it (AdminEngine::MergeNodes). Tools that list nodes skip it.
inline constexpr uint16_t kReceiptBiz = 0;
// How long a receipt is kept: a handoff re-run later than this after an
// interruption could count a node twice.
inline constexpr uint32_t kReceiptSeconds = 7 * 86400;

// A node as a human or a script sees it.
// A lease held now (a concurrency rule): its id, when the node's whole key
// is known (the id hashes it), and when it expires (unix s).
struct LeaseView {
  uint32_t serial = 0;
  uint32_t nonce = 0;  // the node's (with the key, what the id is made of)
  std::string id;      // "" when the key is not known whole, or the lease is of another series
  int64_t expires_s = 0;
  // A replica's copy of a lease the other holder granted under its own
  // nonce (docs/cluster.md, "Ring changes with replicas"): counted here,
  // released by the other holder; no id of this node names it.
  bool other_series = false;
};

// A reservation held now (the sources' src/limit/reservation.h): its id (as a lease's), the
// estimate it holds, when it was taken and when it expires (unix s).
struct ReservationView {
  uint32_t serial = 0;
  uint32_t nonce = 0;
  std::string id;  // "" when the key is not known whole
  int64_t estimate = 0;
  int64_t taken_s = 0;
  int64_t expires_s = 0;
};

struct NodeView {
  uint16_t biz_id = 0;
  std::string biz_name;
  std::string key;  // the stored key bytes (may be a prefix)
  bool key_truncated = false;
  // False: the node keeps no key text (a compact node of a key longer than
  // its identity, docs/store.md); node.fp.lo identifies it.
  bool key_kept = true;
  Mode mode = Mode::kEnforce;
  int64_t count = 0;  // of the most restrictive rule
  int64_t limit = 0;  // of that same rule (its count's limit, as an answer gives both)
  std::vector<RuleView> rules;
  std::vector<LeaseView> leases;              // held now, of the biz's concurrency rule
  std::vector<ReservationView> reservations;  // held now
  // How many reservations the biz lets one key hold (map.xml
  // `reservations`; 0: it takes none): with as many held, an acquire with
  // `reserve` is denied until the first of them expires.
  uint32_t reservations_cap = 0;
  NodeInfo node;
};

// A key denied lately (AdminEngine::TopDenied).
struct DeniedKey {
  uint16_t biz_id = 0;
  std::string key;          // its text, also of a biz whose nodes keep no key
  uint64_t denied = 0;      // in the minutes asked about
  int64_t last_minute = 0;  // unix minute of the newest denial
};

struct DeniedKeys {
  std::vector<DeniedKey> keys;  // most denied first
  uint64_t dropped = 0;         // denials since the table was made that found no room in it
};

class AdminEngine : public Engine {
 public:
  static Result<std::unique_ptr<AdminEngine>> Open(const EngineOptions& opts);

  // Decodes a node for humans and scripts (explain, get, dump, top).
  virtual Result<NodeView> Inspect(std::string_view biz, std::string_view key) = 0;
  virtual Result<NodeView> View(const NodeInfo& node) const = 0;
  // Whether lease `serial` of (biz_id, key), granted or renewed until
  // `until` (unix s), is known to be held no more here: its node holds no
  // lease of that serial (released, or past its expiry), or the key has no
  // node and `until` has passed. False when that cannot be told (an
  // unknown biz, a store error). A replica link asks it of a grant or a
  // renewal it kept while the other holder was away: each worker sends on a
  // link of its own, so the release another worker kept could arrive first,
  // and the grant after it would hold a place there until its expiry.
  virtual bool LeaseEnded(uint16_t biz_id, std::string_view key, uint32_t serial, int64_t until) {
    (void)biz_id, (void)key, (void)serial, (void)until;
    return false;
  }
  // What every biz holds now, in one walk over the store's chains (one
  // chain locked at a time), in map order, zeros included: the leases (not
  // past their expiry, swept or not) of each biz with a concurrency rule
  // (/metrics: frs_leases_held) and the reservations (not settled, not past
  // their expiry) of each biz that names reservations="N" in map.xml
  // (frs_reservations_held). Read from the store, so it is right after a
  // restart and the moment one expires. `has_leases` and `has_reservations`
  // say which of the two a biz counts; a biz with neither is left out.
  // `lock_wait_ms` > 0: a chain locked that long ends the walk with Busy
  // (Store::Filter::lock_wait_ms).
  struct BizHeldNow {
    uint16_t biz_id = 0;
    std::string biz;
    uint64_t leases = 0;
    uint64_t reservations = 0;
    bool has_leases = false;
    bool has_reservations = false;
  };
  virtual Result<std::vector<BizHeldNow>> HeldNow(uint32_t lock_wait_ms) {
    (void)lock_wait_ms;
    return std::vector<BizHeldNow>{};
  }
  // The same list with every figure 0 and no walk: which bizzes count what.
  virtual std::vector<BizHeldNow> HeldBizzes() const { return {}; }

  // Portable text (one JSON object per node, no trailing newline) and back.
  // Import resolves the biz by name (falling back to id), rehashes into this
  // store's geometry and keeps every rule's state. Export writes a node that
  // holds a block written under a rule since changed converted to this
  // map's rules, as the key's next use would (a removed rule's block is
  // dropped then); others as stored. A node of a biz missing from this map
  // is written with an empty biz_name.
  virtual Result<std::string> ExportNode(const NodeInfo& node) const = 0;
  // true: written. false: no rule of this map takes any of its blocks (they
  // were a removed rule's, or the biz was renamed into one with other
  // rules), so nothing was written: a node of empty blocks would never
  // expire.
  virtual Result<bool> ImportNode(std::string_view json_line) = 0;
  // What ImportNode would refuse of the line, without writing anything.
  virtual Status CheckImport(std::string_view json_line) const = 0;

  // Handoff: folds nodes another shard exported (ExportNode's text) into
  // this store's nodes of the same keys, rule by rule, so that no use either
  // shard recorded is lost (docs/cluster.md gives each algorithm's merge).
  // `receipt` (1..255 bytes) names this transfer: every merge and one
  // receipt node are written in one transaction, and a receipt already
  // present makes it a no-op, so nodes sent twice are counted once. At most
  // kMaxMergeNodes lines. Returns true when merged, false when the receipt
  // was already there; an error changes nothing.
  static constexpr size_t kMaxMergeNodes = Store::kMaxBatch - 1;
  virtual Result<bool> MergeNodes(std::span<const std::string_view> json_lines, std::string_view receipt) = 0;
  // As MergeNodes, but each node is of its biz id (MergeNodes takes its
  // name first), and a node of a biz id this map lacks is left out (named
  // in *left_out: its line's index and that id) where MergeNodes refuses
  // the batch for it: a peer's replica snapshot, taken
  // under a map that a change rolling across the cluster gave bizzes this
  // one has not yet, or no longer. The batch's other nodes are merged; a
  // batch of none but those still writes its receipt, so it is counted
  // once. So is a node this store refuses (a state out of its bounds, a
  // time far ahead, a fingerprint not its key's: `why` says which), where
  // MergeNodes refuses the batch for it: one such node of a snapshot lost
  // the 63 of its batch and every batch after it (found from outside).
  // `left_out` null: either refuses the batch (NotFound, InvalidArgument),
  // as MergeNodes, the nodes still taken by their biz id.
  struct LeftOutNode {
    size_t line = 0;
    uint32_t biz = 0;
    std::string why;  // empty: of a biz this map lacks
  };
  virtual Result<bool> MergeKnownNodes(std::span<const std::string_view> json_lines, std::string_view receipt,
                                       std::vector<LeftOutNode>* left_out) = 0;
  // As MergeNodes, but each sent node's rules take the place of this
  // store's node's, and its reservation table too: the copy a route's old
  // owner sends a new holder when replicas are switched on, whose node
  // already holds every use that holder counted since the change (each
  // reached the old owner as a replica; a sum would count it twice), and
  // which a copy sent again leaves as it is. Leases and a reservation table
  // this node holds under a nonce of its own are kept, their ids with them.
  virtual Result<bool> ReplaceNodes(std::span<const std::string_view> json_lines, std::string_view receipt) = 0;
  // Adds statistics by key field counted elsewhere (a leaving shard's) to
  // the same day and table here: counts add up, distinct sketches merge.
  // `receipt` (not empty): a merge of that receipt already taken is not
  // taken again (answers OK).
  virtual Status MergeStatsBy(const GroupStats& incoming, std::string_view receipt = {}) = 0;
  // The keys denied most in the last `minutes` (1..10) of `biz_id` (0:
  // every biz), at most `n`: from the store directory's table of recent
  // denials (denials.frs), which every process deciding on this store
  // writes, so they are a running frsd's too. Read only.
  virtual Result<DeniedKeys> TopDenied(uint32_t minutes, uint16_t biz_id, size_t n) const;

  // The other way: every day file of statistics by key field this store
  // keeps, its own days' and those handoffs brought, whatever map.xml says
  // now (a table the map no longer keeps goes as it was counted); and one of
  // them read whole, with its sketches, as MergeStatsBy takes it (biz: the
  // id's text). Reading changes nothing; the caller removes a file it has
  // handed over. An engine without a store directory keeps none.
  virtual Result<std::vector<StatsDayFile>> StatsDayFiles() const { return std::vector<StatsDayFile>{}; }
  virtual Result<GroupStats> ExportStatsDay(const StatsDayFile& file) const;

  // A replica's side (frs/change.h): folds the changes another shard made
  // into this store's nodes of the same keys with the handoff's merge, in
  // one transaction with the stream's watermark: `stream` (1..200 bytes)
  // names the sender's ordered stream and `seq` (>= 1) this batch of it. A
  // seq at or below the stream's watermark was applied before: nothing
  // changes and the answer is false. The first `skip_first` changes are
  // skipped (a snapshot already carried them: the receiver knows by their
  // numbers in the stream, docs/cluster.md "Replicas"). At most
  // kMaxMergeNodes distinct keys; kResetBiz is applied on its own, before
  // the transaction: a caller that may apply one stream's batches at once
  // (a batch sent again) serializes them while one resets (frsd does). A
  // change's times are 0 to the end of year 9999 (else an error); one after
  // this engine's clock is applied as of it. An error changes nothing.
  virtual Result<bool> ApplyChanges(std::span<const Change> changes, std::string_view stream, uint64_t seq,
                                    size_t skip_first = 0) = 0;

 protected:
  AdminEngine() = default;
};

}  // namespace frs
