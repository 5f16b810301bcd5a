// frsctl stat --cluster: the whole cluster's figures, from every shard of
// srv.xml's <cluster> over HTTP (the `stats` command), summed: nodes,
// evictions, the per-biz daily counters, and each shard's share of the keys.
#include <pugixml.hpp>

#include <cstdio>
#include <map>
#include <string_view>
#include <vector>

#include "commands.h"
#include "frs/http_client.h"
#include "frs/ring.h"
#include "json_out.h"

namespace frs::ctl {
namespace {

struct ShardFigures {
  std::string name;
  bool reachable = false;
  std::string error;
  uint64_t slots = 0, nodes = 0, evictions_stale = 0, evictions_live = 0;
  // <cluster replicas="1">: this shard's replica state, and its links to
  // the others (shard name, changes pending, link up).
  bool replicas = false, catching_up = false;
  // Age of its oldest change no other holder acknowledged (<cluster lag_ms>:
  // frs_replica_lag_seconds); -1: an earlier frsd's answer, without it.
  int64_t lag_ms = -1;
  std::string digest;  // of the shard list it runs (<cluster digest>)
  struct Link {
    std::string to;
    uint64_t pending = 0;
    bool up = true;
  };
  std::vector<Link> links;
};
struct DayFigures {
  uint64_t requests = 0, allowed = 0, denied = 0, new_keys = 0;
};

}  // namespace

Result<int> RunStatCluster(Session& s, const StatArgs& a) {
  if (s.cfg.cluster_shards.empty())
    return Status::InvalidArgument(s.cfg.path + " has no <cluster>: use frsctl stat without --cluster");
  std::vector<ShardFigures> shards;
  std::map<std::string, std::map<std::string, DayFigures>> bizzes;  // biz -> date -> figures
  ShardFigures total;
  total.name = "total";
  for (const RingShard& sh : s.cfg.cluster_shards) {
    ShardFigures f;
    f.name = sh.name;
    HttpClient http(sh.name, 5000);
    auto resp = http.Post("/frs", "<request cmd=\"stats\"/>");
    pugi::xml_document d;
    if (!resp.ok()) {
      f.error = WithoutShardName(resp.status().message(), sh.name);
    } else if (resp->status != 200 || !d.load_string(resp->body.c_str())) {
      f.error = "answered " + std::to_string(resp->status);
    } else {
      pugi::xml_node r = d.child("response");
      pugi::xml_node st = r.child("store");
      f.reachable = true;
      f.slots = st.attribute("slots").as_ullong();
      f.nodes = st.attribute("nodes_used").as_ullong();
      f.evictions_stale = st.attribute("evictions_stale").as_ullong();
      f.evictions_live = st.attribute("evictions_live").as_ullong();
      pugi::xml_node cl = r.child("cluster");
      f.replicas = cl.attribute("replicas").as_int() == 1;
      f.catching_up = cl.attribute("catching_up").as_int() == 1;
      if (pugi::xml_attribute lag = cl.attribute("lag_ms")) f.lag_ms = lag.as_llong();
      f.digest = cl.attribute("digest").value();
      for (pugi::xml_node sh2 = cl.child("shard"); sh2; sh2 = sh2.next_sibling("shard"))
        if (sh2.attribute("link"))
          f.links.push_back({sh2.child_value(), sh2.attribute("pending").as_ullong(),
                             std::string_view(sh2.attribute("link").value()) == "up"});
      for (pugi::xml_node b = r.child("biz"); b; b = b.next_sibling("biz")) {
        uint32_t shown = 0;
        for (pugi::xml_node day = b.child("day"); day && shown < a.days; day = day.next_sibling("day"), ++shown) {
          DayFigures& df = bizzes[b.attribute("name").value()][day.attribute("date").value()];
          df.requests += day.attribute("requests").as_ullong();
          df.allowed += day.attribute("allowed").as_ullong();
          df.denied += day.attribute("denied").as_ullong();
          df.new_keys += day.attribute("new_keys").as_ullong();
        }
      }
      total.slots += f.slots;
      total.nodes += f.nodes;
      total.evictions_stale += f.evictions_stale;
      total.evictions_live += f.evictions_live;
    }
    shards.push_back(std::move(f));
  }
  size_t down = 0;
  // Each shard left out is named on standard error too, once, as stat
  // --cluster --by names it: a script that reads stderr sees why it exits 1.
  for (const ShardFigures& f : shards) {
    if (f.reachable) continue;
    ++down;
    std::fprintf(stderr, "frsctl: shard %s: %s\n", f.name.c_str(), f.error.c_str());
  }
  // Shards that run different lists route keys differently (and, with
  // replicas, refuse each other's changes: links read DOWN): each one's
  // digest is named, and the exit code says the figures are no cluster's.
  std::map<std::string, std::vector<std::string>> lists;  // digest -> shards
  for (const ShardFigures& f : shards)
    if (f.reachable) lists[f.digest].push_back(f.name);
  const bool lists_agree = lists.size() <= 1;
  if (!lists_agree)
    for (const auto& [digest, names] : lists)
      for (const std::string& n : names)
        std::fprintf(stderr,
                     "frsctl: shard %s runs the shard list of digest %s (%zu different lists among the shards)\n",
                     n.c_str(), digest.c_str(), lists.size());
  auto share = [&](const ShardFigures& f) {
    return total.nodes ? 100.0 * static_cast<double>(f.nodes) / static_cast<double>(total.nodes) : 0.0;
  };
  if (s.json) {
    JsonOut j;
    j.BeginObject().Key("shards").BeginArray();
    for (const ShardFigures& f : shards) {
      j.BeginObject().Key("shard").String(f.name).Key("reachable").Bool(f.reachable);
      if (!f.reachable) j.Key("error").String(f.error);
      else j.Key("digest").String(f.digest);
      j.Key("slots").Uint(f.slots).Key("nodes_used").Uint(f.nodes).Key("share_pct").Double(share(f));
      j.Key("evictions_stale").Uint(f.evictions_stale).Key("evictions_live").Uint(f.evictions_live);
      if (f.replicas) {
        j.Key("replicas").BeginObject().Key("catching_up").Bool(f.catching_up);
        if (f.lag_ms >= 0) j.Key("lag_seconds").Double(static_cast<double>(f.lag_ms) / 1000.0);
        j.Key("links").BeginArray();
        for (const auto& l : f.links)
          j.BeginObject().Key("to").String(l.to).Key("pending").Uint(l.pending).Key("up").Bool(l.up).EndObject();
        j.EndArray().EndObject();
      }
      j.EndObject();
    }
    j.EndArray();
    j.Key("slots").Uint(total.slots).Key("nodes_used").Uint(total.nodes);
    j.Key("evictions_stale").Uint(total.evictions_stale).Key("evictions_live").Uint(total.evictions_live);
    j.Key("bizzes").BeginArray();
    for (const auto& [name, days] : bizzes) {
      j.BeginObject().Key("name").String(name).Key("days").BeginArray();
      for (auto it = days.rbegin(); it != days.rend(); ++it) {
        j.BeginObject().Key("date").String(it->first).Key("requests").Uint(it->second.requests);
        j.Key("allowed").Uint(it->second.allowed).Key("denied").Uint(it->second.denied);
        j.Key("new_keys").Uint(it->second.new_keys).EndObject();
      }
      j.EndArray().EndObject();
    }
    j.EndArray().Key("unreachable").Uint(down).Key("lists_agree").Bool(lists_agree).EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%-28s %14s %14s %8s %12s %12s\n", "shard", "slots", "nodes", "share", "ev.stale", "ev.live");
    for (const ShardFigures& f : shards) {
      if (!f.reachable) {
        std::printf("%-28s unreachable: %s\n", f.name.c_str(), f.error.c_str());
        continue;
      }
      std::printf("%-28s %14llu %14llu %7.2f%% %12llu %12llu\n", f.name.c_str(),
                  static_cast<unsigned long long>(f.slots), static_cast<unsigned long long>(f.nodes), share(f),
                  static_cast<unsigned long long>(f.evictions_stale),
                  static_cast<unsigned long long>(f.evictions_live));
    }
    std::printf("%-28s %14llu %14llu %8s %12llu %12llu\n", "total", static_cast<unsigned long long>(total.slots),
                static_cast<unsigned long long>(total.nodes), "",
                static_cast<unsigned long long>(total.evictions_stale),
                static_cast<unsigned long long>(total.evictions_live));
    if (!lists_agree) {
      std::printf("shard lists DIFFER:");
      for (const auto& [digest, names] : lists) {
        std::printf(" digest %s on", digest.c_str());
        for (const std::string& n : names) std::printf(" %s", n.c_str());
        std::printf(";");
      }
      std::printf("\n");
    }
    bool any_replicas = false;
    for (const ShardFigures& f : shards) any_replicas = any_replicas || f.replicas;
    if (any_replicas) {
      // Each shard's links to the others, as it sees them: what it still
      // owes each (changes not acknowledged) and whether that link answers.
      std::printf("replicas\n");
      for (const ShardFigures& f : shards) {
        if (!f.reachable || !f.replicas) continue;
        std::printf("  %-26s %s", f.name.c_str(), f.catching_up ? "catching up (its routes answer 503)" : "serving");
        if (f.lag_ms >= 0) std::printf(", lag %.1f s", static_cast<double>(f.lag_ms) / 1000.0);
        for (const auto& l : f.links)
          std::printf("; to %s: %llu pending, link %s", l.to.c_str(), static_cast<unsigned long long>(l.pending),
                      l.up ? "up" : "DOWN");
        std::printf("\n");
      }
    }
    for (const auto& [name, days] : bizzes) {
      std::printf("biz %s\n", name.c_str());
      for (auto it = days.rbegin(); it != days.rend(); ++it)
        std::printf("  %s  requests %llu  allowed %llu  denied %llu  new keys %llu\n", it->first.c_str(),
                    static_cast<unsigned long long>(it->second.requests),
                    static_cast<unsigned long long>(it->second.allowed),
                    static_cast<unsigned long long>(it->second.denied),
                    static_cast<unsigned long long>(it->second.new_keys));
    }
  }
  // Figures without some shards, or of shards that run different lists,
  // are not one cluster's: say so in the exit code.
  return down || !lists_agree ? kExitNo : kExitOk;
}

}  // namespace frs::ctl
