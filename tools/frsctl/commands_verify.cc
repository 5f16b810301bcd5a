// frsctl verify [--repair]: every header (magic, version, geometry,
// checksum), every chain (no duplicate identities, fields in range, no torn
// node) and the counters; then every other file of the store directory
// (frs/store_admin.h), each by the check frsd's start makes, with what
// frsd will do with it. A lock held by a dead process is recovered as its
// next locker would (listed, not a problem). With --repair it fixes
// what can be fixed, says what it did, and checks again: the exit code is
// that of the second check.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include <cstdio>

#include "commands.h"
#include "format.h"
#include "frs/store_admin.h"
#include "frs/store_dir.h"
#include "frs/unique_fd.h"
#include "json_out.h"
#include "store_users.h"

namespace frs::ctl {
namespace {

void ListJson(JsonOut& j, const char* key, const std::vector<std::string>& v) {
  j.Key(key).BeginArray();
  for (const std::string& s : v) j.String(s);
  j.EndArray();
}

void ListHuman(const char* title, const std::vector<std::string>& v) {
  if (v.empty()) return;
  std::printf("%s\n", title);
  for (const std::string& s : v) std::printf("  %s\n", s.c_str());
}

// absent, clean, damaged, or unreadable (its owner, mode or type, or the
// disk: not damage, and not to be moved aside); `more` after the last two.
std::string StateWord(const SideFileReport& f, const char* more) {
  if (!f.exists) return "absent";
  if (f.status.ok()) return "clean";
  if (f.link) return std::string("a symbolic link") + more;
  const bool damage = f.status.code() == Status::Code::kCorruption || f.status.code() == Status::Code::kMismatch;
  return std::string(damage ? "damaged" : "unreadable") + more;
}

// What frsd's start does with the file; the store's own lease.key is not
// read (nor made) where <cluster lease_key> names the cluster's.
std::string AtStartWords(const Session& s, const SideFileReport& f) {
  if (!s.cfg.cluster_lease_key.empty() && f.path == store_dir::In(s.cfg.store_dir, store_dir::kLeaseKey))
    return "not used: <cluster lease_key> names " + s.cfg.cluster_lease_key;
  return f.AtStartText();
}

// The first bytes of each store file (its header's checked part and
// checksum), as they were before a rebuild: put back when the nodes show the
// rebuilt header wrong.
std::vector<std::pair<std::string, std::string>> KeepHeaders(const Session& s) {
  std::vector<std::pair<std::string, std::string>> kept;
  for (uint32_t i = 0; i < s.cfg.geometry.files; ++i) {
    const std::string p = store_dir::In(s.cfg.store_dir, store_dir::StoreFileName(i));
    std::string bytes(kHeaderBytesRewritten, '\0');
    const UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
    // One entry a file, by its number: empty when it could not be read
    // (missing), and then never written back.
    if (!fd.valid() || ::pread(fd.get(), bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
      bytes.clear();
    kept.emplace_back(p, std::move(bytes));
  }
  return kept;
}

// A rebuilt header names the file by its name; a file swapped with another
// or copied over it holds nodes of another file, which the check then finds
// out of place, every one. More than a few such nodes in a rebuilt file
// (more than 2, and more than half a file's share of the store's nodes):
// the header did not belong there. The kept headers are written back, so
// that a rebuild never turns a wrong file into one frsd accepts.
Status UndoWrongRebuild(Session& s, const std::vector<std::string>& repairs,
                        const std::vector<std::pair<std::string, std::string>>& kept) {
  Result<Store::VerifyReport> probe = s.store->Verify(false);
  if (!probe.ok()) return probe.status();
  const uint64_t share = probe.value().nodes / std::max<uint32_t>(s.cfg.geometry.files, 1);
  std::string wrong;
  const std::vector<uint64_t>& out_of_place = probe.value().misplaced;
  for (uint32_t i = 0; i < kept.size(); ++i) {
    const std::string& path = kept[i].first;
    bool rebuilt = false;
    for (const std::string& r : repairs) rebuilt |= r.starts_with(path + ": header rebuilt");
    const uint64_t misplaced = i < out_of_place.size() ? out_of_place[i] : 0;
    if (rebuilt && misplaced > 2 && misplaced * 2 > share)
      wrong += (wrong.empty() ? "" : "; ") + path + ": under the rebuilt header " + std::to_string(misplaced) +
               " of its nodes belong to another file (swapped with another, or copied over it?)";
  }
  if (wrong.empty()) return Status::OK();
  s.engine.reset();
  s.store.reset();
  for (const auto& [path, bytes] : kept) {
    if (bytes.empty()) continue;
    const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd.valid() || ::pwrite(fd.get(), bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()) ||
        ::fsync(fd.get()) != 0)
      return Status::FromErrno(path + ": putting its header back", errno);
  }
  return Status::Corruption(wrong +
                            ": every header was put back as it was; put each file in its place (or restore "
                            "it from a backup), then verify again");
}

// --repair of a store that would not open for a damaged header: with the
// store stopped (frsd's store lock held, no process mapping a file), each
// damaged header is rebuilt where the rest of the store tells what it held
// (frs/store_admin.h), and the store is opened again. What was done goes to
// `repairs`; a header that cannot be rebuilt stays a problem.
Status RebuildHeaders(Session& s, std::vector<std::string>* repairs) {
  if (pid_t pid = LiveFrsdFromPidFile(s.cfg.pidfile))
    return Status::Busy(
        "frsd (pid " + std::to_string(pid) +
        ") is running on this store: stop it first; a damaged header is rebuilt on a stopped store only");
  Result<UniqueFd> store_lock = TakeFrsdStoreLock(s.cfg.store_dir);
  if (!store_lock.ok()) return store_lock.status();
  std::vector<std::string> paths;
  for (uint32_t i = 0; i < s.cfg.geometry.files; ++i) {
    const std::string p = store_dir::In(s.cfg.store_dir, store_dir::StoreFileName(i));
    if (::access(p.c_str(), F_OK) == 0) paths.push_back(p);
  }
  if (std::vector<StoreUser> users = ProcessesMapping(paths); !users.empty())
    return Status::Busy(DescribeUsers(users) + " has " + users.front().file +
                        " mapped: stop it first; a damaged header is rebuilt on a stopped store only");
  Result<ExclusiveLocks> hold = ExclusiveLocks::Take(paths);
  if (!hold.ok()) return hold.status();
  const auto kept = KeepHeaders(s);
  if (Status r = RepairStoreHeaders(s.cfg.store_dir, s.cfg.geometry, repairs); !r.ok()) return r;
  hold.value().Release();
  if (Status o = OpenStoreAndEngine(&s, /*create=*/false, /*engine=*/false); !o.ok()) return o;
  if (Status u = UndoWrongRebuild(s, *repairs, kept); !u.ok()) {
    repairs->clear();  // put back: nothing of it stays
    return u;
  }
  return Status::OK();
}

// A header Store::Open refused for its checksum, magic or version (not
// the previous format or the other byte order, which have remedies of their
// own). Whether it is damage --repair rebuilds is asked of the files
// (CheckStoreHeadersRepairable): a version not this build's may be damage
// or a newer store.
bool HeaderRefused(const Status& opened) {
  if (opened.ok()) return false;
  const std::string& m = opened.message();
  return m.find("header checksum mismatch") != std::string::npos || m.find("bad magic") != std::string::npos ||
         (m.find(": format version ") != std::string::npos && m.find("frsctl upgrade") == std::string::npos);
}

}  // namespace

Result<int> RunVerify(Session& s, const VerifyArgs& a) {
  // A store whose header is damaged or of another version cannot be opened:
  // that is verify's answer, not a failure of verify.
  Status opened = OpenStoreAndEngine(&s, /*create=*/false, /*engine=*/false);
  // A store that lost a file may have a damaged header beside it, which
  // init --recreate-missing cannot get past: --repair rebuilds that first.
  const bool incomplete = opened.IsNotFound() && opened.message().find(" is incomplete: ") != std::string::npos;
  const Status header_plan = HeaderRefused(opened) || incomplete
                                 ? CheckStoreHeadersRepairable(s.cfg.store_dir, s.cfg.geometry)
                                 : Status::NotFound("");
  if (!opened.ok() && opened.IsNotFound() && !(a.repair && header_plan.ok())) return opened;
  // --repair on a store this user cannot write here (a read-only mount,
  // another owner's files) could not do what it was asked: said as such,
  // not as a problem of the store.
  const std::string first_file = store_dir::In(s.cfg.store_dir, store_dir::StoreFileName(0));
  if (!opened.ok() && a.repair && ::access(first_file.c_str(), R_OK) == 0 &&
      (::access(first_file.c_str(), W_OK) != 0 || ::access(s.cfg.store_dir.c_str(), W_OK) != 0))
    return Status::Unavailable("verify --repair writes the store, and " + s.cfg.store_dir +
                               " cannot be written here (" + opened.message() +
                               "): run it as the store's owner on a writable file system; verify without --repair "
                               "only reads");
  Store::VerifyReport first, after;
  bool rechecked = false;
  // A damaged header found and rebuilt: the first check's problem and
  // repair, and the store checked again whatever its nodes say.
  std::vector<std::string> header_problems, header_repairs;
  if (a.repair && !header_plan.IsNotFound()) {  // a damaged header: rebuilt, or why not
    header_problems.push_back(opened.message());
    opened = header_plan.ok() ? RebuildHeaders(s, &header_repairs) : header_plan;
    if (opened.code() == Status::Code::kBusy) return opened;  // could not do what was asked (exit 3)
  }
  if (opened.ok()) {
    Result<Store::VerifyReport> r = s.store->Verify(a.repair);
    if (!r.ok()) return r.status();
    first = std::move(r).value();
    first.problems.insert(first.problems.begin(), header_problems.begin(), header_problems.end());
    first.repairs.insert(first.repairs.begin(), header_repairs.begin(), header_repairs.end());
    if (a.repair && !first.problems.empty()) {
      Result<Store::VerifyReport> again = s.store->Verify(false);
      if (!again.ok()) return again.status();
      after = std::move(again).value();
      rechecked = true;
      if (Status f = s.store->Flush(true); !f.ok()) return f;
    }
  } else {
    first.problems = header_problems;
    first.problems.push_back(opened.message());
    first.repairs = header_repairs;  // what was written before the failure
    // A header --repair would not rebuild: why, before anyone runs it.
    if (!a.repair && !header_plan.ok() && !header_plan.IsNotFound())
      first.problems.push_back("verify --repair would not rebuild it: " + header_plan.message());
  }
  // The engine's files: checked, never repaired here (frsd's start acts on
  // them as AtStartText says).
  const std::vector<SideFileReport> side = CheckStoreSideFiles(s.cfg.store_dir);
  const bool store_repairable =
      !(rechecked ? after.problems : first.problems).empty() && (opened.ok() || (!a.repair && header_plan.ok()));
  for (const SideFileReport& f : side) {
    if (f.status.ok()) continue;
    const std::string p = f.status.message() + " (" + f.AtStartText() + ")";
    first.problems.push_back(p);
    if (rechecked) after.problems.push_back(p);
  }
  // Not damage: a missing lease.key is made anew at frsd's next start, which
  // voids every id given out before (a store that never served gave none).
  std::vector<std::string> warnings;
  if (opened.ok() && s.cfg.cluster_lease_key.empty() && !LeaseKeyMissingWarning(s.cfg.store_dir).empty())
    warnings.push_back(store_dir::In(s.cfg.store_dir, store_dir::kLeaseKey) +
                       " is missing: frsd makes a new secret at its next start, and every lease and "
                       "reservation id given out before answers 409; restore it from a backup to keep them");
  // Not damage either: a secret its group or others may read, which frsd -t
  // and the start's log warn of (whoever reads it can forge every id).
  if (std::string w = LeaseKeyModeWarning(s.cfg.store_dir); !w.empty()) warnings.push_back(w);
  const std::vector<std::string>& remaining = rechecked ? after.problems : first.problems;
  const bool clean = remaining.empty();
  if (s.json) {
    JsonOut j;
    j.BeginObject();
    j.Key("clean").Bool(clean);
    j.Key("chains").Uint(first.chains);
    j.Key("nodes").Uint(rechecked ? after.nodes : first.nodes);
    ListJson(j, "problems", first.problems);
    ListJson(j, "repairs", first.repairs);
    ListJson(j, "recovered", first.recovered);
    ListJson(j, "remaining", remaining);
    ListJson(j, "warnings", warnings);
    j.Key("files").BeginArray();
    for (const SideFileReport& f : side) {
      j.BeginObject();
      j.Key("path").String(f.path);
      j.Key("state").String(StateWord(f, ""));
      if (!f.status.ok()) j.Key("problem").String(f.status.message());
      j.Key("at_start").String(AtStartWords(s, f));
      j.EndObject();
    }
    j.EndArray();
    j.EndObject();
    std::printf("%s\n", j.str().c_str());
    return clean ? kExitOk : kExitNo;
  }
  // The chains are counted by their locks: one per key-node group (stat's
  // key-nodes are chains too, but a group's share one lock and one check).
  std::printf("verify %s: %s key-node groups, %s nodes: %s\n", s.cfg.store_dir.c_str(), Grouped(first.chains).c_str(),
              Grouped(rechecked ? after.nodes : first.nodes).c_str(),
              first.problems.empty()
                  ? "clean"
                  : (std::to_string(first.problems.size()) + " problem" + (first.problems.size() == 1 ? "" : "s"))
                        .c_str());
  // The named files one line each; day files only when damaged, with a count.
  size_t days = 0, days_damaged = 0;
  const std::string stats_dir = frs::store_dir::In(s.cfg.store_dir, frs::store_dir::kFieldStats);
  std::printf("files:\n");
  for (const SideFileReport& f : side) {
    const bool day = f.at_start == SideFileAtStart::kSetAsideLater && f.path != stats_dir && !f.link;
    days += day;
    days_damaged += day && !f.status.ok();
    if (day && f.status.ok()) continue;
    std::printf("  %s: %s: %s\n", f.path.c_str(), StateWord(f, " (below)").c_str(), AtStartWords(s, f).c_str());
  }
  if (days != 0) std::printf("  %zu statistics day file(s), %zu damaged\n", days, days_damaged);
  ListHuman("warnings:", warnings);
  ListHuman("recovered (what a dead process left, as its next locker recovers it; no damage):", first.recovered);
  ListHuman("problems:", first.problems);
  ListHuman("repaired:", first.repairs);
  if (rechecked) {
    if (clean) {
      std::printf("the store is clean now\n");
    } else {
      ListHuman("still wrong after repair:", after.problems);
    }
  } else if (store_repairable) {
    std::printf("run `frsctl verify --repair` to fix what can be fixed\n");
  }
  return clean ? kExitOk : kExitNo;
}

}  // namespace frs::ctl
