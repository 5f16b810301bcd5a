// tests/server/fake_engine.h: a deterministic in-memory Engine for the
// server's unit tests: one biz "login" (id 1) and one "api" (id 2), a fixed
// window of `limit` uses per key that never resets, counts in a std::map.
// The real engine is exercised by the end-to-end tests.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>

#include "frs/admin_engine.h"
#include "frs/clock.h"

namespace frs::server::testing {

class FakeEngine final : public AdminEngine {
 public:
  int64_t limit = 5;
  int64_t now_ms = 1763790000000;
  std::map<std::pair<uint16_t, std::string>, int64_t> counts;
  int reloads = 0;
  // What Bizzes, DailyStats and Today answer (the /metrics tests set them).
  std::vector<BizInfo> bizzes = {{1, "login", Mode::kEnforce, {"login_1"}}, {2, "api", Mode::kEnforce, {"api_1"}}};
  std::vector<BizStats> daily_stats;
  uint32_t today = 0;
  // MergeNodes answers NotFound unless `merges`; then each receipt once.
  bool merges = false;
  std::string other_biz_mark;  // MergeKnownNodes: see there
  std::string refused_mark;    // MergeKnownNodes: a line this store refuses
  std::set<std::string> receipts;
  size_t merged_nodes = 0;

  int64_t Count(uint16_t biz, const std::string& key) const {
    auto it = counts.find({biz, key});
    return it == counts.end() ? 0 : it->second;
  }

  class Clk final : public Clock {
   public:
    explicit Clk(const FakeEngine* e) : e_(e) {}
    int64_t NowMs() const override { return e_->now_ms; }
    const FakeEngine* e_;
  };
  Clk clk{this};

  Decision Execute(const Request& req) override {
    Decision d;
    auto id = ResolveBiz(req.biz);
    if (!id.ok()) {
      d.status = id.status();
      return d;
    }
    auto k = std::make_pair(id.value(), std::string(req.key));
    int64_t& c = counts[k];
    switch (req.cmd) {
      case Cmd::kQuery: Fill(&d, c, c + req.n <= limit); break;
      case Cmd::kUpdate:
        c += req.n;
        Fill(&d, c, c <= limit);
        break;
      case Cmd::kAcquire:
        if (c + req.n <= limit) {
          c += req.n;
          Fill(&d, c, true);
        } else {
          Fill(&d, c, false);
        }
        break;
      case Cmd::kGet:
        d.found = c > 0;
        Fill(&d, c, c < limit);
        break;
      case Cmd::kSet:
        c = req.count;
        d.found = true;
        Fill(&d, c, c < limit);
        break;
      case Cmd::kDelete:
        d.found = c > 0;
        counts.erase(k);
        break;
      case Cmd::kReset: {
        uint64_t n = 0;
        for (auto it = counts.begin(); it != counts.end();)
          if (it->first.first == id.value()) {
            it = counts.erase(it);
            ++n;
          } else ++it;
        d.erased = n;
        break;
      }
      case Cmd::kStats:
      case Cmd::kMerge: break;
      case Cmd::kRelease:
      case Cmd::kRenew:
        // The fake grants no lease: every id is one it never granted.
        d = Decision{};
        d.status = Status::Conflict("lease is unknown");
        break;
      case Cmd::kSettle:
        // Nor a reservation.
        d = Decision{};
        d.status = Status::Conflict("reservation is unknown");
        break;
    }
    return d;
  }

  // The fake runs whatever it resolves: the checks are the real engine's.
  Status CheckRequest(const Request& req) const override {
    auto id = ResolveBiz(req.biz);
    return id.ok() ? Status::OK() : id.status();
  }

