#include "stats/group_table.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <vector>

#include "frs/key.h"
#include "os/mapped_table.h"
#include "os/sigbus_guard.h"
#include "os/store_dir.h"
#include "os/whole_file.h"

namespace frs::stats {
namespace {

// 2: registers of 2^15 (codes of 15 index bits).
constexpr os::TableFormat kGroupFormat{.magic = "FRSGROUP",
                                       .version = 2,
                                       .header_bytes = 256,
                                       .checksum_at = 48,
                                       .sum = os::HeaderSum::kXxh3};
constexpr uint64_t kUnit = 64;
constexpr uint64_t kGrowBytes = 1 << 20;
// Blocks that racing writers may allocate and lose (distinct_sketch.h): the
// bound keeps room for this many beyond one set per group.
constexpr uint64_t kSpareSketches = 64;

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

template <typename T>
std::atomic_ref<T> Ref(T& v) {
  return std::atomic_ref<T>(v);
}
template <typename T>
T Load(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}

uint64_t HashOf(std::string_view value) { return XXH3_64bits(value.data(), value.size()) | 1; }

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

struct GroupTable::Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t index_slots;
  uint32_t groups;  // the bound on groups of their own
  uint32_t distinct;
  uint32_t record_bytes;  // the largest record (a value of kMaxKeyBytes)
  uint64_t pool_start;    // bytes from the file's start
  uint64_t limit_bytes;   // the most the file may grow to
  uint64_t checksum;      // XXH3 of the fields above
  // Shared words, each updated atomically.
  uint64_t claimed;     // groups of their own
  uint64_t next;        // the allocation point (bytes)
  uint64_t file_bytes;  // bytes allocated on disk
  uint64_t field_errors;
  uint64_t lost;     // updates not stored (no space)
  uint32_t other;    // offset of the "~other" record
  uint32_t retired;  // nonzero: moved aside as damaged (GroupTable::MoveAside)
  uint8_t reserved[152];
};
static_assert(sizeof(GroupTable::Header) == 256);
static_assert(offsetof(GroupTable::Header, checksum) == kGroupFormat.checksum_at);
static_assert(sizeof(GroupTable::Header) == kGroupFormat.header_bytes);
static_assert(offsetof(GroupTable::Header, claimed) == 56);
static_assert(offsetof(GroupTable::Header, retired) == 100);

struct GroupTable::Record {
  uint64_t hash;
  uint64_t requests, allowed, denied, units;
  uint16_t value_len;
  uint16_t reserved16;
  uint32_t reserved32;
  // Then `distinct` SketchHeads and the value's bytes.
  sketch::SketchHead* heads() { return reinterpret_cast<sketch::SketchHead*>(this + 1); }
  const sketch::SketchHead* heads() const { return reinterpret_cast<const sketch::SketchHead*>(this + 1); }
  char* value(uint32_t distinct) { return reinterpret_cast<char*>(heads() + distinct); }
  const char* value(uint32_t distinct) const { return reinterpret_cast<const char*>(heads() + distinct); }
};
static_assert(sizeof(GroupTable::Record) == 48);
static_assert(offsetof(GroupTable::Record, value_len) == 40);

namespace {
uint64_t RecordBytes(uint32_t distinct, size_t value_len) {
  return RoundUp(sizeof(GroupTable::Record) + distinct * sizeof(sketch::SketchHead) + value_len, kUnit);
}
uint64_t SketchBytes() { return uint64_t{sketch::kSparseSlots} * 4 + sketch::kRegisters; }

// "" when the header is one of ours (magic, version, checksum), else what is wrong.
std::string HeaderProblem(const GroupTable::Header& h, ssize_t got, const std::string& path) {
  // The geometry is the file's own (a day keeps the shape it was made in):
  // Open and CheckDayFile check it after.
  const Status s = os::CheckTableHeader(path, &h, got < 0 ? 0 : static_cast<uint64_t>(got), kGroupFormat, nullptr, 0);
  return s.ok() ? std::string() : s.message();
}

// "" when a file of `size` bytes holds what header `h` says it does.
std::string LengthProblem(const GroupTable::Header& h, uint64_t size, const std::string& path) {
  const uint64_t file_bytes = Load(h.file_bytes);
  if (size < h.pool_start || size < file_bytes || file_bytes > h.limit_bytes)
    return path + " is shorter than its header says (" + std::to_string(size) + " bytes of " +
           std::to_string(std::max(file_bytes, h.pool_start)) + "): truncated";
  return "";
}

std::atomic<uint64_t> g_aside_seq{0};

// Moves the file open as `fd` away from `path`, when it is still the one
// there. The lock orders processes that found the same file damaged: the
// first moves it, the others see another file at `path` and move nothing.
Result<bool> MoveAsideFd(int fd, const std::string& path, std::string* aside) {
  if (::flock(fd, LOCK_EX) != 0) return Errno("cannot lock", path);
  struct stat mine {
  }, there{};
  Result<bool> out = false;
  if (::fstat(fd, &mine) == 0 && ::stat(path.c_str(), &there) == 0 && mine.st_ino == there.st_ino &&
      mine.st_dev == there.st_dev) {
    *aside =
        os::store_dir::DamagedPath(path, std::to_string(::getpid()) + "-" + std::to_string(g_aside_seq.fetch_add(1)));
    if (::rename(path.c_str(), aside->c_str()) != 0) {
      out = Errno("cannot move aside", path);
    } else {
      // Every process mapping this file sees the mark (a shared page) and
      // opens the day anew; written through the descriptor, never past the
      // file's end (the mapping here may be the guard's zero pages).
      const uint32_t one = 1;
      // Best effort: a process that misses the mark finds the damage by
      // its own check of the file and sets it aside in turn.
      if (static_cast<uint64_t>(mine.st_size) >= sizeof(GroupTable::Header)) {
        [[maybe_unused]] const ssize_t w = ::pwrite(fd, &one, sizeof one, offsetof(GroupTable::Header, retired));
      }
      out = true;
    }
  }
  ::flock(fd, LOCK_UN);
  return out;
}

}  // namespace

class GroupTable::Blocks final : public sketch::BlockSource {
 public:
  explicit Blocks(GroupTable* t) : t_(t) {}
  uint32_t Allocate(uint32_t bytes) override { return t_->Allocate(bytes); }
  uint8_t* At(uint32_t offset, uint32_t bytes) const override { return t_->BlockAt(offset, bytes); }

