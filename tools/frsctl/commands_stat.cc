// frsctl stat: geometry, occupancy per file, the chain-length histogram
// (occupied slots per key-node, from one walk of every chain), evictions and
// the per-biz counters of the last days.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <vector>

#include "commands.h"
#include "format.h"
#include "frs/store_admin.h"
#include "json_out.h"

namespace frs::ctl {
namespace {

struct Walk {
  // histogram[k]: key-nodes with k occupied slots (k = 0..chain).
  std::vector<uint64_t> histogram;
  std::vector<uint64_t> nodes_per_biz = std::vector<uint64_t>(65536, 0);
  uint64_t nodes = 0, in_alternate = 0;
  // Nodes a new key may take without evicting a live one: expired (every
  // window ended), or of a biz the map no longer has, as the store judges
  // them (a stale eviction). Slots used counts them until then.
  uint64_t stale_nodes = 0, stale_slots = 0;
};

Result<Walk> WalkChains(const Session& s) {
  Store& store = *s.store;
  const StoreGeometry& g = store.geometry();
  const uint32_t now_s = static_cast<uint32_t>(s.NowMs() / 1000);
  std::vector<bool> live(65536, false);
  for (const BizInfo& b : s.engine->Bizzes()) live[b.id] = true;
  live[kReceiptBiz] = true;  // handoff and replica receipts, as the engine keeps them
  Walk w;
  w.histogram.assign(g.chain + 1, 0);
  std::vector<uint8_t> used(g.keynodes);
  for (uint32_t f = 0; f < g.files; ++f) {
    std::fill(used.begin(), used.end(), 0);
    Store::Filter filter;
    filter.busy_percent = kWalkBusyPercent;
    filter.file = f;
    Status st = store.ForEach(filter, [&](const NodeInfo& n) {
      if (n.keynode < used.size())
        used[n.keynode] = static_cast<uint8_t>(std::min<uint32_t>(used[n.keynode] + n.span, g.chain));
      ++w.nodes_per_biz[n.biz];
      ++w.nodes;
      w.in_alternate += n.in_alternate;
      if ((n.expire_s != 0 && n.expire_s <= now_s) || !live[n.biz]) {
        ++w.stale_nodes;
        w.stale_slots += n.span;
      }
    });
    if (!st.ok()) return st;
    for (uint8_t u : used) ++w.histogram[u];
  }
  return w;
}

// The usage counters a store file and the whole store both have, in the
// order --json has always written them; `slots` is what occupancy divides by.
void UsageMembers(const FileStats& f, uint64_t slots, JsonOut& j) {
  j.Key("nodes_used").Uint(f.nodes_used);
  j.Key("slots_used").Uint(f.slots_used);
  j.Key("occupancy").Double(slots ? static_cast<double>(f.slots_used) / static_cast<double>(slots) : 0.0);
  j.Key("evictions_stale").Uint(f.evictions_stale);
  j.Key("evictions_live").Uint(f.evictions_live);
  j.Key("cuckoo_moves").Uint(f.cuckoo_moves);
  j.Key("lock_recoveries").Uint(f.lock_recoveries);
}

// The store's format as its files' headers say (0: not read): 5 is served
// as it is, its placement unkeyed (docs/store.md, "Format 6").
uint32_t FormatOf(const std::string& dir) {
  Result<StoreOnDisk> d = InspectStoreFiles(dir);
  return d.ok() ? d.value().format_version : 0;
}

void PrintJson(const Session& s, const StoreStats& st, const Walk& w, const std::vector<BizStats>& bizzes,
               uint32_t days) {
  JsonOut j;
  j.BeginObject();
  j.Key("store_dir").String(s.cfg.store_dir);
  j.Key("format").Uint(FormatOf(s.cfg.store_dir));
  j.Key("files").Uint(st.geometry.files);
  j.Key("keynodes").Uint(st.geometry.keynodes);
  j.Key("chain").Uint(st.geometry.chain);
  j.Key("slots").Uint(st.slots);
  j.Key("bytes_mapped").Uint(st.bytes_mapped);
  UsageMembers(st.total, st.slots, j);
  j.Key("damaged_nodes").Uint(st.total.damaged_nodes);
  j.Key("nodes_walked").Uint(w.nodes);
  j.Key("nodes_in_alternate").Uint(w.in_alternate);
  j.Key("stale_nodes").Uint(w.stale_nodes);
  j.Key("stale_slots").Uint(w.stale_slots);
  const uint64_t live_slots = st.total.slots_used > w.stale_slots ? st.total.slots_used - w.stale_slots : 0;
  j.Key("live_occupancy").Double(st.slots ? static_cast<double>(live_slots) / static_cast<double>(st.slots) : 0.0);
  j.Key("per_file").BeginArray();
  const uint64_t file_slots = uint64_t{st.geometry.keynodes} * st.geometry.chain;
  for (size_t i = 0; i < st.per_file.size(); ++i) {
    const FileStats& f = st.per_file[i];
    j.BeginObject();
    j.Key("file").Uint(i);
    UsageMembers(f, file_slots, j);
    j.Key("created_unix").Uint(f.created_unix);
    j.EndObject();
  }
  j.EndArray();
  j.Key("chain_histogram").BeginArray();
  for (uint64_t h : w.histogram) j.Uint(h);
  j.EndArray();
  j.Key("bizzes").BeginArray();
  for (const BizStats& b : bizzes) {
    j.BeginObject();
    j.Key("id").Uint(b.id);
    j.Key("name").String(b.name);
    j.Key("nodes").Uint(w.nodes_per_biz[b.id]);
    j.Key("days").BeginArray();
    for (size_t d = 0; d < b.days.size() && d < days; ++d) {
      const BizStatsDay& day = b.days[d];
      j.BeginObject();
      j.Key("date").String(DayText(day.day)).Key("requests").Uint(day.requests).Key("allowed").Uint(day.allowed);
      j.Key("denied").Uint(day.denied).Key("new_keys").Uint(day.new_keys);
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
  }
  j.EndArray();
  j.EndObject();
  std::printf("%s\n", j.str().c_str());
}

void PrintHuman(const Session& s, const StoreStats& st, const Walk& w, const std::vector<BizStats>& bizzes,
                uint32_t days) {
  const StoreGeometry& g = st.geometry;
  std::printf("store %s\n", s.cfg.store_dir.c_str());
  Table t;
  t.Row({"geometry", std::to_string(g.files) + " files x " + Grouped(g.keynodes) + " key-nodes x " +
                         std::to_string(g.chain) + " slots"});
  if (const uint32_t format = FormatOf(s.cfg.store_dir); format != 0)
    t.Row({"format", std::to_string(format) + (format == kStoreFormatVersion
                                                   ? std::string(" (placement keyed)")
                                                   : std::string(" (placement unkeyed: frsctl upgrade, frsd "
                                                                 "stopped, makes it " +
                                                                 std::to_string(kStoreFormatVersion) + ")"))});
  // MiB with one decimal: 1.5 MiB read "1", and a small store "0".
  char mapped[32];
  std::snprintf(mapped, sizeof mapped, "%.1f", static_cast<double>(st.bytes_mapped) / (1 << 20));
  t.Row({"slots", Grouped(st.slots) + " (" + mapped + " MiB mapped)"});
  t.Row({"nodes used",
         Grouped(st.total.nodes_used) + ", " + Grouped(w.in_alternate) + " of them in their alternate key-node"});
  t.Row({"slots used", Grouped(st.total.slots_used) + " (" + Percent(st.total.slots_used, st.slots) + " occupancy)"});
  // What sizing needs: slots used counts expired nodes until a new key
  // reuses one, so a store of short windows reads full while it is not.
  const uint64_t live_slots = st.total.slots_used > w.stale_slots ? st.total.slots_used - w.stale_slots : 0;
  t.Row({"live slots", Grouped(live_slots) + " (" + Percent(live_slots, st.slots) + "); " + Grouped(w.stale_slots) +
                           " more held by " + Grouped(w.stale_nodes) +
                           " stale node(s), which new keys take first (expired, or of a biz the map no longer has)"});
  t.Row({"evictions", Grouped(st.total.evictions_stale) + " stale, " + Grouped(st.total.evictions_live) + " live" +
                          (st.total.evictions_live ? " (live evictions reset limits: grow the store)" : "")});
  t.Row({"cuckoo moves", Grouped(st.total.cuckoo_moves)});
  t.Row({"lock recoveries", Grouped(st.total.lock_recoveries)});
  // A count of meetings (each read that found a damaged node adds one), not
  // of nodes damaged now: after a repair it stays, and says so.
  t.Row({"damaged nodes met", Grouped(st.total.damaged_nodes) +
                                  (st.total.damaged_nodes ? " (reads that found one, since the store was made: "
                                                            "frsctl verify says which are damaged now)"
                                                          : "")});
  t.Print(stdout);

  std::printf("\nper file\n");
  Table pf({"file", "nodes", "slots used", "occupancy", "stale evictions", "live evictions", "created"});
  pf.AlignRight({0, 1, 2, 3, 4, 5});
  const uint64_t file_slots = uint64_t{g.keynodes} * g.chain;
  const int64_t now = s.NowMs();
  for (size_t i = 0; i < st.per_file.size(); ++i) {
    const FileStats& f = st.per_file[i];
    pf.Row({std::to_string(i), Grouped(f.nodes_used), Grouped(f.slots_used), Percent(f.slots_used, file_slots),
            Grouped(f.evictions_stale), Grouped(f.evictions_live),
            When(static_cast<int64_t>(f.created_unix) * 1000, now)});
  }
  pf.Print(stdout, 2);

  std::printf("\nchain length (occupied slots per key-node)\n");
  Table h({"slots", "key-nodes", "share", ""});
  h.AlignRight({0, 1, 2});
  const uint64_t total_keynodes = uint64_t{g.files} * g.keynodes;
  for (size_t k = 0; k < w.histogram.size(); ++k) {
    uint64_t n = w.histogram[k];
    size_t bar = total_keynodes ? static_cast<size_t>((n * 40 + total_keynodes - 1) / total_keynodes) : 0;
    h.Row({std::to_string(k), Grouped(n), Percent(n, total_keynodes), std::string(bar, '#')});
  }
  h.Print(stdout, 2);

  std::printf("\nper biz (daily counters, newest first)\n");
  Table b({"biz", "id", "nodes", "day", "requests", "allowed", "denied", "new keys"});
  b.AlignRight({1, 2, 4, 5, 6, 7});
  for (const BizStats& biz : bizzes) {
    if (biz.days.empty()) {
      b.Row({biz.name, std::to_string(biz.id), Grouped(w.nodes_per_biz[biz.id]), "-", "0", "0", "0", "0"});
      continue;
    }
    for (size_t d = 0; d < biz.days.size() && d < days; ++d) {
      const BizStatsDay& day = biz.days[d];
      bool first = d == 0;
      b.Row({first ? biz.name : "", first ? std::to_string(biz.id) : "", first ? Grouped(w.nodes_per_biz[biz.id]) : "",
             DayText(day.day), Grouped(day.requests), Grouped(day.allowed), Grouped(day.denied),
             Grouped(day.new_keys)});
    }
  }
  // Nodes no biz of this map names (a biz taken out of map.xml: stale, for
  // eviction, `dump --biz ID` lists them) and handoff and replica receipts:
  // with them the column adds up to "nodes used".
  std::vector<bool> named(65536, false);
  for (const BizStats& biz : bizzes) named[biz.id] = true;
  for (uint32_t id = 0; id < 65536; ++id) {
    if (named[id] || w.nodes_per_biz[id] == 0) continue;
    b.Row({id == kReceiptBiz ? "(receipts)" : "(not in map.xml)", std::to_string(id), Grouped(w.nodes_per_biz[id]), "-",
           "", "", "", ""});
  }
  b.Print(stdout, 2);
}

}  // namespace

Result<int> RunStat(Session& s, const StatArgs& a) {
  StoreStats st = s.store->Stats();
  Result<Walk> w = WalkChains(s);
  if (!w.ok()) return w.status();
  std::vector<BizStats> bizzes = s.engine->DailyStats();
  std::sort(bizzes.begin(), bizzes.end(), [](const BizStats& x, const BizStats& y) { return x.id < y.id; });
  if (s.json) {
    PrintJson(s, st, w.value(), bizzes, a.days);
  } else {
    PrintHuman(s, st, w.value(), bizzes, a.days);
  }
  return kExitOk;
}

}  // namespace frs::ctl
