#include "server/handler.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <ctime>

#include "server/admin_auth.h"
#include "server/buf_writer.h"
#include "server/group_stats_xml.h"
#include "server/clock_util.h"

namespace frs::server {

namespace {

// The status line of each status frsd sends, whole: one copy of known
// length instead of the number, a space and a looked-up reason.
std::string_view StatusLine(int status) {
  switch (status) {
    case 100: return "HTTP/1.1 100 Continue\r\n";
    case 200: return "HTTP/1.1 200 OK\r\n";
    case 204: return "HTTP/1.1 204 No Content\r\n";
    case 400: return "HTTP/1.1 400 Bad Request\r\n";
    case 403: return "HTTP/1.1 403 Forbidden\r\n";
    case 404: return "HTTP/1.1 404 Not Found\r\n";
    case 405: return "HTTP/1.1 405 Method Not Allowed\r\n";
    case 408: return "HTTP/1.1 408 Request Timeout\r\n";
    case 411: return "HTTP/1.1 411 Length Required\r\n";
    case 413: return "HTTP/1.1 413 Content Too Large\r\n";
    case 421: return "HTTP/1.1 421 Misdirected Request\r\n";
    case 429: return "HTTP/1.1 429 Too Many Requests\r\n";
    case 431: return "HTTP/1.1 431 Request Header Fields Too Large\r\n";
    case 500: return "HTTP/1.1 500 Internal Server Error\r\n";
    case 503: return "HTTP/1.1 503 Service Unavailable\r\n";
    default: return {};  // "HTTP/1.1 NNN Error"
  }
}

void AppendNum(int64_t v, std::string* out) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, static_cast<size_t>(r.ptr - buf));
}

// Content-Type lines, whole.
constexpr const char* kXml = "Content-Type: application/xml\r\n";
constexpr const char* kText = "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";
constexpr const char* kPlain = "Content-Type: text/plain; charset=utf-8\r\n";
constexpr const char* kJson = "Content-Type: application/json\r\n";


}  // namespace

struct Handler::Extra {
  const Decision* rate = nullptr;  // the RateLimit fields (and Retry-After) of this decision
  int64_t now_s = 0;
  const char* allow = nullptr;     // 405: Allow
};

namespace {

// The IETF httpapi RateLimit header fields (draft 10): every rule of the biz
// as a policy, the most restrictive one's remaining quota and reset; the
// older trio when configured (or it alone); Retry-After on a denial some
// wait cures. What the fields promise is the quota a client can pace by:
// - under borrow a window may grant beyond max, but r and the trio's
//   remaining say what is left of the allowance (max - debt) without
//   borrowing, so r never exceeds q;
// - a token bucket's q/w is its sustained rate (max per interval), with its
//   capacity as the `burst` parameter (an RFC 8941 parameter that a client
//   which does not know it ignores): q=burst overstated the rate, and a
//   client pacing at burst per interval was denied.
// What a rule has left without borrowing (its allowance minus its count).
int64_t LeftWithoutBorrow(const RuleResult& r) { return std::max<int64_t>(0, std::min(r.remaining, r.limit - r.count)); }

void WriteRateLimitFields(const Decision& d, int64_t now_s, SrvConfig::RateLimitFields fields, BufWriter& w) {
  // The rule the fields speak for: the decision's most restrictive one,
  // unless another has less left once borrowing is set aside (the decision
  // weighs a borrowing window by what it may still grant, which a client
  // pacing by r must not count on).
  uint32_t pick = d.top < d.nrules ? d.top : 0;
  for (uint32_t i = 0; i < d.nrules; ++i)
    if (LeftWithoutBorrow(d.rules[i]) < LeftWithoutBorrow(d.rules[pick])) pick = i;
  const RuleResult& top = d.rules[pick];
  const int64_t reset_in = top.reset > now_s ? top.reset - now_s : 0;
  if (fields != SrvConfig::RateLimitFields::kLegacy) {
    w.Lit("RateLimit-Policy: ");
    for (uint32_t i = 0; i < d.nrules; ++i) {
      const RuleResult& r = d.rules[i];
      if (i) w.Lit(", ");
      w.Char('"');
      w.Str(r.name);
      w.Lit("\";q=");
      w.Int(r.quota);
      w.Lit(";w=");
      w.Int(r.interval);
      if (r.algo == Algo::kTokenBucket) {
        w.Lit(";burst=");
        w.Int(r.limit);
      }
    }
    w.Lit("\r\nRateLimit: \"");
    w.Str(top.name);
    w.Lit("\";r=");
    w.Int(std::min(LeftWithoutBorrow(top), top.quota));
    w.Lit(";t=");
    w.Int(reset_in);
    w.Lit("\r\n");
  }
  if (fields != SrvConfig::RateLimitFields::kDraft) {
    const int64_t limit = std::max<int64_t>(top.limit, 0);
    w.Lit("RateLimit-Limit: ");
    w.Int(limit);
    w.Lit("\r\nRateLimit-Remaining: ");
    w.Int(std::min(LeftWithoutBorrow(top), limit));
    w.Lit("\r\nRateLimit-Reset: ");
    w.Int(reset_in);
    w.Lit("\r\n");
  }
  if (!d.allowed && d.retry_after != kNeverCurable) {
    w.Lit("Retry-After: ");
    w.Int(std::max<int64_t>(d.retry_after, 1));
    w.Lit("\r\n");
  }
}

}  // namespace

