// frsctl: the FRS admin CLI. Parses the command line (CLI11), opens what the
// command needs (session.h) and runs it (commands.h). Failures print one
// line "frsctl: what went wrong" on standard error; exit codes are in
// session.h and docs/frsctl.md.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>

#include <signal.h>

#include "commands.h"
#include "os/sigbus_guard.h"
#include "os/stop_request.h"
#include "session.h"

namespace {

using frs::ctl::Needs;
using frs::ctl::Session;

struct Command {
  CLI::App* app = nullptr;
  Needs needs = Needs::kEngine;
  bool reads_only = false;  // works on a read-only store
  std::function<frs::Result<int>(Session&)> run;
};

int Fail(const std::string& msg, int code) {
  std::fprintf(stderr, "frsctl: %s\n", msg.c_str());
  return code;
}

// The contract's default: $FRS_CONF, else the installed srv.xml
// (/etc/frs/srv.xml, or PREFIX/etc/frs/srv.xml under another prefix).
std::string DefaultConfig() { return frs::DefaultSrvConfigPath(); }

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

int main(int argc, char** argv) {
  // Ctrl-C or SIGTERM must not kill frsctl inside a chain it holds: the
  // operation in hand finishes (or a walk stops between chains) and frsctl
  // exits with a message. Before, an interrupted `reset` left a lock that
  // only a waiter's liveness check could recover.
  struct sigaction sa {};
  sa.sa_handler = [](int) { frs::os::RequestStop(); };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  frs::os::InstallSigbusGuard();  // a truncated store file is an error, not a crash
  static char outbuf[1 << 16];
  std::setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);

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
  app.add_option("-c,--config", config,
                 "srv.xml of the server whose store to work on (default: $FRS_CONF, else /etc/frs/srv.xml, or PREFIX/etc/frs/srv.xml installed under another prefix)");
  app.set_version_flag("--version", "frsctl " FRS_VERSION, "print the version and exit");
  // --json is accepted before or after the command (the command documents it).
  app.add_flag("--json", json, "machine-readable output (also accepted after the command)");

  std::vector<Command> commands;
  auto add = [&](const char* name, const char* help, Needs needs) -> Command& {
    Command& c = commands.emplace_back();
    c.app = app.add_subcommand(name, help);
    c.app->add_flag("--json", json, "print JSON: one object (one object per line for listings)");
    c.needs = needs;
    return c;
  };

  frs::ctl::StatArgs stat;
  add("stat", "geometry, slots, nodes used, occupancy per file, chain-length histogram, evictions, per-biz counters",
      Needs::kEngine)
      .run = [&](Session& s) {
        if (!stat.by.empty()) return stat.cluster ? RunStatByCluster(s, stat) : RunStatBy(s, stat);
        return stat.cluster ? RunStatCluster(s, stat) : RunStat(s, stat);
      };
  commands.back().app->add_option("--days", stat.days, "days of per-biz counters to show, newest first (1..8)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  commands.back().app->add_flag("--cluster", stat.cluster,
                                "every shard of srv.xml's <cluster>, asked over HTTP and summed (exit 1 when one is "
                                "unreachable)");
  std::string stat_day;
  commands.back().app->add_option("--by", stat.by,
                                  "statistics by key field instead: the groups of map.xml's <stats by=\"F[,F]\"> "
                                  "of every biz that keeps them, one day");
  commands.back().app->add_option("--biz", stat.biz, "with --by: only this biz (name or id)");
  commands.back().app->add_option("--day", stat_day, "with --by: the day, YYYY-MM-DD (default: today)")
      ->check([](const std::string& v) {
        uint32_t d;
        return frs::ParseDayText(v, &d) ? std::string() : "'" + v + "' is not a YYYY-MM-DD date";
      });
  commands.back().app->add_option("--top", stat.top, "with --by: only the N groups with the most requests")
      ->check(CLI::Range(1, 1000000));
  commands.back().app->add_option("--value", stat.value,
                                  "with --by: only this group (its fields' values joined by the biz's separator)");
  const size_t stat_index = commands.size() - 1;

  frs::ctl::NodeArgs get;
  add("get", "one node's state (exit 1 when the key has no node)", Needs::kEngine).run = [&](Session& s) {
    return RunGet(s, get);
  };
  commands.back().app->add_option("BIZ", get.biz, "biz name or id")->required();
  commands.back().app->add_option("KEY", get.key, "the key, as sent to frsd")->required();

  frs::ctl::DumpArgs dump;
  add("dump", "every node, one line each, with its chain position (file, key-node, slot, span, alternate)",
      Needs::kEngine)
      .run = [&](Session& s) { return RunDump(s, dump); };
  commands.back().app->add_option("--file", dump.file, "only this store file (0-based)");
  commands.back().app->add_option("--keynode", dump.keynode, "only this key-node (in every file unless --file)");
  commands.back().app->add_option("--biz", dump.biz, "only this biz (name or id)");

