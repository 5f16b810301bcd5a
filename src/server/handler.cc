#include "server/handler.h"

#include <cstring>

#include "base/ascii_case.h"
#include "os/store_dir.h"
#include "server/admin_auth.h"
#include "server/clock_util.h"
#include "server/grpc_methods.h"
#include "server/held_now.h"
#include "server/replica_metrics.h"

namespace frs::server {

namespace {

// Content-Type lines, whole.
constexpr const char* kXml = "Content-Type: application/xml\r\n";
constexpr const char* kPrometheusTextType = "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";
constexpr const char* kPlain = "Content-Type: text/plain; charset=utf-8\r\n";
constexpr const char* kJson = "Content-Type: application/json\r\n";
constexpr const char* kProblem = "Content-Type: application/problem+json\r\n";

// RFC 9112 3.2.2: a server accepts the absolute form of a target (what a
// proxy may send: "http://host:port/acquire?..."); the authority is not ours
// to check, the path and query are used as in the origin form.
std::string_view OriginForm(std::string_view target) {
  const size_t skip = StartsWithAsciiLower(target, "http://") ? 7 : StartsWithAsciiLower(target, "https://") ? 8 : 0;
  if (skip == 0) return target;
  const size_t end = target.find_first_of("/?", skip);
  return end == std::string_view::npos ? std::string_view("/") : target.substr(end);
}

}  // namespace

Handler::Handler(const Backend& backend, const HandlerOptions& opts, Metrics* metrics, WorkerCounters* counters)
    : engine_(backend.engine),
      store_(backend.store),
      clock_(backend.clock),
      opts_(opts),
      metrics_(metrics),
      counters_(counters),
      envoy_log_(backend.clock) {
  if (metrics_ != nullptr) opts_.cluster.catching_up = &metrics_->master().replica.catching_up;
  body_.reserve(4096);
  biz_buf_.reserve(256);
  key_buf_.reserve(256);
  wire_.reserve(opts.max_batch);
  reqs_.reserve(opts.max_batch);
  decisions_.resize(opts.max_batch);
}

HandlerOptions HandlerOptionsFor(const SrvConfig& cfg) {
  HandlerOptions o;
  o.admin_token = cfg.admin_token;
  o.max_batch = cfg.max_batch;
  o.ratelimit_fields = cfg.ratelimit_fields;
  if (!cfg.cluster_shards.empty()) {
    auto ring = Ring::Make(cfg.cluster_shards);  // validated when srv.xml was read
    if (ring.ok()) {
      o.cluster.ring = std::make_shared<const Ring>(std::move(ring.value()));
      o.cluster.self = cfg.cluster_self;
      o.cluster.self_index = o.cluster.ring->Find(cfg.cluster_self);
      o.cluster.enforce = cfg.cluster_enforce;
      o.cluster.replicas = cfg.cluster_replicas > 0;
      if (o.cluster.replicas && !cfg.store_dir.empty()) {
        o.store_dir = cfg.store_dir;
        o.park_path = os::store_dir::In(cfg.store_dir, os::store_dir::kReplicaParked);
      }
    }
  }
  return o;
}

void Handler::SetOptions(const HandlerOptions& opts) {
  opts_ = opts;
  if (metrics_ != nullptr) opts_.cluster.catching_up = &metrics_->master().replica.catching_up;
  if (opts_.max_batch > wire_.capacity()) {
    wire_.reserve(opts_.max_batch);
    reqs_.reserve(opts_.max_batch);
  }
  if (decisions_.size() < opts_.max_batch) decisions_.resize(opts_.max_batch);
}

void Handler::ErrorBody(int code, std::string_view msg, int* status) {
  decision_ = {};
  body_.clear();
  AppendError(code, msg, &body_);
  *status = code;
}

void Handler::TextBody(int code, std::string_view msg, int* status) {
  decision_ = {};
  body_.assign(msg);
  body_.push_back('\n');
  *status = code;
}

Status Handler::Unhealthy() const {
  if (shutting_down_) return Status::Unavailable("the server is shutting down");
  // A store file deleted or truncated under a running server: take it out
  // of rotation rather than answer from a lost inode.
  return UnhealthyGiven(store_ != nullptr ? store_->CheckFiles() : Status::OK());
}

Status Handler::UnhealthyGiven(const Status& files) const {
  if (shutting_down_) return Status::Unavailable("the server is shutting down");
  // <cluster replicas="1">: not serving its routes before it took back what
  // the other shards hold for it.
  if (opts_.cluster.replicas && metrics_ != nullptr && CounterGet(metrics_->master().replica.catching_up) != 0)
    return Status::Unavailable("taking back this shard's nodes from the other shards (replicas) after a start");
  return files;
}

void Handler::HandleJson(std::string_view body, bool* json, int* status) {
  if (!rls_ || !rls_->rules()) {
    TextBody(404, "POST /json is Envoy's rate limit service: srv.xml sets no <grpc config>", status);
    return;
  }
  if (Status s = json_.Decode(body, &rls_req_); !s.ok()) {
    CountEnvoyRefused(envoy_metrics_);
    TextBody(400, "POST /json: " + s.message(), status);
    return;
  }
  rls_->Decide(rls_req_, &rls_answer_);
  CountEnvoyAnswer(envoy_metrics_, rls_req_, rls_answer_);
  envoy_log_.Record(decision_log_, peer_, rls_req_, rls_answer_);
  const envoy::RlsAnswer& a = rls_answer_;
  if (!a.status.ok()) {
    // Another shard owns a descriptor (enforce="1"): 421 as for any key of
    // the HTTP side; the store unable to answer: 503.
    TextBody(!a.owner.empty() ? 421 : HttpStatusFor(a.status), "POST /json: " + a.status.message(), status);
    return;
  }
  decision_ = {};
  body_.clear();
  if (!EnvoyJson::Encode(a, &body_)) {
    TextBody(500, "POST /json: the answer could not be written as JSON", status);
    return;
  }
  *json = true;
  // As envoyproxy/ratelimit answers /json.
  *status = a.overall == envoy::Code::kOverLimit ? 429 : 200;
}

bool Handler::Handle(const HttpHead& head, char* base, bool keep_alive, int64_t start_ns, std::string* out,
                     const IpAddress* peer) {
  decision_ = {};
  peer_ = peer;
  route_param_ = {};
  std::string_view target = OriginForm(std::string_view(base + head.target_off, head.target_len));
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);

