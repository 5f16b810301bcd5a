// server/response_encoder.h: answers out: the XML responses of the protocol.
//
// Encoding appends to a caller's reused std::string, in the contract's exact
// attribute order (code allowed count limit remaining reset retry_after,
// then shadow/found/... extras), numbers by WriteDecimal (base/decimal.h).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/xml_escape.h"
#include "frs/store.h"
#include "server/cluster_view.h"
#include "server/wire.h"

namespace frs::server {

void AppendError(int code, std::string_view msg, std::string* out);
// 421: `route` belongs to shard `owner` of the cluster.
void AppendMisrouted(std::string_view route, std::string_view owner, std::string* out);
// One <response> for a successful (code 0) decision of `cmd`.
void AppendDecision(Cmd cmd, const Decision& d, std::string* out);
// The same into `buf` (at least kMaxDecisionBytes); returns its length.
inline constexpr size_t kMaxDecisionBytes = 4096;
size_t WriteDecision(Cmd cmd, const Decision& d, char* buf);
void AppendBatch(bool allowed, std::span<const WireRequest> reqs, std::span<const Decision> decisions,
                 std::string* out);
// <batch answer="compact">: one <m a="0|1" r="REMAINING" t="RESET"/> per
// member (w="RETRY_AFTER" when denied; code= and msg= for a member error;
// a lease's or a reservation's attributes as in a <response>).
void AppendBatchCompact(bool allowed, std::span<const WireRequest> reqs, std::span<const Decision> decisions,
                        std::string* out);
// This shard's view of its link to another shard (<cluster replicas="1">).
struct ReplicaPeerView {
  uint64_t pending = 0;  // changes queued for it, not acknowledged
  bool up = true;
};
// This shard's replica links as a whole: per other shard (by ring index),
// and the age of the oldest change not acknowledged by any (0: none).
struct ReplicaLinksView {
  std::vector<ReplicaPeerView> peers;
  uint64_t lag_ms = 0;
};
// The answer to cmd="stats"; `cluster` is the cluster this server is a shard
// of (null: none); `links` (with replicas) its replica links.
void AppendStats(const StoreStats& st, const std::vector<BizStats>& bizzes, const ClusterView* cluster,
                 std::string* out, const ReplicaLinksView* links = nullptr);

}  // namespace frs::server
