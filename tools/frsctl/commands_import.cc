// frsctl import [FILE]: reads `export` lines (standard input without FILE)
// into this store, whatever its geometry: the way a full store is grown.
//
// All or nothing: every line is checked first, by the same biz policy and by
// the engine's own check of an import (AdminEngine::CheckImport, against
// this map, writing nothing), and only when every line passed are they
// applied to the real store (creating it, with srv.xml's geometry, when there is none). The
// checked lines are spooled in the scratch directory, so standard input is
// read once.
//
// Biz policy: a line's biz must be in map.xml under the same name and id.
// --map-by-name accepts the same name under another id; --rename-biz OLD=NEW
// (OLD a name or an id of the export) imports OLD's nodes into NEW.
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "commands.h"
#include "export_end.h"
#include "format.h"
#include "frs/store_admin.h"
#include "frs/store_dir.h"
#include "json_in.h"
#include "json_out.h"
#include "receipt_line.h"
#include "store_users.h"

namespace frs::ctl {
namespace {

// A private directory for the scratch store and the spool; "" when none
// could be made.
std::string MakeScratchDir() {
  std::error_code ec;
  std::string tmpl = (std::filesystem::temp_directory_path(ec) / "frsctl-import-XXXXXX").string();
  if (ec) tmpl = "/tmp/frsctl-import-XXXXXX";
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

// Removes the scratch directory and everything in it (a guard's deleter:
// it owns the path, not the string).
struct RemoveTree {
  void operator()(const std::string* dir) const {
    std::error_code ec;
    std::filesystem::remove_all(*dir, ec);
  }
};

struct BizPolicy {
  bool map_by_name = false;
  std::map<std::string, std::string> rename;  // export name or id -> name in map.xml
  std::map<std::string, uint16_t> by_name;    // this map
  std::map<uint16_t, std::string> by_id;
  std::string map_path;
};

Result<BizPolicy> MakePolicy(const Engine& engine, const ImportArgs& a, const std::string& map_path) {
  BizPolicy p;
  p.map_by_name = a.map_by_name;
  p.map_path = map_path;
  for (const BizInfo& b : engine.Bizzes()) {
    p.by_name[b.name] = b.id;
    p.by_id[b.id] = b.name;
  }
  for (const std::string& r : a.rename) {
    size_t eq = r.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == r.size())
      return Status::InvalidArgument("bad --rename-biz \"" + r + "\": expected OLD=NEW");
    std::string to = r.substr(eq + 1);
    if (!p.by_name.count(to))
      return Status::InvalidArgument("bad --rename-biz \"" + r + "\": \"" + to + "\" is not a biz of " + map_path);
    p.rename[r.substr(0, eq)] = to;
  }
  return p;
}

// Applies the biz policy to one line; returns the line to import (with its
// biz_name rewritten for a rename) and the name of the biz it goes to.
Result<std::string> ApplyPolicy(const BizPolicy& p, const std::string& line, std::string* target) {
  // The engine reads the whole line next; the policy needs its biz only.
  Result<JsonValue> v = ParseLeadingMembers(line, {"biz", "biz_name"});
  if (!v.ok()) return v.status();
  if (!v->IsObject()) return Status::InvalidArgument("not a JSON object");
  const JsonValue* id_v = v->Find("biz");
  const JsonValue* name_v = v->Find("biz_name");
  if (id_v == nullptr || !id_v->IsNumber()) return Status::InvalidArgument("no numeric \"biz\" member");
  const std::string id_text = id_v->text;
  // Named as such: too long for an integer, it was refused later as "bad
  // integer" after the message had said to pass --map-by-name, and one out
  // of range was taken under --map-by-name (found from outside).
  uint32_t id_number = 0;
  const auto [id_end, id_ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id_number);
  if (id_ec != std::errc() || id_end != id_text.data() + id_text.size() || id_number < 1 || id_number > 65535)
    return Status::InvalidArgument("\"biz\" is " + id_text.substr(0, 40) + ": a biz id is 1..65535");
  // An export writes the name as a string or leaves it out: anything else
  // is a damaged line, not a biz the exporting map left unnamed.
  if (name_v != nullptr && !name_v->IsString())
    return Status::InvalidArgument("\"biz_name\" is not a string (export writes the biz's name, or leaves it out)");
  const std::string name = name_v ? name_v->text : "";
  const std::string shown = name.empty() ? "biz id " + id_text : "biz '" + name + "' (id " + id_text + ")";
  auto renamed = p.rename.find(name);
  if (name.empty() || renamed == p.rename.end()) renamed = p.rename.find(id_text);
  if (renamed != p.rename.end()) {
    *target = renamed->second;
    std::string quoted;
    AppendJsonString(renamed->second, &quoted);
    std::string out = line;
    if (name_v != nullptr) {
      out.replace(name_v->begin, name_v->end - name_v->begin, quoted);
    } else {
      out.insert(v->begin + 1, "\"biz_name\":" + quoted + ",");
    }
    return out;
  }
  if (name.empty())
    return Status::NotFound(shown + " had no name in the exporting map: pass --rename-biz " + id_text +
                            "=NAME (to leave its nodes out: frsctl reset " + id_text +
                            " on the exporting store, then export again)");
  auto here = p.by_name.find(name);
  if (here == p.by_name.end())
    return Status::NotFound(shown + " is not in " + p.map_path + ": add it, or pass --rename-biz " + name + "=NAME");
  if (std::to_string(here->second) != id_text && !p.map_by_name)
    return Status::InvalidArgument(shown + " has id " + std::to_string(here->second) + " in " + p.map_path +
                                   ": pass --map-by-name to import it as '" + name + "' (id " +
                                   std::to_string(here->second) + ")");
  *target = name;
  return line;
}

// Whether a store may be made here: none of its files, and no stats.frs of
// one that served. An incomplete store or one whose files are gone is also
// "not found", but the import's open would refuse to make it, after a dry
// run had said that every line can be imported.
bool NoStoreWasHere(const ServiceConfig& cfg) {
  std::error_code ec;
  for (uint32_t i = 0; i < cfg.geometry.files; ++i)
    if (std::filesystem::exists(store_dir::In(cfg.store_dir, store_dir::StoreFileName(i)), ec) || ec) return false;
  return !std::filesystem::exists(store_dir::In(cfg.store_dir, store_dir::kDailyStats), ec) && !ec;
}

struct Checked {
  uint64_t lines = 0;
  uint64_t receipts = 0;
  std::map<std::string, uint64_t> per_biz;
  bool ended = false;    // an end line was read (export_end.h)
  uint64_t unended = 0;  // node and receipt lines after the last end line, or all without one
};

// Pass 1: every line through the policy and the scratch engine's check; the
// lines to apply go to `spool`. The first refusal is returned (with the count
// of the others).
Result<Checked> CheckAll(std::istream& in, const BizPolicy& policy, AdminEngine& scratch, std::ofstream& spool) {
  Checked c;
  std::string line, first_error;
  uint64_t refused = 0, lineno = 0;
  uint64_t nodes_since_end = 0, receipts_since_end = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (IsExportEndLine(line)) {
      // The lines since the start, or since the end line before (exports
      // joined), must be as many as it says: fewer is a cut at a line's end.
      uint64_t nodes = 0, receipts = 0;
      Status st = ParseExportEndLine(line, &nodes, &receipts);
      if (st.ok() && (nodes != nodes_since_end || receipts != receipts_since_end))
        st = Status::InvalidArgument("the export's end line says " + std::to_string(nodes) + " node(s) and " +
                                     std::to_string(receipts) + " receipt(s), and the lines before it hold " +
                                     std::to_string(nodes_since_end) + " and " + std::to_string(receipts_since_end) +
                                     ": the file was cut short or edited");
      if (!st.ok() && refused++ == 0) first_error = "line " + std::to_string(lineno) + ": " + st.message();
      c.ended = true;
      nodes_since_end = receipts_since_end = 0;
      continue;
    }
    if (IsReceiptLine(line)) ++receipts_since_end;
    else ++nodes_since_end;
    if (IsReceiptLine(line)) {
      // Handoff receipts go back as they were (receipt_line.h).
      if (Status st = ImportReceipt(line, nullptr, 0); !st.ok()) {
        if (refused++ == 0) first_error = "line " + std::to_string(lineno) + ": " + st.message();
        continue;
      }
      spool << line << '\n';
      ++c.receipts;
      continue;
    }
    std::string target;
    Result<std::string> out = ApplyPolicy(policy, line, &target);
    Status st = out.ok() ? scratch.CheckImport(out.value()) : out.status();
    if (!st.ok()) {
      if (refused++ == 0) first_error = "line " + std::to_string(lineno) + ": " + st.message();
      continue;
    }
    spool << out.value() << '\n';
    ++c.lines;
    ++c.per_biz[target];
  }
  if (in.bad())
    return Status::IOError("reading the import input failed after line " + std::to_string(lineno) +
                           " (an I/O error: nothing was changed)");
  if (refused != 0)
    return Status::InvalidArgument("import refused, nothing changed: " + first_error +
                                   (refused > 1 ? " (and " + std::to_string(refused - 1) + " more bad lines)" : ""));
  if (!spool.flush()) return Status::IOError("cannot write the import spool");
  c.unended = nodes_since_end + receipts_since_end;
  return c;
}

}  // namespace

