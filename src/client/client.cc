#include "frs/client.h"

#include <pugixml.hpp>

#include <chrono>
#include <map>

#include "base/xml_escape.h"
#include "client/http_client.h"
#include "frs/percent_encode.h"

namespace frs {
namespace {

void AppendAttr(std::string* out, const char* name, std::string_view v) {
  out->push_back(' ');
  out->append(name).append("=\"");
  // Bytes XML does not allow go as they are: the server judges a key.
  AppendXmlEscaped(v, out, XmlBadBytes::kKeep);
  out->push_back('"');
}

bool IsLeaseCmd(Cmd c) { return c == Cmd::kRelease || c == Cmd::kRenew; }
bool IsSent(Cmd c) {
  return c == Cmd::kQuery || c == Cmd::kUpdate || c == Cmd::kAcquire || IsLeaseCmd(c) || c == Cmd::kSettle;
}

// Every field the caller set goes out, and the server judges it (a lease on
// an acquire, a reserve on a query, an n on a release are its 400s): a field
// dropped here would be a request answered as if it had not been asked.
void AppendRequest(std::string* out, const ClientRequest& r) {
  out->append("<request");
  AppendAttr(out, "cmd", CmdName(r.cmd));
  AppendAttr(out, "biz", r.biz);
  AppendAttr(out, "key", r.key);
  if (!IsLeaseCmd(r.cmd) || r.n != 1) AppendAttr(out, "n", std::to_string(r.n));
  if (IsLeaseCmd(r.cmd) || !r.lease.empty()) AppendAttr(out, "lease", r.lease);
  if (r.cmd == Cmd::kSettle || !r.reservation.empty()) AppendAttr(out, "reservation", r.reservation);
  if (r.reserve != 0) AppendAttr(out, "reserve", std::to_string(r.reserve));
  out->append("/>");
}

ClientDecision Refused(std::string why) { return ClientDecision{.error = Status::InvalidArgument(std::move(why))}; }
constexpr const char* kCmdsSent = "the client sends query, update, acquire, release, renew and settle";

ClientDecision FromXml(const pugi::xml_node& r) {
  ClientDecision d;
  const int code = r.attribute("code").as_int(-1);
  if (code != 0) {
    std::string msg = r.attribute("msg").value();
    // 413 and 431: the request was too large for the server's limits, a
    // refusal of the request as a 400 is.
    d.error = code == 400 || code == 413 || code == 431 ? Status::InvalidArgument(msg)
              : code == 404                             ? Status::NotFound(msg)
              : code == 409                             ? Status::Conflict(msg)
              : code == 410                             ? Status::Gone(msg)
                                                        : Status::Unavailable(msg);
    return d;
  }
  d.allowed = r.attribute("allowed").as_int() == 1;
  d.count = r.attribute("count").as_llong();
  d.limit = r.attribute("limit").as_llong();
  d.remaining = r.attribute("remaining").as_llong();
  d.reset = r.attribute("reset").as_llong();
  d.retry_after = r.attribute("retry_after").as_llong();
  d.shadow = r.attribute("shadow").as_int() == 1;
  d.would_deny = r.attribute("would_deny").as_int() == 1;
  d.lease = r.attribute("lease").value();
  d.lease_expires = r.attribute("expires").as_llong();
  d.released = r.attribute("released").as_int() == 1;
  d.reservation = r.attribute("reservation").value();
  if (!d.reservation.empty()) {
    // expires is the reservation's unless a lease came too (then it is the lease's).
    const bool lease = !r.attribute("lease").empty();
    d.reservation_expires = lease ? r.attribute("reservation_expires").as_llong() : d.lease_expires;
    if (!lease) d.lease_expires = 0;
  }
  d.settled = r.attribute("settled").as_int() == 1;
  d.returned = r.attribute("returned").as_llong();
  d.overrun = r.attribute("overrun").as_llong();
  d.reservations_full = r.attribute("reservations_full").as_int() == 1;
  return d;
}

// Whether `r` is a decision frsd could have written: an error answer (code
// not 0, with its msg) or a decision that says allowed 0 or 1. Anything else
// (a proxy's page that parses as XML, a body cut short) is no answer.
bool IsDecision(const pugi::xml_node& r) {
  if (std::string_view(r.name()) != "response" || r.attribute("code").empty()) return false;
  if (r.attribute("code").as_int(-1) != 0) return true;
  const std::string_view allowed = r.attribute("allowed").value();
  return allowed == "0" || allowed == "1";
}

// Why a batch's answer is no answer for its `members` (OK: it is one): the
// refusal of the whole batch (<response code> not 0), or one decision for
// each member, in order. A member missing would read as a plain denial.
Status UnusableBatch(const pugi::xml_node& root, size_t members) {
  if (std::string_view(root.name()) == "response")
    return IsDecision(root) && root.attribute("code").as_int() != 0
               ? Status::OK()
               : Status::Unavailable("a single <response> without an error for a batch");
  size_t n = 0;
  for (pugi::xml_node r = root.child("response"); r; r = r.next_sibling("response")) {
    if (!IsDecision(r)) return Status::Unavailable("a batch member's answer without a decision");
    ++n;
  }
  if (n != members)
    return Status::Unavailable(std::to_string(n) + " decisions for a batch of " + std::to_string(members));
  return Status::OK();
}

}  // namespace

struct Client::Impl {
  ClientOptions opts;
  Ring ring;
  std::vector<std::unique_ptr<client::HttpClient>> conns;  // by shard index

