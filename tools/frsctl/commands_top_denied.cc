// frsctl top --denied [BIZ] [N]: the keys denied most in the last minutes,
// with their text, from the store's table of recent denials (denials.frs,
// AdminEngine::TopDenied), which every process deciding on this store
// writes: the answer to "who is being denied right now?", also for a biz
// whose nodes do not keep their keys.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>

#include "commands.h"
#include "format.h"
#include "frs/store_dir.h"
#include "json_out.h"

namespace frs::ctl {

Result<int> RunTopDenied(Session& s, const TopArgs& a) {
  uint16_t biz = 0;
  if (!a.biz.empty()) {
    Result<uint16_t> id = ResolveBizArg(s, a.biz);
    if (!id.ok()) return id.status();
    biz = id.value();
  }
  Result<DeniedKeys> denied = s.engine->TopDenied(a.minutes, biz, a.n);
  if (!denied.ok()) return denied.status();
  // No table reads as no denial: said, so that "no key was denied" is not
  // taken for the store's answer when frsd kept none.
  const std::string table = store_dir::In(s.cfg.store_dir, store_dir::kRecentDenials);
  if (::access(table.c_str(), F_OK) != 0 && errno == ENOENT)
    std::fprintf(stderr,
                 "frsctl: warning: %s does not exist: frsd keeps no recent denials on this store, so none shows here "
                 "(its log says why, `recent denials are not kept ...`: a disk too full for the table's 3 MB when "
                 "frsd started; or no frsd has served this store yet (`frsctl init` makes no table); or a store older "
                 "than the table)\n",
                 table.c_str());
  const std::vector<DeniedKey>& rows = denied->keys;
  std::map<uint16_t, std::string> names;
  for (const BizInfo& b : s.engine->Bizzes()) names[b.id] = b.name;
  auto name_of = [&](uint16_t id) {
    auto it = names.find(id);
    return it == names.end() ? std::to_string(id) : it->second;
  };
  if (s.json) {
    for (const auto& r : rows) {
      JsonOut j;
      j.BeginObject().Key("biz").String(name_of(r.biz_id)).Key("key").String(r.key).Key("denied").Uint(r.denied);
      j.Key("last_minute").String(LocalTime(r.last_minute * 60000)).EndObject();
      std::printf("%s\n", j.str().c_str());
    }
    return kExitOk;
  }
  if (rows.empty()) {
    std::printf("no key was denied in the last %u minute(s)%s\n", a.minutes,
                a.biz.empty() ? "" : (" in biz " + name_of(biz)).c_str());
    return kExitOk;
  }
  std::printf("denied in the last %u minute(s), most first\n", a.minutes);
  // The biz column as wide as its longest name (a map's names may be
  // longer than 16): the columns after it stay aligned.
  int biz_width = 16;
  for (const auto& r : rows) biz_width = std::max(biz_width, static_cast<int>(name_of(r.biz_id).size()));
  // "YYYY-MM-DD HH:MM:SS UTC": 23 columns (LocalTime).
  std::printf("%-*s %10s  %-23s %s\n", biz_width, "biz", "denied", "last (minute)", "key");
  for (const auto& r : rows)
    std::printf("%-*s %10llu  %-23s %s\n", biz_width, name_of(r.biz_id).c_str(),
                static_cast<unsigned long long>(r.denied), LocalTime(r.last_minute * 60000).c_str(),
                Printable(r.key).c_str());
  if (uint64_t dropped = denied->dropped)
    std::printf("(%llu denial(s) since the table was made found no room: the table keeps the keys it has)\n",
                static_cast<unsigned long long>(dropped));
  return kExitOk;
}

}  // namespace frs::ctl