Result<int> RunImport(Session& s, const ImportArgs& a) {
  // The input opened as the caller (root's file), then, on another user's
  // store directory, that user's identity for what is made there.
  std::ifstream file;
  if (!a.file.empty()) {
    // A directory opens as a stream and fails at its first read, which
    // said only "reading the import input failed".
    std::error_code ec;
    if (std::filesystem::is_directory(a.file, ec))
      return Status::InvalidArgument(a.file + ": is a directory, not an export file (frsctl export writes one)");
    file.open(a.file, std::ios::binary);
    if (!file) return Status::NotFound(a.file + ": cannot open the import file: " + std::strerror(errno));
  }
  if (Status st = ActAsStoreOwner(s.cfg.store_dir); !st.ok()) return st;
  // The real store first: one of another geometry or version is refused
  // before anything is read; a missing one is created only after the check.
  // A dry run's engine only reads (it made stats.frs and lease.key).
  s.writes_nothing = a.dry_run;
  s.brings_nodes = true;
  Status opened = OpenStoreAndEngine(&s, /*create=*/false, /*engine=*/true);
  const bool create = opened.IsNotFound() && NoStoreWasHere(s.cfg);
  if (!opened.ok() && !create) return opened;
  // A store that holds no node before this import: a lease.key it has made
  // no id any node holds (frsctl init, then a command, made it), so the
  // imported nodes' ids are another key's.
  const bool was_empty = create || s.store->Stats().total.nodes_used == 0;

  const std::string dir = MakeScratchDir();
  if (dir.empty()) return Status::IOError("cannot create a scratch directory for the import check");
  const std::unique_ptr<const std::string, RemoveTree> remove_dir(&dir);
  Session scratch;
  scratch.cfg = s.cfg;
  scratch.running = s.running;  // checked under the map frsd runs, as applied
  scratch.cfg.store_dir = dir + "/store";
  scratch.cfg.geometry = StoreGeometry{1, 1024, s.cfg.geometry.chain};
  if (Status st = OpenStoreAndEngine(&scratch, /*create=*/true, /*engine=*/true); !st.ok()) return st;

  Result<BizPolicy> policy = MakePolicy(*scratch.engine, a, s.cfg.map_path);
  if (!policy.ok()) return policy.status();

  const std::string spool_path = dir + "/lines.jsonl";
  std::ofstream spool(spool_path, std::ios::binary | std::ios::trunc);
  if (!spool) return Status::IOError("cannot create " + spool_path);
  Result<Checked> checked = Status::IOError("no input");
  if (a.file.empty()) {
    checked = CheckAll(std::cin, policy.value(), *scratch.engine, spool);
  } else {
    checked = CheckAll(file, policy.value(), *scratch.engine, spool);
  }
  if (!checked.ok()) return checked.status();
  spool.close();
  // Whole lines, but whether any are missing after them cannot be told: an
  // export cut at a line's end (a copy stopped, a disk full) restored part
  // of a store without a word (found from outside).
  // An input of no line at all is one too (found from outside: a failed
  // export piped into import made an empty new store, exit 0).
  if (checked->unended != 0 || !checked->ended) {
    const std::string what = checked->ended ? "its last " + std::to_string(checked->unended) +
                                                  " line(s) come after its last end line, with none of their own"
                             : checked->unended == 0 ? "it holds no line, not even an export's end line"
                                                     : "it has no end line";
    if (!a.without_end)
      return Status::InvalidArgument(
          "import refused, nothing changed: " + (a.file.empty() ? std::string("the input") : a.file) + ": " + what +
          " ({\"end\":{\"nodes\":N,\"receipts\":M}}, export's last line): an export cut short at a line's end; "
          "an export of frsctl 0.3.0, which wrote none, is taken with --without-end-line");
    std::fprintf(stderr,
                 "frsctl: note: %s: taken with --without-end-line: every line is whole, but whether lines are missing "
                 "after them cannot be told\n",
                 what.c_str());
  }

  // A restore into a store frsd serves is a rollback of the keys it names:
  // said, since an operator may mean a merge.
  if (!create)
    if (std::vector<pid_t> frsd = FlockHolders(store_dir::In(s.cfg.store_dir, store_dir::kStoreLock)); !frsd.empty())
      std::fprintf(stderr,
                   "frsctl: warning: frsd (pid %d) serves this store: each key of the import gets the export's node "
                   "in place of its own, and the uses frsd counted for it since the export are forgotten\n",
                   static_cast<int>(frsd.front()));
  uint64_t applied = 0, no_rule = 0, live_before = 0, live_after = 0;
  if (!a.dry_run) {
    if (create) {
      if (Status st = OpenStoreAndEngine(&s, /*create=*/true, /*engine=*/true); !st.ok()) return st;
    }
    live_before = s.store->Stats().total.evictions_live;
    std::ifstream in(spool_path, std::ios::binary);
    std::string line;
    const uint32_t now_s = static_cast<uint32_t>(s.NowMs() / 1000);
    while (std::getline(in, line)) {
      if (IsReceiptLine(line)) {
        if (Status st = ImportReceipt(line, s.store.get(), now_s); !st.ok())
          return Status::IOError("import stopped at a handoff receipt: " + st.message());
        continue;
      }
      Result<bool> written = s.engine->ImportNode(line);
      if (!written.ok())
        return Status::IOError("import stopped after " + std::to_string(applied) + " of " +
                               std::to_string(checked->lines) + " nodes: " + written.status().message());
      ++(written.value() ? applied : no_rule);
    }
    if (Status st = s.store->Flush(true); !st.ok()) return st;
    live_after = s.store->Stats().total.evictions_live;
  }
  const uint64_t evicted = live_after - live_before;
  if (s.json) {
    JsonOut j;
    j.BeginObject();
    j.Key("checked").Uint(checked->lines);
    j.Key("imported").Uint(applied);
    j.Key("no_rule").Uint(no_rule);
    j.Key("receipts").Uint(checked->receipts);
    j.Key("dry_run").Bool(a.dry_run);
    j.Key("created_store").Bool(create && !a.dry_run);
    j.Key("evictions_live").Uint(evicted);
    j.Key("bizzes").BeginObject();
    for (const auto& [name, n] : checked->per_biz) j.Key(name).Uint(n);
    j.EndObject();
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
  } else {
    const StoreGeometry& g = s.cfg.geometry;
    if (a.dry_run) {
      std::printf("checked %s node%s: all can be imported (dry run, nothing changed)\n",
                  Grouped(checked->lines).c_str(), checked->lines == 1 ? "" : "s");
    } else {
      // A store too small evicted some of them (or of its own) on the way:
      // the first line must not read as success (the exit status is 3).
      std::printf("%s %s node%s into %s%s (%u files x %s key-nodes x %u slots)%s\n",
                  evicted != 0 ? "wrote" : "imported", Grouped(applied).c_str(), applied == 1 ? "" : "s",
                  s.cfg.store_dir.c_str(), create ? ", a new store" : "", g.files, Grouped(g.keynodes).c_str(), g.chain,
                  evicted != 0 ? ", but not all are kept: see the warning below" : "");
      if (no_rule != 0)
        std::printf(
            "%s node%s not imported: no rule of this map takes any of %s blocks (another interval or "
            "algorithm, a removed rule); %s counts are not carried over\n",
            Grouped(no_rule).c_str(), no_rule == 1 ? "" : "s", no_rule == 1 ? "its" : "their",
            no_rule == 1 ? "its" : "their");
    }
    Table t;
    t.AlignRight({1});
    for (const auto& [name, n] : checked->per_biz) t.Row({name, Grouped(n)});
    t.Print(stdout, 2);
    if (evicted != 0)
      std::printf("warning: %s live nodes were evicted to make room: this store is too small for the export\n",
                  Grouped(evicted).c_str());
  }
  // Said once the nodes are in, when frsd would otherwise make a new
  // secret at its start: the step of a move most easily forgotten.
  if (!a.dry_run && applied != 0 && s.cfg.cluster_lease_key.empty() && !LeaseKeyMissingWarning(s.cfg.store_dir).empty())
    std::fprintf(stderr,
                 "frsctl: note: %s has no lease.key: copy the exporting store's into it (cp -p OLD_STORE_DIR/lease.key "
                 "%s/) before frsd starts; the lease and reservation ids the imported nodes hold were made under "
                 "that key, and answer 409 under the new one frsd would make\n",
                 s.cfg.store_dir.c_str(), s.cfg.store_dir.c_str());
  else if (!a.dry_run && applied != 0 && s.cfg.cluster_lease_key.empty() && was_empty &&
           ::access(store_dir::In(s.cfg.store_dir, store_dir::kLeaseKey).c_str(), F_OK) == 0)
    std::fprintf(stderr,
                 "frsctl: note: %s/lease.key was there before these nodes: unless it is a copy of the exporting "
                 "store's, copy that one over it (cp -p OLD_STORE_DIR/lease.key %s/) before frsd starts; the lease "
                 "and reservation ids the imported nodes hold were made under it, and answer 409 under another\n",
                 s.cfg.store_dir.c_str(), s.cfg.store_dir.c_str());
  // Not done as asked: counts were lost (the store's or the export's). The
  // same import again after a grow puts back what the export holds (a line
  // replaces its key's node).
  if (evicted != 0 && !a.dry_run) {
    std::fprintf(stderr,
                 "frsctl: %s live nodes were evicted during the import (the least recently used, of this store or "
                 "of the import; frsd's own new keys too, if it serves): grow the store (frsctl grow --keynodes N, "
                 "with frsd stopped) and import the same file again; a node of this store evicted is lost\n",
                 Grouped(evicted).c_str());
    return kExitFail;
  }
  return kExitOk;
}

}  // namespace frs::ctl