  CmdLabel label = CmdLabel::kNone;
  int status = 200;
  const char* ctype = kXml;
  Extra extra;
  bool is_get = head.method == HttpMethod::kGet;

  if (path == "/frs") {
    if (head.method != HttpMethod::kPost) {
      ErrorBody(405, "/frs takes POST with an XML body", &status);
      extra.allow = "POST";
    } else {
      HandlePost(base + head.body_off, head.body_len, query,
                 BearerToken(std::string_view(base + head.auth_off, head.auth_len)), &label, &status);
    }
  } else if (path == "/acquire" || path == "/query" || path == "/auth" || path == "/release" || path == "/renew" ||
             path == "/settle") {
    Cmd cmd = path == "/query"     ? Cmd::kQuery
              : path == "/release" ? Cmd::kRelease
              : path == "/renew"   ? Cmd::kRenew
              : path == "/settle"  ? Cmd::kSettle
                                   : Cmd::kAcquire;
    label = LabelOf(cmd);
    if (!is_get) {
      ErrorBody(405, std::string(path) + " takes GET", &status);
      extra.allow = "GET";
    } else {
      bool problem = false;
      HandleGetForm(cmd, path == "/auth", query, head.accept, &extra, &status, &problem);
      if (problem) ctype = kProblem;
    }
  } else if (path == "/health" || path == "/metrics") {
    bool health = path == "/health";
    label = health ? CmdLabel::kHealth : CmdLabel::kMetrics;
    if (!is_get && head.method != HttpMethod::kHead) {
      ErrorBody(405, std::string(path) + " takes GET or HEAD", &status);
      extra.allow = "GET, HEAD";
    } else {
      if (health) {
        body_.clear();
        if (Status why = Unhealthy(); !why.ok()) ErrorBody(503, why.message(), &status);
        else body_.append("<response code=\"0\" msg=\"serving\"/>\n");
      } else {
        body_.clear();
        ctype = kPrometheusTextType;
        if (metrics_) {
          metrics_->Render(*engine_, store_, &body_);
          Result<HeldNowScrape> held = ReadHeldNow(*engine_, metrics_->master().held, counters_, MonoNs() / 1000000);
          if (held.ok()) RenderHeldNow(*held, *metrics_, &body_);
          if (rls_ && rls_->rules()) RenderEnvoyMetrics(*metrics_, *rls_->rules(), &body_);
          if (opts_.cluster.ring && opts_.cluster.replicas)
            RenderReplicaMetrics(*metrics_, *opts_.cluster.ring, opts_.cluster.self_index, opts_.store_dir, &body_);
        } else {
          body_.append("# metrics are not shared in this process\n");
        }
      }
    }
  } else if (path == "/healthcheck") {
    // envoyproxy/ratelimit's health check path, for probes configured for it.
    label = CmdLabel::kHealth;
    ctype = kPlain;
    if (!is_get && head.method != HttpMethod::kHead) {
      TextBody(405, "/healthcheck takes GET or HEAD", &status);
      extra.allow = "GET, HEAD";
    } else {
      // Upstream's HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED holds its HTTP
      // health check too, not only gRPC's Check; unhealthy is upstream's
      // 500 here (/health says 503).
      if (Status why = Unhealthy(); !why.ok()) TextBody(500, why.message(), &status);
      else if (grpc_ && !grpc_->Serving())
        TextBody(500, "no rate limit configuration is loaded (<grpc healthy_with_config=\"1\">)", &status);
      else TextBody(200, "OK", &status);
    }
  } else if (path == "/json") {
    label = CmdLabel::kJson;
    ctype = kPlain;
    if (head.method != HttpMethod::kPost) {
      TextBody(405, "/json takes POST with a JSON RateLimitRequest", &status);
      extra.allow = "POST";
    } else {
      bool json = false;
      HandleJson(std::string_view(base + head.body_off, head.body_len), &json, &status);
      if (json) ctype = kJson;
    }
  } else if (path == "/replicate") {
    label = CmdLabel::kMerge;
    ctype = kPlain;
    HandleReplicate(head, base, query, &extra, &status);
  } else if (path == "/stats") {
    label = CmdLabel::kStats;
    if (!is_get && head.method != HttpMethod::kPost) {
      ErrorBody(405, "/stats takes GET (or POST from a handoff)", &status);
      extra.allow = "GET, POST";
    } else {
      HandleStatsBy(head, base, query, &status);
      if (status == 200) ctype = kXml;
    }
  } else if (head.method == HttpMethod::kOther) {  // OPTIONS *, CONNECT, ...: no path takes it (RFC 9110 15.6.2)
    ErrorBody(501, "frsd takes GET, HEAD and POST only", &status);
  } else {
    ErrorBody(404,
              "no such path: use POST /frs, GET /acquire, /query, /auth, /release, /renew, /settle, /stats, /health, "
              "/healthcheck or /metrics (with <grpc>: POST /json)",
              &status);
  }
  if (shutting_down_) keep_alive = false;
  // No body to HEAD, a 405's or 404's neither: it would be read as the next answer.
  Respond(status, keep_alive, head.version, ctype, &extra, head.method == HttpMethod::kHead, out);
  if (counters_) counters_->CountRequest(label, status, static_cast<uint64_t>(MonoNs() - start_ns));
  return keep_alive;
}

