#include "server/handler.h"

#include <algorithm>
#include <cstring>
#include <ctime>

#include "base/decimal.h"
#include "limit/lease_id.h"
#include "server/buf_writer.h"

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
    case 409: return "HTTP/1.1 409 Conflict\r\n";
    case 410: return "HTTP/1.1 410 Gone\r\n";
    case 411: return "HTTP/1.1 411 Length Required\r\n";
    case 413: return "HTTP/1.1 413 Content Too Large\r\n";
    case 421: return "HTTP/1.1 421 Misdirected Request\r\n";
    case 429: return "HTTP/1.1 429 Too Many Requests\r\n";
    case 431: return "HTTP/1.1 431 Request Header Fields Too Large\r\n";
    case 500: return "HTTP/1.1 500 Internal Server Error\r\n";
    case 501: return "HTTP/1.1 501 Not Implemented\r\n";
    case 503: return "HTTP/1.1 503 Service Unavailable\r\n";
    default: return {};  // "HTTP/1.1 NNN Error"
  }
}

void AppendNum(int64_t v, std::string* out) {
  char buf[kMaxDecimalChars];
  out->append(buf, static_cast<size_t>(WriteDecimal(buf, v) - buf));
}

// The IETF httpapi RateLimit header fields (draft-ietf-httpapi-ratelimit-
// headers-11): every rule of the biz as a policy, the most restrictive one's
// available quota and effective window; the older trio when configured (or
// it alone); Retry-After on a denial some wait cures. What the fields
// promise is the quota a client can pace by:
// - under borrow a window may grant beyond max, but r and the trio's
//   remaining say what is left of the allowance (max - debt) without
//   borrowing, so r never exceeds q;
// - a token bucket's q/w is its sustained rate (max per interval), with its
//   capacity as a parameter (which a client that does not know it ignores):
//   q=burst overstated the rate, and a client pacing at burst per interval
//   was denied. The draft asks an implementation's own parameters to carry
//   a vendor prefix: `frs-burst`; the bare `burst` of draft 10's answers
//   stays beside it for one release, for the clients that read it;
// - a biz counting something other than requests says so: `qu` with a unit
//   of the draft's registry, `frs-qu` with any other (the draft allows only
//   registered values in `qu`).
// What a rule has left without borrowing (its allowance minus its count).
int64_t LeftWithoutBorrow(const RuleResult& r) {
  return std::max<int64_t>(0, std::min(r.remaining, r.limit - r.count));
}

// The units the draft's registry lists beside its default, "requests".
bool RegisteredUnit(std::string_view unit) { return unit == "content-bytes" || unit == "concurrent-requests"; }

