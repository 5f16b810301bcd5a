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

namespace {

struct HeaderRead {
  std::string path;
  store::FileHeader h{};
  uint64_t size = 0;
  bool read = false;   // a whole header was read
  bool sound = false;  // its magic, version and checksum hold
};

HeaderRead ReadHeader(const std::string& path) {
  HeaderRead r;
  r.path = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return r;
  struct stat st {};
  r.read = ::pread(fd, &r.h, sizeof r.h, 0) == static_cast<ssize_t>(sizeof r.h) && ::fstat(fd, &st) == 0;
  ::close(fd);
  r.size = static_cast<uint64_t>(st.st_size);
  r.sound = r.read && r.h.magic == store::kMagic && r.h.version == store::kFormatVersion &&
            store::HeaderChecksum(r.h) == r.h.checksum;
  return r;
}

}  // namespace

Status RepairStoreHeaders(const std::string& dir, const StoreGeometry& g, std::vector<std::string>* repairs) {
  std::vector<HeaderRead> files;
  const HeaderRead* model = nullptr;  // a sound header of this store: its id and creation time
  for (uint32_t i = 0; i < g.files; ++i) files.push_back(ReadHeader(store::StoreFile::PathFor(dir, i)));
  for (const HeaderRead& f : files)
    if (f.sound && f.h.files == g.files && f.h.keynodes == g.keynodes && f.h.chain == g.chain) model = &f;
  const uint64_t want_bytes = store::LayoutFor(g).file_bytes;
  std::string refused;
  for (uint32_t i = 0; i < g.files; ++i) {
    HeaderRead& f = files[i];
    if (!f.read || f.sound) continue;  // a missing file, or a header to judge by CheckHeader
    if (f.h.magic == store::kMagic && f.h.version == kPreviousStoreFormatVersion) {
      refused += (refused.empty() ? "" : "; ") + f.path + ": a file of the previous format: run frsctl upgrade";
      continue;
    }
    if (f.size != want_bytes) {
      refused += (refused.empty() ? "" : "; ") + f.path + ": its header is damaged and the file is " +
                 std::to_string(f.size) + " bytes, not the " + std::to_string(want_bytes) +
                 " of this geometry: not rebuilt";
      continue;
    }
    store::FileHeader want = f.h;
    store::StoreFile::WriteIdentity(&want, g, i, model ? model->h.store_id : f.h.store_id,
                                    model ? model->h.created_unix : f.h.created_unix);
    int differ = 0;
    const auto* a = reinterpret_cast<const unsigned char*>(&f.h);
    const auto* b = reinterpret_cast<const unsigned char*>(&want);
    for (size_t k = 0; k < store::kChecksummedBytes; ++k) differ += a[k] != b[k];
    if (differ > kMaxHeaderBytesRebuilt) {
      refused += (refused.empty() ? "" : "; ") + f.path + ": its header differs from this store's in " +
                 std::to_string(differ) + " of its " + std::to_string(store::kChecksummedBytes) +
                 " checked bytes, more than damage to a few: not rebuilt (another store's file, or srv.xml's "
                 "<store> not this store's geometry; restore the file from a backup)";
      continue;
    }
    const int fd = ::open(f.path.c_str(), O_WRONLY | O_CLOEXEC);
    const size_t n = offsetof(store::FileHeader, checksum) + sizeof want.checksum;
    const bool ok = fd >= 0 && ::pwrite(fd, &want, n, 0) == static_cast<ssize_t>(n) && ::fsync(fd) == 0;
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) return Status::FromErrno(f.path + ": rewriting its header", err);
    repairs->push_back(f.path + ": header rebuilt from the store's geometry" +
                       (model ? std::string(" and its other files' id") : std::string(" (a store of one file)")) +
                       " (" + std::to_string(differ) + " byte(s) of it differed" +
                       (differ == 0 ? ": its checksum was the damage" : "") + ")");
  }
  if (!refused.empty()) return Status::Corruption(refused);
  return Status::OK();
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