bool Handler::HandleGetForm(Cmd cmd, bool auth, std::string_view query, const AcceptPrefs& accept, Extra* extra,
                            int* status, bool* problem) {
  ProtocolError err;
  WireRequest r;
  if (!DecodeQuery(query, cmd, &biz_buf_, &key_buf_, &id_buf_, &r, &err)) {
    ErrorBody(err.status, err.msg, status);
    return false;
  }
  if (auth && r.reserve != 0) {
    // Its 204 carries no body to give the reservation's id in.
    ErrorBody(400, "/auth takes no reserve: take a reservation with GET /acquire or POST /frs", status);
    return false;
  }
  if (!RouteRequests(std::span<WireRequest>(&r, 1), {}, status)) return false;
  body_.clear();
  if (!ExecuteOne(r, status)) return false;
  const Decision& d = decisions_[0];
  extra->rate = &d;
  // The instant the engine decided at: its reset times are relative to it.
  extra->now_s = d.now_s != 0 ? d.now_s : clock_->NowMs() / 1000;
  extra->unit = BizUnit(d.biz_id);
  if (auth) {
    // For forward-auth proxies: nginx's auth_request passes only 2xx, 401
    // and 403 (anything else becomes a 500), and wants no body.
    decision_ = {};
    body_.clear();
    *status = d.allowed ? 204 : 403;
    // Its front door makes the client's 429 itself and sees no body (nginx
    // passes none from a subrequest): the violated policies go in a field.
    // /acquire and /query carry them in their body.
    extra->violated = true;
  } else if (cmd == Cmd::kRelease || cmd == Cmd::kRenew || cmd == Cmd::kSettle) {
    *status = 200;  // done (an unknown or ended lease or reservation answered 409 or 410 above)
  } else {
    *status = d.allowed ? 200 : 429;
    if (!d.allowed && accept.PrefersProblemJson()) {
      ProblemBody(d);
      *problem = true;
    }
  }
  return true;
}

