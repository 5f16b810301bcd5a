// frsctl get / set / del / reset: one node's state, and the admin changes,
// made through the engine exactly as frsd's admin commands make them.
#include <cstdio>

#include "commands.h"
#include "format.h"
#include "frs/key.h"
#include "json_out.h"
#include "node_out.h"

namespace frs::ctl {
namespace {

// Checks a biz and key given on the command line; returns the biz id.
Result<uint16_t> CheckNodeArgs(const Session& s, const std::string& biz, const std::string& key) {
  Result<uint16_t> id = ResolveBizArg(s, biz);
  if (!id.ok()) return id;
  if (std::string why = ValidateKeyBytes(key); !why.empty())
    return Status::InvalidArgument("bad key \"" + PrintableHead(key) + "\": " + why);
  return id;
}

// An engine answer that is an error, as frsctl's exit code wants it: an
// unknown biz or a bad argument is the caller's (exit 2), the rest a failure.
Status DecisionError(const Decision& d) {
  if (d.status.code() == Status::Code::kInvalidArgument || d.status.IsNotFound())
    return Status::InvalidArgument(d.status.message());
  return d.status;
}

void PrintNodeHuman(const NodeView& v, int64_t now_ms) {
  bool denied = false;
  for (const RuleView& r : v.rules) denied |= r.denies;
  std::printf("%s \"%s\"%s (biz %u, mode %s): count %lld, %s\n", v.biz_name.c_str(), Printable(v.key).c_str(),
              v.key_truncated ? "..." : "", v.biz_id, ModeName(v.mode), static_cast<long long>(v.count),
              v.mode == Mode::kOff ? "mode off: always allowed"
              : denied             ? "denied now"
                                   : "allowed now");
  Table t({"rule", "name", "algo", "count", "limit", "debt", "window", "next allowed"});
  t.AlignRight({0, 3, 4, 5});
  for (size_t i = 0; i < v.rules.size(); ++i) {
    const RuleView& r = v.rules[i];
    std::string window = WindowText(r);
    if (r.algo == Algo::kTokenBucket) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f tokens left", r.tokens);
      window = buf;
    }
    t.Row({std::to_string(i + 1), r.name, RuleSummary(r), std::to_string(r.count), std::to_string(r.limit),
           std::to_string(r.debt), window.empty() ? "-" : window, r.denies ? When(r.next_allowed_ms, now_ms) : "now"});
  }
  t.Print(stdout, 2);
  PrintLeases(v, now_ms);
  PrintReservations(v, now_ms);
  const NodeInfo& n = v.node;
  std::printf("  node at %s; last use %s; expires %s\n", Position(n).c_str(),
              When(int64_t{n.last_access_s} * 1000, now_ms).c_str(),
              n.expire_s == 0   ? "never"
              : n.expire_s == 1 ? "already (it holds nothing: its room is reused when needed)"
                                : When(int64_t{n.expire_s} * 1000, now_ms).c_str());
}

void PrintDecisionJson(const std::string& biz, const std::string& key, const char* action, const Decision& d) {
  JsonOut j;
  j.BeginObject();
  j.Key("biz").String(biz).Key("key").String(key).Key("action").String(action);
  j.Key("count").Int(d.count).Key("limit").Int(d.limit).Key("remaining").Int(d.remaining);
  j.Key("allowed").Bool(d.allowed);
  j.Key("rules").BeginArray();
  for (uint32_t i = 0; i < d.nrules && i < kMaxRulesPerBiz; ++i) {
    const RuleResult& r = d.rules[i];
    // Named as get's rules are (map.xml's name, else BIZ_N).
    j.BeginObject().Key("name").String(r.name).Key("algo").String(AlgoName(r.algo)).Key("interval").Uint(r.interval);
    j.Key("count").Int(r.count).Key("limit").Int(r.limit).Key("remaining").Int(r.remaining);
    j.Key("reset").Int(r.reset).Key("debt").Int(r.debt).Key("allowed").Bool(r.allowed);
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

Result<int> RunGet(Session& s, const NodeArgs& a) {
  Result<uint16_t> id = CheckNodeArgs(s, a.biz, a.key);
  if (!id.ok()) return id.status();
  Result<NodeView> v = s.engine->Inspect(a.biz, a.key);
  if (!v.ok() && !v.status().IsNotFound()) return v.status();
  if (!v.ok()) {
    if (s.json) {
      JsonOut j;
      j.BeginObject().Key("biz").String(a.biz).Key("biz_id").Uint(id.value()).Key("key").String(a.key);
      j.Key("found").Bool(false).Key("count").Int(0).Key("rules").BeginArray().EndArray();
      // A full store's live evictions: the key may have been one of them.
      j.Key("store_evictions_live").Uint(s.store->Stats().total.evictions_live);
      HoldersJson(s, a.key, j);
      std::printf("%s\n", j.EndObject().str().c_str());
    } else {
      std::printf("%s \"%s\": no such node (%s)\n", a.biz.c_str(), Printable(a.key).c_str(),
                  WhyNoNode(s, a.key).c_str());
    }
    return kExitNo;
  }
  if (s.json) {
    JsonOut j;
    j.BeginObject();
    j.Key("found").Bool(true);
    NodeMembers(v.value(), j);
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    PrintNodeHuman(v.value(), s.NowMs());
  }
  return kExitOk;
}

Result<int> RunSet(Session& s, const SetArgs& a) {
  Result<uint16_t> id = CheckNodeArgs(s, a.biz, a.key);
  if (!id.ok()) return id.status();
  if (a.count < 0 || a.count > kMaxUses)
    return Status::InvalidArgument("bad count " + std::to_string(a.count) + ": must be 0.." + std::to_string(kMaxUses));
  Request req;
  req.cmd = Cmd::kSet;
  req.biz = a.biz;
  req.key = a.key;
  req.count = a.count;
  Decision d = s.engine->Execute(req);
  if (!d.ok()) return DecisionError(d);
  NoteChangeIsThisShardsOnly(s, a.key, "set");
  if (s.json) {
    PrintDecisionJson(a.biz, a.key, "set", d);
  } else if (d.count != a.count) {
    // The answer is the most restrictive rule's: one that keeps each use (a
    // sliding window of a small max) or each lease (a concurrency rule)
    // holds no more than its max of them, a token bucket no refill past
    // kMaxAheadMs (a count that large at a slow rate).
    const Algo algo = d.top < d.nrules ? d.rules[d.top].algo : Algo::kSliding;
    const char* why = algo == Algo::kConcurrency   ? "a concurrency rule holds at most its max leases"
                      : algo == Algo::kTokenBucket ? "a token bucket keeps its refill at most 2^40 ms (34 years) ahead"
                                                   : "a sliding window keeps at most its max uses";
    std::printf(
        "%s \"%s\": count set to %lld; the most restrictive rule holds %lld of %lld (%s; explain shows each "
        "rule): %s now\n",
        a.biz.c_str(), Printable(a.key).c_str(), static_cast<long long>(a.count), static_cast<long long>(d.count),
        static_cast<long long>(d.limit), why, d.allowed ? "allowed" : "denied");
  } else {
    std::printf("%s \"%s\": count set to %lld (limit %lld): %s now\n", a.biz.c_str(), Printable(a.key).c_str(),
                static_cast<long long>(d.count), static_cast<long long>(d.limit), d.allowed ? "allowed" : "denied");
  }
  return kExitOk;
}

Result<int> RunDel(Session& s, const NodeArgs& a) {
  Result<uint16_t> id = CheckNodeArgs(s, a.biz, a.key);
  if (!id.ok()) return id.status();
  Result<NodeView> before = s.engine->Inspect(a.biz, a.key);
  if (!before.ok() && !before.status().IsNotFound()) return before.status();
  Request req;
  req.cmd = Cmd::kDelete;
  req.biz = a.biz;
  req.key = a.key;
  Decision d = s.engine->Execute(req);
  if (!d.ok()) return DecisionError(d);
  bool existed = before.ok() || d.found;
  if (existed) NoteChangeIsThisShardsOnly(s, a.key, "del");
  if (s.json) {
    JsonOut j;
    j.BeginObject().Key("biz").String(a.biz).Key("key").String(a.key).Key("action").String("del");
    j.Key("deleted").Bool(existed).EndObject();
    std::printf("%s\n", j.str().c_str());
  } else if (existed) {
    std::printf("%s \"%s\": deleted (every rule starts afresh)\n", a.biz.c_str(), Printable(a.key).c_str());
  } else {
    std::printf("%s \"%s\": no such node, nothing to delete\n", a.biz.c_str(), Printable(a.key).c_str());
  }
  return kExitOk;
}

Result<int> RunReset(Session& s, const ResetArgs& a) {
  Result<uint16_t> id = ResolveBizArg(s, a.biz);
  uint64_t erased = 0;
  if (id.ok()) {
    Request req;
    req.cmd = Cmd::kReset;
    req.biz = a.biz;
    Decision d = s.engine->Execute(req);
    if (!d.ok()) return DecisionError(d);
    erased = d.erased;
  } else if (std::optional<uint16_t> former = BizIdArg(a.biz)) {
    // A biz map.xml no longer has: its nodes are orphans, which frsd reuses
    // only when it needs their room, and which block an import of an export
    // that holds them (it asks for a name). Reset erases them now.
    Store::Filter filter;
    filter.biz = *former;
    Result<uint64_t> n = s.store->EraseIf(filter, [](const NodeInfo&) { return true; });
    if (!n.ok()) return n.status();
    id = *former;
    erased = n.value();
  } else {
    return id.status();
  }
  if (erased != 0) NoteChangeIsThisShardsOnly(s, {}, "reset");
  if (s.json) {
    JsonOut j;
    j.BeginObject().Key("biz").String(a.biz).Key("biz_id").Uint(id.value()).Key("action").String("reset");
    j.Key("erased").Uint(erased).EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s: reset, %s node%s erased\n", a.biz.c_str(), Grouped(erased).c_str(), erased == 1 ? "" : "s");
  }
  return kExitOk;
}

}  // namespace frs::ctl
