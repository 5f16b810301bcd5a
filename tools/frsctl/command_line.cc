// frsctl's command line: parses it (CLI11), opens what the command needs
// (session.h) and runs it (commands.h). Failures print one line "frsctl:
// what went wrong" on standard error; exit codes are in session.h and
// docs/frsctl.md. The process around it (signals, stdout's buffer) is
// main.cc's.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.h"
#include "commands.h"
#include "node_out.h"
#include "session.h"

namespace frs::ctl {
namespace {

// Every command's arguments, as CLI11 fills them.
struct Args {
  frs::ctl::StatArgs stat;
  std::string stat_day;
  frs::ctl::NodeArgs get, del, explain;
  frs::ctl::DumpArgs dump;
  frs::ctl::SetArgs set;
  frs::ctl::ResetArgs reset;
  frs::ctl::VerifyArgs verify;
  frs::ctl::ExportArgs exp;
  frs::ctl::ImportArgs imp;
  frs::ctl::TopArgs top;
  frs::ctl::InitArgs init;
  frs::ctl::OwnerArgs owner;
  frs::ctl::EnvoyConfigArgs envoy_config;
  frs::ctl::HandoffArgs handoff;
  frs::ctl::GrowArgs grow, upgrade;
};

// One row per command. Dispatch, `frsctl --help` (which tests/package holds
// frsctl.8 to) and the list in the unknown-command message all come from it.
struct CommandSpec {
  const char* name;
  const char* help;
  Needs needs;
  bool reads_only;  // works on a store this user cannot write
  void (*options)(CLI::App&, Args&);
  frs::Result<int> (*run)(Session&, Args&);
};

// CLI11 converts a number as strtoll does with base 0: 010 is 8, 0x10 is
// 16, and '' or ' 5' pass (a set of 010 set 8). A count, a size or a number
// of days an operator types is decimal: anything else is refused, naming
// what was typed (a number past int64 read as its clamped value).
std::string DecimalProblem(std::string& s) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return "'" + s + "' is not a whole number in decimal digits";
  if (s.size() > 1 && s[0] == '0') return "'" + s + "' begins with 0 (read as octal, 010 is 8): write it without";
  if (s.size() > 18) return "'" + s + "' is too large";
  return "";
}

void AddBizKey(CLI::App& c, frs::ctl::NodeArgs& a, const char* key_help) {
  c.add_option("BIZ", a.biz, "biz name or id")->required();
  c.add_option("KEY", a.key, key_help)->required();
}

const CommandSpec kCommands[] =
    {
        {"stat", "geometry, slots, nodes used, occupancy per file, chain-length histogram, evictions, per-biz counters",
         Needs::kEngine, true,
         [](CLI::App& c, Args& a) {
  CLI::Option* days = c.add_option("--days", a.stat.days, "days of per-biz counters to show, newest first (1..8)")
                          ->check(CLI::Range(1, 8))
                          ->capture_default_str();
  c.add_flag("--cluster", a.stat.cluster,
             "every shard of srv.xml's <cluster>, asked over HTTP and summed (exit 1 when one is unreachable)");
  // The options of one form refuse the other's (they were ignored unsaid),
  // and an empty --by, which read as plain stat.
  CLI::Option* by = c.add_option("--by", a.stat.by,
                                 "statistics by key field instead: the groups of map.xml's <stats by=\"F[,F]\"> of "
                                 "every biz that keeps them, one day")
                        ->check([](const std::string& v) {
                          return v.empty() ? std::string("empty: name the fields of a <stats by=...>") : std::string();
                        })
                        ->excludes(days);
  c.add_option("--biz", a.stat.biz, "with --by: only this biz (name or id)")->needs(by);
  c.add_option("--day", a.stat_day, "with --by: the day, YYYY-MM-DD (default: today)")
      ->check([](const std::string& v) {
        uint32_t d;
        return frs::ParseDayText(v, &d) ? std::string() : "'" + v + "' is not a YYYY-MM-DD date";
      })
      ->needs(by);
  c.add_option("--top", a.stat.top, "with --by: only the N groups with the most requests")
      ->check(CLI::Range(1, 1000000))
      ->needs(by);
  c.add_option("--value", a.stat.value, "with --by: only this group (its fields' values joined by the biz's separator)")
      ->check([](const std::string& v) {
        // As GET /stats refuses it: an empty value would read as no filter.
        return v.empty() ? std::string("empty: leave it out for every group") : std::string();
      })
      ->needs(by);
         },
         [](Session& s, Args& a) {
  if (!a.stat.by.empty()) return a.stat.cluster ? RunStatByCluster(s, a.stat) : RunStatBy(s, a.stat);
  return a.stat.cluster ? RunStatCluster(s, a.stat) : RunStat(s, a.stat);
        }},
                  {"get", "one node's state (exit 1 when the key has no node)", Needs::kEngine, true,
                   [](CLI::App& c, Args& a) { AddBizKey(c, a.get, "the key, as sent to frsd"); },
                   [](Session& s, Args& a) { return RunGet(s, a.get); }},
                  {"dump", "every node, one line each, with its chain position (file, key-node, slot, span, alternate)",
                   Needs::kEngine, true,
                   [](CLI::App& c, Args& a) {
  // -1 is "every file" inside; given on the command line it is a mistake.
  c.add_option("--file", a.dump.file, "only this store file (0-based)")->check(CLI::Range(0, 255));
  c.add_option("--keynode", a.dump.keynode, "only this key-node (in every file unless --file)")
      ->check(CLI::Range(0, 67108863));
  c.add_option("--biz", a.dump.biz, "only this biz (name or id)");
                   },
                   [](Session& s, Args& a) { return RunDump(s, a.dump); }},
    {"set", "set the count of a node (of every rule), creating it when absent", Needs::kEngine, false,
     [](CLI::App& c, Args& a) {
  c.add_option("BIZ", a.set.biz, "biz name or id")->required();
  c.add_option("KEY", a.set.key, "the key")->required();
  c.add_option("COUNT", a.set.count, "the new count (0 .. 2147483647)")->required();
     },
     [](Session& s, Args& a) { return RunSet(s, a.set); }},
    {"del", "delete a node: every rule of the key starts afresh", Needs::kEngine, false,
     [](CLI::App& c, Args& a) { AddBizKey(c, a.del, "the key"); },
     [](Session& s, Args& a) { return RunDel(s, a.del); }},
    {"reset", "delete every node of a biz", Needs::kEngine, false,
     [](CLI::App& c, Args& a) { c.add_option("BIZ", a.reset.biz, "biz name or id")->required(); },
     [](Session& s, Args& a) { return RunReset(s, a.reset); }},
    {"verify",
     "check every header (magic, version, geometry, checksum), chain (duplicates, ranges, dead locks, torn nodes) "
     "and counter; exit 0 when clean, 1 with a report",
     Needs::kStoreDir, true,
     [](CLI::App& c, Args& a) {
  c.add_flag("--repair", a.verify.repair,
             "fix what can be fixed (release dead locks, clear torn nodes, recount), say what was done, and "
             "check again");
     },
     [](Session& s, Args& a) { return RunVerify(s, a.verify); }},
    {"export", "every node with its whole rule state as JSON lines (to back up, or to move to another geometry)",
     Needs::kEngine, true,
     [](CLI::App& c, Args& a) {
  c.add_option("FILE", a.exp.file, "write here (atomically) instead of standard output");
     },
     [](Session& s, Args& a) { return RunExport(s, a.exp); }},
    {"import",
     "read export lines into this store, of any geometry (creating it with srv.xml's geometry when missing); "
     "every line is checked before any is applied",
     Needs::kConfig, false,
     [](CLI::App& c, Args& a) {
  c.add_option("FILE", a.imp.file, "read from here instead of standard input");
  c.add_flag("--map-by-name", a.imp.map_by_name,
             "import a biz whose id differs in map.xml under its name (default: refused)");
  c.add_option("--rename-biz", a.imp.rename,
               "OLD=NEW: import the nodes of exported biz OLD (name or id) into biz NEW of map.xml; repeatable")
      ->allow_extra_args(false);
  c.add_flag("--dry-run", a.imp.dry_run, "check every line, change nothing");
  c.add_flag("--without-end-line", a.imp.without_end,
             "take an input that does not end with an export's end line (an export of frsctl 0.3.0); refused "
             "without this, since an export cut short at a line's end reads the same");
     },
     [](Session& s, Args& a) { return RunImport(s, a.imp); }},
    {"top", "the keys of a biz with the highest counts; --denied: the keys most denied in the last minutes",
     Needs::kEngine, true,
     [](CLI::App& c, Args& a) {
  CLI::Option* biz = c.add_option("BIZ", a.top.biz, "biz name or id (with --denied: optional, default every biz)");
  CLI::Option* n = c.add_option("N", a.top.n, "how many keys")->capture_default_str()->check(CLI::Range(1u, 1000000u));
  CLI::Option* denied =
      c.add_flag("--denied", a.top.denied,
                 "the keys denied most in the last minutes, with their text, even for a biz whose nodes keep no key "
                 "(from the store's table of recent denials)");
  // One way to say each thing: two that disagree are refused, not one of
  // them silently taken.
  c.add_option("--biz", a.top.biz, "with --denied: only this biz (name or id)")->excludes(biz)->needs(denied);
  c.add_option("-n,--count", a.top.n, "how many keys (the same as N; with --denied, N without BIZ)")
      ->check(CLI::Range(1u, 1000000u))
      ->excludes(n);
  c.add_option("--minutes", a.top.minutes, "with --denied: how many minutes back (1..10)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10u))
      ->needs(denied);
  c.add_option("--rule", a.top.rule,
               "rank by this rule's count (its name in map.xml, or BIZ_N), not the most restrictive rule's")
      ->excludes(denied);
     },
     [](Session& s, Args& a) { return a.top.denied ? RunTopDenied(s, a.top) : RunTop(s, a.top); }},
    {"explain",
     "why a key is or is not allowed: per rule count, limit, window, debt, and when next allowed (exit 1 when denied "
     "now)",
     Needs::kEngine, true, [](CLI::App& c, Args& a) { AddBizKey(c, a.explain, "the key"); },
     [](Session& s, Args& a) { return RunExplain(s, a.explain); }},
    {"init",
     "create the store with srv.xml's geometry; --recreate-missing completes a store whose files were lost, with "
     "empty ones",
     Needs::kStoreDir, false,
     [](CLI::App& c, Args& a) {
  c.add_flag("--recreate-missing", a.init.recreate_missing,
             "create the missing files of an incomplete store, empty (their keys' counts are lost)");
     },
     [](Session& s, Args& a) { return RunInit(s, a.init); }},
    {"owner", "the shard of srv.xml's <cluster> that owns ROUTE (host:port), as nginx's consistent hash picks it",
     Needs::kConfig, false,
     [](CLI::App& c, Args& a) {
  c.add_option("ROUTE", a.owner.route, "the route, byte for byte as sent")->required();
  c.add_flag("--key", a.owner.is_key, "ROUTE is a key: route it by its {hash tag} when it has one, else whole");
     },
     [](Session& s, Args& a) { return RunOwner(s, a.owner); }},
    {"envoy-config",
     "the map.xml that envoyproxy/ratelimit YAML files mean (one biz per rate-limited descriptor path, as "
     "<grpc config> runs them), to move to FRS's own rules",
     Needs::kNothing, false,
     [](CLI::App& c, Args& a) {
  c.add_flag("--merge-domains", a.envoy_config.merge_domains,
             "files of one domain merged into it, as <grpc merge_domains=\"1\"> serves them (MERGE_DOMAIN_CONFIG); "
             "without it a domain in two files is refused");
  c.add_option("FILE", a.envoy_config.files,
               "YAML files, one domain each, or directories (read as frsd reads <grpc config>: every file, "
               "subdirectories included, names starting with '.' skipped)")
      ->required();
     },
     [](Session& s, Args& a) { return RunEnvoyConfig(s, a.envoy_config); }},
    {"handoff",
     "after a <cluster> change: send every node another shard now owns to it (merged with what it counted), then "
     "erase it here; safe to run again after any interruption",
     Needs::kEngine, false,
     [](CLI::App& c, Args& a) {
  CLI::Option* token = c.add_option("--token", a.handoff.token, "the other shards' admin token (default: srv.xml's)");
  c.add_option("--token-file", a.handoff.token_file,
               "read that token from the first line of FILE: a token on the command line is seen by every user "
               "of the machine (ps)")
      ->excludes(token);
  c.add_flag("--dry-run", a.handoff.dry_run, "print how many nodes would go to each shard; change nothing");
  c.add_option("--from", a.handoff.from,
               "the srv.xml this shard ran before the change (required with replicas: it says which of a node's "
               "two holders sends it, and to which new holders)");
  c.add_flag("--any-self", a.handoff.any_self,
             "take --from's shard list even from another shard's srv.xml: on every shard, after a list that one "
             "shard ran by mistake was put back (docs/cluster.md)");
  c.add_option("--batch", a.handoff.batch,
               "nodes per merge request, each with one receipt (1..63; at most the receivers' <limits batch>)")
      ->check(CLI::Range(1, 63))
      ->capture_default_str();
     },
     [](Session& s, Args& a) { return RunHandoff(s, a.handoff); }},
    {"grow",
     "move a stopped store to a new geometry, keeping every node (state, expiry, last use) and the daily "
     "statistics; prints the <store> line to set in srv.xml",
     Needs::kConfig, false,
     [](CLI::App& c, Args& a) {
  c.add_option("--keynodes", a.grow.keynodes, "key-nodes per file of the new geometry")
      ->required()
      ->check(CLI::Range(1u, 1u << 26));
  c.add_option("--files", a.grow.files, "files of the new geometry (default: the store's)")
      ->check(CLI::Range(1u, 256u));
  c.add_option("--chain", a.grow.chain, "slots per chain of the new geometry (default: the store's)")
      ->check(CLI::Range(1u, 64u));
     },
     [](Session& s, Args& a) { return RunGrow(s, a.grow); }},
    {"upgrade",
     "move a stopped store of format 4 (frsd 0.2) or 5 (unkeyed placement) to this build's format 6, keeping "
     "every node (state, expiry, last use) and the daily statistics; a kill at any point leaves the old store or "
     "the new one, whole",
     Needs::kConfig, false, [](CLI::App&, Args& a) { a.upgrade.upgrade = true; },
     [](Session& s, Args& a) { return RunGrow(s, a.upgrade); }},
    };

int Fail(const std::string& msg, int code) {
  std::fprintf(stderr, "frsctl: %s\n", msg.c_str());
  return code;
}

// The contract's default: $FRS_CONF, else the installed srv.xml
// (/etc/frs/srv.xml, or PREFIX/etc/frs/srv.xml under another prefix).
std::string DefaultConfig() { return frs::DefaultServiceConfigPath(); }

// A srv.xml that is not there, when no -c named it: where its path came
// from, as frsd says it ($FRS_CONF, set in a unit or a container, is easily
// forgotten; the default follows the program's own prefix). "" otherwise.
std::string WhereTheConfigPathCameFrom(const std::string& config, bool given) {
  if (given || ::access(config.c_str(), F_OK) == 0) return "";
  const char* env = std::getenv("FRS_CONF");
  return std::string(env != nullptr && *env != '\0'
                         ? "named by $FRS_CONF"
                         : "the default path (neither -c nor $FRS_CONF given: /etc/frs/srv.xml, or "
                           "PREFIX/etc/frs/srv.xml for a program in PREFIX/bin)") +
         "; -c FILE names another";
}

// CLI11's words for the commonest mistakes, said as frsctl says the rest.
std::string PlainParseError(std::string what) {
  constexpr std::string_view kConvert = "Could not convert: ",
                             kUnexpected = "The following argument was not expected: ",
                             kUnexpectedMany = "The following arguments were not expected: ";
  if (what.starts_with(kConvert)) {
    const std::string rest = what.substr(kConvert.size());
    const size_t eq = rest.find(" = ");
    if (eq != std::string::npos) return rest.substr(0, eq) + ": \"" + rest.substr(eq + 3) + "\" is not a number";
  }
  if (what.starts_with(kUnexpected))
    return "unknown option or one argument too many: " + what.substr(kUnexpected.size());
  if (what.starts_with(kUnexpectedMany))
    return "unknown options or arguments too many: " + what.substr(kUnexpectedMany.size());
  return what;
}

// The first word that is not an option (or an option's value): the command.
std::string_view CommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "-c" || a == "--config") {
      ++i;
      continue;
    }
    if (a.empty() || a[0] == '-') continue;
    return a;
  }
  return {};
}

}  // namespace

