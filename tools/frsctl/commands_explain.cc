// frsctl explain BIZ KEY: why a key is (or is not) blocked, in words. For
// each rule: count, limit, window, borrow debt, whether it denies, and when
// the key is next allowed; then one verdict line, e.g.
//   denied by rule 2 (sliding 3600 s, max 1): next allowed at
//   2026-11-22 14:03:10 UTC (in 12 min)
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "format.h"
#include "frs/key.h"
#include "json_out.h"
#include "node_out.h"

namespace frs::ctl {
namespace {

// One rule's state as a sentence (without its verdict).
std::string RuleSentence(const RuleView& r, int64_t now) {
  std::string s;
  if (r.algo == Algo::kTokenBucket) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.2f of %lld tokens left (refill %lld per %u s), %lld used", r.tokens,
                  static_cast<long long>(r.burst ? r.burst : r.max), static_cast<long long>(r.max), r.interval,
                  static_cast<long long>(r.count));
    return buf;
  }
  if (r.algo == Algo::kConcurrency) {
    s = std::to_string(r.count) + " of " + std::to_string(r.max) + " leases held";
    // Past a lowered max, more than one must end before a place is free.
    if (r.denies && r.count > r.max)
      s += ", over its max: a place is free once " + std::to_string(r.count - r.max + 1) + " of them have ended, " +
           Relative(r.next_allowed_ms, now);
    else if (r.denies) s += ", the first ends " + Relative(r.next_allowed_ms, now);
    return s;
  }
  s = "count " + std::to_string(r.count) + " of " + std::to_string(r.limit);
  if (r.algo == Algo::kSliding) {
    s += " in the last " + Duration(r.interval);
  } else if (r.window_end_ms != 0) {
    s += ", window " + LocalTime(r.window_start_ms) + " .. " + LocalTime(r.window_end_ms) + " (ends " +
         Relative(r.window_end_ms, now) + ")";
  } else {
    s += ", no window open";
  }
  if (r.debt > 0 && r.count > r.max) {
    s += ", borrowed " + std::to_string(r.debt) + " beyond max " + std::to_string(r.max) +
         ": the next window allows only " + std::to_string(r.max - r.debt);
  } else if (r.debt > 0) {
    s += ", repaying a debt of " + std::to_string(r.debt) + ": this window allows " + std::to_string(r.limit) +
         " instead of " + std::to_string(r.max);
  } else if (r.borrow > 0 && r.limit > r.max) {
    s += ", may borrow up to " + std::to_string(r.borrow) + " beyond max";
  }
  return s;
}

std::string RuleName(size_t i, const RuleView& r) {
  return "rule " + std::to_string(i + 1) + " (" + RuleSummary(r) + ")";
}

// The key holds every reservation its biz lets it hold.
bool TableFull(const NodeView& v) { return v.reservations_cap != 0 && v.reservations.size() >= v.reservations_cap; }

struct Verdict {
  bool denied = false;
  int64_t next_ms = 0;     // when n=1 is next allowed (the latest of the denying rules)
  std::vector<size_t> by;  // denying rules, 0-based
  std::string words;
};

Verdict Judge(const NodeView& v, int64_t now) {
  Verdict out;
  size_t last = 0;
  for (size_t i = 0; i < v.rules.size(); ++i) {
    if (!v.rules[i].denies) continue;
    out.by.push_back(i);
    if (v.rules[i].next_allowed_ms >= out.next_ms) {
      out.next_ms = v.rules[i].next_allowed_ms;
      last = i;
    }
  }
  const bool would_deny = !out.by.empty();
  std::string why;
  if (would_deny) {
    why = "denied by " + RuleName(last, v.rules[last]) + ": next allowed at " + When(out.next_ms, now);
    for (size_t i : out.by)
      if (i != last)
        why += "; " + RuleName(i, v.rules[i]) + " also denies until " + LocalTime(v.rules[i].next_allowed_ms);
  }
  switch (v.mode) {
    case Mode::kOff:
      out.words = "allowed: mode off, every request is allowed and nothing is counted";
      out.by.clear();
      break;
    case Mode::kShadow:
      out.words = would_deny ? "allowed (mode shadow, counted but never denied); enforce would answer: " + why
                             : "allowed (mode shadow): no rule would deny it";
      break;
    case Mode::kEnforce:
      out.denied = would_deny;
      out.words = would_deny ? why : "allowed now: no rule denies it";
      break;
  }
  // The rules allow it, but the key holds every reservation its biz lets it
  // hold: an acquire with `reserve` is denied (reservations_full) until the
  // first of them ends, which the rules' verdict alone does not say.
  if (TableFull(v) && v.mode != Mode::kOff) {
    int64_t first = v.reservations[0].expires_s;
    for (const ReservationView& r : v.reservations) first = std::min(first, r.expires_s);
    out.words += "; with reserve, denied until the first reservation ends at " + When(first * 1000, now) +
                 ": the key holds all " + std::to_string(v.reservations_cap) + " reservations its biz allows";
  }
  return out;
}

