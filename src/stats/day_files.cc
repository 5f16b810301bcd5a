// stats/day_files.cc: a store directory's day files of statistics by key
// field, for a handoff (stats/day_files.h).
#include "stats/day_files.h"

#include <filesystem>
#include <memory>
#include <span>

#include "os/store_dir.h"
#include "stats/field_stats.h"
#include "stats/group_table.h"

namespace frs::stats {

Result<std::vector<StatsDayFile>> ListDayFiles(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path root = os::store_dir::In(dir, os::store_dir::kFieldStats);
  std::vector<StatsDayFile> out;
  std::error_code ec;
  // Nothing through a link (os/store_dir.h): frsd counts nothing below one,
  // and a handoff that sent and then deleted what it leads to took files
  // that are not this store's (found from outside).
  if (!fs::exists(root, ec) || fs::is_symlink(root, ec)) return out;
  for (const auto& biz_dir : fs::directory_iterator(root, ec)) {
    if (biz_dir.is_symlink(ec)) continue;
    uint32_t biz_id = 0;
    try {
      biz_id = static_cast<uint32_t>(std::stoul(biz_dir.path().filename().string()));
    } catch (...) {
      continue;
    }
    if (biz_id > UINT16_MAX) continue;
    for (const auto& table_dir : fs::directory_iterator(biz_dir.path(), ec)) {
      if (table_dir.is_symlink(ec)) continue;
      const std::string table = table_dir.path().filename().string();
      const size_t plus = table.find('+');
      StatsDayFile f;
      f.biz_id = static_cast<uint16_t>(biz_id);
      f.table = table;
      f.by = table.substr(0, plus);
      // The folder name's "+user,ip".
      for (size_t start = plus; start != std::string::npos && start + 1 < table.size();) {
        const size_t comma = table.find(',', start + 1);
        f.distinct_fields.push_back(
            table.substr(start + 1, comma == std::string::npos ? std::string::npos : comma - start - 1));
        start = comma;
      }
      for (const auto& file : fs::directory_iterator(table_dir.path(), ec)) {
        if (file.is_symlink(ec)) continue;
        const std::string name = file.path().filename().string();
        // A day's own file, or one this shard received from another.
        if (os::store_dir::KindOfDayFile(name) == os::store_dir::DayFile::kNone ||
            !ParseDayText(name.substr(0, 10), &f.day))
          continue;
        f.path = file.path().string();
        out.push_back(f);
      }
    }
  }
  return out;
}

Result<GroupStats> ReadDayFile(const StatsDayFile& file) {
  auto day_table = GroupTable::Open(file.path, GroupTableShape{1, static_cast<uint32_t>(file.distinct_fields.size())},
                                    GroupTable::Mode::kRead);
  if (!day_table.ok()) return day_table.status();
  GroupStatsQuery q;
  q.sketches = true;
  const std::shared_ptr<const GroupTable> one(std::move(day_table.value()));
  GroupStats all = ReadGroupStats(std::span(&one, 1), q);
  all.biz_id = file.biz_id;
  all.biz = std::to_string(file.biz_id);
  all.by = file.by;
  all.day = file.day;
  all.distinct_fields = file.distinct_fields;
  return all;
}

}  // namespace frs::stats