Handler::Handler(const Backend& backend, const HandlerOptions& opts, Metrics* metrics, WorkerCounters* counters)
    : engine_(backend.engine), store_(backend.store), clock_(backend.clock), opts_(opts), metrics_(metrics), counters_(counters) {
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
    }
  }
  return o;
}

void Handler::SetOptions(const HandlerOptions& opts) {
  opts_ = opts;
  if (opts_.max_batch > wire_.capacity()) {
    wire_.reserve(opts_.max_batch);
    reqs_.reserve(opts_.max_batch);
  }
  if (decisions_.size() < opts_.max_batch) decisions_.resize(opts_.max_batch);
}

std::string_view Handler::ServerAndDate(int64_t now_s) {
  const int64_t now = now_s != 0 ? now_s : static_cast<int64_t>(std::time(nullptr));
  if (now != date_sec_) {
    date_sec_ = now;
    static constexpr char kServer[] = "Server: frsd/" FRS_VERSION "\r\n";
    static_assert(sizeof kServer + 64 <= sizeof date_);
    std::memcpy(date_, kServer, sizeof kServer - 1);
    const time_t t = static_cast<time_t>(now);
    struct tm tm;
    gmtime_r(&t, &tm);
    date_len_ = sizeof kServer - 1 + strftime(date_ + sizeof kServer - 1, sizeof date_ - (sizeof kServer - 1),
                                              "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
  }
  return {date_, date_len_};
}

void Handler::Respond(int status, bool keep_alive, int version, const char* content_type, const Extra* extra,
                      bool head_only, std::string* out) {
  // Every response goes through here: the head is written into a stack
  // buffer and appended once, then the body (see buf_writer.h). The
  // status line and the Server and Date lines are whole pieces (the Date
  // line rebuilt once a second). Worst case: the fixed text, the Date line
  // (< 64), a content type, an Allow value (short literals), four policies
  // (names < 32 bytes, two integers each) and eight more integers of at
  // most 20 digits: well under 2048.
  const std::string_view body = Body();
  char buf[2048];
  BufWriter w(buf);
  if (const std::string_view line = StatusLine(status); !line.empty()) {
    w.Str(line);
  } else {
    w.Lit("HTTP/1.1 ");
    w.Int(status);
    w.Lit(" Error\r\n");
  }
  w.Str(ServerAndDate(extra != nullptr && extra->rate != nullptr ? extra->now_s : 0));
  if (status != 204) {  // RFC 9110 8.6: a 204 carries no Content-Length
    if (!body.empty()) w.Str(content_type);
    w.Lit("Content-Length: ");
    w.Int(static_cast<int64_t>(body.size()));
    w.Lit("\r\n");
  }
  if (extra) {
    if (extra->rate) WriteRateLimitFields(*extra->rate, extra->now_s, opts_.ratelimit_fields, w);
    if (extra->allow) {
      w.Lit("Allow: ");
      w.Str(extra->allow);
      w.Lit("\r\n");
    }
  }
  if (!keep_alive) w.Lit("Connection: close\r\n");
  else if (version < 11) w.Lit("Connection: keep-alive\r\n");
  w.Lit("\r\n");
  w.AppendTo(out);
  if (!head_only) out->append(body);
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
  return store_ != nullptr ? store_->CheckFiles() : Status::OK();
}

void Handler::HandleJson(std::string_view body, bool* json, int* status) {
  if (!rls_ || !rls_->rules()) {
    TextBody(404, "POST /json is Envoy's rate limit service: srv.xml sets no <grpc config>", status);
    return;
  }
  if (Status s = json_.Decode(body, &rls_req_); !s.ok()) {
    TextBody(400, "POST /json: " + s.message(), status);
    return;
  }
  rls_->Decide(rls_req_, &rls_answer_);
  CountEnvoyAnswer(envoy_metrics_, rls_req_, rls_answer_);
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

void Handler::CountDecision(const WireRequest& r, const Decision& d) {
  if (!d.ok() || d.biz_id == 0) return;
  if (r.cmd != Cmd::kQuery && r.cmd != Cmd::kUpdate && r.cmd != Cmd::kAcquire) return;
  if (counters_) {
    const uint16_t biz = d.biz_id;
    CounterAdd(d.allowed ? counters_->biz_allowed[biz] : counters_->biz_denied[biz]);
    if (d.shadow && d.would_deny) CounterAdd(counters_->biz_shadow_denied[biz]);
    // Each rule by its own verdict: which rule of a biz denies is what an
    // operator tunes.
    const size_t denied = static_cast<size_t>(d.shadow ? RuleResultLabel::kShadowDenied : RuleResultLabel::kDenied);
    const uint32_t nrules = std::min<uint32_t>(d.nrules, kMaxRulesPerBiz);
    for (uint32_t i = 0; i < nrules; ++i)
      CounterAdd(counters_->rule_decisions[biz][i][d.rules[i].allowed ? static_cast<size_t>(RuleResultLabel::kAllowed)
                                                                       : denied]);
  }
  // No log: this one branch. A log: a line is formatted only for the
  // decisions it records (denied ones by default) and samples.
  if (decision_log_ != nullptr && decision_log_->Wants(!d.allowed || (d.shadow && d.would_deny))) LogDecision(r, d);
}

std::string_view Handler::BizName(const WireRequest& r, uint16_t id) {
  // A name is never all digits (map.xml refuses it): anything else sent is the name.
  if (!r.biz.empty() && r.biz.find_first_not_of("0123456789") != std::string_view::npos) return r.biz;
  if (id >= biz_names_.size() || biz_names_[id].empty()) {
    for (const BizInfo& b : engine_->Bizzes()) {
      if (b.id >= biz_names_.size()) biz_names_.resize(size_t{b.id} + 1);
      biz_names_[b.id] = b.name;
    }
  }
  return id < biz_names_.size() && !biz_names_[id].empty() ? std::string_view(biz_names_[id]) : r.biz;
}

void Handler::LogDecision(const WireRequest& r, const Decision& d) {
  DecisionRecord rec;
  rec.ts_ms = clock_->NowMs();
  rec.biz = BizName(r, d.biz_id);
  rec.key = r.key;
  const RuleResult& top = d.rules[d.top < d.nrules ? d.top : 0];
  rec.rule = std::string_view(top.name, strnlen(top.name, sizeof top.name));
  // Shadow mode answers allowed; the line says what enforce mode would have.
  const bool shadow_denied = d.shadow && d.would_deny;
  rec.allowed = d.allowed && !shadow_denied;
  rec.shadow = shadow_denied;
  rec.n = r.n;
  rec.count = d.count;
  rec.limit = d.limit;
  rec.remaining = d.remaining;
  rec.retry_after = shadow_denied ? top.retry_after : d.retry_after;
  // What the request was (or, on a lone server, would be) routed by: the
  // ?route= of POST /frs, else the request's route, else the key's hash tag,
  // else the key (a GET's as sent, still %-encoded).
  rec.route = Ring::RouteOf(r.route_key.empty() ? r.key : r.route_key, route_param_.empty() ? r.route : route_param_);
  rec.client = peer_;
  decision_log_->Record(rec);
}

namespace {

// RFC 9112 3.2.2: a server accepts the absolute form of a target (what a
// proxy may send: "http://host:port/acquire?..."); the authority is not ours
// to check, the path and query are used as in the origin form.
std::string_view OriginForm(std::string_view target) {
  auto starts = [&](std::string_view scheme) {
    if (target.size() < scheme.size()) return false;
    for (size_t i = 0; i < scheme.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(target[i])) != scheme[i]) return false;
    return true;
  };
  const size_t skip = starts("http://") ? 7 : starts("https://") ? 8 : 0;
  if (skip == 0) return target;
  const size_t end = target.find_first_of("/?", skip);
  return end == std::string_view::npos ? std::string_view("/") : target.substr(end);
}

}  // namespace

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
  bool head_only = false;
  bool is_get = head.method == HttpMethod::kGet;

  if (path == "/frs") {
    if (head.method != HttpMethod::kPost) {
      ErrorBody(405, "/frs takes POST with an XML body", &status);
      extra.allow = "POST";
    } else {
      HandlePost(base + head.body_off, head.body_len, query, &label, &status);
    }
  } else if (path == "/acquire" || path == "/query" || path == "/auth") {
    Cmd cmd = path == "/query" ? Cmd::kQuery : Cmd::kAcquire;
    label = LabelOf(cmd);
    if (!is_get) {
      ErrorBody(405, std::string(path) + " takes GET", &status);
      extra.allow = "GET";
    } else {
      HandleGetForm(cmd, path == "/auth", query, &extra, &status);
    }
  } else if (path == "/health" || path == "/metrics") {
    bool health = path == "/health";
    label = health ? CmdLabel::kHealth : CmdLabel::kMetrics;
    if (!is_get && head.method != HttpMethod::kHead) {
      ErrorBody(405, std::string(path) + " takes GET or HEAD", &status);
      extra.allow = "GET, HEAD";
    } else {
      head_only = head.method == HttpMethod::kHead;
      if (health) {
        body_.clear();
        if (Status why = Unhealthy(); !why.ok()) ErrorBody(503, why.message(), &status);
        else body_.append("<response code=\"0\" msg=\"serving\"/>\n");
      } else {
        body_.clear();
        ctype = kText;
        if (metrics_) {
          metrics_->Render(*engine_, store_, &body_);
          if (rls_ && rls_->rules()) RenderEnvoyMetrics(*metrics_, *rls_->rules(), &body_);
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
      head_only = head.method == HttpMethod::kHead;
      if (Status why = Unhealthy(); !why.ok()) TextBody(503, why.message(), &status);
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
  } else if (path == "/stats") {
    label = CmdLabel::kStats;
    if (!is_get && head.method != HttpMethod::kPost) {
      ErrorBody(405, "/stats takes GET (or POST from a handoff)", &status);
      extra.allow = "GET, POST";
    } else {
      HandleStatsBy(head, base, query, &status);
      if (status == 200) ctype = kXml;
    }
  } else {
    ErrorBody(404, "no such path: use POST /frs, GET /acquire, /query, /auth, /stats, /health or /metrics (with <grpc>: POST /json, GET /healthcheck)", &status);
  }
  if (shutting_down_) keep_alive = false;
  Respond(status, keep_alive, head.version, ctype, &extra, head_only, out);
  if (counters_) counters_->CountRequest(label, status, static_cast<uint64_t>(MonoNs() - start_ns));
  return keep_alive;
}

namespace {

std::string Quoted(std::string_view s) {
  return "\"" + std::string(s.substr(0, 64)) + (s.size() > 64 ? "...\"" : "\"");
}

}  // namespace

bool Handler::RouteRequests(std::span<WireRequest> reqs, std::string_view route_param, int* status) {
  const ClusterView& c = opts_.cluster;
  if (!c.ring) {
    // A lone server owns every route: members may route apart (as batches
    // did before clusters), each node keeping its own route's position.
    // When the route is the one the key itself implies (no route given, the
    // key as sent is the key), it stays unknown: the store gives a node it
    // creates that very position (StoreImpl::RouteFor), so the CRC-32 of
    // every key (5-7 % of a request) is only computed when a node is made.
    for (WireRequest& r : reqs) {
      if (!IsRouted(r.cmd)) continue;
      const std::string_view route = route_param.empty() ? r.route : route_param;
      if (route.empty() && (r.route_key.empty() || r.route_key == r.key)) continue;
      r.route_pos = Ring::HashRoute(Ring::RouteOf(r.route_key.empty() ? r.key : r.route_key, route));
      r.route_known = true;
    }
    return true;
  }
  std::string_view route;
  size_t first = 0;
  bool any = false;
  for (size_t i = 0; i < reqs.size(); ++i) {
    WireRequest& r = reqs[i];
    if (!IsRouted(r.cmd)) continue;
    std::string_view mine =
        Ring::RouteOf(r.route_key.empty() ? r.key : r.route_key, route_param.empty() ? r.route : route_param);
    if (!any) {
      route = mine;
      first = i;
      any = true;
    } else if (mine != route) {
      ErrorBody(400,
                "batch members route differently: " + Quoted(route) + " (member " + std::to_string(first + 1) +
                    ") and " + Quoted(mine) + " (member " + std::to_string(i + 1) +
                    "); give their keys one {hash tag} or send POST /frs?route=R",
                status);
      return false;
    }
  }
  if (!any) return true;
  const uint32_t pos = Ring::HashRoute(route);
  for (WireRequest& r : reqs) {
    if (!IsRouted(r.cmd)) continue;
    r.route_pos = pos;
    r.route_known = true;
  }
  const size_t owner = c.ring->OwnerOfHash(pos);
  if (static_cast<long>(owner) == c.self_index) return true;
  if (counters_) CounterAdd(counters_->misrouted);
  if (!c.enforce) return true;
  const std::string& name = c.ring->shards()[owner].name;
  body_.clear();
  AppendMisrouted(route, name, &body_);
  *status = 421;
  return false;
}

bool Handler::HandleMerges(int* status) {
  // Handoff: the members that share a receipt (one handoff batch) are merged
  // with one receipt node in one store transaction; each group is answered
  // on its own, and the sender keeps what was not acknowledged.
  std::vector<std::string_view> lines;
  lines.reserve(wire_.size());
  // allowed="1" only when every member was merged (or found merged before).
  static constexpr std::string_view kHead = "<batch allowed=\"1\">\n";
  body_.append(kHead);
  bool all_merged = true;
  for (size_t i = 0; i < wire_.size();) {
    size_t end = i;
    lines.clear();
    while (end < wire_.size() && wire_[end].receipt == wire_[i].receipt) lines.push_back(wire_[end++].node);
    auto merged = lines.size() <= AdminEngine::kMaxMergeNodes
                      ? engine_->MergeNodes(lines, wire_[i].receipt)
                      : Result<bool>(Status::InvalidArgument("one receipt covers at most " +
                                                             std::to_string(AdminEngine::kMaxMergeNodes) + " nodes"));
    all_merged = all_merged && merged.ok();
    for (size_t k = i; k < end; ++k) {
      body_.append("  ");
      if (!merged.ok()) {
        // A node that does not parse is the sender's fault, not ours.
        const Status& s = merged.status();
        AppendError(s.code() == Status::Code::kCorruption ? 400 : HttpStatusFor(s), s.message(), &body_);
        continue;
      }
      if (counters_) CounterAdd(merged.value() ? counters_->merged : counters_->merge_duplicates);
      body_.append(merged.value() ? "<response code=\"0\" merged=\"1\"/>\n" : "<response code=\"0\" merged=\"0\"/>\n");
    }
    i = end;
  }
  if (!all_merged) body_[kHead.find('1')] = '0';
  body_.append("</batch>\n");
  *status = 200;
  return true;
}

bool Handler::HandlePost(char* body, size_t len, std::string_view query, CmdLabel* label, int* status) {
  ProtocolError err;
  bool is_batch = false;
  std::string_view route_param;
  if (!DecodePostQuery(query, &route_param, &err)) {
    ErrorBody(err.status, err.msg, status);
    return false;
  }
  route_param_ = route_param;
  if (!decoder_.Decode(body, len, opts_.max_batch, &wire_, &is_batch, &err)) {
    ErrorBody(err.status, err.msg, status);
    return false;
  }
  *label = is_batch ? CmdLabel::kBatch : LabelOf(wire_[0].cmd);
  size_t merges = 0;
  for (const WireRequest& r : wire_) merges += r.cmd == Cmd::kMerge;
  if (merges != 0 && merges != wire_.size()) {
    ErrorBody(400, "cmd=\"merge\" cannot share a batch with other commands", status);
    return false;
  }
  // Authorization and biz resolution first, for every member: a refused
  // or unknown member fails the whole request before anything executes.
  // Members mostly share their biz: each run of one name is looked up once.
  std::string_view known_biz;
  bool have_known = false;
  for (size_t i = 0; i < wire_.size(); ++i) {
    const WireRequest& r = wire_[i];
    if (IsAdmin(r.cmd)) {
      AdminAuth a = CheckAdminToken(opts_.admin_token, r.token);
      if (a != AdminAuth::kOk) {
        std::string msg = a == AdminAuth::kDisabled
                              ? std::string("admin commands are disabled: srv.xml sets no <admin token>")
                              : std::string("cmd=\"") + WireCmdName(r.cmd) + "\" needs the admin token, and it is missing or wrong";
        if (is_batch) msg = "batch member " + std::to_string(i + 1) + ": " + msg;
        ErrorBody(403, msg, status);
        return false;
      }
    }
    if (is_batch && r.cmd != Cmd::kMerge && !(have_known && r.biz == known_biz)) {
      auto id = engine_->ResolveBiz(r.biz);
      if (!id.ok()) {
        ErrorBody(id.status().IsNotFound() ? 404 : 400,
                  "batch member " + std::to_string(i + 1) + ": " + id.status().message(), status);
        return false;
      }
      known_biz = r.biz;
      have_known = true;
    }
  }

  if (!RouteRequests(wire_, route_param, status)) return false;

  body_.clear();
  if (merges != 0) return HandleMerges(status);
  if (!is_batch) {
    const WireRequest& r = wire_[0];
    if (r.cmd == Cmd::kStats) {
      AppendStats(store_ != nullptr ? store_->Stats() : StoreStats{}, engine_->DailyStats(), &opts_.cluster, &body_);
      *status = 200;
      return true;
    }
    return ExecuteOne(r, status);
  }

  reqs_.clear();
  for (const WireRequest& r : wire_) reqs_.push_back(r.ToEngine());
  // ExecuteBatch writes every decision: no clearing of ~500 bytes each first.
  std::span<Decision> out(decisions_.data(), reqs_.size());
  bool allowed = engine_->ExecuteBatch(reqs_, out);
  for (size_t i = 0; i < wire_.size(); ++i) CountDecision(wire_[i], out[i]);
  if (decoder_.compact()) AppendBatchCompact(allowed, out, &body_);
  else AppendBatch(allowed, wire_, out, &body_);
  *status = 200;
  return true;
}

bool Handler::ExecuteOne(const WireRequest& r, int* status) {
  Decision& d = decisions_[0];
  d = engine_->Execute(r.ToEngine());
  if (!d.ok()) {
    ErrorBody(HttpStatusFor(d.status), d.status.message(), status);
    return false;
  }
  CountDecision(r, d);
  decision_ = std::string_view(decision_buf_, WriteDecision(r.cmd, d, decision_buf_));
  *status = 200;
  return true;
}

bool Handler::HandleGetForm(Cmd cmd, bool auth, std::string_view query, Extra* extra, int* status) {
  ProtocolError err;
  WireRequest r;
  if (!DecodeQuery(query, cmd, &biz_buf_, &key_buf_, &r, &err)) {
    ErrorBody(err.status, err.msg, status);
    return false;
  }
  if (!RouteRequests(std::span<WireRequest>(&r, 1), {}, status)) return false;
  body_.clear();
  if (!ExecuteOne(r, status)) return false;
  const Decision& d = decisions_[0];
  extra->rate = &d;
  // The instant the engine decided at: its reset times are relative to it.
  extra->now_s = d.now_s != 0 ? d.now_s : clock_->NowMs() / 1000;
  if (auth) {
    // For forward-auth proxies: nginx's auth_request passes only 2xx, 401
    // and 403 (anything else becomes a 500), and wants no body.
    decision_ = {};
    body_.clear();
    *status = d.allowed ? 204 : 403;
  } else {
    *status = d.allowed ? 200 : 429;
  }
  return true;
}

void Handler::HandleStatsBy(const HttpHead& head, const char* base, std::string_view query, int* status) {
  GroupStatsQuery q;
  std::string token, receipt;
  bool have_biz = false, have_by = false;
  std::string buf;
  for (size_t start = 0; start <= query.size() && !query.empty();) {
    const size_t amp = query.find('&', start);
    const std::string_view pair = query.substr(start, amp == std::string_view::npos ? query.npos : amp - start);
    start = amp == std::string_view::npos ? query.size() + 1 : amp + 1;
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    std::string_view value;
    if (!PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), &buf, &value)) {
      ErrorBody(400, "/stats: parameter '" + std::string(name) + "' has a bad %-escape", status);
      return;
    }
    auto count = [&](uint64_t max, uint64_t* out) {
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), *out);
      return !value.empty() && ec == std::errc() && p == value.data() + value.size() && *out <= max;
    };
    uint64_t n = 0;
    if (name == "biz") {
      q.biz = std::string(value);
      have_biz = !value.empty();
    } else if (name == "by") {
      q.by = std::string(value);
      have_by = !value.empty();
    } else if (name == "day") {
      uint32_t day;
      if (!ParseDayText(value, &day)) {
        ErrorBody(400, "/stats: day '" + std::string(value.substr(0, 32)) + "' is not a YYYY-MM-DD date", status);
        return;
      }
      q.day = day;
    } else if (name == "value") {
      q.value = std::string(value);
    } else if (name == "top") {
      if (!count(1000000, &n)) {
        ErrorBody(400, "/stats: top '" + std::string(value.substr(0, 32)) + "' is not a count (0..1000000)", status);
        return;
      }
      q.top = static_cast<uint32_t>(n);
    } else if (name == "sketches") {
      q.sketches = value == "1";
    } else if (name == "token") {
      token = std::string(value);
    } else if (name == "receipt" && head.method == HttpMethod::kPost) {
      receipt = std::string(value);
    } else {
      ErrorBody(400, "/stats: unknown parameter '" + std::string(name.substr(0, 32)) +
                         "' (biz, by, day, value, top, sketches, token; receipt with POST)", status);
      return;
    }
  }
  // The admin token, when srv.xml sets one: ?token=T or Authorization:
  // Bearer T. A merge (POST) changes counts: like every admin command, it
  // is refused when srv.xml sets none.
  if (!opts_.admin_token.empty() || head.method == HttpMethod::kPost) {
    std::string_view auth(base + head.auth_off, head.auth_len);
    if (token.empty() && auth.size() > 7 && (auth.starts_with("Bearer ") || auth.starts_with("bearer ")))
      token = std::string(auth.substr(7));
    if (CheckAdminToken(opts_.admin_token, token) != AdminAuth::kOk) {
      ErrorBody(403, "/stats needs the admin token (token=T or Authorization: Bearer T), and it is missing or wrong",
                status);
      return;
    }
  }
  if (head.method == HttpMethod::kPost) {
    auto in = ParseGroupStats(std::string_view(base + head.body_off, head.body_len));
    if (!in.ok()) {
      ErrorBody(400, "POST /stats: " + in.status().message(), status);
      return;
    }
    Status s = engine_->MergeStatsBy(in.value(), receipt);
    if (!s.ok()) {
      ErrorBody(HttpStatusFor(s), "POST /stats: " + s.message(), status);
      return;
    }
    body_.clear();
    body_.append("<response code=\"0\" msg=\"merged\" groups=\"");
    body_.append(std::to_string(in.value().rows.size()));
    body_.append("\"/>\n");
    *status = 200;
    return;
  }
  if (!have_biz || !have_by) {
    ErrorBody(400, "/stats needs biz=B and by=F[,F...]", status);
    return;
  }
  auto st = engine_->StatsBy(q);
  if (!st.ok()) {
    ErrorBody(HttpStatusFor(st.status()), st.status().message(), status);
    return;
  }
  body_.clear();
  AppendGroupStats(st.value(), &body_);
  *status = 200;
}

void Handler::HandleFailure(int status, std::string_view msg, int64_t start_ns, std::string* out) {
  decision_ = {};
  ErrorBody(status, msg, &status);
  Respond(status, /*keep_alive=*/false, 11, kXml, nullptr, false, out);
  if (counters_) counters_->CountRequest(CmdLabel::kNone, status, static_cast<uint64_t>(MonoNs() - start_ns));
}

void Handler::AppendOverloaded(std::string* out) {
  static constexpr char kBody[] = "<response code=\"503\" msg=\"the server is at its connection limit; retry later\"/>\n";
  out->append("HTTP/1.1 503 Service Unavailable\r\nServer: frsd/" FRS_VERSION "\r\nContent-Type: application/xml\r\nContent-Length: ");
  AppendNum(static_cast<int64_t>(sizeof kBody - 1), out);
  out->append("\r\nRetry-After: 1\r\nConnection: close\r\n\r\n");
  out->append(kBody, sizeof kBody - 1);
}

}  // namespace frs::server