  // frsd's answer `r` (a decision): one it could not make (code 5xx: its
  // store or a shard failed; 408: the request came too slowly) is no answer,
  // decided by the fail policy, alone or as a batch's member; a refusal
  // (400, 404, 409, 410, 413, 431) is the server's verdict on the request.
  ClientDecision Decide(const pugi::xml_node& r, Cmd cmd) const {
    ClientDecision d = FromXml(r);
    const int code = r.attribute("code").as_int();
    if (code >= 500 || code == 408) return Failed(std::move(d.error), cmd);
    return d;
  }

  ClientDecision Failed(Status why, Cmd cmd) const {
    ClientDecision d;
    // The policy decides whether traffic goes on; release, renew and
    // settle let nothing go, and failed they were not done.
    const bool admits = cmd != Cmd::kRelease && cmd != Cmd::kRenew && cmd != Cmd::kSettle;
    d.allowed = opts.fail == FailPolicy::kOpen && admits;
    d.error = std::move(why);
    return d;
  }

  // The bytes a request is routed by: an explicit route as it is sent
  // (%-encoded: frsd and a proxy hash the raw query bytes, so "a b" is routed
  // by "a%20b" there), else the key's own route, which frsd takes from the
  // key itself.
  static std::string RouteBytes(std::string_view key, std::string_view route) {
    return route.empty() ? std::string(Ring::RouteOf(key, {})) : PercentEncoded(route, kPercentQueryValue);
  }
  size_t ShardOf(std::string_view key, std::string_view route) const { return ring.OwnerIndex(RouteBytes(key, route)); }

  static int64_t NowMs() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  // The end of a call begun now: timeout_ms bounds it whole.
  int64_t Deadline() const { return NowMs() + opts.timeout_ms; }

  // How an exchange that gave no root element ended: what decides whether
  // the route's other holder is asked.
  enum class Miss : uint8_t {
    kNone,        // an answer (or a failure no other shard would mend: not FRS's XML, a 421 to a stranger)
    kUnanswered,  // no connection, no whole answer in time, or frsd's 5xx: the shard could not answer
    kMisrouted,   // a 421 not followed: that shard holds no copy of the route
  };

