// Store::Open: checks the geometry, opens or creates every file, and makes
// sure they all belong to one store.
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <random>

#include "frs/store_admin.h"
#include "os/path_access.h"
#include "os/store_dir.h"
#include "store/store_check.h"
#include "store/store_impl.h"

namespace frs {
namespace {

// A new store's placement key: 16 bytes from the kernel, never all 0 (which
// says "unkeyed").
Result<store::PlaceKey> NewPlaceKey() {
  store::PlaceKey k;
  while (!k.keyed()) {
    uint64_t w[2];
    size_t got = 0;
    while (got < sizeof w) {
      const ssize_t n = ::getrandom(reinterpret_cast<char*>(w) + got, sizeof w - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("getrandom (a store's placement key)", errno);
      got += static_cast<size_t>(n);
    }
    k = store::PlaceKey{w[0], w[1]};
  }
  return k;
}

// Store files one Open made, removed when it fails.
struct MadeHere {
  std::vector<std::string> paths;
  MadeHere() = default;
  MadeHere(const MadeHere&) = delete;
  MadeHere& operator=(const MadeHere&) = delete;
  ~MadeHere() {
    for (const std::string& p : paths) ::unlink(p.c_str());
  }
};

// A file refused as damaged that holds only zeros: said as what it is
// (store/store_check.h), not as "empty" or "bad magic".
Status ZerosSaid(const std::string& dir, const std::string& path, Status refused) {
  if (refused.code() != Status::Code::kCorruption) return refused;
  switch (store::ClassifyZeros(dir, path)) {
    case store::ZerosFile::kCutShort:
      return Status::Corruption(path +
                                ": holds no byte but zeros, a store file whose making was cut short (a kill, a file "
                                "size limit, a power loss before its header reached the disk), holding no count: "
                                "frsd's next start, or frsctl init, makes it again");
    case store::ZerosFile::kDamage: return store::ZerosDamage(path);
    case store::ZerosFile::kNo: break;
  }
  return refused;
}

// A half store is refused up front rather than completed with empty files:
// a deleted frs.1.store silently recreated would lose its keys' counts with
// no word said. `making_cut_short`: the files missing are those a making
// cut short never reached (made now).
Status CheckWhole(const StoreOptions& opts, bool making_cut_short, const std::vector<uint32_t>& remade) {
  const StoreGeometry& g = opts.geometry;
  std::string missing;
  uint32_t present = 0, first_present = 0;
  std::string unmade;  // missing, and not a file of zeros just removed (said then)
  for (uint32_t i = 0; i < g.files; ++i) {
    std::string p = store::StoreFile::PathFor(opts.dir, i);
    // A link is none of the store's files, whole or missing (a dangling one
    // was said lost, and frsctl init --recreate-missing advised: found from
    // outside).
    if (struct stat ls{}; !opts.read_only && ::lstat(p.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode))
      return Status::IOError(os::store_dir::LinkRefusedWords(p));
    Result<bool> there = os::PathExists(p);
    if (!there.ok()) return there.status();
    if (there.value() && present++ == 0) first_present = i;
    if (!there.value()) missing += (missing.empty() ? "" : ", ") + p;
    if (!there.value() && std::find(remade.begin(), remade.end(), i) == remade.end())
      unmade += (unmade.empty() ? "" : ", ") + p;
  }
  // One of them a making cut short (an open that makes nothing, here):
  // said as such, not as files lost.
  for (uint32_t i = 0; present > 0 && !missing.empty() && !making_cut_short && i < g.files; ++i)
    if (const std::string p = store::StoreFile::PathFor(opts.dir, i);
        store::ClassifyZeros(opts.dir, p) == store::ZerosFile::kCutShort)
      return ZerosSaid(opts.dir, p, Status::Corruption(p));
  // A store of fewer files than srv.xml says is another geometry, not a
  // store that lost its last files: its header says so, and "restore it
  // from a backup" would send the operator after files that never were.
  if (present > 0 && !missing.empty()) {
    auto f = store::StoreFile::Open(opts.dir, first_present, g, /*create=*/false, 0, store::PlaceKey{},
                                    /*read_only=*/true);
    if (!f.ok() && f.status().code() == Status::Code::kMismatch) return f.status();
  }
  // Every file gone, but the engine's daily counters of a store that
  // served here are not: the store was deleted or moved, not never made,
  // and a new empty one would reset every count with no word said.
  if (present == 0 && !opts.recreate_missing_files)
    if (Status gone = store::GoneStoreProblem(opts.dir, g.files); !gone.ok()) return gone;
  if (present == 0 && !opts.create_if_missing)
    return Status::NotFound(store::StoreFile::PathFor(opts.dir, 0) + ": no such store file");
  if (present > 0 && !unmade.empty() && making_cut_short && opts.on_recovery)
    opts.on_recovery("the store in " + opts.dir +
                     " never served (no node in any file, no file of the engine beside it): " + unmade +
                     ", which the start that was cut short did not make, made now");
  // An open that makes nothing (a read of frsctl's) says files never made
  // as such, as frsd -t does, not as files whose counts are lost.
  if (present > 0 && !missing.empty() && !making_cut_short && store::FilesNeverMade(opts.dir, g.files))
    return Status::NotFound("the store in " + opts.dir + " never served: " + missing +
                            ", which the start that was cut short did not make, is not there yet; frsd's next "
                            "start, or frsctl init, makes it");
  if (present > 0 && !missing.empty() && !opts.recreate_missing_files && !making_cut_short)
    return Status::NotFound(
        "the store in " + opts.dir + " is incomplete: " + missing +
        " is missing (the counts it held are lost unless you restore it from a backup); "
        "restore it, or start it empty with `frsctl init --recreate-missing` (then `frsctl import` puts an "
        "export back into it)");
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& opts) {
  const StoreGeometry& g = opts.geometry;
  if (g.files < 1 || g.files > 256) return Status::InvalidArgument("store files must be 1..256");
  if (g.keynodes < 1 || g.keynodes > (1u << 26)) return Status::InvalidArgument("store keynodes must be 1..67108864");
  if (g.chain < 1 || g.chain > 64) return Status::InvalidArgument("store chain must be 1..64");
  if (opts.dir.empty()) return Status::InvalidArgument("store dir is empty");

  std::error_code ec;
  // Not there, or not ours to see: a directory this user may not search is
  // no reason to say "no store" (or to create one).
  Result<bool> dir_exists = os::PathExists(opts.dir);
  if (!dir_exists.ok()) return dir_exists.status();
  // A file where the directory should be: said as such, not as "no such
  // store file" under it (nor, for frsd, ENOTDIR from the first open).
  if (dir_exists.value() && !std::filesystem::is_directory(opts.dir, ec))
    return Status::InvalidArgument(opts.dir + ": not a directory (<store dir> must name a directory)");
  if (!dir_exists.value()) {
    if (Status grow = CheckNoInterruptedGrow(opts.dir); !grow.ok()) return grow;
    if (!opts.create_if_missing) return Status::NotFound(opts.dir + ": no store here (directory missing)");
    if (::mkdir(opts.dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno(opts.dir, errno);
  }
  // A file whose making was cut short holds nothing: removed and made again
  // (store/store_check.h), with the files after it that the making never
  // reached, when no file left holds a node.
  const bool makes_files = !opts.read_only && (opts.create_if_missing || opts.recreate_missing_files);
  std::vector<uint32_t> cut_short;
  if (makes_files) {
    Result<std::vector<uint32_t>> removed = store::RemoveCutShortFiles(opts.dir, g.files, opts.on_recovery);
    if (!removed.ok()) return removed.status();
    cut_short = std::move(removed.value());
  }
  // A file is cut short only where nothing was counted: the files the
  // making never reached are made with it, as are the files a start killed
  // between two files never made.
  const bool making_cut_short = !cut_short.empty() || (makes_files && store::FilesNeverMade(opts.dir, g.files));
  if (Status whole = CheckWhole(opts, making_cut_short, cut_short); !whole.ok()) return whole;
  // A new store gets a random id; files of one store must agree on it.
  // Existing files are opened first, so that a file recreated empty takes
  // the id of the store it joins.
  // So does its placement key (format.h): random, from the kernel, never 0;
  // a file recreated in a store of format 5 stays unkeyed, as its store.
  std::random_device rd;
  const uint64_t new_id = (uint64_t{rd()} << 32) ^ rd();
  uint64_t id = 0;
  store::PlaceKey key;
  bool have_id = false;
  std::string first_path;  // the file `id` and `key` were read from
  std::vector<std::unique_ptr<store::StoreFile>> files(g.files);
  // The files this call made go again if it fails after them (a full disk
  // at a later file, a foreign file among them): left, a half-made store
  // was "missing files, their counts lost" to every later start. They hold
  // a header and no node. Declared after `files`: removed while still open.
  MadeHere made;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t i = 0; i < g.files; ++i) {
      if (files[i]) continue;
      if (pass == 0 && !std::filesystem::exists(store::StoreFile::PathFor(opts.dir, i), ec)) continue;
      const bool create = pass == 1 && makes_files;
      // A key is drawn only for a store made here (getrandom may wait for
      // the kernel's entropy early at boot: not for a store that has one).
      if (create && !have_id) {
        Result<store::PlaceKey> fresh = NewPlaceKey();
        if (!fresh.ok()) return fresh.status();
        key = fresh.value();
      }
      auto f = store::StoreFile::Open(opts.dir, i, g, create, have_id ? id : new_id, key, opts.read_only);
      if (!f.ok()) return ZerosSaid(opts.dir, store::StoreFile::PathFor(opts.dir, i), f.status());
      if (f.value()->created()) made.paths.push_back(f.value()->path());
      if (!have_id) {
        id = f.value()->store_id();
        key = f.value()->place_key();
        first_path = f.value()->path();
        have_id = true;
      } else if (f.value()->store_id() != id) {
        return Status::Mismatch(
            store::StoreFile::ForeignFileWords(first_path, id, f.value()->path(), f.value()->store_id()));
      } else if (!(f.value()->place_key() == key)) {
        return Status::Mismatch(f.value()->path() +
                                ": its placement key is not the other files' (a file of this store made again "
                                "by hand, or damage): its nodes would not be found; restore it from a backup");
      }
      files[i] = std::move(f.value());
    }
  }
  made.paths.clear();  // the store is whole: kept
  return std::unique_ptr<Store>(std::make_unique<store::StoreImpl>(opts, std::move(files)));
}

}  // namespace frs
