// store/store_admin.cc: a store directory as a whole (frs/store_admin.h).
#include "frs/store_admin.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "frs/store_dir.h"
#include "store/format.h"
#include "store/format4_reader.h"
#include "store/store_check.h"
#include "store/store_file.h"

namespace frs {

Status CheckNoInterruptedGrow(const std::string& dir_as_given) {
  // "data/" names the directory grow calls "data" (its sibling is
  // data.grow-old, not data/.grow-old).
  std::string dir = dir_as_given;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 || errno != ENOENT) return Status::OK();
  const std::string old = dir + std::string(store_dir::kGrowOldSuffix);
  if (::stat(old.c_str(), &st) != 0) return Status::OK();
  return Status::Unavailable(dir + " is missing and " + old +
                             " holds the store from before an interrupted frsctl grow: run `frsctl grow` with "
                             "this srv.xml, which says which store to keep, before anything else");
}

// A store of the previous format is read whole by store::OpenFormat4, which
// checks every file as that format did; this build's by each file's header.
Result<StoreOnDisk> InspectStoreFiles(const std::string& dir) {
  const std::string path = store::StoreFile::PathFor(dir, 0);
  if (Result<uint32_t> v = store::FormatVersionOf(path); v.ok() && v.value() == kPreviousStoreFormatVersion) {
    Result<std::unique_ptr<Store>> old = store::OpenFormat4(dir);
    if (!old.ok()) return old.status();
    return StoreOnDisk{kPreviousStoreFormatVersion, old.value()->geometry()};
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(dir + ": no store here (" + path + " is missing)");
    return Status::FromErrno(path, errno);
  }
  store::FileHeader h{};
  struct stat st {};
  ssize_t n = ::pread(fd, &h, sizeof h, 0);
  int err = n < 0 ? errno : 0;
  if (err == 0 && ::fstat(fd, &st) != 0) err = errno;
  ::close(fd);
  if (err != 0) return Status::FromErrno(path, err);
  if (static_cast<size_t>(n) < sizeof h) return Status::Corruption(path + ": shorter than a store file header");
  const StoreGeometry g{h.files, h.keynodes, h.chain};
  // Magic, version, checksum, then the layout, before the geometry is used.
  if (Status s = store::StoreFile::CheckHeader(path, h, g, 0, static_cast<uint64_t>(st.st_size)); !s.ok()) return s;
  Result<store::StoreCheck> all = store::CheckStoreFiles(dir, g);
  if (!all.ok()) return all.status();
  return StoreOnDisk{kStoreFormatVersion, g};
}

Result<std::unique_ptr<Store>> OpenPreviousFormatStore(const std::string& dir) { return store::OpenFormat4(dir); }

uint64_t StoreFileBytes(const StoreGeometry& g) { return store::LayoutFor(g).file_bytes; }

// Key-nodes group only by a divisor of keynodes: a count that is no
// multiple of 64 / chain makes smaller groups (1020 with chains of 8: 6
// key-nodes, 48 slots; a prime: one), in which a node of several slots finds
// no room from a low fill (73 % measured on a prime). One-slot nodes fill
// it as well, so it is said, not refused.
std::string KeynodeGroupWarning(const StoreGeometry& g) {
  const uint32_t ideal = std::min<uint32_t>(64 / std::max<uint32_t>(g.chain, 1), g.keynodes);
  const uint32_t group = KeynodeGroup(g);
  if (group >= ideal) return {};
  return "<store keynodes=\"" + std::to_string(g.keynodes) + "\" chain=\"" + std::to_string(g.chain) +
         "\"> groups key-nodes " + std::to_string(group) + " by " + std::to_string(group) + " (" +
         std::to_string(group * g.chain) + " slots), the largest divisor of keynodes up to " + std::to_string(ideal) +
         ": nodes of several slots (sliding windows, two rules) are evicted from a low fill; a keynodes divisible by " +
         std::to_string(ideal) + " makes groups of " + std::to_string(ideal * g.chain) + " slots (docs/store.md)";
}

}  // namespace frs
