#include "limit/rule_history.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace frs::limit {

std::vector<RuleHistory::Entry> RuleHistory::ReadFile() const {
  std::vector<Entry> out;
  if (dir_.empty()) return out;
  std::ifstream in(dir_ + "/rules.history");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    Entry e;
    uint32_t biz = 0;
    if (!(ls >> biz >> e.name >> e.identity >> e.max) || biz == 0 || biz > 65535 || e.max <= 0 ||
        e.name.size() >= kRuleNameBytes)
      continue;  // a damaged line forgets one rule's past, nothing more
    e.biz = static_cast<uint16_t>(biz);
    out.push_back(std::move(e));
  }
  return out;
}

void RuleHistory::WriteFile(const std::vector<Entry>& entries) const {
  if (dir_.empty() || read_only_) return;
  const std::string path = dir_ + "/rules.history";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "# biz-id rule-name identity(algo<<25|interval) max: written by frsd, read at reload (docs/rules.md)\n";
    for (const Entry& e : entries) out << e.biz << ' ' << e.name << ' ' << e.identity << ' ' << e.max << '\n';
    if (!out.good()) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

void RuleHistory::Apply(MapConfig* config) {
  MutexLock lock(&mu_);
  // What another process (an earlier frsd, another worker) wrote, then ours.
  std::vector<Entry> merged = ReadFile();
  for (const Entry& e : entries_)
    if (std::find(merged.begin(), merged.end(), e) == merged.end()) merged.push_back(e);
  const std::vector<Entry> before = merged;
  for (const BizConfig& biz : config->bizzes) {
    for (uint32_t i = 0; i < biz.nrules; ++i) {
      const RuleSpec& spec = biz.rules[i];
      Entry now{biz.id, spec.name, TagIdentity(spec.tag), spec.max};
      auto same_identity = [&](const Entry& e) {
        return e.biz == now.biz && e.name == now.name && e.identity == now.identity;
      };
      auto it = std::find_if(merged.begin(), merged.end(), same_identity);
      if (it != merged.end() && *it == now &&
          std::none_of(it + 1, merged.end(), [&](const Entry& e) { return e.biz == now.biz && e.name == now.name; }))
        continue;  // already the newest entry of this name
      merged.erase(std::remove_if(merged.begin(), merged.end(), same_identity), merged.end());
      merged.push_back(now);
      // At most kKept identities per name: drop the oldest.
      size_t of_name = 0;
      for (const Entry& e : merged) of_name += e.biz == now.biz && e.name == now.name;
      for (auto e = merged.begin(); of_name > kKept && e != merged.end();) {
        if (e->biz == now.biz && e->name == now.name) {
          e = merged.erase(e);
          --of_name;
        } else {
          ++e;
        }
      }
    }
  }
  if (merged != before) WriteFile(merged);
  entries_ = merged;
  // Each rule's past: the other identities of its name and algorithm, newest
  // first. Fixed and calendar windows count alike: either takes the other's.
  for (BizConfig& biz : config->bizzes) {
    for (uint32_t i = 0; i < biz.nrules; ++i) {
      RuleSpec& spec = biz.rules[i];
      spec.npast = 0;
      for (auto e = entries_.rbegin(); e != entries_.rend() && spec.npast < kRulePasts; ++e) {
        if (e->biz != biz.id || e->name != spec.name || e->identity == TagIdentity(spec.tag)) continue;
        const bool windows = IsWindowAlgo(TagAlgo(e->identity)) && IsWindowAlgo(spec.algo);
        if (TagAlgo(e->identity) != spec.algo && !windows) continue;
        spec.past[spec.npast++] = RulePast{e->identity, e->max};
      }
    }
  }
}

}  // namespace frs::limit