void PrintJson(const NodeView& v, const Verdict& verdict, int64_t now) {
  JsonOut j;
  j.BeginObject();
  j.Key("found").Bool(true);
  j.Key("now_ms").Int(now);
  j.Key("allowed").Bool(!verdict.denied);
  j.Key("next_allowed_ms").Int(verdict.by.empty() ? now : verdict.next_ms);
  j.Key("denied_by").BeginArray();
  for (size_t i : verdict.by) j.Uint(i + 1);
  j.EndArray();
  j.Key("verdict").String(verdict.words);
  j.Key("reservations_full").Bool(TableFull(v));
  j.Key("explanations").BeginArray();
  for (const RuleView& r : v.rules) j.String(RuleSentence(r, now));
  j.EndArray();
  NodeMembers(v, j);
  j.EndObject();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

Result<int> RunExplain(Session& s, const NodeArgs& a) {
  Result<uint16_t> id = ResolveBizArg(s, a.biz);
  if (!id.ok()) return id.status();
  if (std::string why = ValidateKeyBytes(a.key); !why.empty())
    return Status::InvalidArgument("bad key \"" + PrintableHead(a.key) + "\": " + why);
  const int64_t now = s.NowMs();
  Result<NodeView> v = s.engine->Inspect(a.biz, a.key);
  if (!v.ok() && !v.status().IsNotFound()) return v.status();
  if (!v.ok()) {
    // A biz in mode off never makes a node: its mode is the answer, not the
    // missing node (it said only "no node", where shadow and off are said).
    Mode mode = Mode::kEnforce;
    for (const BizInfo& b : s.engine->Bizzes())
      if (b.id == id.value()) mode = b.mode;
    const std::string words = mode == Mode::kOff
                                  ? "allowed: mode off, every request is allowed and nothing is counted (no node)"
                                  : std::string("allowed") + (mode == Mode::kShadow ? " (mode shadow)" : "") +
                                        ": no node (" + WhyNoNode(s, a.key) + "): every rule starts at 0";
    if (s.json) {
      JsonOut j;
      j.BeginObject().Key("found").Bool(false).Key("now_ms").Int(now).Key("allowed").Bool(true);
      j.Key("next_allowed_ms").Int(now).Key("denied_by").BeginArray().EndArray().Key("verdict").String(words);
      j.Key("biz").String(a.biz).Key("biz_id").Uint(id.value()).Key("key").String(a.key).Key("count").Int(0);
      j.Key("rules").BeginArray().EndArray();
      j.Key("store_evictions_live").Uint(s.store->Stats().total.evictions_live);
      HoldersJson(s, a.key, j);
      std::printf("%s\n", j.EndObject().str().c_str());
    } else {
      std::printf("%s \"%s\": %s\n", a.biz.c_str(), Printable(a.key).c_str(), words.c_str());
    }
    return kExitOk;
  }
  const NodeView& node = v.value();
  Verdict verdict = Judge(node, now);
  // Scripts ask "is this key blocked?": the answer "yes, denied now" is the
  // "no" exit code, as get's "absent" is.
  const int rc = verdict.denied ? kExitNo : kExitOk;
  if (s.json) {
    PrintJson(node, verdict, now);
    return rc;
  }
  std::printf("%s \"%s\"%s (biz %u, mode %s), now %s\n", node.biz_name.c_str(), Printable(node.key).c_str(),
              node.key_truncated ? "..." : "", node.biz_id, ModeName(node.mode), LocalTime(now).c_str());
  // Each rule by its number and its name (map.xml's, else BIZ_N), the name
  // `top --rule` takes.
  Table t;
  for (size_t i = 0; i < node.rules.size(); ++i) {
    const RuleView& r = node.rules[i];
    std::string state = r.denies ? "DENIES until " + When(r.next_allowed_ms, now)
                                 : "allows" + (r.remaining > 0 && r.algo != Algo::kTokenBucket
                                                   ? " (" + std::to_string(r.remaining) + " more)"
                                                   : std::string());
    t.Row({"rule " + std::to_string(i + 1), r.name, RuleSummary(r) + ":", RuleSentence(r, now) + ":", state});
  }
  t.Print(stdout, 2);
  PrintLeases(node, now);
  PrintReservations(node, now);
  std::printf("%s\n", verdict.words.c_str());
  return rc;
}

}  // namespace frs::ctl
