#include "limit/rule_history.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "os/output_file.h"
#include "os/path_access.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/whole_file.h"

namespace frs::limit {

bool RuleHistory::ParseLine(const std::string& line, Entry* e) { return LineProblem(line, e).empty(); }

std::string RuleHistory::LineProblem(const std::string& line, Entry* e) {
  std::istringstream ls(line);
  uint32_t biz = 0;
  std::string rest;
  if (!(ls >> biz >> e->name >> e->identity >> e->max) || (ls >> rest))
    return "is not \"biz-id rule-name identity max\"";
  if (biz == 0 || biz > 65535) return "names biz id " + std::to_string(biz) + ", out of range (1..65535)";
  if (e->max <= 0) return "gives max " + std::to_string(e->max) + ", not above 0";
  if (e->name.size() >= kRuleNameBytes)
    return "names a rule of " + std::to_string(e->name.size()) + " bytes, longer than any (" +
           std::to_string(kRuleNameBytes - 1) + " at most)";
  e->biz = static_cast<uint16_t>(biz);
  return "";
}

std::vector<RuleHistory::Entry> RuleHistory::ReadFile(bool* damaged) const {
  std::vector<Entry> out;
  *damaged = false;
  if (dir_.empty()) return out;
  // Read as a configuration file is: a FIFO in its place is refused, never
  // waited on (a SIGHUP's master, a respawned worker and frsctl waited for
  // a writer for ever), and so is a device (/dev/zero read without end).
  // Unreadable, it is left as it is: never rewritten over (Apply), and
  // frsd's start, `frsd -t` and frsctl verify say what it is (Check).
  Result<std::string> text = os::ReadTextFile(os::store_dir::In(dir_, os::store_dir::kRuleHistory), kMaxFileBytes);
  if (!text.ok()) {
    *damaged = !text.status().IsNotFound();
    return out;
  }
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    Entry e;
    if (!ParseLine(line, &e)) {
      // A damaged line forgets one rule's past, nothing more; a comment is none.
      *damaged = *damaged || !(line.empty() || line[0] == '#');
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status RuleHistory::Readable(const std::string& dir) {
  const std::string path = os::store_dir::In(dir, os::store_dir::kRuleHistory);
  // A directory (or a FIFO) in its place reads as an empty file, and no
  // write replaces it: every interval changed since would start its keys'
  // counts afresh at the next start, unsaid.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return Status::IOError(os::NotRegularWords(path, st.st_mode) +
                           ": frsd could not keep in it what each rule was (a changed interval would start its "
                           "keys' counts afresh)");
  if (::access(path.c_str(), R_OK) == 0 || ::access(path.c_str(), F_OK) != 0) return Status::OK();
  if (::access(path.c_str(), R_OK) != 0 && (errno == EACCES || errno == EPERM))
    return Status::IOError(os::PermissionWords(path));
  return Status::IOError("cannot read " + path);
}

Status RuleHistory::Check(const std::string& dir) {
  if (Status s = Readable(dir); !s.ok()) return s;
  const std::string path = os::store_dir::In(dir, os::store_dir::kRuleHistory);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0) return Status::OK();
    return Status::IOError("cannot read " + path);
  }
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    Entry e;
    if (line.empty() || line[0] == '#') continue;
    if (const std::string problem = LineProblem(line, &e); !problem.empty())
      return Status::Corruption(path + ": line " + std::to_string(n) + " " + problem + " (the file is damaged)");
  }
  return Status::OK();
}

void RuleHistory::WriteFile(const std::vector<Entry>& entries) const {
  if (dir_.empty() || read_only_) return;
  std::ostringstream out;
  out << "# biz-id rule-name identity(algo<<25|interval) max: written by frsd, read at reload (docs/rules.md)\n";
  for (const Entry& e : entries) out << e.biz << ' ' << e.name << ' ' << e.identity << ' ' << e.max << '\n';
  // Not synced: a history lost to a power cut only starts the changed rules'
  // counts fresh at the next reload. Not written (a full disk): the same,
  // and said.
  // The service's alone, as the store files are (frsctl import made it
  // readable by all under a umask of 022).
  const std::string path = os::store_dir::In(dir_, os::store_dir::kRuleHistory);
  auto written = os::WriteFileWhole(path, out.str(), {.mode = 0600});
  // Said (an outside run found a write refused for RLIMIT_FSIZE unsaid, and
  // a restart after it started a changed rule's counts afresh).
  if (!written.ok() && on_problem_)
    on_problem_(written.status().message() + " (" + path +
                " was not rewritten: a rule whose interval changes at a later reload or start will start its keys' "
                "counts afresh unless it can be written by then)");
}

