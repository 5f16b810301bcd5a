// store/store_admin.cc: a store directory as a whole (frs/store_admin.h).
#include "frs/store_admin.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "frs/store_dir.h"
#include "frs/unique_fd.h"
#include "os/output_file.h"
#include "os/store_dir.h"
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
  // O_NONBLOCK: a FIFO in its place opens at once (and is refused below)
  // instead of waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(dir + ": no store here (" + path + " is missing)");
    return Status::FromErrno(path, errno);
  }
  store::FileHeader h{};
  struct stat st {};
  int err = ::fstat(fd, &st) != 0 ? errno : 0;
  const bool regular = err == 0 && S_ISREG(st.st_mode);
  ssize_t n = regular ? ::pread(fd, &h, sizeof h, 0) : 0;
  if (err == 0 && n < 0) err = errno;
  ::close(fd);
  if (err != 0) return Status::FromErrno(path, err);
  if (!regular) return Status::IOError(os::NotRegularWords(path, st.st_mode));
  if (static_cast<size_t>(n) < sizeof h) return Status::Corruption(path + ": shorter than a store file header");
  const StoreGeometry g{h.files, h.keynodes, h.chain};
  // Magic, version, checksum, then the layout, before the geometry is used.
  if (Status s = store::StoreFile::CheckHeader(path, h, g, 0, static_cast<uint64_t>(st.st_size)); !s.ok()) return s;
  Result<store::StoreCheck> all = store::CheckStoreFiles(dir, g);
  if (!all.ok()) return all.status();
  return StoreOnDisk{h.version, g};  // 5 or 6: CheckHeader took no other
}

namespace {

struct HeaderRead {
  std::string path;
  store::FileHeader h{};
  uint64_t size = 0;
  bool read = false;    // a whole header was read
  bool intact = false;  // its checksum holds: whatever it says, it is not damage
  bool sound = false;   // intact, and this build's magic and version
};

HeaderRead ReadHeader(const std::string& path) {
  HeaderRead r;
  r.path = path;
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));  // a FIFO: at once, unread
  if (!fd.valid()) return r;
  struct stat st {};
  r.read = ::pread(fd.get(), &r.h, sizeof r.h, 0) == static_cast<ssize_t>(sizeof r.h) && ::fstat(fd.get(), &st) == 0;
  r.size = static_cast<uint64_t>(st.st_size);
  r.intact = r.read && store::HeaderChecksum(r.h) == r.h.checksum;
  r.sound = r.intact && r.h.magic == store::kMagic && store::IsReadableFormat(r.h.version);
  return r;
}

int BytesDiffering(const void* a, const void* b, size_t n) {
  int d = 0;
  for (size_t k = 0; k < n; ++k)
    d += static_cast<const unsigned char*>(a)[k] != static_cast<const unsigned char*>(b)[k];
  return d;
}

std::string GeometryText(uint32_t files, uint32_t keynodes, uint32_t chain) {
  return "files=" + std::to_string(files) + " keynodes=" + std::to_string(keynodes) + " chain=" + std::to_string(chain);
}

struct Rebuild {
  uint32_t index;
  store::FileHeader h;
  int differ;
  bool own_id;  // no intact header: its store id is the one the damaged agree on
};