void WriteRateLimitFields(const Decision& d, int64_t now_s, std::string_view unit, bool violated,
                          SrvConfig::RateLimitFields fields, BufWriter& w) {
  // The rule the fields speak for: the decision's most restrictive one,
  // unless, while it allows, another has less left once borrowing is set
  // aside (the decision weighs a borrowing window by what it may still
  // grant, which a client pacing by r must not count on). A denial speaks
  // for the rule that decided it, as the body does: its reset is the wait.
  uint32_t pick = d.top < d.nrules ? d.top : 0;
  if (!d.would_deny)
    for (uint32_t i = 0; i < d.nrules; ++i)
      if (LeftWithoutBorrow(d.rules[i]) < LeftWithoutBorrow(d.rules[pick])) pick = i;
  const RuleResult& top = d.rules[pick];
  int64_t reset_in = top.reset > now_s ? top.reset - now_s : 0;
  // A token bucket's reset is its next token's moment rounded up to the
  // second, and now_s is rounded down: reset - now_s reads up to a second
  // long. On a denial the rule's own wait, counted from the exact moment,
  // bounds it, so that t never says to wait longer than Retry-After.
  if (!top.allowed && top.retry_after > 0 && top.retry_after != kNeverCurable)
    reset_in = std::min(reset_in, top.retry_after);
  if (fields != SrvConfig::RateLimitFields::kLegacy) {
    w.Lit("RateLimit-Policy: ");
    for (uint32_t i = 0; i < d.nrules; ++i) {
      const RuleResult& r = d.rules[i];
      if (i) w.Lit(", ");
      w.Char('"');
      w.Str(r.name);
      w.Lit("\";q=");
      w.Int(r.quota);
      if (r.algo == Algo::kConcurrency) {
        // Leases held at once: the draft's own unit, and no window (a
        // lease's length is not one).
        w.Lit(";qu=\"concurrent-requests\"");
        continue;
      }
      if (!unit.empty()) {
        // The draft's own order (3.2): q, qu, w.
        if (RegisteredUnit(unit)) w.Lit(";qu=\"");
        else w.Lit(";frs-qu=\"");
        w.Str(unit);
        w.Char('"');
      }
      w.Lit(";w=");
      w.Int(r.interval);
      if (r.algo == Algo::kTokenBucket) {
        w.Lit(";frs-burst=");
        w.Int(r.limit);
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
  if (violated && d.allowed && d.lease_serial != 0) {
    // /auth answers no body, so a lease it took is only of use with its id
    // here: a front door keeps it (nginx: auth_request_set $lease
    // $upstream_http_frs_lease) and releases with it when the request ends.
    char id[limit::kLeaseIdChars];
    limit::FormatLeaseId(d.lease_serial, d.lease_mac, id);
    w.Lit("FRS-Lease: ");
    w.Str(std::string_view(id, sizeof id));
    w.Lit("\r\nFRS-Lease-Expires: ");
    w.Int(d.lease_expires);
    w.Lit("\r\n");
  }
  if (violated && !d.allowed) {
    // The policies that denied, as a list of strings: what a front door
    // that makes its own 429 (nginx's auth_request sees no body) puts
    // into the problem's violated-policies, between brackets.
    w.Lit("FRS-Violated-Policies: ");
    bool first = true;
    for (uint32_t i = 0; i < d.nrules; ++i) {
      if (d.rules[i].allowed) continue;
      if (!first) w.Lit(", ");
      first = false;
      w.Char('"');
      w.Str(d.rules[i].name);
      w.Char('"');
    }
    w.Lit("\r\n");
  }
}

}  // namespace

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
    date_len_ = sizeof kServer - 1 +
                strftime(date_ + sizeof kServer - 1, sizeof date_ - (sizeof kServer - 1),
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
  // (names < 32 bytes, a unit < 32 bytes, four integers each), four
  // violated policies' names or a lease id, and nine more integers of at
  // most 20 digits, or a /replicate answer's proof (64): well under 2048.
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
    if (extra->rate)
      WriteRateLimitFields(*extra->rate, extra->now_s, extra->unit, extra->violated, opts_.ratelimit_fields, w);
    if (extra->allow) {
      w.Lit("Allow: ");
      w.Str(extra->allow);
      w.Lit("\r\n");
    }
    if (!extra->replica_proof.empty()) {
      w.Lit("FRS-Replica-Proof: ");
      w.Str(extra->replica_proof);
      w.Lit("\r\n");
    }
  }
  if (!keep_alive) w.Lit("Connection: close\r\n");
  else if (version < 11) w.Lit("Connection: keep-alive\r\n");
  w.Lit("\r\n");
  w.AppendTo(out);
  if (!head_only) out->append(body);
  // An answer of megabytes (a replica snapshot: 80 MB for 300,000 nodes)
  // left body_ that large, and the worker held it for good (measured from
  // outside: 83 MB of a worker's memory after one snapshot).
  if (body_.capacity() > kKeepBodyBytes) std::string().swap(body_);
}

namespace {

// A 503 written without a handler: Server and Date as every answer's (no
// cached line: written here), then the body.
void AppendBare503(std::string_view body, std::string_view extra_headers, std::string* out) {
  out->append("HTTP/1.1 503 Service Unavailable\r\nServer: frsd/" FRS_VERSION "\r\n");
  const time_t t = std::time(nullptr);
  struct tm tm;
  gmtime_r(&t, &tm);
  char date[64];
  out->append(date, strftime(date, sizeof date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm));
  out->append("Content-Type: application/xml\r\nContent-Length: ");
  AppendNum(static_cast<int64_t>(body.size()), out);
  out->append("\r\n").append(extra_headers).append("\r\n").append(body);
}

}  // namespace

void Handler::AppendReplicaRefused(bool down, std::string* out) {
  const std::string_view headers = "";
  if (!down) {
    AppendBare503(
        "<response code=\"503\" msg=\"the other holder of this route answered uses of it alone while this shard did "
        "not answer, and this shard judged this request on a copy without them: the use is counted on both; ask "
        "again shortly\"/>\n",
        headers, out);
    return;
  }
  // The link may have failed at once (refused, reset), timed out, or gone
  // down for a full backlog (Replicator::FailOverfull): the words fit each.
  AppendBare503(
      "<response code=\"503\" msg=\"the other holder of this route did not take the change (its link is down, it "
      "did not answer within replica_timeout_ms, or the link's backlog was full), and &lt;cluster "
      "on_replica_down=&quot;refuse&quot;&gt;: the use is counted here\"/>\n",
      headers, out);
}

void Handler::AppendOverloaded(std::string* out) {
  AppendBare503("<response code=\"503\" msg=\"the server is at its connection limit; retry later\"/>\n",
                "Retry-After: 1\r\nConnection: close\r\n", out);
}

}  // namespace frs::server
