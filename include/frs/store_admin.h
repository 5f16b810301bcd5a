// frs/store_admin.h: a store directory as a whole, beside Store::Open: what
// its files say they are, the store of the previous format frsctl upgrade
// reads (format 4; format 5 opens as it is), and the
// engine's files kept beside it (as LevelDB's DestroyDB and RepairDB sit
// beside DB::Open). frsctl's grow, upgrade and verify are built on these.
//
//   frs::Result<frs::StoreOnDisk> s = frs::InspectStoreFiles("/var/lib/frs");
//   if (!s.ok()) return s.status();  // no store, or a damaged file named
//   if (s->format_version == frs::kPreviousStoreFormatVersion) {
//     auto old = frs::OpenPreviousFormatStore("/var/lib/frs");  // read it, copy it into a new one
//   }
//
// Every function but RepairStoreHeaders reads files only: nothing is mapped
// writable, locked or created, so each is safe beside a running frsd.
//
// Thread safety: plain functions over the files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frs/status.h"
#include "frs/store.h"

namespace frs {

// The store format this build writes and opens, and the one before it,
// which it reads only (OpenPreviousFormatStore). A store of format 5 (the
// same layout, its placement unkeyed) is opened and written as it is, and
// `frsctl upgrade` (or a grow) makes it a store of this format.
// docs/store.md.
inline constexpr uint32_t kStoreFormatVersion = 6;
inline constexpr uint32_t kPreviousStoreFormatVersion = 4;

struct StoreOnDisk {
  uint32_t format_version = 0;  // kStoreFormatVersion, 5, or kPreviousStoreFormatVersion
  StoreGeometry geometry;       // as the files say (srv.xml may say otherwise)
};

// The format and geometry of the store in `dir`, from its files' headers,
// each checked as Store::Open checks it (magic, version, checksum, layout,
// one store). NotFound when the store's first file is missing; an error
// names a damaged or missing file.
Result<StoreOnDisk> InspectStoreFiles(const std::string& dir);

// Unavailable when `dir` is missing and DIR.grow-old is there: a frsctl grow
// was killed between the two renames of its swap (frs/store_dir.h), and a
// store made in `dir` now would serve from zero while the counts wait in
// DIR.grow-old. Whoever would create `dir` asks first (frsd, Store::Open).
Status CheckNoInterruptedGrow(const std::string& dir);

// Rewrites the header of each file of the store in `dir` whose checksum
// fails, when what it held can be told again: every field of a header's
// checked part follows from the geometry `g` (srv.xml's), the file's place
// (its name), the store id of its intact files (none intact: the id the
// damaged ones agree on) and its own creation time. A disk error or a
// stray write that changed a few of those bytes cost the file's every
// count before; each node carries its own checksum, so Verify then judges
// the nodes. Nothing is written when any file says otherwise: an intact
// header of another format or geometry than `g`, two store ids, a file
// past g.files, a damaged header that differs from the rebuilt one in more
// than kMaxHeaderBytesRebuilt bytes or whose file has another size, or, with
// no intact header, one that does not say `g` itself. A header whose
// checksum holds is never rewritten. Only with the store stopped (the
// caller holds frsd's store lock). `repairs` gets a line per file.
inline constexpr int kMaxHeaderBytesRebuilt = 8;
// How many bytes from a file's start RepairStoreHeaders writes (the checked
// part and its checksum): what a caller keeps to put a header back.
inline constexpr size_t kHeaderBytesRewritten = 264;
Status RepairStoreHeaders(const std::string& dir, const StoreGeometry& g, std::vector<std::string>* repairs);
// OK when RepairStoreHeaders would rebuild at least one header and refuse
// none (it reads only); NotFound when no header is damaged; else its refusal.
Status CheckStoreHeadersRepairable(const std::string& dir, const StoreGeometry& g);

// Opens the store of the previous format in `dir`, read-only and without
// locks (it must be stopped): ForEach, Verify without repair, Stats and
// geometry() answer, every other operation is Unavailable.
Result<std::unique_ptr<Store>> OpenPreviousFormatStore(const std::string& dir);

// The bytes of each file of a store of geometry `g` (all its files are the
// same size).
uint64_t StoreFileBytes(const StoreGeometry& g);

// What a geometry whose key-nodes group smaller than 64 / chain costs
// (KeynodeGroup: a keynodes with no divisor near it), one sentence, else "":
// nodes of several slots are evicted from a low fill. frsd -t and frsctl
// grow say it; the geometry is not refused.
std::string KeynodeGroupWarning(const StoreGeometry& g);

// The engine's files beside the store (stats.frs, denials.frs,
// rules.history, the day files of statistics by key field), each checked by
// the function its reader uses, and what frsd's start does with a damaged
// one. docs/store.md, "What survives what".
enum class SideFileAtStart {
  kRefuse,         // frsd will not start until the operator acts
  kSetAside,       // frsd moves it aside at start and makes a new one
  kSetAsideLater,  // a day file: moved aside when frsd first writes it
  kGoesWithout     // frsd serves without what it holds (a denials.frs that is a link)
};

struct SideFileReport {
  std::string path;
  bool exists = false;
  Status status;  // OK: clean (or absent); else what is wrong
  SideFileAtStart at_start = SideFileAtStart::kSetAside;
  bool link = false;  // a symbolic link: frsd writes no file of the directory through one
  // What frsd does with the file at start, as one phrase for a report.
  std::string AtStartText() const;
  // Whether frsd's start refuses on it: a file it reads at start that it
  // cannot read, or a damaged one whose row says so (frsd -t and frsctl
  // grow ask this; frsd's start acts on the same verdicts).
  bool RefusesStart() const;
};

// Every side file of the store in `dir` in a fixed order (the four named
// files, present or not, then each day file found under stats/), each with
// its check's verdict. Changes nothing.
std::vector<SideFileReport> CheckStoreSideFiles(const std::string& dir);

// A sentence when the store's lease.key may be read by its group or others
// (whoever reads it can forge every lease and reservation id), else "":
// frsd -t, the start's log and frsctl verify warn of it.
std::string LeaseKeyModeWarning(const std::string& dir);

// Whether the store in `dir` never served: neither its stats.frs (which
// the first engine of a store makes) nor a store file that holds a node.
// Such a store has given out no lease or reservation id, so the first
// engine that opens it may make its lease.key (frsctl's too).
bool StoreNeverServed(const std::string& dir);

// The files of the store in `dir` (of `files` files) whose making was cut
// short, in a store that never served (no node in any file; no lease.key,
// rules.history or stats.frs of counts beside them): a kill or a power loss
// between a file's creation and its header left no byte but zeros (no
// process holding its lock), or a kill between two files left the later
// ones unmade (then they follow every file there). They hold nothing:
// frsd's start and frsctl init make them (again). Changes nothing.
std::vector<std::string> CutShortStoreFiles(const std::string& dir, uint32_t files);

// The words for the first of the store's `files` files in `dir` that is a
// symbolic link ("" when none is): frsd maps each to write and refuses a
// link (docs/store.md), so frsctl init calls no such store complete.
std::string StoreFileLinkProblem(const std::string& dir, uint32_t files);

// A sentence when the store in `dir` served (StoreNeverServed is false)
// and has lost its lease.key, else "": frsd's next start makes a new
// secret, and every lease and reservation id given out before then answers
// 409.
std::string LeaseKeyMissingWarning(const std::string& dir);

// A sentence when the store in `dir` has a rules.history that cannot be read
// (a FIFO, a device, a directory, its mode), else "": an engine opened then
// knows no rule's past, and a rule whose interval changed shows its keys at
// 0. frsd's start and reload refuse it; frsctl says it.
std::string RuleHistoryUnreadableWarning(const std::string& dir);

}  // namespace frs