  // POSTs `body` to shard `i` (following one 421 to the owner it names when
  // `follow`) by `deadline` (Deadline()); the parsed answer's root element,
  // or why there is none (and, in `miss`, of what kind; in `at`, the shard
  // asked last: the owner a 421 named).
  Result<pugi::xml_node> Post(size_t i, std::string_view route, const std::string& body, pugi::xml_document* doc,
                              int64_t deadline, bool follow = true, Miss* miss = nullptr, size_t* at = nullptr) {
    Miss ignored;
    size_t ignored_at;
    if (miss == nullptr) miss = &ignored;
    if (at == nullptr) at = &ignored_at;
    *miss = Miss::kUnanswered;
    std::string target = "/frs";
    // Only unreserved characters as themselves, so that the route frsd
    // hashes (the raw query bytes) is the one a proxy hashes too.
    if (!route.empty()) target += "?route=" + PercentEncoded(route, kPercentQueryValue);
    for (int hop = 0; hop < 2; ++hop) {
      *at = i;
      const int64_t left = deadline - NowMs();
      if (left <= 0) {
        *miss = Miss::kNone;  // not asked: nothing said of the shard
        return Status::Unavailable(ring.shards()[i].name + ": not asked, the call's " +
                                   std::to_string(opts.timeout_ms) + " ms (timeout_ms) were spent");
      }
      conns[i]->SetDeadlineIn(static_cast<int>(left));
      auto resp = conns[i]->Post(target, body);
      conns[i]->ClearDeadline();
      // Whatever failed (a refused connection, a time-out, an answer that is
      // no HTTP), there is no answer: Unavailable, as client.h says.
      if (!resp.ok())
        return resp.status().code() == Status::Code::kUnavailable
                   ? resp.status()
                   : Status::Unavailable(ring.shards()[i].name + ": " + resp.status().message());
      // A 5xx, frsd's or a proxy's page, is the shard not answering; after a
      // followed 421 the failure is another shard's, which is no reason to
      // ask this route's other holder (nor to skip the shard asked).
      *miss = hop == 0 && resp->status >= 500 ? Miss::kUnanswered : Miss::kNone;
      if (!doc->load_buffer(resp->body.data(), resp->body.size()))
        return Status::Unavailable(ring.shards()[i].name + " answered " + std::to_string(resp->status) +
                                   " without XML");
      pugi::xml_node root = doc->document_element();
      // Not FRS's answer (a proxy's 404 or 429 page, a wrong port): no
      // answer, as when none comes, whatever its status.
      const std::string_view name = root.name();
      if (name != "response" && name != "batch")
        return Status::Unavailable(ring.shards()[i].name + " answered " + std::to_string(resp->status) +
                                   ": unexpected <" + std::string(name) + "> answer");
      if (resp->status == 421 && !follow) {
        *miss = Miss::kMisrouted;
        return Status::Unavailable(ring.shards()[i].name + " answered 421: " + root.attribute("msg").value());
      }
      if (resp->status == 421 && hop == 0) {
        long owner = ring.Find(root.attribute("owner").value());
        if (owner < 0 || static_cast<size_t>(owner) == i)
          return Status::Unavailable(
              std::string("misrouted, and the owner named is not in this client's shard list: ") +
              root.attribute("owner").value());
        i = static_cast<size_t>(owner);
        continue;
      }
      if (resp->status >= 500 || resp->status == 421)
        return Status::Unavailable(ring.shards()[i].name + " answered " + std::to_string(resp->status) + ": " +
                                   root.attribute("msg").value());
      return root;
    }
    return Status::Unavailable("misrouted twice");
  }

  // Post to the holders of the route at ring position `hash` (`owner` its
  // owner): the owner, and when it could not answer, its successor with the
  // time left (ClientOptions::failover). A shard that could not answer is
  // asked second for skip_failed_ms; the first asked gets half the time, so
  // that a hung shard leaves the other the rest.
  Result<pugi::xml_node> PostToHolders(size_t owner, uint32_t hash, std::string_view route, const std::string& body,
                                       pugi::xml_document* doc, int64_t deadline, size_t* asked) {
    *asked = owner;
    const long successor = opts.failover ? ring.SuccessorOfHash(hash) : -1;
    const int64_t now = NowMs();
    if (successor < 0 || deadline <= now) return Post(owner, route, body, doc, deadline, true, nullptr, asked);
    const size_t other = static_cast<size_t>(successor);
    const bool owner_first = skip_until[owner] <= now || skip_until[other] > now;
    const size_t first = owner_first ? owner : other, second = owner_first ? other : owner;
    // A 421 is followed from the owner only: the successor's names the owner.
    Miss miss;
    auto r =
        Post(first, route, body, doc, now + std::max<int64_t>((deadline - now) / 2, 1), first == owner, &miss, asked);
    if (miss == Miss::kUnanswered) skip_until[first] = NowMs() + opts.skip_failed_ms;
    if (r.ok()) {
      skip_until[first] = 0;
      if (first != owner) ++failovers;
    }
    // The successor's 421 when it was asked first: no copy there (no
    // replicas), so the owner is asked after all.
    const bool again = miss == Miss::kUnanswered || (miss == Miss::kMisrouted && first != owner);
    if (r.ok() || !again) return r;
    auto r2 = Post(second, route, body, doc, deadline, second == owner, &miss, asked);
    if (miss == Miss::kUnanswered) skip_until[second] = NowMs() + opts.skip_failed_ms;
    if (!r2.ok())
      return Status::Unavailable(r.status().message() + "; the route's other holder: " + r2.status().message());
    skip_until[second] = 0;
    if (second != owner) ++failovers;
    return r2;
  }

