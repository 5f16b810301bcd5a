// config/srv_config.h: srv.xml, the server's configuration.
//
// Paths in srv.xml are relative to srv.xml's folder; LoadSrvConfig resolves
// them to absolute paths. Every error is one line "file:line: what is wrong".
//
// Thread safety: a SrvConfig is a value; loading one reads srv.xml and changes
// no global state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "frs/ring.h"
#include "frs/status.h"
#include "frs/store.h"

namespace frs {

// The most members <limits batch> may allow in one <batch>. Queries and
// updates run one by one; acquires, judged together in one store
// transaction, stay at most Store::kMaxBatch per batch.
inline constexpr uint32_t kMaxWireBatch = 1024;

// <limits worker_stall_ms>'s least value other than 0 (server/stall_watch.h
// says why: an idle loop's second, the master's forgiven gap, a margin).
inline constexpr uint32_t kMinWorkerStallMs = 3000;

struct SrvConfig {
  std::string path;  // srv.xml, absolute
  std::string host = "127.0.0.1";
  // <listen port="0">: the kernel picks a free port when frsd binds, and frsd
  // writes the address it got to ListenAddressPath(); until then (and in
  // frsd -t) this stays 0. ApplyBoundPort puts the real one in.
  uint16_t port = 8300;
  // <listen reuseport="1">: one SO_REUSEPORT socket per worker instead of
  // one socket shared by all workers (see docs/protocol.md, process model).
  bool reuseport = false;
  uint32_t workers = 2;
  std::string map_path;   // absolute
  std::string store_dir;  // absolute
  StoreGeometry geometry;
  std::string timezone = "UTC";
  std::string pidfile;             // absolute; "" = none
  std::string logfile;             // absolute; "" = stderr
  std::string admin_token;         // "" = admin commands refused over HTTP
  std::vector<std::string> allow;  // CIDR ranges; empty = every peer
  // <limits .../>
  uint32_t max_header_bytes = 16 * 1024;
  uint32_t max_body_bytes = 64 * 1024;
  uint32_t max_connections = 10000;  // per worker
  uint32_t idle_timeout_ms = 60000;
  uint32_t request_timeout_ms = 10000;
  uint32_t max_batch = 64;
  // <limits worker_stall_ms>: the master kills a worker whose event loop has
  // not turned for this long (server/stall_watch.h); 0: never. SIGHUP
  // applies it.
  uint32_t worker_stall_ms = 30000;
  // <flush interval_ms="N"/>: the master starts the writeback of the store's
  // dirty pages every N ms (0, the default: the kernel's own writeback
  // decides, vm.dirty_expire_centisecs; docs/store.md, "What survives what").
  uint32_t flush_interval_ms = 0;
  // <ratelimit legacy="1"/> (the default): send the pre-2023
  // RateLimit-Limit, -Remaining, -Reset trio beside RateLimit-Policy and
  // RateLimit; "0": the draft's two fields only; "only": the trio only, for
  // clients that read a RateLimit field in an older draft's form and fail on
  // today's (the npm ratelimit-header-parser). SIGHUP applies it.
  enum class RateLimitFields : uint8_t { kDraft, kDraftAndLegacy, kLegacy };
  RateLimitFields ratelimit_fields = RateLimitFields::kDraftAndLegacy;
  // <cluster self="host:port" enforce="1"><shard weight="N">host:port</shard>...
  // Empty shards: a lone server that owns every route. `cluster_self` defaults
  // to "<listen host>:<listen port>" and need not be a shard: a shard being
  // removed gets the new list without itself, owns nothing, and hands off.
  std::vector<RingShard> cluster_shards;
  std::string cluster_self;
  bool cluster_self_derived = false;  // no self="" given: it follows host:port
  bool cluster_enforce = true;
  // <cluster replicas="0|1" replica_mode="sync|async" replica_timeout_ms="N"
  // on_replica_down="serve|refuse">: every change of a node is also made on
  // the other holder of its route (its successor, or the owner this shard
  // serves for), docs/cluster.md "Replicas". 0: no replicas (the default).
  static constexpr size_t kMaxReplicaShards = 64;
  uint32_t cluster_replicas = 0;
  bool replica_sync = true;           // "sync": an answer waits for the other holder's acknowledgement
  uint32_t replica_timeout_ms = 200;  // how long it waits before on_replica_down applies
  bool replica_refuse = false;        // on_replica_down="refuse": 503 instead of serving alone
  // <cluster catchup_timeout_ms="N">: how long a starting shard waits for
  // what the others hold for it (snapshots, queued changes) before it
  // serves without what has not come (replica_catchup.h); read at start.
  uint32_t catchup_timeout_ms = 60000;
  // <cluster lease_key="FILE">: absolute; the secret that keys lease ids on
  // every shard alike ("": each store's own lease.key).
  std::string cluster_lease_key;
  // <cluster lease_key_also="FILE">: absolute; a second secret during a key
  // rotation: ids made under it verify too, and shards keyed by it are taken
  // as this one's; it makes no id ("": none).
  std::string cluster_lease_key_also;
  // <decisions file="..." record="denied|all" sample="0..1"/>: the decision
  // log (server/decision_log.h). Empty file: no log (the default).
  std::string decisions_file;     // absolute; "" = none
  bool decisions_all = false;     // record="all": every decision, not only denials
  double decisions_sample = 1.0;  // the share of recorded decisions written
  // <grpc listen="host:port" config="DIR" headers="0|1" streams="N"/>: Envoy's
  // rate limit service over gRPC (docs/integrations.md). Port 0: the kernel
  // chooses, written to GrpcListenAddressPath().
  bool grpc = false;
  std::string grpc_host;
  uint16_t grpc_port = 0;
  std::string grpc_config;          // absolute: envoyproxy/ratelimit's YAML files
  bool grpc_headers = false;        // add RateLimit-Limit/-Remaining/-Reset to answers (as envoyproxy/ratelimit)
  uint32_t grpc_max_streams = 100;  // SETTINGS_MAX_CONCURRENT_STREAMS per connection
  // Request bodies all of a worker's gRPC connections buffer at once
  // (server/grpc_session.h, GrpcBudget).
  uint64_t grpc_buffered_bytes = uint64_t{64} << 20;
  // envoyproxy/ratelimit's settings, as <grpc> attributes (their variable
  // names beside them; docs/configuration.md).
  bool grpc_shadow = false;                                   // shadow="1": SHADOW_MODE
  bool grpc_quota = false;                                    // quota="1": QUOTA_MODE
  bool grpc_metadata = false;                                 // metadata="1": RESPONSE_DYNAMIC_METADATA
  std::string grpc_limit_header = "RateLimit-Limit";          // limit_header: LIMIT_LIMIT_HEADER
  std::string grpc_remaining_header = "RateLimit-Remaining";  // remaining_header: LIMIT_REMAINING_HEADER
  std::string grpc_reset_header = "RateLimit-Reset";          // reset_header: LIMIT_RESET_HEADER
  double grpc_near_limit_ratio = 0.8;                         // near_limit_ratio: NEAR_LIMIT_RATIO
  bool grpc_stop_increment = false;       // stop_increment_when_over="1": STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
  bool grpc_healthy_with_config = false;  // healthy_with_config="1": HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED
  bool grpc_merge_domains = false;        // merge_domains="1": MERGE_DOMAIN_CONFIG
  // <grpc unix="PATH" mode="0660">: a Unix stream socket instead of
  // listen="host:port" (absolute; removed when frsd stops).
  std::string grpc_unix;
  uint32_t grpc_unix_mode = 0660;
  // <grpc cert="PEM" key="PEM" client_ca="PEM" client_names="a,b">: TLS
  // (1.2, 1.3; ALPN h2), and with client_ca a required client certificate
  // whose names must include one of client_names (server/tls_context.h).
  // Absolute; SIGHUP reads the files again.
  std::string grpc_tls_cert;
  std::string grpc_tls_key;
  std::string grpc_tls_client_ca;
  std::vector<std::string> grpc_tls_client_names;
  // The line of each element srv.xml gave, by name (an <allow>: its first),
  // for what is found wrong after the parse: a path it names that the
  // machine cannot use ("srv.xml:12: the decision log ...").
  std::map<std::string, size_t, std::less<>> element_lines;

