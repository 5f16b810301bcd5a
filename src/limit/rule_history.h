// limit/rule_history.h: what each named rule was in earlier maps, so that a
// reload that changes a rule's interval keeps what its keys counted.
//
// A node's block says its (algo, interval), not its rule's name. To hand a
// block to the rule of the same name after its interval changed, the engine
// remembers every (biz id, rule name, algo, interval, max) it installed, in
// `rules.history` in the store directory (text, one line each, a rule name's
// lines newest last; lines of different names in no meaningful order),
// so the memory survives restarts, worker respawns and a map edited while
// frsd was stopped. Each rule then carries the identities its name had
// (RuleSpec::past, newest first, same algorithm only, fixed and calendar
// windows counting as one: another change of algorithm starts fresh), and
// MigrateState converts a block of one of them. A token bucket's name also
// keeps the maxes each identity had (a block knows 16 bits of its own).
//
// The file is rewritten whole (temporary file, rename) when a map adds to
// it; every worker of a reload writes the same lines, so racing writers
// agree. A missing or damaged file only forgets history: no count is
// misread, since a block is still checked against its own tag.
//
// Thread safety: Apply may run from any thread (a mutex guards the entries).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "frs/status.h"
#include "limit/map_config.h"

namespace frs::limit {

class RuleHistory {
 public:
  // `dir` "": history kept in memory only; `read_only`: the file is read, never written.
  // `on_problem` (may be empty) hears of a file that could not be written
  // (a full disk, RLIMIT_FSIZE): what each rule was is then not kept past
  // this process, which a later interval change would pay for.
  RuleHistory(std::string dir, bool read_only, std::function<void(const std::string&)> on_problem = {})
      : dir_(std::move(dir)), read_only_(read_only), on_problem_(std::move(on_problem)) {}

  // Records `config`'s rules and fills each rule's past identities.
  void Apply(MapConfig* config) FRS_EXCLUDES(mu_);

  // Identities kept per rule name: the current one and kRulePasts before it.
  static constexpr size_t kKept = kRulePasts + 1;
  // A token bucket's maxes kept per identity, the current one's included:
  // each earlier one takes a place of RuleSpec::past (newest first).
  static constexpr size_t kTokenMaxes = 4;
  // The most the file is read of: 65,535 bizzes of 8 rules, each name's
  // kKept identities (and a token bucket's earlier maxes), fit (about 130
  // MB, 175 MB of token buckets); more is not frsd's.
  static constexpr size_t kMaxFileBytes = size_t{256} << 20;

  // Whether `dir`/rules.history reads whole: OK when it is missing, else a
  // Corruption naming its first line that is neither a comment nor an entry
  // (frsd writes it whole, under a temporary name: such a line is damage).
  // Apply would skip such lines; frsd's start and frsctl verify ask this.
  static Status Check(const std::string& dir);
  // Check's first half, without reading a line: OK when the file is
  // missing or a regular file this user may read, else why not (what a
  // reload asks, every time, of a file that may hold megabytes).
  static Status Readable(const std::string& dir);

 private:
  struct Entry {
    uint16_t biz = 0;
    std::string name;
    uint32_t identity = 0;
    int64_t max = 0;
    bool operator==(const Entry&) const = default;
  };
  // One line of the file; false for a line that is not an entry.
  static bool ParseLine(std::string_view line, Entry* e);
  // What is wrong with a line that is not an entry, in words after "line
  // N" (a biz id out of range named as such, not as a line of another
  // form); "" for an entry.
  static std::string LineProblem(const std::string& line, Entry* e);
  // The file's entries; *damaged when a line is neither an entry nor a
  // comment, or the file is there and could not be read (then *unread too).
  std::vector<Entry> ReadFile(bool* damaged, bool* unread = nullptr) const;
  // The file as stat(2) sees it: what tells a file another process
  // rewrote (a new inode, by rename) from the one read last.
  struct Stamp {
    bool there = false;
    uint64_t dev = 0, ino = 0, size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  // Writes groups_ whole; the stamp of the file it made, none when it made
  // none (no directory, read-only, or the write failed: said).
  std::optional<Stamp> WriteFile() const FRS_REQUIRES(mu_);
  static Stamp StampOf(const struct stat& sb);
  Stamp StampNow() const;
  // The file's groups, then this process's entries the file lacks (one it
  // could not write).
  void ReadGroups(const Stamp& now) FRS_REQUIRES(mu_);
  // `biz`'s rules' pasts: their lineages (FillPasts in rule_history.cc).
  void FillPasts(BizConfig* biz) FRS_REQUIRES(mu_);
  // (biz, name)'s group, made (empty, last) when new.
  std::vector<Entry>& Group(uint16_t biz, const std::string& name) FRS_REQUIRES(mu_);

  const std::string dir_;
  const bool read_only_;
  const std::function<void(const std::string&)> on_problem_;
  Mutex mu_;
  // Each (biz id, rule name)'s identities, oldest first, in the file's order
  // of groups; kept between maps, so that a reload whose rules the history
  // already holds costs its own rules' lookups, not a read of the whole
  // file (a history of 195,000 lines held every reload 0.3-0.6 s).
  std::vector<std::vector<Entry>> groups_ FRS_GUARDED_BY(mu_);
  std::unordered_map<std::string, size_t> group_of_ FRS_GUARDED_BY(mu_);
  std::unordered_map<uint16_t, std::vector<size_t>> of_biz_ FRS_GUARDED_BY(mu_);  // each biz's groups
  // The file as `groups_` last read it; none: read it at the next Apply.
  std::optional<Stamp> read_ FRS_GUARDED_BY(mu_);
  bool damaged_ FRS_GUARDED_BY(mu_) = false;  // a line of it was neither an entry nor a comment
};

}  // namespace frs::limit
