// frsctl/commands.h: one function per frsctl command.
//
// Each takes an opened Session and its parsed arguments, prints its answer
// on standard output (human text, or JSON when s.json), and returns the exit
// code (kExitOk, or kExitNo for a "no" answer) or the Status of a failure,
// which main prints as one line on standard error. A command that fails
// changes nothing: arguments are checked before anything is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frs/status.h"
#include "session.h"

namespace frs::ctl {

struct StatArgs {
  uint32_t days = 3;     // per-biz daily counters shown (newest first)
  bool cluster = false;  // every shard of <cluster>, over HTTP
  // --by F: statistics by key field instead (commands_stat_by.cc).
  std::string by;
  std::string biz;    // "" = every biz with such a table
  int64_t day = -1;   // -1 = today
  uint32_t top = 0;   // 0 = every group
  std::string value;  // "" = every group; else this one
};
struct HandoffArgs {
  std::string token;       // "" = srv.xml's admin token
  std::string token_file;  // a file whose first line is the token (not in ps, unlike --token)
  bool dry_run = false;
  uint32_t batch = 32;  // nodes per merge request
  std::string from;     // the srv.xml before the <cluster> change ("" = not known; replicas need it)
  // --from may be another shard's srv.xml: only its shard list is taken
  // (the list a shard ran by mistake, put back: docs/cluster.md).
  bool any_self = false;
};
struct NodeArgs {  // get, explain, del
  std::string biz, key;
};
struct SetArgs {
  std::string biz, key;
  int64_t count = 0;
};
struct ResetArgs {
  std::string biz;
};
struct DumpArgs {
  int64_t file = -1, keynode = -1;
  std::string biz;  // "" = every biz
};
struct TopArgs {
  std::string biz;
  uint32_t n = 10;
  std::string rule;      // rank by this rule's count ("": the most restrictive rule's)
  bool denied = false;   // the keys denied most lately (commands_top_denied.cc)
  uint32_t minutes = 5;  // with denied
};
struct VerifyArgs {
  bool repair = false;
};
struct ExportArgs {
  std::string file;  // "" = standard output
};
struct ImportArgs {
  std::string file;  // "" = standard input
  bool map_by_name = false;
  std::vector<std::string> rename;  // "OLD=NEW"
  bool dry_run = false;
  bool without_end = false;  // an input with no end line taken (an export of frsctl 0.3.0: export_end.h)
};

struct InitArgs {
  bool recreate_missing = false;
};
struct OwnerArgs {
  std::string route;
  bool is_key = false;  // apply the key's {hash tag} rule first
};
struct GrowArgs {
  uint32_t keynodes = 0;          // 0 (upgrade only): the store's own
  uint32_t files = 0, chain = 0;  // 0: the store's own
  // `frsctl upgrade`: a store of the format before this build's (4) is
  // copied into one of this format, its geometry kept unless given.
  bool upgrade = false;
};

Result<int> RunStat(Session& s, const StatArgs& a);
Result<int> RunOwner(Session& s, const OwnerArgs& a);
struct EnvoyConfigArgs {
  std::vector<std::string> files;  // envoyproxy/ratelimit YAML files
  bool merge_domains = false;      // as <grpc merge_domains="1">
};
Result<int> RunEnvoyConfig(Session& s, const EnvoyConfigArgs& a);
Result<int> RunStatCluster(Session& s, const StatArgs& a);
Result<int> RunStatBy(Session& s, const StatArgs& a);
Result<int> RunTopDenied(Session& s, const TopArgs& a);
Result<int> RunStatByCluster(Session& s, const StatArgs& a);
// --token-file's first line, its line end dropped: read by the caller
// before the session takes the store owner's identity (a root-only file).
Result<std::string> TokenFromFile(const std::string& path);
Result<int> RunHandoff(Session& s, const HandoffArgs& a);
Result<int> RunInit(Session& s, const InitArgs& a);
Result<int> RunGet(Session& s, const NodeArgs& a);
Result<int> RunSet(Session& s, const SetArgs& a);
Result<int> RunDel(Session& s, const NodeArgs& a);
Result<int> RunReset(Session& s, const ResetArgs& a);
Result<int> RunDump(Session& s, const DumpArgs& a);
Result<int> RunTop(Session& s, const TopArgs& a);
Result<int> RunVerify(Session& s, const VerifyArgs& a);
Result<int> RunExport(Session& s, const ExportArgs& a);
// Import opens (or creates) the store itself, after checking every line.
Result<int> RunImport(Session& s, const ImportArgs& a);
Result<int> RunExplain(Session& s, const NodeArgs& a);
// Grow works on a stopped store only, and opens it itself.
Result<int> RunGrow(Session& s, const GrowArgs& a);

}  // namespace frs::ctl