void Handler::ProblemBody(const Decision& d) {
  // draft-ietf-httpapi-ratelimit-headers-11, 5.1: the type, its title as
  // the draft words it, and the names of the policies that denied (those
  // of RateLimit-Policy). The decision itself stays in the header fields.
  decision_ = {};
  body_.assign(
      "{\"type\":\"https://iana.org/assignments/http-problem-types#quota-exceeded\","
      "\"title\":\"Request cannot be satisfied as assigned quota has been exceeded\","
      "\"status\":429,\"violated-policies\":[");
  bool first = true;
  for (uint32_t i = 0; i < d.nrules; ++i) {
    if (d.rules[i].allowed) continue;
    if (!first) body_.push_back(',');
    first = false;
    body_.push_back('"');
    // Policy names are letters, digits, '_', '.' and '-' (map.xml): nothing to escape.
    body_.append(d.rules[i].name, strnlen(d.rules[i].name, sizeof d.rules[i].name));
    body_.push_back('"');
  }
  body_.push_back(']');
  // A full reservation table denies what every rule allows: no policy is
  // violated, and the wait (Retry-After) is the table's, shorter than the
  // RateLimit field's t. Said, so that the empty list does not puzzle.
  if (d.reservations_full) {
    body_.append(
        ",\"detail\":\"the key holds every reservation its biz allows: an acquire with reserve is denied until "
        "the first of them is settled or expires (Retry-After)\"");
  }
  body_.append("}\n");
}

void Handler::HandleFailure(int status, std::string_view msg, int64_t start_ns, std::string* out,
                            std::string_view path) {
  decision_ = {};
  // Envoy's and the replicas' doors answer their errors as plain text
  // (HandleRequest); a body too long for them is no different.
  const bool plain = path == "/json" || path == "/healthcheck" || path == "/replicate";
  if (plain) TextBody(status, msg, &status);
  else ErrorBody(status, msg, &status);
  Respond(status, /*keep_alive=*/false, 11, plain ? kPlain : kXml, nullptr, false, out);
  if (counters_) counters_->CountRequest(CmdLabel::kNone, status, static_cast<uint64_t>(MonoNs() - start_ns));
}

}  // namespace frs::server