  bool ExecuteBatch(std::span<const Request> reqs, std::span<Decision> out) override {
    // All-or-nothing for acquire: check every acquire first.
    std::map<std::pair<uint16_t, std::string>, int64_t> want;
    bool all = true;
    for (const Request& r : reqs) {
      if (r.cmd != Cmd::kAcquire) continue;
      auto id = ResolveBiz(r.biz);
      if (!id.ok()) return false;
      auto k = std::make_pair(id.value(), std::string(r.key));
      want[k] += r.n;
      if (counts[k] + want[k] > limit) all = false;
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].cmd == Cmd::kAcquire && !all) {
        auto id = ResolveBiz(reqs[i].biz);
        int64_t c = counts[{id.value(), std::string(reqs[i].key)}];
        Fill(&out[i], c, c + reqs[i].n <= limit);
        out[i].allowed = false;
      } else {
        out[i] = Execute(reqs[i]);
      }
    }
    return all;
  }

  Status ReloadText(std::string_view, const std::string&) override { return Reload(""); }
  Status Reload(const std::string&) override {
    ++reloads;
    return Status::OK();
  }
  Result<GroupStats> StatsBy(const GroupStatsQuery&) const override {
    return Status::NotFound("no statistics by field");
  }
  Status MergeStatsBy(const GroupStats&, std::string_view) override {
    return Status::NotFound("no statistics by field");
  }
  std::vector<BizStats> DailyStats() const override { return daily_stats; }
  Result<uint16_t> ResolveBiz(std::string_view biz) const override {
    if (biz == "login" || biz == "1") return uint16_t{1};
    if (biz == "api" || biz == "2") return uint16_t{2};
    return Status::NotFound("unknown biz \"" + std::string(biz) + "\"");
  }
  std::vector<BizInfo> Bizzes() const override { return bizzes; }
  // What HeldNow answers (each call a walk, counted; `held_fails`: it
  // fails), and HeldBizzes the same list with zeros.
  std::vector<BizHeldNow> held;
  int held_walks = 0;
  bool held_fails = false;
  std::function<void()> on_held_walk;  // during each walk (a test's clock moves on)
  Result<std::vector<BizHeldNow>> HeldNow(uint32_t /*lock_wait_ms*/) override {
    ++held_walks;
    if (on_held_walk) on_held_walk();
    if (held_fails) return Status::Corruption("fake: a damaged node");
    return held;
  }
  std::vector<BizHeldNow> HeldBizzes() const override {
    std::vector<BizHeldNow> zeros = held;
    for (BizHeldNow& b : zeros) b.leases = b.reservations = 0;
    return zeros;
  }
  Result<NodeView> Inspect(std::string_view, std::string_view) override { return Status::NotFound("fake"); }
  Result<NodeView> View(const NodeInfo&) const override { return Status::NotFound("fake"); }
  Result<std::string> ExportNode(const NodeInfo&) const override { return Status::NotFound("fake"); }
  Result<bool> ImportNode(std::string_view) override { return Status::NotFound("fake"); }
  Status CheckImport(std::string_view) const override { return Status::NotFound("fake"); }
  uint32_t Today() const override { return today; }
  Result<bool> MergeNodes(std::span<const std::string_view> lines, std::string_view receipt) override {
    if (!merges) return Status::NotFound("fake");
    // As the engine: a receipt already present takes nothing again.
    if (!receipts.insert(std::string(receipt)).second) return false;
    merged_nodes += lines.size();
    return true;
  }
  Result<bool> ReplaceNodes(std::span<const std::string_view> lines, std::string_view receipt) override {
    return MergeNodes(lines, receipt);
  }
  // A line holding `other_biz_mark` is of a biz this map lacks (id 7).
  Result<bool> MergeKnownNodes(std::span<const std::string_view> lines, std::string_view receipt,
                               std::vector<LeftOutNode>* left_out) override {
    if (left_out != nullptr) left_out->clear();
    if (!merges) return Status::NotFound("fake");
    for (size_t i = 0; i < lines.size() && left_out == nullptr; ++i)
      if (!other_biz_mark.empty() && lines[i].find(other_biz_mark) != std::string_view::npos)
        return Status::NotFound("fake: a line of biz 7, which this map lacks");
    if (!receipts.insert(std::string(receipt)).second) return false;
    for (size_t i = 0; i < lines.size() && left_out == nullptr; ++i)
      if (!refused_mark.empty() && lines[i].find(refused_mark) != std::string_view::npos)
        return Status::InvalidArgument("fake: a state out of range");
    for (size_t i = 0; i < lines.size(); ++i) {
      if (!other_biz_mark.empty() && lines[i].find(other_biz_mark) != std::string_view::npos)
        left_out->push_back({i, 7, ""});
      else if (!refused_mark.empty() && lines[i].find(refused_mark) != std::string_view::npos)
        left_out->push_back({i, 9, "fake: a state out of range"});
      else ++merged_nodes;
    }
    return true;
  }
  Result<bool> ApplyChanges(std::span<const Change>, std::string_view, uint64_t, size_t) override {
    return Status::NotFound("fake");
  }

 private:
  void Fill(Decision* d, int64_t c, bool allowed) const {
    d->allowed = allowed;
    d->count = c;
    d->limit = limit;
    d->remaining = c >= limit ? 0 : limit - c;
    d->reset = now_ms / 1000 + 60;
    d->retry_after = allowed ? 0 : 60;
    d->nrules = 1;
    RuleResult& r = d->rules[0];
    r.algo = Algo::kFixed;
    r.interval = 60;
    r.count = c;
    r.limit = limit;
    r.remaining = d->remaining;
    r.reset = d->reset;
    r.allowed = allowed;
  }
};

}  // namespace frs::server::testing