// Every header RepairStoreHeaders would write, or why it writes none.
Result<std::vector<Rebuild>> PlanHeaders(const std::string& dir, const StoreGeometry& g) {
  std::vector<HeaderRead> files;
  for (uint32_t i = 0; i < g.files; ++i) files.push_back(ReadHeader(store::StoreFile::PathFor(dir, i)));
  const std::string beyond = store::StoreFile::PathFor(dir, g.files);
  if (::access(beyond.c_str(), F_OK) == 0)
    return Status::Mismatch(beyond + " exists where srv.xml's <store> says " + std::to_string(g.files) +
                            " file(s): no header is rebuilt from a geometry the store does not have");
  // What the intact headers say is the store: they must agree with srv.xml
  // and with each other, or nothing is rebuilt from either.
  const HeaderRead* model = nullptr;
  for (const HeaderRead& f : files) {
    if (!f.intact) continue;
    if (!f.sound)
      return Status::Mismatch(f.path + ": its header is intact and not this build's (magic or format version " +
                              std::to_string(f.h.version) + "): not damage; no header is rebuilt");
    if (f.h.files != g.files || f.h.keynodes != g.keynodes || f.h.chain != g.chain)
      return Status::Mismatch(f.path + ": the store's " + GeometryText(f.h.files, f.h.keynodes, f.h.chain) +
                              ", srv.xml's <store> " + GeometryText(g.files, g.keynodes, g.chain) +
                              ": no header is rebuilt from srv.xml until it says the store's geometry");
    if (model && model->h.store_id != f.h.store_id)
      return Status::Mismatch(f.path + " and " + model->path + " belong to two stores: no header is rebuilt");
    // Everything else Store::Open asks of it too: its place, its build's node
    // layout, its layout fields and its size.
    const uint32_t index = static_cast<uint32_t>(&f - files.data());
    if (Status c = store::StoreFile::CheckHeader(f.path, f.h, g, index, f.size); !c.ok())
      return Status::Mismatch(c.message() + ": no header is rebuilt beside it");
    model = &f;
  }
  const uint64_t want_bytes = store::LayoutFor(g).file_bytes;
  std::vector<Rebuild> plan;
  for (uint32_t i = 0; i < g.files; ++i) {
    const HeaderRead& f = files[i];
    if (!f.read || f.intact) continue;  // a missing file, or a header to judge by CheckHeader
    const auto refuse = [&](const std::string& why) { return Status::Corruption(f.path + ": " + why); };
    if (f.size != want_bytes)
      return refuse("its header is damaged and the file is " + std::to_string(f.size) + " bytes, not the " +
                    std::to_string(want_bytes) + " of this geometry: not rebuilt");
    // Another build's node layout: its nodes would be read wrongly.
    if (BytesDiffering(&f.h.layout_signature, &store::kLayoutSignature, sizeof f.h.layout_signature) > 1)
      return refuse("its header names another build's node layout: not rebuilt");
    uint64_t id = f.h.store_id;
    if (model) {
      // An id unlike the store's in more than two bytes: another store's file.
      if (BytesDiffering(&f.h.store_id, &model->h.store_id, sizeof id) > 2)
        return refuse("its store id is not this store's: not rebuilt (another store's file?)");
      id = model->h.store_id;
    } else {
      // No intact header to say what the store is: the damaged one must say
      // srv.xml's geometry itself, and agree with the others on the id.
      if (f.h.files != g.files || f.h.keynodes != g.keynodes || f.h.chain != g.chain)
        return refuse("its damaged header says " + GeometryText(f.h.files, f.h.keynodes, f.h.chain) +
                      " and no intact file says which is right: not rebuilt; restore it from a backup");
      for (const HeaderRead& o : files)
        if (o.read && o.h.store_id != f.h.store_id)
          return refuse(
              "the damaged headers disagree on the store id and no intact one says which is right: not "
              "rebuilt");
    }
    // The placement key as the store's (an intact file's), else its own
    // copies' vote: a key unlike the store's would place every lookup wrongly.
    const store::PlaceKey key = model ? store::StoreFile::PlaceKeyOf(model->h) : store::StoreFile::VotedPlaceKey(f.h);
    store::FileHeader want = f.h;
    store::StoreFile::WriteIdentity(&want, g, i, id, f.h.created_unix, key);  // its own time: each file has its own
    const int differ = BytesDiffering(&f.h, &want, store::kChecksummedBytes);
    if (differ > kMaxHeaderBytesRebuilt)
      return refuse("its header differs from this store's in " + std::to_string(differ) + " of its " +
                    std::to_string(store::kChecksummedBytes) +
                    " checked bytes, more than damage to a few: not rebuilt (another store's file, or srv.xml's "
                    "<store> not this store's geometry; restore the file from a backup)");
    plan.push_back(Rebuild{i, want, differ, model == nullptr});
  }
  return plan;
}

}  // namespace

Status CheckStoreHeadersRepairable(const std::string& dir, const StoreGeometry& g) {
  Result<std::vector<Rebuild>> plan = PlanHeaders(dir, g);
  if (!plan.ok()) return plan.status();
  if (plan.value().empty()) return Status::NotFound("no damaged header to rebuild in " + dir);
  return Status::OK();
}

Status RepairStoreHeaders(const std::string& dir, const StoreGeometry& g, std::vector<std::string>* repairs) {
  // Every file is judged before any is written: a refusal writes nothing.
  Result<std::vector<Rebuild>> plan = PlanHeaders(dir, g);
  if (!plan.ok()) return plan.status();
  for (const Rebuild& r : plan.value()) {
    const std::string path = store::StoreFile::PathFor(dir, r.index);
    const UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    constexpr size_t n = kHeaderBytesRewritten;
    static_assert(n == offsetof(store::FileHeader, checksum) + sizeof r.h.checksum);
    const ssize_t w = fd.valid() ? ::pwrite(fd.get(), &r.h, n, 0) : -1;
    if (w >= 0 && static_cast<size_t>(w) != n) errno = EIO;  // short: not one whole header
    if (w != static_cast<ssize_t>(n) || ::fsync(fd.get()) != 0)
      return Status::FromErrno(path + ": rewriting its header", errno);
    repairs->push_back(
        path + ": header rebuilt from the store's geometry and id (" + std::to_string(r.differ) +
        " byte(s) of it differed" +
        (r.differ == 0 ? std::string(": the damage was in its checksum, or in what is kept as it was: its creation "
                                     "time") +
                             (r.own_id ? ", and its store id (no intact file to compare)" : "")
                       : std::string()) +
        ")");
  }
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

std::vector<std::string> CutShortStoreFiles(const std::string& dir, uint32_t files) {
  std::vector<std::string> out;
  const bool never_made = store::FilesNeverMade(dir, files);
  for (uint32_t i = 0; i < files; ++i) {
    std::string path = store::StoreFile::PathFor(dir, i);
    const bool missing = ::access(path.c_str(), F_OK) != 0 && errno == ENOENT;
    if ((missing && never_made) || (!missing && store::ClassifyZeros(dir, path) == store::ZerosFile::kCutShort))
      out.push_back(std::move(path));
  }
  // A file of zeros cut short leaves the files after it unmade: those too.
  if (!out.empty() && !never_made)
    for (uint32_t i = 0; i < files; ++i)
      if (std::string path = store::StoreFile::PathFor(dir, i);
          ::access(path.c_str(), F_OK) != 0 && errno == ENOENT && std::find(out.begin(), out.end(), path) == out.end())
        out.push_back(std::move(path));
  return out;
}

std::string StoreFileLinkProblem(const std::string& dir, uint32_t files) {
  for (uint32_t i = 0; i < files; ++i) {
    const std::string path = store::StoreFile::PathFor(dir, i);
    if (struct stat ls{}; ::lstat(path.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode))
      return os::store_dir::LinkRefusedWords(path);
  }
  return "";
}

}  // namespace frs