  // "path:line" of `element`, or the path alone when srv.xml has none.
  std::string Where(std::string_view element) const;
};

// The srv.xml frsd and frsctl read without -c: $FRS_CONF when set, else the
// one installed beside the program: PREFIX/etc/frs/srv.xml for a program in
// PREFIX/sbin or PREFIX/bin, /etc/frs/srv.xml for the prefixes /usr and /
// (GNU's convention), so an install under another prefix (/opt/frs) reads
// its own configuration and not the system's.
std::string DefaultSrvConfigPath();

// "host:port" as the proxy names a server (an IPv6 host in brackets).
std::string ListenName(const std::string& host, uint16_t port);

// A sentence when <cluster self> is not among the <shard>s (a shard leaving
// the ring, or a name spelled otherwise than the list does: localhost for
// 127.0.0.1), else "": frsd -t and the start's log say it.
std::string ClusterSelfNotListed(const SrvConfig& cfg);
// A self the <shard> list lacks while the list names this frsd's own
// <listen> address (its port as bound, once <listen port="0"> is: the start
// and a reload check again then): a typo that would make the shard own no
// route. The message, or "" when there is no such problem.
std::string OwnListenListedUnderAnotherSelf(const SrvConfig& cfg);

// The longest <cluster self> with replicas: a change stream's name (at most
// 200 bytes) is self and 45 bytes more.
inline constexpr size_t kMaxReplicaSelfBytes = 150;

// The port the listening sockets really have: a configured 0 becomes it, and
// a cluster self that follows <listen> follows it too.
void ApplyBoundPort(SrvConfig* cfg, uint16_t bound);

// Where a running frsd writes the address it listens on, one line
// "host:port\n", replaced whole at each start: the store directory's
// frsd.listen. Tests and tools that start frsd on port 0 read it.
std::string ListenAddressPath(const SrvConfig& cfg);

// The same for the <grpc> listener: the store directory's frsd.grpc.listen.
std::string GrpcListenAddressPath(const SrvConfig& cfg);

Result<SrvConfig> LoadSrvConfig(const std::string& path);
// The same from srv.xml's bytes already read (`path` names it in errors and
// resolves relative paths); null `text` reads the file.
Result<SrvConfig> LoadSrvConfigText(const std::string& path, const std::string* text);

}  // namespace frs
