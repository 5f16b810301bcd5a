#include "limit/rule_history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "os/output_file.h"
#include "os/path_access.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/unique_fd.h"
#include "os/whole_file.h"

namespace frs::limit {

namespace {

// The digits at the front of `*v` as an unsigned value, consumed; false for
// none, or a value past `most`.
bool TakeUnsigned(std::string_view* v, uint64_t most, uint64_t* out) {
  const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), *out);
  if (ec != std::errc() || end == v->data() || !std::isdigit(static_cast<unsigned char>(v->front())) || *out > most)
    return false;
  v->remove_prefix(static_cast<size_t>(end - v->data()));
  return true;
}

bool TakeSpace(std::string_view* v) {
  if (v->empty() || v->front() != ' ') return false;
  v->remove_prefix(1);
  return true;
}

}  // namespace

bool RuleHistory::ParseLine(std::string_view line, Entry* e) {
  // The form frsd writes ("1 name 123 5", one space apart), read without a
  // stream (a history of 195,000 lines took 0.3 s a reload through one);
  // any other line is judged by LineProblem, as before.
  std::string_view v = line;
  uint64_t biz = 0, identity = 0, max = 0;
  if (TakeUnsigned(&v, 65535, &biz) && biz != 0 && TakeSpace(&v)) {
    const size_t name_end = v.find(' ');
    const std::string_view name = v.substr(0, name_end);
    if (name_end != std::string_view::npos && name_end != 0 && name.size() < kRuleNameBytes &&
        name.find_first_of("\t\r\v\f") == std::string_view::npos) {
      v.remove_prefix(name_end + 1);
      if (TakeUnsigned(&v, UINT32_MAX, &identity) && TakeSpace(&v) &&
          TakeUnsigned(&v, static_cast<uint64_t>(INT64_MAX), &max) && max > 0 && v.empty()) {
        e->biz = static_cast<uint16_t>(biz);
        e->name.assign(name);
        e->identity = static_cast<uint32_t>(identity);
        e->max = static_cast<int64_t>(max);
        return true;
      }
    }
  }
  return LineProblem(std::string(line), e).empty();
}

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

