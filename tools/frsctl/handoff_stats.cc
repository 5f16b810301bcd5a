// frsctl handoff, for a shard leaving the ring: its statistics by key field
// go to the shards that stay, so the cluster's figures (frsctl stat
// --cluster --by) keep what it counted.
//
// Each day file (stats/<biz id>/<table>/<day>.frs) goes whole, as GET /stats
// answers it with its distinct sketches, to the shard that owns the route
// "stats/<biz>/<table>/<day>", by POST /stats with a receipt naming this
// shard and the file: the receiver merges it (counts add, sketches merge)
// and ignores a receipt it already took. The file is deleted here once the
// receiver answered, so a re-run after an interruption sends what is left,
// and a file sent whose answer was lost is sent again and taken once. A day
// the receiver does not keep (older than its `days`) is skipped, said, and
// left here: it would be refused at every run.
#include <algorithm>
#include <filesystem>
#include <span>

#include "base/percent_encode.h"
#include "client/http_client.h"
#include "commands.h"
#include "format.h"
#include "handoff_stats.h"
#include "os/store_dir.h"
#include "server/group_stats_xml.h"
#include "stats/field_stats.h"
#include "stats/group_table.h"

namespace frs::ctl {
namespace {

// The msg of an error answer (<response code="400" msg="..."/>), or the body.
std::string ErrorMessageOf(const std::string& body) {
  const size_t at = body.find("msg=\"");
  if (at == std::string::npos) return body;
  const size_t end = body.find('"', at + 5);
  return body.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
}

}  // namespace

Result<uint64_t> HandOffStats(Session& s, const Ring& ring, const std::string& token, std::vector<Status>* failed,
                              std::vector<std::pair<std::string, std::string>>* skipped) {
  namespace fs = std::filesystem;
  const fs::path root = os::store_dir::In(s.cfg.store_dir, os::store_dir::kFieldStats);
  std::error_code ec;
  if (!fs::exists(root, ec)) return uint64_t{0};
  uint64_t sent = 0;
  for (const auto& biz_dir : fs::directory_iterator(root, ec)) {
    uint32_t biz_id = 0;
    try {
      biz_id = static_cast<uint32_t>(std::stoul(biz_dir.path().filename().string()));
    } catch (...) {
      continue;
    }
    for (const auto& table_dir : fs::directory_iterator(biz_dir.path(), ec)) {
      const std::string table = table_dir.path().filename().string();
      const size_t plus = table.find('+');
      const std::string by = table.substr(0, plus);
      std::vector<std::string> distinct;  // the dir name's "+user,ip"
      for (size_t start = plus; start != std::string::npos && start + 1 < table.size();) {
        const size_t comma = table.find(',', start + 1);
        distinct.push_back(table.substr(start + 1, comma == std::string::npos ? std::string::npos : comma - start - 1));
        start = comma;
      }
      for (const auto& file : fs::directory_iterator(table_dir.path(), ec)) {
        const std::string name = file.path().filename().string();
        uint32_t day = 0;
        // A day's own file, or one this shard received from another.
        if (os::store_dir::KindOfDayFile(name) == os::store_dir::DayFile::kNone ||
            !ParseDayText(name.substr(0, 10), &day))
          continue;
        // The file itself, whatever the map says now: a table the map no
        // longer keeps (a changed distinct) is handed over as it was counted.
        auto day_table = stats::GroupTable::Open(file.path().string(),
                                                 stats::GroupTableShape{1, static_cast<uint32_t>(distinct.size())},
                                                 stats::GroupTable::Mode::kRead);
        if (!day_table.ok()) {
          failed->push_back(Status::Unavailable(file.path().string() + " stays: " + day_table.status().message()));
          continue;
        }
        GroupStatsQuery q;
        q.sketches = true;
        const std::shared_ptr<const stats::GroupTable> one(std::move(day_table.value()));
        const GroupStats all = stats::ReadGroupStats(std::span(&one, 1), q);
        const std::string route = "stats/" + std::to_string(biz_id) + "/" + table + "/" + name.substr(0, 10);
        const std::string& dest = ring.shards()[ring.OwnerOfHash(Ring::HashRoute(route))].name;
        // In bodies the receiver takes (its <limits body_bytes>, taken to be
        // this shard's): a group's counts and each of its sketches may go in
        // pieces of their own (a dense sketch is ~32 KB of text), and each
        // body under a receipt of its own, so a re-run takes each once.
        const size_t budget = std::max<size_t>(s.cfg.max_body_bytes, 4096) - 1024;
        std::vector<GroupStats> bodies;
        auto fresh = [&]() {
          GroupStats b;
          b.biz = std::to_string(biz_id);
          b.by = by;
          b.day = day;
          b.distinct_fields = distinct;
          return b;
        };
        bodies.push_back(fresh());
        bodies.back().field_errors = all.field_errors;
        size_t used = 512;
        auto add = [&](GroupStat piece) {
          size_t bytes = 160 + piece.value.size() * 6;
          for (const std::string& sk : piece.sketches) bytes += sk.size() + 32;
          if (used + bytes > budget && !bodies.back().rows.empty()) {
            bodies.push_back(fresh());
            used = 512;
          }
          used += bytes;
          bodies.back().rows.push_back(std::move(piece));
        };
        for (const GroupStat& g : all.rows) {
          size_t sketch_bytes = 0;
          for (const std::string& sk : g.sketches) sketch_bytes += sk.size();
          if (sketch_bytes < budget / 4) {
            add(g);
            continue;
          }
          GroupStat counts = g;
          counts.sketches.assign(g.sketches.size(), std::string());
          add(counts);
          for (size_t d = 0; d < g.sketches.size(); ++d) {
            GroupStat piece;
            piece.value = g.value;
            piece.sketches.assign(g.sketches.size(), std::string());
            piece.sketches[d] = g.sketches[d];
            add(std::move(piece));
          }
        }
        bool taken = true;
        for (size_t k = 0; k < bodies.size() && taken; ++k) {
          std::string body;
          server::AppendGroupStats(bodies[k], &body);
          const std::string receipt = s.cfg.cluster_self + "/" + route + "/" + name + "#" + std::to_string(k);
          client::HttpClient http(dest, 10000);
          auto resp = http.Post("/stats?receipt=" + PercentEncoded(receipt, kPercentQueryValue) +
                                    "&token=" + PercentEncoded(token, kPercentQueryValue),
                                body, "application/xml");
          // A day the receiver does not keep is refused whole, at the first
          // body, before anything is merged: it would never be taken, so the
          // file stays and the run goes on.
          if (resp.ok() && resp->status == 400 && resp->body.find(stats::kDayNotKept) != std::string::npos) {
            skipped->emplace_back(file.path().string(), dest + " answered " + ErrorMessageOf(resp->body));
            taken = false;
            break;
          }
          if (!resp.ok() || resp->status != 200) {
            failed->push_back(
                Status::Unavailable(file.path().string() + " stays: " + dest + " " +
                                    (resp.ok() ? "answered " + std::to_string(resp->status) + ": " + resp->body
                                               : resp.status().message())));
            taken = false;
          }
        }
        if (!taken) continue;
        fs::remove(file.path(), ec);
        ++sent;
      }
    }
  }
  return sent;
}

}  // namespace frs::ctl