 private:
  GroupTable* const t_;
};

GroupTable::~GroupTable() {
  if (guard_ >= 0) os::UnregisterGuardedMapping(guard_);
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

// Offsets come from shared memory that a bug, a disk or an operator may have
// damaged: each is checked against the pool before it is followed, and a bad
// one marks the table broken (its figures stop) instead of faulting.
bool GroupTable::InPool(uint64_t offset, uint64_t bytes) const {
  const uint64_t at = offset * kUnit;
  if (at >= pool_start_ && at + bytes <= mapped_ && at + bytes >= at) return true;
  broken_.store(true, std::memory_order_relaxed);
  return false;
}

GroupTable::Record* GroupTable::RecordAt(uint32_t offset) const {
  if (!InPool(offset, RecordBytes(shape_.distinct, 0))) return nullptr;
  auto* r = reinterpret_cast<Record*>(base_ + uint64_t{offset} * kUnit);
  if (r->value_len > kMaxKeyBytes || !InPool(offset, RecordBytes(shape_.distinct, r->value_len))) {
    broken_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  return r;
}

uint8_t* GroupTable::BlockAt(uint32_t offset, uint32_t bytes) const {
  return InPool(offset, bytes) ? base_ + uint64_t{offset} * kUnit : nullptr;
}
uint32_t* GroupTable::index() const { return reinterpret_cast<uint32_t*>(base_ + sizeof(Header)); }

Status GroupTable::MakeDayFile(const std::string& path, const Header& want, const GroupTableShape& shape) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  Header h = want;
  h.next = want.pool_start + RecordBytes(shape.distinct, kOtherGroup.size());
  h.file_bytes = RoundUp(h.next, kGrowBytes);
  h.other = static_cast<uint32_t>(want.pool_start / kUnit);
  Record other{};
  other.hash = HashOf(kOtherGroup);
  other.value_len = static_cast<uint16_t>(kOtherGroup.size());
  std::string rec(RecordBytes(shape.distinct, kOtherGroup.size()), '\0');
  std::memcpy(rec.data(), &other, sizeof other);
  std::memcpy(rec.data() + sizeof other + shape.distinct * sizeof(sketch::SketchHead), kOtherGroup.data(),
              kOtherGroup.size());
  auto made = os::WriteFileWhole(path, os::WholeFileOptions{.exclusive = true}, [&](const std::string& tmp) {
    os::UniqueFd tfd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!tfd.valid()) return Errno("cannot create", tmp);
    // posix_fallocate returns its error instead of setting errno: a
    // full disk was reported as the last failed call's ENOENT.
    if (const int err = ::posix_fallocate(tfd.get(), 0, static_cast<off_t>(h.file_bytes)); err != 0) {
      errno = err;
      return Errno("cannot allocate " + std::to_string(h.file_bytes) + " bytes for", tmp);
    }
    auto put = [&](const void* p, size_t n, off_t at) {
      const ssize_t w = ::pwrite(tfd.get(), p, n, at);
      if (w >= 0 && static_cast<size_t>(w) != n) errno = ENOSPC;  // short: the file system is full
      return w == static_cast<ssize_t>(n);
    };
    const bool ok = put(&h, sizeof h, 0) && put(rec.data(), rec.size(), static_cast<off_t>(want.pool_start));
    return ok ? Status::OK() : Errno("cannot write", tmp);
  });
  return made.ok() ? Status::OK() : made.status();
}

Result<std::unique_ptr<GroupTable>> GroupTable::Open(const std::string& path, const GroupTableShape& shape, Mode mode,
                                                     std::string* set_aside) {
  if (shape.distinct > kMaxDistinctFields || shape.groups == 0) return Status::InvalidArgument("bad group table shape");
  std::unique_ptr<GroupTable> t(new GroupTable());
  t->path_ = path;
  t->shape_ = shape;
  t->read_only_ = mode == Mode::kRead;

  // The geometry this shape asks for.
  Header want{};
  uint32_t slots = 64;
  while (slots < 2 * (uint64_t{shape.groups} + 1)) slots *= 2;
  want.index_slots = slots;
  want.groups = shape.groups;
  want.distinct = shape.distinct;
  want.record_bytes = static_cast<uint32_t>(RecordBytes(shape.distinct, kMaxKeyBytes));
  want.pool_start = RoundUp(sizeof(Header) + uint64_t{slots} * 4, kUnit);
  const uint64_t per_group = want.record_bytes + shape.distinct * SketchBytes();
  want.limit_bytes =
      RoundUp(want.pool_start + (uint64_t{shape.groups} + 1) * per_group + kSpareSketches * SketchBytes() + kGrowBytes,
              kGrowBytes);
  os::SealHeader(&want, kGroupFormat);

  for (int attempt = 0; attempt < 3; ++attempt) {
    // Written never through a link: one at a day file's name had a root
    // frsd count into, or mark as damaged, the file it led to (found from
    // outside).
    // Nor read through one: what it leads to is not this store's counts
    // (GET /stats and frsctl stat read with kRead).
    int fd = ::open(path.c_str(), (t->read_only_ ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT && !t->read_only_) {
      // Made whole under a temporary name, then linked into place: a reader
      // never sees a half-written header, and of two processes creating the
      // same day, one wins the link and the other opens its file.
      if (Status made = MakeDayFile(path, want, shape); !made.ok()) return made;
      continue;  // open what is now there
    }
    if (fd < 0) {
      if (errno == ENOENT) return Status::NotFound("no statistics file " + path);
      if (errno == ELOOP)
        return Status::IOError(path +
                               " is a symbolic link: frsd keeps its statistics only in files of its own there: "
                               "remove it");
      return Errno("cannot open", path);
    }
    t->fd_.reset(fd);
    Header h{};
    std::string wrong = HeaderProblem(h, ::pread(fd, &h, sizeof h, 0), path);
    if (wrong.empty() && std::memcmp(&h, &want, offsetof(Header, checksum)) == 0) {
      struct stat st {};
      if (::fstat(fd, &st) != 0) return Errno("cannot stat", path);
      wrong = LengthProblem(h, static_cast<uint64_t>(st.st_size), path);
      if (wrong.empty()) {
        t->index_slots_ = want.index_slots;
        t->mapped_ = want.limit_bytes;
        t->pool_start_ = want.pool_start;
        t->other_ = h.other;
        void* p = ::mmap(nullptr, t->mapped_, t->read_only_ ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return Errno("cannot map", path);
        t->base_ = static_cast<uint8_t*>(p);
        os::InstallSigbusGuard();
        t->guard_ = os::RegisterGuardedMapping(t->base_, t->mapped_, &t->broken_);
        if (t->guard_ < 0)
          return Status::Unavailable(path + ": not mapped: this process maps more files than it can guard against " +
                                     "their truncation");
        t->blocks_ = std::make_unique<Blocks>(t.get());
        if (t->RecordAt(t->other_) == nullptr) wrong = path + ": its ~other record lies outside the file";
        else if (Load(t->header()->claimed) > t->index_slots_)
          wrong = path + ": it claims more groups than its index holds";
        if (wrong.empty()) {
          if (t->read_only_) t->fd_.reset();  // the mapping needs no descriptor; only growing does
          return t;
        }
      }
    } else if (wrong.empty() && h.distinct <= kMaxDistinctFields && h.groups != 0 &&
               (h.groups != shape.groups || h.distinct != shape.distinct)) {
      // Another geometry (a changed <stats groups>): the day goes on in the
      // shape it was written in; the new one applies from the next day.
      t->fd_.reset();
      return Open(path, GroupTableShape{h.groups, h.distinct}, mode, set_aside);
    } else if (wrong.empty()) {
      wrong = path + ": its header does not match its geometry";
    }
    if (t->read_only_) return Status::Corruption(wrong);
    // A damaged file is never reinterpreted: it is moved aside (readable by
    // hand) and the day starts anew.
    std::string aside;
    Result<bool> moved = MoveAsideFd(t->fd_.get(), path, &aside);
    if (!moved.ok()) return moved.status();
    if (set_aside != nullptr && moved.value()) *set_aside = wrong + "; moved to " + aside + ", the day starts anew";
    t.reset(new GroupTable());
    t->path_ = path;
    t->shape_ = shape;
    t->read_only_ = mode == Mode::kRead;
  }
  return Status::IOError("cannot open " + path + ": it keeps changing under us");
}

bool GroupTable::damaged() const {
  return broken_.load(std::memory_order_relaxed) || (base_ != nullptr && Load(header()->retired) != 0);
}

Result<bool> GroupTable::MoveAside(std::string* aside) {
  if (!fd_.valid()) return Status::InvalidArgument(path_ + ": opened for reading, not moved");
  return MoveAsideFd(fd_.get(), path_, aside);
}

void GroupTable::AddLost(uint64_t n) {
  if (read_only_ || n == 0) return;
  Ref(header()->lost).fetch_add(n, std::memory_order_relaxed);
}

uint32_t GroupTable::Allocate(uint32_t bytes) {
  Header* h = header();
  const uint64_t size = RoundUp(bytes, kUnit);
  const uint64_t off = Ref(h->next).fetch_add(size, std::memory_order_relaxed);
  if (off + size > h->limit_bytes) return 0;
  uint64_t have = Load(h->file_bytes);
  if (off + size > have) {
    const uint64_t want = std::min<uint64_t>(RoundUp(off + size, kGrowBytes), h->limit_bytes);
    if (::posix_fallocate(fd_.get(), static_cast<off_t>(have), static_cast<off_t>(want - have)) != 0) return 0;
    while (have < want && !Ref(h->file_bytes).compare_exchange_weak(have, want, std::memory_order_acq_rel)) {
    }
  }
  return static_cast<uint32_t>(off / kUnit);
}

Status GroupTable::Trim() {
  if (!fd_.valid() || read_only_) return Status::InvalidArgument(path_ + ": opened for reading, not trimmed");
  Header* h = header();
  const uint64_t have = Load(h->file_bytes);
  // An allocation refused at the limit left `next` past what is on disk.
  const uint64_t want = std::min(RoundUp(Load(h->next), 4096), have);
  if (want == have) return Status::OK();
  // The header first: a file never holds less than its header says.
  Ref(h->file_bytes).store(want, std::memory_order_release);
  if (::ftruncate(fd_.get(), static_cast<off_t>(want)) != 0) {
    Ref(h->file_bytes).store(have, std::memory_order_release);
    return Errno("cannot trim", path_);
  }
  return Status::OK();
}

const GroupTable::Record* GroupTable::Find(std::string_view value, uint64_t hash) const {
  const uint32_t* slots = index();
  for (uint32_t i = 0; i < index_slots_; ++i) {
    const uint32_t off = Load(slots[(hash + i) & (index_slots_ - 1)]);
    if (off == 0) return nullptr;
    const Record* r = RecordAt(off);
    if (r == nullptr) return nullptr;
    // A published record's hash is never 0 (HashOf): zeros are a file cut
    // and grown back under it.
    if (r->hash == 0) broken_.store(true, std::memory_order_relaxed);
    if (r->hash == hash && r->value_len == value.size() &&
        std::memcmp(r->value(shape_.distinct), value.data(), value.size()) == 0)
      return r;
  }
  return nullptr;
}

GroupTable::Record* GroupTable::FindOrAdd(std::string_view value, uint64_t hash) {
  Header* h = header();
  if (value == kOtherGroup) return RecordAt(other_);
  uint32_t* slots = index();
  uint32_t mine = 0;  // a record written for this value, not yet published
  for (uint32_t i = 0; i < index_slots_; ++i) {
    uint32_t& slot = slots[(hash + i) & (index_slots_ - 1)];
    uint32_t off = Load(slot);
    if (off == 0 && mine == 0) {
      // A group of its own while the bound allows, else "~other". The bound
      // is read, and counted once a group is published: writers racing to
      // add new values at the bound may each add one (the bound is soft by
      // their number), and one value's racing first adds land in its group.
      if (Load(h->claimed) >= h->groups) {
        // The bound may have just been reached by a writer publishing this
        // very value here (it counts after publishing, with release): look
        // again before counting in ~other.
        off = Load(slot);
        if (off == 0) return RecordAt(other_);
      } else {
        mine = Allocate(static_cast<uint32_t>(RecordBytes(shape_.distinct, value.size())));
        if (mine == 0) return nullptr;
        Record* r = RecordAt(mine);
        if (r == nullptr) return nullptr;
        r->hash = hash;
        r->value_len = static_cast<uint16_t>(value.size());
        std::memcpy(r->value(shape_.distinct), value.data(), value.size());
      }
    }
    if (off == 0) {
      if (Ref(slot).compare_exchange_strong(off, mine, std::memory_order_acq_rel)) {
        Ref(h->claimed).fetch_add(1, std::memory_order_release);
        return RecordAt(mine);
      }
      // Another writer took the slot: `off` is its record.
    }
    Record* r = RecordAt(off);
    if (r == nullptr) return nullptr;
    if (r->hash == hash && r->value_len == value.size() &&
        std::memcmp(r->value(shape_.distinct), value.data(), value.size()) == 0)
      return r;  // a record of ours, if any, goes unused
  }
  return RecordAt(other_);
}

bool GroupTable::AddTo(Record* r, const GroupCounts& delta, const uint32_t* codes) {
  // requests is allowed + denied (every decision is one or the other): one
  // atomic add fewer per table on the request path; the word stays unused.
  if (delta.allowed) Ref(r->allowed).fetch_add(delta.allowed, std::memory_order_relaxed);
  if (delta.denied) Ref(r->denied).fetch_add(delta.denied, std::memory_order_relaxed);
  if (delta.units) Ref(r->units).fetch_add(delta.units, std::memory_order_relaxed);
  bool ok = true;
  for (uint32_t d = 0; d < shape_.distinct && codes != nullptr; ++d)
    ok = sketch::Insert(&r->heads()[d], blocks_.get(), codes[d]) && ok;
  return ok;
}

bool GroupTable::Add(std::string_view value, const GroupCounts& delta, const uint32_t* distinct_codes) {
  if (read_only_ || damaged()) return false;
  Record* r = FindOrAdd(value, HashOf(value));
  if (r == nullptr || !AddTo(r, delta, distinct_codes)) {
    Ref(header()->lost).fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void GroupTable::Prefetch(std::string_view value, const uint32_t* codes) const {
  if (broken_.load(std::memory_order_relaxed)) return;
  const Record* r = Find(value, HashOf(value));
  if (r == nullptr) return;
  for (uint32_t d = 0; d < shape_.distinct; ++d) {
    const uint32_t dense = Load(r->heads()[d].dense);
    if (const uint8_t* regs = dense == 0 ? nullptr : BlockAt(dense, sketch::kRegisters))
      __builtin_prefetch(regs + sketch::RegisterOf(codes[d]), 1);
  }
}

bool GroupTable::Merge(const GroupRow& row) {
  if (read_only_ || damaged()) return false;
  Record* r = FindOrAdd(row.value, HashOf(row.value));
  if (r == nullptr) return false;
  // A merge adds counts another shard (or an admin's POST /stats) sends:
  // they stop at 2^63 instead of wrapping to a small number (requests
  // 2^64-1 then 5 read 4), which leaves the request path's adds of one
  // each 2^63 of room before they could wrap.
  static constexpr uint64_t kCeiling = uint64_t{1} << 63;
  const auto capped = [](uint64_t& word, uint64_t add) {
    auto w = Ref(word);
    uint64_t v = w.load(std::memory_order_relaxed);
    while (add != 0 &&
           !w.compare_exchange_weak(v, v >= kCeiling || add >= kCeiling - v ? std::max(v, kCeiling) : v + add,
                                    std::memory_order_relaxed)) {
    }
  };
  capped(r->allowed, row.counts.allowed);
  capped(r->denied, row.counts.denied);
  capped(r->units, row.counts.units);
  bool ok = true;
  for (uint32_t d = 0; d < shape_.distinct && d < row.distinct.size(); ++d)
    ok = row.distinct[d].InsertInto(&r->heads()[d], blocks_.get()) && ok;
  return ok;
}

void GroupTable::AddFieldErrors(uint64_t n) {
  if (read_only_ || n == 0) return;
  Ref(header()->field_errors).fetch_add(n, std::memory_order_relaxed);
}

GroupRow GroupTable::RowOf(const Record& r, bool sketches) const {
  GroupRow row;
  row.value.assign(r.value(shape_.distinct), r.value_len);
  const uint64_t allowed = Load(r.allowed), denied = Load(r.denied);
  row.counts = {allowed > UINT64_MAX - denied ? UINT64_MAX : allowed + denied, allowed, denied, Load(r.units)};
  for (uint32_t d = 0; d < shape_.distinct && sketches; ++d)
    row.distinct.push_back(sketch::Sketch::Read(r.heads()[d], *blocks_));
  return row;
}

std::vector<GroupRow> GroupTable::Rows(bool sketches) const {
  std::vector<GroupRow> rows;
  const uint32_t* slots = index();
  for (uint32_t i = 0; i < index_slots_; ++i)
    if (uint32_t off = Load(slots[i]); off != 0)
      if (const Record* r = RecordAt(off)) {
        // A record is written whole before its offset is published: one
        // whose value does not give its hash was damaged after (a file cut
        // and grown back reads as zeros), and is left out, the file marked.
        if (r->hash != HashOf(std::string_view(r->value(shape_.distinct), r->value_len))) {
          broken_.store(true, std::memory_order_relaxed);
          continue;
        }
        rows.push_back(RowOf(*r, sketches));
      }
  const Record* other = RecordAt(other_);
  if (other != nullptr && (Load(other->allowed) != 0 || Load(other->denied) != 0))
    rows.push_back(RowOf(*other, sketches));
  return rows;
}

bool GroupTable::Row(std::string_view value, GroupRow* out) const {
  const Record* r = value == kOtherGroup ? RecordAt(other_) : Find(value, HashOf(value));
  if (r == nullptr) return false;
  *out = RowOf(*r, true);
  return true;
}

uint64_t GroupTable::field_errors() const { return Load(header()->field_errors); }
uint64_t GroupTable::lost() const { return Load(header()->lost); }
uint32_t GroupTable::groups() const { return static_cast<uint32_t>(Load(header()->claimed)); }

Status CheckDayFile(const std::string& path) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return Status::NotFound("no statistics file " + path);
    return Errno("cannot open", path);
  }
  GroupTable::Header h{};
  if (std::string w = HeaderProblem(h, ::pread(fd.get(), &h, sizeof h, 0), path); !w.empty())
    return Status::Corruption(w);
  // The geometry the header claims must be one Open makes.
  uint32_t slots = 64;
  while (slots < 2 * (uint64_t{h.groups} + 1)) slots *= 2;
  if (h.header_bytes != sizeof h || h.distinct > kMaxDistinctFields || h.groups == 0 || h.index_slots != slots ||
      h.pool_start != RoundUp(sizeof h + uint64_t{slots} * 4, kUnit) ||
      h.record_bytes != RecordBytes(h.distinct, kMaxKeyBytes) || h.limit_bytes < h.pool_start)
    return Status::Corruption(path + ": its header does not match its geometry");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Errno("cannot stat", path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (std::string w = LengthProblem(h, size, path); !w.empty()) return Status::Corruption(w);
  if (h.claimed > h.index_slots) return Status::Corruption(path + ": it claims more groups than its index holds");
  const uint64_t end = std::min(size, h.limit_bytes);
  auto in_pool = [&](uint64_t offset, uint64_t bytes) {
    const uint64_t at = offset * kUnit;
    return at >= h.pool_start && at + bytes <= end;
  };
  // One record: in the pool, a value no longer than a key, the hash of its
  // value, and sketch blocks in the pool.
  auto check_record = [&](uint32_t offset, const std::string& where) -> Status {
    if (!in_pool(offset, RecordBytes(h.distinct, 0)))
      return Status::Corruption(path + ": " + where + " points outside the pool (offset " + std::to_string(offset) +
                                ")");
    std::vector<uint8_t> buf(RecordBytes(h.distinct, kMaxKeyBytes));
    const ssize_t got = ::pread(fd.get(), buf.data(), buf.size(), static_cast<off_t>(uint64_t{offset} * kUnit));
    if (got < static_cast<ssize_t>(RecordBytes(h.distinct, 0))) return Errno("cannot read", path);
    GroupTable::Record r;
    std::memcpy(&r, buf.data(), sizeof r);
    if (r.value_len > kMaxKeyBytes || !in_pool(offset, RecordBytes(h.distinct, r.value_len)) ||
        static_cast<uint64_t>(got) < sizeof r + h.distinct * sizeof(sketch::SketchHead) + r.value_len)
      return Status::Corruption(path + ": " + where + " has a value length of " + std::to_string(r.value_len));
    const char* value = reinterpret_cast<const char*>(buf.data()) + sizeof r + h.distinct * sizeof(sketch::SketchHead);
    if (r.hash != HashOf(std::string_view(value, r.value_len)))
      return Status::Corruption(path + ": " + where + " holds a value that does not match its hash");
    for (uint32_t d = 0; d < h.distinct; ++d) {
      sketch::SketchHead head;
      std::memcpy(&head, buf.data() + sizeof r + d * sizeof head, sizeof head);
      if ((head.sparse != 0 && !in_pool(head.sparse, uint64_t{sketch::kSparseSlots} * 4)) ||
          (head.dense != 0 && !in_pool(head.dense, sketch::kRegisters)))
        return Status::Corruption(path + ": " + where + " has a sketch outside the pool");
    }
    return Status::OK();
  };
  if (Status s = check_record(h.other, "its ~other record"); !s.ok()) return s;
  std::vector<uint32_t> index(h.index_slots);
  if (::pread(fd.get(), index.data(), index.size() * 4, sizeof h) != static_cast<ssize_t>(index.size() * 4))
    return Errno("cannot read the index of", path);
  for (uint32_t i = 0; i < h.index_slots; ++i) {
    if (index[i] == 0) continue;
    if (Status s = check_record(index[i], "index slot " + std::to_string(i)); !s.ok()) return s;
  }
  return Status::OK();
}

}  // namespace frs::stats
