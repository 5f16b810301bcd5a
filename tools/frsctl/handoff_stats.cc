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

#include "commands.h"
#include "format.h"
#include "frs/group_stats.h"
#include "frs/http_client.h"
#include "frs/percent_encode.h"
#include "frs/store_dir.h"
#include "handoff_stats.h"

namespace frs::ctl {
namespace {

// The msg of an error answer (<response code="400" msg="..."/>), or the body.
std::string ErrorMessageOf(const std::string& body) {
  const size_t at = body.find("msg=\"");
  if (at == std::string::npos) return body;
  const size_t end = body.find('"', at + 5);
  return body.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
}

// The symbolic links under stats/ (at it, a biz's or a table's folder, or a
// day file): the listing passes over them (frsd counts nothing through
// one, so what they lead to is not this store's), and the run says so.
void SkippedLinks(const std::string& store_dir, std::vector<std::pair<std::string, std::string>>* skipped) {
  namespace fs = std::filesystem;
  const std::string why = "a symbolic link: not this store's statistics (frsd counts nothing through one); left here";
  std::error_code ec;
  const fs::path root = frs::store_dir::In(store_dir, frs::store_dir::kFieldStats);
  if (fs::is_symlink(root, ec)) {
    skipped->emplace_back(root.string(), why);
    return;
  }
  for (const auto& biz : fs::directory_iterator(root, ec)) {
    if (biz.is_symlink(ec)) {
      skipped->emplace_back(biz.path().string(), why);
      continue;
    }
    for (const auto& table : fs::directory_iterator(biz.path(), ec)) {
      if (table.is_symlink(ec)) {
        skipped->emplace_back(table.path().string(), why);
        continue;
      }
      for (const auto& file : fs::directory_iterator(table.path(), ec))
        if (file.is_symlink(ec)) skipped->emplace_back(file.path().string(), why);
    }
  }
}

}  // namespace

Result<uint64_t> HandOffStats(Session& s, const Ring& ring, const std::string& token, std::vector<Status>* failed,
                              std::vector<std::pair<std::string, std::string>>* skipped) {
  namespace fs = std::filesystem;
  Result<std::vector<StatsDayFile>> files = s.engine->StatsDayFiles();
  if (!files.ok()) return files.status();
  SkippedLinks(s.cfg.store_dir, skipped);
  std::error_code ec;
  uint64_t sent = 0;
  for (const StatsDayFile& file : files.value()) {
    const std::string name = fs::path(file.path).filename().string();
    const std::string& table = file.table;
    const uint32_t biz_id = file.biz_id;
    const uint32_t day = file.day;
    // The file itself, whatever the map says now: a table the map no
    // longer keeps (a changed distinct) is handed over as it was counted.
    Result<GroupStats> read = s.engine->ExportStatsDay(file);
    if (!read.ok()) {
      failed->push_back(Status::Unavailable(file.path + " stays: " + read.status().message()));
      continue;
    }
    const GroupStats& all = read.value();
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
      b.by = file.by;
      b.day = day;
      b.distinct_fields = file.distinct_fields;
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
      AppendGroupStats(bodies[k], &body);
      const std::string receipt = s.cfg.cluster_self + "/" + route + "/" + name + "#" + std::to_string(k);
      HttpClient http(dest, 10000);
      http.SetBearer(token);
      auto resp = http.Post("/stats?receipt=" + PercentEncoded(receipt, kPercentQueryValue), body, "application/xml");
      // A day the receiver does not keep is refused whole, at the first
      // body, before anything is merged: it would never be taken, so the
      // file stays and the run goes on.
      if (resp.ok() && resp->status == 400 && resp->body.find(kStatsDayNotKept) != std::string::npos) {
        skipped->emplace_back(file.path, dest + " answered " + ErrorMessageOf(resp->body));
        taken = false;
        break;
      }
      if (!resp.ok() || resp->status != 200) {
        failed->push_back(
            Status::Unavailable(file.path + " stays: " + dest + " " +
                                (resp.ok() ? "answered " + std::to_string(resp->status) + ": " + resp->body
                                           : "cannot be reached: " + WithoutShardName(resp.status().message(), dest))));
        taken = false;
      }
    }
    if (!taken) continue;
    fs::remove(file.path, ec);
    ++sent;
  }
  return sent;
}

}  // namespace frs::ctl