  std::vector<int64_t> skip_until;  // by shard: asked second until then (NowMs)
  uint64_t failovers = 0;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Make(ClientOptions opts) {
  auto ring = Ring::Make(opts.shards);
  if (!ring.ok()) return ring.status();
  // A shard that is not host:port would fail every call it owns, and under
  // fail open allow them all: refused here, where the typo is made.
  for (const RingShard& s : opts.shards) {
    if (Status st = Ring::CheckAddress(s.name); !st.ok())
      return Status::InvalidArgument("shard \"" + s.name + "\" is not host:port: " + st.message());
  }
  if (opts.timeout_ms <= 0) return Status::InvalidArgument("timeout_ms must be positive");
  if (opts.skip_failed_ms < 0) return Status::InvalidArgument("skip_failed_ms must be 0 or more");
  auto impl = std::make_unique<Impl>(Impl{std::move(opts), std::move(ring.value()), {}, {}, 0});
  for (const RingShard& s : impl->ring.shards())
    impl->conns.push_back(std::make_unique<client::HttpClient>(s.name, impl->opts.timeout_ms));
  impl->skip_until.assign(impl->conns.size(), 0);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const Ring& Client::ring() const { return impl_->ring; }
uint64_t Client::failovers() const { return impl_->failovers; }

const std::string& Client::OwnerOf(std::string_view key, std::string_view route) const {
  return impl_->ring.shards()[impl_->ShardOf(key, route)].name;
}

ClientDecision Client::Acquire(std::string_view biz, std::string_view key, int64_t n, std::string_view route) {
  return Execute(ClientRequest{Cmd::kAcquire, std::string(biz), std::string(key), n}, route);
}
ClientDecision Client::Query(std::string_view biz, std::string_view key, int64_t n, std::string_view route) {
  return Execute(ClientRequest{Cmd::kQuery, std::string(biz), std::string(key), n}, route);
}
ClientDecision Client::Update(std::string_view biz, std::string_view key, int64_t n, std::string_view route) {
  return Execute(ClientRequest{Cmd::kUpdate, std::string(biz), std::string(key), n}, route);
}

ClientDecision Client::Release(std::string_view biz, std::string_view key, std::string_view lease,
                               std::string_view route) {
  return Execute(ClientRequest{Cmd::kRelease, std::string(biz), std::string(key), 1, std::string(lease)}, route);
}
ClientDecision Client::Renew(std::string_view biz, std::string_view key, std::string_view lease,
                             std::string_view route) {
  return Execute(ClientRequest{Cmd::kRenew, std::string(biz), std::string(key), 1, std::string(lease)}, route);
}

ClientDecision Client::Reserve(std::string_view biz, std::string_view key, int64_t n, int64_t seconds,
                               std::string_view route) {
  // 0 in a ClientRequest means "no reservation"; asked for by name, it is
  // the caller's error, not a plain acquire.
  if (seconds <= 0) return Refused("reserve: seconds must be at least 1, got " + std::to_string(seconds));
  ClientRequest r{Cmd::kAcquire, std::string(biz), std::string(key), n};
  r.reserve = seconds;
  return Execute(r, route);
}
ClientDecision Client::Settle(std::string_view biz, std::string_view key, std::string_view reservation, int64_t real,
                              std::string_view route) {
  ClientRequest r{Cmd::kSettle, std::string(biz), std::string(key), real};
  r.reservation = std::string(reservation);
  return Execute(r, route);
}

ClientDecision Client::Execute(const ClientRequest& r, std::string_view route) {
  if (!IsSent(r.cmd)) return Refused(kCmdsSent);
  std::string body;
  AppendRequest(&body, r);
  pugi::xml_document doc;
  const uint32_t hash = Ring::HashRoute(Impl::RouteBytes(r.key, route));
  size_t shard = impl_->ring.OwnerOfHash(hash);
  auto root = impl_->PostToHolders(shard, hash, route, body, &doc, impl_->Deadline(), &shard);
  const std::string& name = impl_->ring.shards()[shard].name;
  ClientDecision d =
      !root.ok() ? impl_->Failed(root.status(), r.cmd)
      : !IsDecision(root.value())
          ? impl_->Failed(Status::Unavailable(name + " answered <" + root.value().name() + "> without a decision"),
                          r.cmd)
          : impl_->Decide(root.value(), r.cmd);
  d.server = name;
  return d;
}

bool Client::Batch(std::span<const ClientRequest> reqs, std::vector<ClientDecision>* out, std::string_view route) {
  if (out == nullptr) return false;
  out->assign(reqs.size(), ClientDecision{});
  // As the server refuses a batch with a bad member: every member says why.
  for (const ClientRequest& r : reqs) {
    if (!IsSent(r.cmd)) {
      out->assign(reqs.size(), Refused(kCmdsSent));
      return false;
    }
  }
  // One group per route, in the order of first appearance: frsd routes a
  // batch by one route (its ?route=, else its members' key route, which must
  // be one) and keeps every member's node under it. A lone server takes
  // members of any routes in one batch, each node under its own.
  bool lone = impl_->ring.shards().size() == 1;
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  const auto split = [&](bool by_route) {
    groups.clear();
    std::map<std::string, size_t> group_of;
    for (size_t i = 0; i < reqs.size(); ++i) {
      std::string r = by_route ? Impl::RouteBytes(reqs[i].key, route) : std::string();
      auto [it, fresh] = group_of.try_emplace(r, groups.size());
      if (fresh) groups.push_back({std::move(r), {}});
      groups[it->second].second.push_back(i);
    }
  };
  split(/*by_route=*/!lone);
  const int64_t deadline = impl_->Deadline();  // every part within one timeout_ms
  bool all = true;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string group_route = groups[g].first;
    const std::vector<size_t> members = groups[g].second;
    const uint32_t hash = Ring::HashRoute(group_route);
    size_t shard = lone ? 0 : impl_->ring.OwnerOfHash(hash);
    std::string body = "<batch>";
    for (size_t i : members) AppendRequest(&body, reqs[i]);
    body += "</batch>";
    pugi::xml_document doc;
    // Without `route` no ?route=: frsd takes each member's key route.
    auto root = lone ? impl_->Post(shard, route, body, &doc, deadline)
                     : impl_->PostToHolders(shard, hash, route, body, &doc, deadline, &shard);
    Status unusable = root.ok() ? UnusableBatch(root.value(), members.size()) : root.status();
    // A list of one shard whose server is a <cluster>'s (of one shard, or
    // one this list has not caught up with): its members must share a
    // route, so the batch goes again split by route.
    if (lone && unusable.ok() && std::string_view(root.value().name()) == "response" &&
        std::string_view(root.value().attribute("msg").value()).find("route differently") != std::string_view::npos) {
      split(/*by_route=*/true);
      lone = false;
      g = static_cast<size_t>(-1);  // from the first part again
      continue;
    }
    if (!unusable.ok()) {
      const std::string& name = impl_->ring.shards()[shard].name;
      if (root.ok()) unusable = Status::Unavailable(name + ": " + unusable.message());
      for (size_t i : members) (*out)[i] = impl_->Failed(unusable, reqs[i].cmd);
    } else if (std::string_view(root.value().name()) == "response") {
      // The whole batch was refused (a bad member): every member says why.
      for (size_t i : members) (*out)[i] = impl_->Decide(root.value(), reqs[i].cmd);
    } else {
      size_t k = 0;
      for (pugi::xml_node r = root.value().child("response"); r && k < members.size(); r = r.next_sibling("response")) {
        (*out)[members[k]] = impl_->Decide(r, reqs[members[k]].cmd);
        ++k;
      }
    }
    for (size_t i : members) {
      (*out)[i].server = impl_->ring.shards()[shard].name;
      all = all && (*out)[i].allowed;
    }
  }
  return all;
}

}  // namespace frs
