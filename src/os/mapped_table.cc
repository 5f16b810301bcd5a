#include "os/mapped_table.h"

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace frs::os {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kVersionAt = 8;
constexpr size_t kGeometryAt = 12;  // header_bytes, then the geometry

uint64_t Fnv1a(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

uint64_t HeaderChecksum(const void* h, const TableFormat& f) {
  return f.sum == HeaderSum::kFnv1a ? Fnv1a(h, f.checksum_at) : XXH3_64bits(h, f.checksum_at);
}

void SealHeader(void* h, const TableFormat& f) {
  auto* b = static_cast<uint8_t*>(h);
  std::memcpy(b, f.magic.data(), kMagicBytes);
  std::memcpy(b + kVersionAt, &f.version, sizeof f.version);
  std::memcpy(b + kGeometryAt, &f.header_bytes, sizeof f.header_bytes);
  const uint64_t sum = HeaderChecksum(h, f);
  std::memcpy(b + f.checksum_at, &sum, sizeof sum);
}

Status CheckTableHeader(const std::string& path, const void* have, uint64_t file_size, const TableFormat& f,
                        const void* want, uint64_t table_bytes) {
  const auto* h = static_cast<const uint8_t*>(have);
  if (file_size < f.header_bytes) return Status::Corruption(path + ": shorter than its header");
  if (std::memcmp(h, f.magic.data(), kMagicBytes) != 0) return Status::Corruption(path + ": bad magic");
  uint32_t version;
  std::memcpy(&version, h + kVersionAt, sizeof version);
  if (version != f.version)
    return Status::Mismatch(path + ": format version " + std::to_string(version) + ", this build reads " +
                            std::to_string(f.version));
  uint64_t sum;
  std::memcpy(&sum, h + f.checksum_at, sizeof sum);
  if (sum != HeaderChecksum(h, f)) return Status::Corruption(path + ": header checksum");
  if (want != nullptr &&
      std::memcmp(h + kGeometryAt, static_cast<const uint8_t*>(want) + kGeometryAt, f.checksum_at - kGeometryAt) != 0)
    return Status::Mismatch(path + ": table layout differs from this build's");
  if (file_size < table_bytes)
    return Status::Corruption(path + ": truncated (" + std::to_string(file_size) + " bytes of " +
                              std::to_string(table_bytes) + ")");
  // Made by ftruncate to its size and never grown: bytes past it are
  // someone else's (a copy over another file, a bad disk), as for a store
  // file, whose check words the fix alike.
  if (table_bytes != 0 && file_size > table_bytes)
    return Status::Corruption(path + ": extended (" + std::to_string(file_size) + " bytes of " +
                              std::to_string(table_bytes) + "): with frsd stopped, truncate -s " +
                              std::to_string(table_bytes) + " " + path +
                              " gives it its size back; then frsctl verify checks what it holds");
  return Status::OK();
}

Status CheckTableHeaderOf(int fd, const std::string& path, const TableFormat& f, const void* want,
                          uint64_t table_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("cannot stat " + path, errno);
  std::vector<uint8_t> h(f.header_bytes);
  const ssize_t got = ::pread(fd, h.data(), h.size(), 0);
  if (got < 0) return Status::FromErrno("cannot read " + path, errno);
  // A short read is a short file, whatever fstat said a moment before.
  const uint64_t size =
      static_cast<uint64_t>(got) < f.header_bytes ? static_cast<uint64_t>(got) : static_cast<uint64_t>(st.st_size);
  return CheckTableHeader(path, h.data(), size, f, want, table_bytes);
}

Result<MappedTable> OpenMappedTable(const std::string& path, const TableFormat& f, const void* want,
                                    uint64_t table_bytes, bool read_only) {
  MappedTable t;
  if (path.empty() || (read_only && ::access(path.c_str(), F_OK) != 0 && errno == ENOENT)) {
    auto zeros = ZeroPages::Map(table_bytes);
    if (!zeros.ok()) return zeros.status();
    t.memory = std::move(zeros.value());
    t.base = t.memory.data();
    std::memcpy(t.base, want, f.header_bytes);
    return t;
  }
  auto file =
      MappedFile::Open(path, read_only ? MappedFile::Mode::kReadOnly : MappedFile::Mode::kCreateIfMissing, table_bytes);
  if (!file.ok()) return file.status();
  t.file = std::move(file.value());
  t.base = t.file->data();
  if (t.file->created()) {
    // Backed by blocks before its first page is written: a full disk is an
    // error here, not a SIGBUS later in a worker (or in the master, when a
    // reload adds a biz and claims its slot).
    if (Status s = t.file->Reserve(); !s.ok()) {
      // Not left behind as a file of zeros (a bad magic to every later
      // opener, moved aside at each start): this open made it, and the
      // name still names it.
      if (t.file->IsAt(path)) ::unlink(path.c_str());
      return s;
    }
    std::memcpy(t.base, want, f.header_bytes);
    if (Status s = t.file->FinishCreate(); !s.ok()) return s;
    return t;
  }
  if (Status s = CheckTableHeader(path, t.base, t.file->size(), f, want, table_bytes); !s.ok()) return s;
  if (auto n = t.file->BytesToReserve(); !read_only && n.ok() && n.value() > 0)
    if (Status s = t.file->Reserve(); !s.ok()) return s;
  return t;
}

}  // namespace frs::os