  frs::ctl::SetArgs set;
  add("set", "set the count of a node (of every rule), creating it when absent", Needs::kEngine).run =
      [&](Session& s) { return RunSet(s, set); };
  commands.back().app->add_option("BIZ", set.biz, "biz name or id")->required();
  commands.back().app->add_option("KEY", set.key, "the key")->required();
  commands.back().app->add_option("COUNT", set.count, "the new count (0 .. 2147483647)")->required();

  frs::ctl::NodeArgs del;
  add("del", "delete a node: every rule of the key starts afresh", Needs::kEngine).run = [&](Session& s) {
    return RunDel(s, del);
  };
  commands.back().app->add_option("BIZ", del.biz, "biz name or id")->required();
  commands.back().app->add_option("KEY", del.key, "the key")->required();

  frs::ctl::ResetArgs reset;
  add("reset", "delete every node of a biz", Needs::kEngine).run = [&](Session& s) { return RunReset(s, reset); };
  commands.back().app->add_option("BIZ", reset.biz, "biz name or id")->required();

  frs::ctl::VerifyArgs verify;
  add("verify",
      "check every header (magic, version, geometry, checksum), chain (duplicates, ranges, dead locks, torn nodes) "
      "and counter; exit 0 when clean, 1 with a report",
      Needs::kConfig)
      .run = [&](Session& s) { return RunVerify(s, verify); };
  commands.back().app->add_flag("--repair", verify.repair,
                                "fix what can be fixed (release dead locks, clear torn nodes, recount), say what was "
                                "done, and check again");

  frs::ctl::ExportArgs exp;
  add("export", "every node with its whole rule state as JSON lines (to back up, or to move to another geometry)",
      Needs::kEngine)
      .run = [&](Session& s) { return RunExport(s, exp); };
  commands.back().app->add_option("FILE", exp.file, "write here (atomically) instead of standard output");

  frs::ctl::ImportArgs imp;
  add("import",
      "read export lines into this store, of any geometry (creating it with srv.xml's geometry when missing); "
      "every line is checked before any is applied",
      Needs::kConfig)
      .run = [&](Session& s) { return RunImport(s, imp); };
  commands.back().app->add_option("FILE", imp.file, "read from here instead of standard input");
  commands.back().app->add_flag("--map-by-name", imp.map_by_name,
                                "import a biz whose id differs in map.xml under its name (default: refused)");
  commands.back().app->add_option("--rename-biz", imp.rename,
                                  "OLD=NEW: import the nodes of exported biz OLD (name or id) into biz NEW of map.xml; "
                                  "repeatable")
      ->allow_extra_args(false);
  commands.back().app->add_flag("--dry-run", imp.dry_run, "check every line, change nothing");