std::vector<RuleHistory::Entry> RuleHistory::ReadFile(bool* damaged, bool* unread) const {
  std::vector<Entry> out;
  *damaged = false;
  if (unread) *unread = false;
  if (dir_.empty()) return out;
  // Read as a configuration file is: a FIFO in its place is refused, never
  // waited on (a SIGHUP's master, a respawned worker and frsctl waited for
  // a writer for ever), and so is a device (/dev/zero read without end).
  // Unreadable, it is left as it is: never rewritten over (Apply), and
  // frsd's start, `frsd -t` and frsctl verify say what it is (Check).
  Result<std::string> text = os::ReadTextFile(os::store_dir::In(dir_, os::store_dir::kRuleHistory), kMaxFileBytes);
  if (!text.ok()) {
    *damaged = !text.status().IsNotFound();
    if (unread) *unread = *damaged;
    return out;
  }
  const std::string_view all = *text;
  for (size_t at = 0; at < all.size();) {
    const size_t nl = all.find('\n', at);
    const std::string_view line = all.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? all.size() : nl + 1;
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

std::optional<RuleHistory::Stamp> RuleHistory::WriteFile() const {
  if (dir_.empty() || read_only_) return std::nullopt;
  std::string text =
      "# biz-id rule-name identity(algo<<25|interval) max: written by frsd, read at reload "
      "(docs/rules.md)\n";
  auto append = [&text](uint64_t n) {
    char buf[24];
    text.append(buf, static_cast<size_t>(std::to_chars(buf, buf + sizeof buf, n).ptr - buf));
  };
  for (const std::vector<Entry>& g : groups_)
    for (const Entry& e : g) {
      append(e.biz);
      text += ' ';
      text += e.name;
      text += ' ';
      append(e.identity);
      text += ' ';
      append(static_cast<uint64_t>(e.max));
      text += '\n';
    }
  // Not synced: a history lost to a power cut only starts the changed rules'
  // counts fresh at the next reload. Not written (a full disk): the same,
  // and said.
  // The service's alone, as the store files are (frsctl import made it
  // readable by all under a umask of 022).
  // Stamped before it takes the name (a rename keeps the inode, size and
  // mtime): another process's file renamed over it after that has another
  // stamp, and is read at the next Apply.
  Stamp made;
  const std::string path = os::store_dir::In(dir_, os::store_dir::kRuleHistory);
  auto written = os::WriteFileWhole(path, {}, [&](const std::string& tmp) -> Status {
    os::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid()) return Status::FromErrno("cannot write " + tmp, errno);
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(fd.get(), text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("cannot write " + tmp, errno);
      if (n == 0) return Status::IOError("cannot write " + tmp + ": the file system took no more");
      at += static_cast<size_t>(n);
    }
    struct stat sb {};
    if (::fstat(fd.get(), &sb) != 0) return Status::FromErrno("cannot write " + tmp, errno);
    made = StampOf(sb);
    // A delayed write error (NFS, a quota) is said by close.
    if (::close(fd.release()) != 0) return Status::FromErrno("cannot write " + tmp, errno);
    return Status::OK();
  });
  // Said (an outside run found a write refused for RLIMIT_FSIZE unsaid, and
  // a restart after it started a changed rule's counts afresh).
  if (!written.ok() && on_problem_)
    on_problem_(written.status().message() + " (" + path +
                " was not rewritten: a rule whose interval changes at a later reload or start will start its keys' "
                "counts afresh unless it can be written by then)");
  if (!written.ok()) return std::nullopt;
  return made;
}

RuleHistory::Stamp RuleHistory::StampOf(const struct stat& sb) {
  Stamp st;
  st.there = true;
  st.dev = sb.st_dev;
  st.ino = sb.st_ino;
  st.size = static_cast<uint64_t>(sb.st_size);
  st.mtime_ns = int64_t{sb.st_mtim.tv_sec} * 1000000000 + sb.st_mtim.tv_nsec;
  return st;
}

RuleHistory::Stamp RuleHistory::StampNow() const {
  struct stat sb {};
  if (dir_.empty() || ::stat(os::store_dir::In(dir_, os::store_dir::kRuleHistory).c_str(), &sb) != 0) return Stamp{};
  return StampOf(sb);
}

std::vector<RuleHistory::Entry>& RuleHistory::Group(uint16_t biz, const std::string& name) {
  std::string k(reinterpret_cast<const char*>(&biz), sizeof biz);
  k += name;
  auto [it, added] = group_of_.try_emplace(std::move(k), groups_.size());
  if (added) {
    of_biz_[biz].push_back(groups_.size());
    groups_.emplace_back();
  }
  return groups_[it->second];
}

void RuleHistory::ReadGroups(const Stamp& now) {
  // What another process (an earlier frsd, another worker) wrote, then ours,
  // each rule name's identities in a group of their own, oldest first: only
  // the order within a name means anything, and a map of 65,535 bizzes
  // searched the whole list per rule (quadratic: a minute's reload).
  std::vector<std::vector<Entry>> ours = std::move(groups_);
  groups_.clear();
  group_of_.clear();
  of_biz_.clear();
  bool damaged = false, unread = false;
  for (Entry& e : ReadFile(&damaged, &unread)) Group(e.biz, e.name).push_back(std::move(e));
  // How many of each group's entries the file gave.
  std::vector<size_t> from_file(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) from_file[g] = groups_[g].size();
  for (std::vector<Entry>& g : ours)
    for (Entry& e : g) {
      std::vector<Entry>& to = Group(e.biz, e.name);
      if (std::find(to.begin(), to.end(), e) != to.end()) continue;
      // A token bucket's maxes of an identity a whole file holds are the
      // file's: one this process still has was dropped there (Apply keeps
      // the last kTokenMaxes), and put back it came out as the newest, the
      // workers' files then differing (found from outside: two holders of
      // a key read its tokens in use 37,000 apart).
      const size_t g_at = group_of_[std::string(reinterpret_cast<const char*>(&e.biz), sizeof e.biz) + e.name];
      const size_t n_file = g_at < from_file.size() ? from_file[g_at] : 0;
      if (!damaged && TagAlgo(e.identity) == Algo::kTokenBucket &&
          std::any_of(to.begin(), to.begin() + static_cast<std::ptrdiff_t>(n_file),
                      [&](const Entry& f) { return f.identity == e.identity; }))
        continue;
      to.push_back(std::move(e));
    }
  damaged_ = damaged;
  // A file that could not be read (its type, its mode, a worker out of
  // descriptors) is read again at the next Apply, not taken as read.
  if (unread) read_.reset();
  else read_ = now;
}

void RuleHistory::Apply(MapConfig* config) {
  MutexLock lock(&mu_);
  // Stamped before the read: a file rewritten between the two is read again
  // at the next Apply.
  if (const Stamp now = StampNow(); !read_ || !(*read_ == now)) ReadGroups(now);
  bool changed = false;
  for (const BizConfig& biz : config->bizzes) {
    for (uint32_t i = 0; i < biz.nrules; ++i) {
      const RuleSpec& spec = biz.rules[i];
      Entry now{biz.id, spec.name, TagIdentity(spec.tag), spec.max};
      std::vector<Entry>& g = Group(now.biz, now.name);
      if (!g.empty() && g.back() == now) continue;  // already the newest entry of this name
      // A token bucket keeps the maxes its identity had before: its keys'
      // blocks hold 16 bits of the max they were written under, and one of
      // 65,536 or more changed with the interval kept is told by these
      // (rule_state.cc, WrittenMax). Another rule's block needs no max.
      const bool token = TagAlgo(now.identity) == Algo::kTokenBucket;
      g.erase(std::remove_if(g.begin(), g.end(),
                             [&](const Entry& e) { return e.identity == now.identity && (!token || e == now); }),
              g.end());
      if (token) {
        size_t earlier = static_cast<size_t>(
            std::count_if(g.begin(), g.end(), [&](const Entry& e) { return e.identity == now.identity; }));
        for (auto e = g.begin(); earlier >= kTokenMaxes && e != g.end();)
          e = e->identity == now.identity ? (--earlier, g.erase(e)) : e + 1;
      }
      g.push_back(now);
      // At most kKept identities per name, and a token bucket's earlier
      // maxes: drop the oldest.
      const size_t bound = kKept + (token ? kTokenMaxes - 1 : 0);
      if (g.size() > bound) g.erase(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(g.size() - bound));
      changed = true;
    }
  }
  // A damaged file is left as it is: frsd's start moves it aside, saying so,
  // and frsctl verify reports it. Rewritten here (by any read of frsctl, or
  // a library's engine), its damage went unsaid and the pasts it still held
  // in its unread lines were gone for good. Written, it is what this
  // process holds (another's renamed over it since is read at the next
  // Apply); not written, it is still the file read, and the lines it lacks
  // are written at the next change.
  if (changed && !damaged_)
    if (std::optional<Stamp> made = WriteFile()) read_ = *made;
  for (BizConfig& biz : config->bizzes) FillPasts(&biz);
}

void RuleHistory::FillPasts(BizConfig* biz) {
  // Each rule's lineage: its name's identities, newest first, then those of
  // the names it was renamed from. A name the map no longer holds whose
  // newest identity one rule's lineage had was renamed to it (the rename
  // kept the interval, as docs/rules.md asks): that name's older identities
  // are the rule's too. A key untouched since an interval change of the old
  // name holds a block of one of them, which the rename otherwise dropped
  // (found by an outside run). A name that two rules could descend from is
  // given to neither.
  std::vector<std::vector<const Entry*>> lineage(biz->nrules);
  std::vector<std::string_view> names;
  for (uint32_t i = 0; i < biz->nrules; ++i) {
    const std::vector<Entry>& own = Group(biz->id, biz->rules[i].name);
    for (size_t j = own.size(); j-- > 0;) lineage[i].push_back(&own[j]);
    names.emplace_back(biz->rules[i].name);
  }
  auto had = [&](uint32_t i, uint32_t identity) {
    return std::any_of(lineage[i].begin(), lineage[i].end(), [&](const Entry* e) { return e->identity == identity; });
  };
  std::vector<size_t> absent;
  if (auto it = of_biz_.find(biz->id); it != of_biz_.end())
    for (size_t g : it->second)
      if (!groups_[g].empty() && std::find(names.begin(), names.end(), groups_[g].back().name) == names.end())
        absent.push_back(g);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t& g : absent) {
      if (g == SIZE_MAX) continue;
      const uint32_t newest = groups_[g].back().identity;
      uint32_t heirs = 0, heir = 0;
      for (uint32_t i = 0; i < biz->nrules; ++i)
        if (had(i, newest)) ++heirs, heir = i;
      if (heirs == 0) continue;
      if (heirs == 1)
        for (size_t j = groups_[g].size(); j-- > 0;)
          if (!had(heir, groups_[g][j].identity)) lineage[heir].push_back(&groups_[g][j]);
      g = SIZE_MAX;  // given (or to no one): looked at once
      grew = true;
    }
  }
  // An inherited identity another rule's lineage holds too is dropped: a
  // block of it may be that rule's from before its own interval change, and
  // the migration gives each block to the first rule that asks (a rule
  // added with a removed name's interval took a live rule's count, which
  // then started from zero).
  // Judged on the lineages as built, then dropped: two rules that inherited
  // one identity both lose it.
  std::vector<std::vector<const Entry*>> kept(biz->nrules);
  for (uint32_t i = 0; i < biz->nrules; ++i) {
    const size_t own = Group(biz->id, biz->rules[i].name).size();
    for (size_t k = 0; k < lineage[i].size(); ++k) {
      bool elsewhere = false;
      for (uint32_t j = 0; k >= own && j < biz->nrules && !elsewhere; ++j)
        elsewhere = j != i && had(j, lineage[i][k]->identity);
      if (!elsewhere) kept[i].push_back(lineage[i][k]);
    }
  }
  lineage = std::move(kept);
  // Fixed and calendar windows count alike: either takes the other's.
  for (uint32_t i = 0; i < biz->nrules; ++i) {
    RuleSpec& spec = biz->rules[i];
    spec.npast = 0;
    // The newest entry of each other identity first (a block of one is
    // converted), then a token bucket's earlier maxes of its own (Apply),
    // then the other identities' earlier maxes, in the places left: maxes
    // only name the one a block was written under (WrittenMax).
    auto taken = [&](const Entry* e) {
      for (uint32_t p = 0; p < spec.npast; ++p)
        if (spec.past[p].identity == e->identity) return true;
      return false;
    };
    for (int pass = 0; pass < 3; ++pass) {
      for (const Entry* e : lineage[i]) {
        if (spec.npast == kRulePasts) break;
        const bool same = e->identity == TagIdentity(spec.tag);
        if (same && (spec.algo != Algo::kTokenBucket || e->max == spec.max)) continue;
        if (pass == 0 ? same || taken(e) : pass == 1 ? !same : same) continue;
        if (pass == 2 && std::any_of(spec.past, spec.past + spec.npast,
                                     [&](const RulePast& p) { return p.identity == e->identity && p.max == e->max; }))
          continue;
        const bool windows = IsWindowAlgo(TagAlgo(e->identity)) && IsWindowAlgo(spec.algo);
        if (TagAlgo(e->identity) != spec.algo && !windows) continue;
        spec.past[spec.npast++] = RulePast{e->identity, e->max};
      }
    }
  }
}

}  // namespace frs::limit