int RunCommandLine(int argc, char** argv) {
  ResetRunNotes();
  CLI::App app{
      "frsctl: inspect, change, verify, explain, export and import an FRS store.\n"
      "Works directly on the store files, whether or not frsd runs (same locks, one chain at a time).\n"
      "Exit codes: 0 done, 1 the answer is no (get: absent; explain: denied now; verify: problems), 2 bad arguments,\n"
      "3 failed.",
      "frsctl"};
  app.require_subcommand(1);
  app.fallthrough();
  std::string config;
  bool json = false;
  config = DefaultConfig();
  CLI::Option* config_option =
      app.add_option("-c,--config", config,
                     "srv.xml of the server whose store to work on (default: $FRS_CONF, else /etc/frs/srv.xml, or "
                     "PREFIX/etc/frs/srv.xml installed under another prefix)");
  app.set_version_flag("--version", "frsctl " FRS_VERSION, "print the version and exit");
  // --json is accepted before or after the command (the command documents it).
  app.add_flag("--json", json, "machine-readable output (also accepted after the command)");

  Args args;
  std::vector<CLI::App*> apps;  // kCommands' subcommands, in its order
  for (const CommandSpec& spec : kCommands) {
    CLI::App* c = app.add_subcommand(spec.name, spec.help);
    c->add_flag("--json", json, "print JSON: one object (one object per line for listings)");
    spec.options(*c, args);
    for (CLI::Option* o : c->get_options()) {
      const std::string type = o->get_type_name();
      if (type.starts_with("INT") || type.starts_with("UINT")) o->check(CLI::Validator(DecimalProblem, ""));
    }
    apps.push_back(c);
  }

  // An unknown command names itself and the known ones, instead of CLI11's
  // "A subcommand is required".
  if (std::string_view word = CommandWord(argc, argv); !word.empty()) {
    bool known = false;
    std::string names;
    for (const CommandSpec& spec : kCommands) {
      known = known || spec.name == word;
      names += (names.empty() ? "" : ", ") + std::string(spec.name);
    }
    if (!known)
      return Fail("unknown command \"" + std::string(word) + "\"; the commands are: " + names, frs::ctl::kExitUsage);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    const std::string word(CommandWord(argc, argv));
    return Fail((word.empty() ? "" : word + ": ") + PlainParseError(e.what()) + " (frsctl " +
                    (word.empty() ? "" : word + " ") + "--help)",
                frs::ctl::kExitUsage);
  }

  if (!args.stat_day.empty()) {
    uint32_t day = 0;
    frs::ParseDayText(args.stat_day, &day);  // checked by the option
    args.stat.day = day;
  }
  const frs::ctl::StatArgs& stat = args.stat;
  if (stat.by.empty() && (!stat.biz.empty() || !args.stat_day.empty() || stat.top != 0 || !stat.value.empty()))
    return Fail("stat: --biz, --day, --top and --value go with --by", frs::ctl::kExitUsage);
  for (size_t i = 0; i < apps.size(); ++i) {
    if (!apps[i]->parsed()) continue;
    const CommandSpec& spec = kCommands[i];
    const std::string_view name = spec.name;
    Session s;
    s.json = json;
    s.reads_only = spec.reads_only && !(name == "verify" && args.verify.repair);
    // stat and top --denied are the statistics: without them they fail.
    s.reads_nodes_only =
        name == "get" || name == "dump" || name == "export" || name == "explain" || (name == "top" && !args.top.denied);
    // top --denied reads denials.frs: its engine makes none where frsd has
    // not (it would hide that frsd keeps none, and read it empty).
    s.writes_nothing = name == "top" && args.top.denied;
    // stat --cluster asks the shards over HTTP: it needs srv.xml only.
    const Needs needs = name == "stat" && stat.cluster ? Needs::kConfig : spec.needs;
    // Read as the caller (root's 0600 file), before the session may become
    // the store's owner.
    if (name == "handoff" && !args.handoff.token_file.empty()) {
      frs::Result<std::string> t = frs::ctl::TokenFromFile(args.handoff.token_file);
      if (!t.ok()) return Fail(t.status().message(), frs::ctl::ExitCodeFor(t.status()));
      args.handoff.token = std::move(t.value());
    }
    if (frs::Status st = frs::ctl::OpenSession(config, needs, &s); !st.ok()) {
      // One line, as every failure: what is wrong, then where the path came from.
      std::string what = st.message();
      if (std::string where = WhereTheConfigPathCameFrom(config, config_option->count() > 0); !where.empty())
        what += " (" + where + ")";
      return Fail(what, frs::ctl::ExitCodeFor(st));
    }
    frs::Result<int> r = spec.run(s, args);
    std::fflush(stdout);
    if (!r.ok()) return Fail(r.status().message(), frs::ctl::ExitCodeFor(r.status()));
    return r.value();
  }
  return Fail("no command given (see frsctl --help)", frs::ctl::kExitUsage);
}

}  // namespace frs::ctl