  frs::ctl::TopArgs top;
  add("top", "the keys of a biz with the highest counts; --denied: the keys most denied in the last minutes",
      Needs::kEngine)
      .run = [&](Session& s) { return top.denied ? RunTopDenied(s, top) : RunTop(s, top); };
  commands.back().app->add_option("BIZ", top.biz, "biz name or id (with --denied: optional, default every biz)");
  commands.back().app->add_option("N", top.n, "how many keys")->capture_default_str()->check(CLI::Range(1u, 1000000u));
  commands.back().app->add_flag("--denied", top.denied,
                                "the keys denied most in the last minutes, with their text, even for a biz whose "
                                "nodes keep no key (from the store's table of recent denials)");
  commands.back().app->add_option("--biz", top.biz, "with --denied: only this biz (name or id)");
  commands.back().app->add_option("-n,--count", top.n, "how many keys (the same as N; with --denied, N without BIZ)")
      ->check(CLI::Range(1u, 1000000u));
  commands.back().app->add_option("--minutes", top.minutes, "with --denied: how many minutes back (1..10)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10u));

  frs::ctl::NodeArgs explain;
  add("explain",
      "why a key is or is not allowed: per rule count, limit, window, debt, and when next allowed (exit 1 when denied "
      "now)",
      Needs::kEngine)
      .run = [&](Session& s) { return RunExplain(s, explain); };
  commands.back().app->add_option("BIZ", explain.biz, "biz name or id")->required();
  commands.back().app->add_option("KEY", explain.key, "the key")->required();

  frs::ctl::InitArgs init;
  add("init",
      "create the store with srv.xml's geometry; --recreate-missing completes a store whose files were lost, with "
      "empty ones",
      Needs::kConfig)
      .run = [&](Session& s) { return RunInit(s, init); };
  commands.back().app->add_flag("--recreate-missing", init.recreate_missing,
                                "create the missing files of an incomplete store, empty (their keys' counts are lost)");

  frs::ctl::OwnerArgs owner;
  add("owner", "the shard of srv.xml's <cluster> that owns ROUTE (host:port), as nginx's consistent hash picks it",
      Needs::kConfig)
      .run = [&](Session& s) { return RunOwner(s, owner); };
  commands.back().app->add_option("ROUTE", owner.route, "the route, byte for byte as sent")->required();
  commands.back().app->add_flag("--key", owner.is_key,
                                "ROUTE is a key: route it by its {hash tag} when it has one, else whole");

  frs::ctl::EnvoyConfigArgs envoy_config;
  add("envoy-config",
      "the map.xml that envoyproxy/ratelimit YAML files mean (one biz per rate-limited descriptor path, as "
      "<grpc config> runs them), to move to FRS's own rules",
      Needs::kNothing)
      .run = [&](Session& s) { return RunEnvoyConfig(s, envoy_config); };
  commands.back().app->add_option("FILE", envoy_config.files, "YAML files, one domain each")->required();

  frs::ctl::HandoffArgs handoff;
  add("handoff",
      "after a <cluster> change: send every node another shard now owns to it (merged with what it counted), "
      "then erase it here; safe to run again after any interruption",
      Needs::kEngine)
      .run = [&](Session& s) { return RunHandoff(s, handoff); };
  commands.back().app->add_option("--token", handoff.token, "the other shards' admin token (default: srv.xml's)");
  commands.back().app->add_flag("--dry-run", handoff.dry_run, "print how many nodes would go to each shard; change nothing");
  commands.back().app->add_option("--batch", handoff.batch, "nodes per merge request, each with one receipt (1..63; at most the receivers' <limits batch>)")
      ->check(CLI::Range(1, 63))
      ->capture_default_str();

  frs::ctl::GrowArgs grow;
  add("grow",
      "move a stopped store to a new geometry, keeping every node (state, expiry, last use) and the daily "
      "statistics; prints the <store> line to set in srv.xml",
      Needs::kConfig)
      .run = [&](Session& s) { return RunGrow(s, grow); };
  commands.back().app->add_option("--keynodes", grow.keynodes, "key-nodes per file of the new geometry")
      ->required()
      ->check(CLI::Range(1u, 1u << 26));
  commands.back().app->add_option("--files", grow.files, "files of the new geometry (default: the store's)")
      ->check(CLI::Range(1u, 256u));
  commands.back().app->add_option("--chain", grow.chain, "slots per chain of the new geometry (default: the store's)")
      ->check(CLI::Range(1u, 64u));

  frs::ctl::GrowArgs upgrade;
  upgrade.upgrade = true;
  add("upgrade",
      "move a stopped store of format 4 (frsd 0.2) to this build's format 5, keeping every node (state, expiry, "
      "last use) and the daily statistics; a kill at any point leaves the old store or the new one, whole",
      Needs::kConfig)
      .run = [&](Session& s) { return RunGrow(s, upgrade); };

  // Commands that only read work on a store this user cannot write.
  for (Command& c : commands) {
    const std::string& n = c.app->get_name();
    c.reads_only = n == "stat" || n == "get" || n == "dump" || n == "verify" || n == "export" || n == "top" ||
                   n == "explain";
  }

  // An unknown command names itself and the known ones, instead of CLI11's
  // "A subcommand is required".
  if (std::string_view word = CommandWord(argc, argv); !word.empty()) {
    bool known = false;
    std::string names;
    for (const Command& c : commands) {
      known = known || c.app->get_name() == word;
      names += (names.empty() ? "" : ", ") + c.app->get_name();
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
    return Fail(std::string(e.what()) + " (see frsctl --help)", frs::ctl::kExitUsage);
  }

  // stat --cluster asks the shards over HTTP: it needs srv.xml only.
  if (stat.cluster) commands[stat_index].needs = Needs::kConfig;
  if (!stat_day.empty()) {
    uint32_t day = 0;
    frs::ParseDayText(stat_day, &day);  // checked by the option
    stat.day = day;
  }
  if (stat.by.empty() && (!stat.biz.empty() || !stat_day.empty() || stat.top != 0 || !stat.value.empty()))
    return Fail("stat: --biz, --day, --top and --value go with --by", frs::ctl::kExitUsage);
  for (Command& c : commands) {
    if (!c.app->parsed()) continue;
    Session s;
    s.json = json;
    s.reads_only = c.reads_only && !(c.app->get_name() == "verify" && verify.repair);
    if (frs::Status st = frs::ctl::OpenSession(config, c.needs, &s); !st.ok())
      return Fail(st.message(), frs::ctl::ExitCodeFor(st));
    frs::Result<int> r = c.run(s);
    std::fflush(stdout);
    if (!r.ok()) return Fail(r.status().message(), frs::ctl::ExitCodeFor(r.status()));
    return r.value();
  }
  return Fail("no command given (see frsctl --help)", frs::ctl::kExitUsage);
}
