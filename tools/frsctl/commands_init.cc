// frsctl init: create a store with srv.xml's geometry, or (--recreate-missing)
// complete a store whose files were lost, with empty ones. frsd never
// completes a store by itself: a missing file means lost counts, which an
// operator should decide about (restore it from a backup first if one exists).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "frs/engine.h"
#include "frs/store_admin.h"
#include "frs/store_dir.h"
#include "json_out.h"
#include "store_users.h"

namespace frs::ctl {
namespace {

// --json: one object, {"store_dir", "done": "nothing" | "created" |
// "recreated", "files": the files made (empty when nothing), "geometry"}.
void PrintInitJson(const Session& s, const char* done, const std::vector<std::string>& made) {
  const StoreGeometry& g = s.cfg.geometry;
  JsonOut j;
  j.BeginObject().Key("store_dir").String(s.cfg.store_dir).Key("done").String(done);
  j.Key("files").BeginArray();
  for (const std::string& p : made) j.String(p);
  j.EndArray();
  j.Key("geometry").BeginObject().Key("files").Uint(g.files).Key("keynodes").Uint(g.keynodes);
  j.Key("chain").Uint(g.chain).EndObject().EndObject();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

Result<int> RunInit(Session& s, const InitArgs& a) {
  // The map frsd will serve, judged first as every other command judges it
  // (exit 2 naming its line): a store made beside a map frsd refuses was
  // an exit 0 that no start could use.
  if (Result<std::vector<BizInfo>> map = ReadMapBizzes(s.cfg.map_path); !map.ok()) return map.status();
  const StoreGeometry& g = s.cfg.geometry;
  std::vector<std::string> missing;
  uint32_t present = 0;
  std::error_code ec;
  // A file whose making was cut short holds nothing: made again as a
  // missing one is (store/store_check.h), and with it those after it.
  const std::vector<std::string> cut_short = CutShortStoreFiles(s.cfg.store_dir, g.files);
  // frsd refuses a store file that is a link (it maps it to write): one to
  // a whole store file was called complete, "nothing to do".
  if (std::string link = StoreFileLinkProblem(s.cfg.store_dir, g.files); !link.empty())
    return Status::IOError(link + ": frsd will not start on this store");
  for (uint32_t i = 0; i < g.files; ++i) {
    std::string p = store_dir::In(s.cfg.store_dir, store_dir::StoreFileName(i));
    const bool cut = std::find(cut_short.begin(), cut_short.end(), p) != cut_short.end();
    if (std::filesystem::exists(p, ec) && !cut) ++present;
    else missing.push_back(p);
  }
  if (missing.empty()) {
    // Every file there is not a store that opens: one truncated, of another
    // magic or damaged was called complete, "nothing to do", exit 0.
    Result<StoreOnDisk> on_disk = InspectStoreFiles(s.cfg.store_dir);
    if (!on_disk.ok())
      return Status::Corruption(on_disk.status().message() +
                                " (the store's files are all here: init makes missing ones only; `frsctl verify` says "
                                "what each holds, and `--repair` rebuilds a damaged header)");
    // Nor one of another geometry than srv.xml's, which frsd refuses.
    if (const StoreGeometry& d = on_disk->geometry;
        d.files != g.files || d.keynodes != g.keynodes || d.chain != g.chain)
      return Status::Mismatch(s.cfg.store_dir +
                              ": the store's files are all here, of files=" + std::to_string(d.files) +
                              " keynodes=" + std::to_string(d.keynodes) + " chain=" + std::to_string(d.chain) +
                              ", and srv.xml says files=" + std::to_string(g.files) +
                              " keynodes=" + std::to_string(g.keynodes) + " chain=" + std::to_string(g.chain) +
                              ": frsd will not start on it (a store is never reinterpreted: set srv.xml's <store> to "
                              "the store's geometry, or change the store's with frsctl grow)");
    // Nor one beside a file frsd's start refuses (stats.frs truncated, say).
    for (const SideFileReport& f : CheckStoreSideFiles(s.cfg.store_dir))
      if (f.RefusesStart())
        return Status::Corruption(f.status.message() + " (" + f.AtStartText() +
                                  "): the store's files are all here, but frsd will not start on it; `frsctl verify` "
                                  "lists each file of the store directory and what to do with it");
    if (s.json) PrintInitJson(s, "nothing", {});
    else std::printf("%s: the store is complete (%u files); nothing to do\n", s.cfg.store_dir.c_str(), g.files);
    return kExitOk;
  }
  // A missing file (exit 3), as every other command that meets this store says.
  // Nor one whose files were never all made (a first start killed between
  // two, in a store that never served): they held nothing.
  const bool never_served = !cut_short.empty();
  if (present > 0 && !a.recreate_missing && !never_served)
    return Status::NotFound("the store in " + s.cfg.store_dir + " is incomplete (" + missing.front() +
                            (missing.size() > 1 ? " and others" : "") +
                            " missing): restore the files from a backup, or pass --recreate-missing to start "
                            "them empty");
  // Files recreated under a running frsd are not the ones it maps: it goes
  // on answering 503 for them until restarted, and meanwhile nothing says
  // so. A stopped store only, held against a start while they are made.
  // Every file gone (deleted or moved under a running frsd, which goes on
  // counting in the files it maps) is refused the same way.
  Result<UniqueFd> store_lock = UniqueFd();
  if (pid_t pid = LiveFrsdFromPidFile(s.cfg.pidfile))
    return Status::Busy("frsd (pid " + std::to_string(pid) + ", pid file " + s.cfg.pidfile +
                        ") is running on this store: stop it first (e.g. systemctl stop frsd); it maps the "
                        "files it had and would not see the ones " +
                        (present > 0 ? "recreated" : "made"));
  if (std::filesystem::exists(s.cfg.store_dir, ec)) {
    store_lock = TakeFrsdStoreLock(s.cfg.store_dir);
    if (!store_lock.ok()) return store_lock.status();
  }
  // The directories above the store's, as frsd's start makes them (the
  // store's own is made by Store::Open, its mode 0700).
  if (present == 0) {
    const std::filesystem::path parent = std::filesystem::path(s.cfg.store_dir).parent_path();
    if (!parent.empty() && !std::filesystem::create_directories(parent, ec) && ec)
      return Status::IOError("cannot create " + parent.string() + ", the store directory's parent: " + ec.message());
  }
  StoreOptions so = StoreOptionsFor(s.cfg, /*create_if_missing=*/present == 0);
  // A store whose files are all gone (its stats.frs left) is made anew only
  // when asked: Store::Open refuses it otherwise, naming the way out.
  so.recreate_missing_files = present > 0 || a.recreate_missing;
  Result<std::unique_ptr<Store>> store = Store::Open(so);
  if (!store.ok()) return store.status();
  // A new store is allocated now, as frsd's start allocates it: one left
  // with holes turns a full disk into a failed write at some later command
  // instead of an error here. (Files recreated into a store are left to
  // frsd's start, which must not race a running one.)
  if (present == 0) {
    if (Status r = store.value()->Reserve(); !r.ok()) {
      // Not left behind with its holes (a second init would call it
      // complete): the files this init made go, as a failed start's do.
      store.value().reset();
      for (const std::string& p : missing) ::unlink(p.c_str());
      return r;
    }
  }
  if (s.json) {
    PrintInitJson(s, present == 0 ? "created" : "recreated", missing);
  } else if (present == 0) {
    std::printf("%s: created a store of %u x %u x %u slots\n", s.cfg.store_dir.c_str(), g.files, g.keynodes, g.chain);
  } else {
    for (const std::string& p : missing)
      std::printf(never_served ? "%s: made (the store never served: it held nothing)\n"
                               : "%s: created empty; the keys it held start again from zero\n",
                  p.c_str());
  }
  return kExitOk;
}

}  // namespace frs::ctl