void RuleHistory::Apply(MapConfig* config) {
  MutexLock lock(&mu_);
  // What another process (an earlier frsd, another worker) wrote, then ours,
  // each rule name's identities in a group of their own, oldest first: only
  // the order within a name means anything, and a map of 65,535 bizzes
  // searched the whole list per rule (quadratic: a minute's reload).
  std::vector<std::vector<Entry>> groups;
  std::unordered_map<std::string, size_t> group_of;
  auto group = [&](uint16_t biz, const std::string& name) -> std::vector<Entry>& {
    std::string k(reinterpret_cast<const char*>(&biz), sizeof biz);
    k += name;
    auto [it, added] = group_of.try_emplace(std::move(k), groups.size());
    if (added) groups.emplace_back();
    return groups[it->second];
  };
  bool damaged = false;
  for (Entry& e : ReadFile(&damaged)) group(e.biz, e.name).push_back(std::move(e));
  for (const Entry& e : entries_) {
    std::vector<Entry>& g = group(e.biz, e.name);
    if (std::find(g.begin(), g.end(), e) == g.end()) g.push_back(e);
  }
  bool changed = false;
  for (const BizConfig& biz : config->bizzes) {
    for (uint32_t i = 0; i < biz.nrules; ++i) {
      const RuleSpec& spec = biz.rules[i];
      Entry now{biz.id, spec.name, TagIdentity(spec.tag), spec.max};
      std::vector<Entry>& g = group(now.biz, now.name);
      auto same_identity = [&](const Entry& e) { return e.identity == now.identity; };
      auto it = std::find_if(g.begin(), g.end(), same_identity);
      if (it != g.end() && *it == now && it + 1 == g.end()) continue;  // already the newest entry of this name
      g.erase(std::remove_if(g.begin(), g.end(), same_identity), g.end());
      g.push_back(now);
      // At most kKept identities per name: drop the oldest.
      if (g.size() > kKept) g.erase(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(g.size() - kKept));
      changed = true;
    }
  }
  std::vector<Entry> merged;
  std::vector<std::pair<size_t, size_t>> spans;  // each group's (first, count) in merged
  spans.reserve(groups.size());
  for (std::vector<Entry>& g : groups) {
    spans.emplace_back(merged.size(), g.size());
    for (Entry& e : g) merged.push_back(std::move(e));
  }
  // A damaged file is left as it is: frsd's start moves it aside, saying so,
  // and frsctl verify reports it. Rewritten here (by any read of frsctl, or
  // a library's engine), its damage went unsaid and the pasts it still held
  // in its unread lines were gone for good.
  if (changed && !damaged) WriteFile(merged);
  entries_ = std::move(merged);
  // Each rule's past: the other identities of its name and algorithm, newest
  // first. Fixed and calendar windows count alike: either takes the other's.
  for (BizConfig& biz : config->bizzes) {
    for (uint32_t i = 0; i < biz.nrules; ++i) {
      RuleSpec& spec = biz.rules[i];
      spec.npast = 0;
      std::string k(reinterpret_cast<const char*>(&biz.id), sizeof biz.id);
      k += spec.name;
      const auto found = group_of.find(k);
      if (found == group_of.end()) continue;
      const auto [first, count] = spans[found->second];
      for (size_t j = first + count; j-- > first && spec.npast < kRulePasts;) {
        const Entry& e = entries_[j];
        if (e.identity == TagIdentity(spec.tag)) continue;
        const bool windows = IsWindowAlgo(TagAlgo(e.identity)) && IsWindowAlgo(spec.algo);
        if (TagAlgo(e.identity) != spec.algo && !windows) continue;
        spec.past[spec.npast++] = RulePast{e.identity, e.max};
      }
    }
  }
}

}  // namespace frs::limit
