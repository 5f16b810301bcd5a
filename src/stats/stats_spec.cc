#include "stats/stats_spec.h"

namespace frs::stats {

std::string StatsSpec::DirName(const std::vector<std::string>& fields) const {
  std::string name;
  for (uint8_t f : by) name += (name.empty() ? "" : ",") + fields[f];
  for (size_t i = 0; i < distinct.size(); ++i) name += (i == 0 ? "+" : ",") + fields[distinct[i]];
  return name;
}

}  // namespace frs::stats
