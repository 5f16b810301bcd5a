// store/store_check.h: whether the store a srv.xml names can be opened as
// it says, without mapping, locking or creating anything (frsd -t).
//
// Thread safety: a plain function over the files; safe anywhere.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frs/status.h"
#include "frs/store.h"

namespace frs::store {

struct StoreCheck {
  bool exists = false;  // false: no file of the store yet (frsd creates it)
  uint32_t files_found = 0;
  // Files whose making was cut short (CutShortFile), which frsd's start
  // makes again: neither found nor missing.
  std::vector<std::string> cut_short;
  // Files not there in a store that never served here (a first start cut
  // short before it made them), which the start makes: not missing.
  std::vector<std::string> never_made;
};

// Reads each file's header with pread and checks magic, version, layout,
// checksum and geometry as Open does. A store with some files missing is
// an error naming them; no file at all is `exists = false`. A file whose
// making was cut short is listed in `cut_short`, as Open would make it
// again; one of zeros beside a store that served is damage, said so.
Result<StoreCheck> CheckStoreFiles(const std::string& dir, const StoreGeometry& geometry);

// Whether a store file of `dir` (every frs.N.store there) holds a node by
// its header's counter, or may hold one: it does not open or read as a
// store file (a damaged header, its mode), or the directory does not list.
// Whether a store there was ever used, read without its geometry.
bool StoreMayHoldNodes(const std::string& dir);

// For a directory with no store file: an error when the engine's daily
// counters (stats.frs) show a store that served there, whose files were
// deleted or moved (a new empty store would reset every count unsaid);
// OK otherwise. Only frsctl init --recreate-missing makes such a store anew.
Status GoneStoreProblem(const std::string& dir, uint32_t files);

// A store file's making cut short: its creator holds the file's lock from
// its creation until its header is written and synced, and a kill in
// between (kill -9, SIGXFSZ at its ftruncate under `ulimit -f`), or a power
// loss before the header reached the disk, leaves 0 bytes or its size in
// zeros. Every later start refused such a file ("empty", "bad magic"), and
// named the store's other files missing, their counts lost, where no count
// ever was. A file is taken as such when no process holds its lock, it
// holds no byte but zeros, and nothing was ever counted in the directory
// (StoreNeverServedHere): it holds nothing, and Store::Open (frsd's start,
// frsctl init) removes it and makes it again, with the files the making
// never reached, said through on_recovery. In a store that served the same
// file is damage (a store that served has no file of zeros), refused with
// words saying so.

// Nothing was ever counted in `dir`: the engine never opened there (no
// lease.key, no rules.history, stats.frs absent or zeros: a power loss in a
// store's first minute) and no store file holds a node. Its files are made
// where they are missing or of zeros.
bool StoreNeverServedHere(const std::string& dir);
// The store files of `dir` (of `files`) that are not there are ones a start
// cut short never made: the store never served here, and they all come
// after every file that is there (one at least), since a start makes its
// files in order. A gap (frs.1 missing, frs.2 there) is a file lost.
bool FilesNeverMade(const std::string& dir, uint32_t files);

enum class ZerosFile {
  kNo,        // not a file of zeros (or in use, or unreadable): the usual checks say what it is
  kCutShort,  // its making cut short: made again
  kDamage,    // zeros where a store that served keeps a file
};
ZerosFile ClassifyZeros(const std::string& dir, const std::string& path);

// The refusal of a file of zeros beside a store that served (kDamage).
Status ZerosDamage(const std::string& path);

// Removes each file of the store in `dir` whose making was cut short (its
// lock held while it is checked and removed, the removal synced), and
// returns their indices; `said` gets a sentence for each.
Result<std::vector<uint32_t>> RemoveCutShortFiles(const std::string& dir, uint32_t files,
                                                  const std::function<void(const std::string&)>& said);

}  // namespace frs::store
