#include "stats/recent_denials.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>

#include "frs/key.h"
#include "os/mapped_file.h"
#include "os/mapped_table.h"
#include "os/store_dir.h"

namespace frs::stats {
namespace {

// 2: a bucket is one word (minute, count).
constexpr os::TableFormat kDenialsFormat{.magic = "FRSDENY1",
                                         .version = 2,
                                         .header_bytes = 64,
                                         .checksum_at = 32,
                                         .sum = os::HeaderSum::kXxh3};

template <typename T>
T Load(const T& v) {
  return std::atomic_ref<T>(const_cast<T&>(v)).load(std::memory_order_acquire);
}

// The biz enters through a seed that is its own hash: XXH3 mixes its seed
// linearly into keys of 1 to 8 bytes, and the bare id (10, 11, 12) made
// short keys of neighbouring bizzes ("p|1", "p|2", "p|3") hash alike and
// share one slot, shown under the first. Slots written with the bare id
// before this do not verify (Top skips them) and are reused once stale:
// an upgrade forgets at most the last kMinutes of denials.
uint64_t HashOf(uint16_t biz, std::string_view key) {
  const unsigned char id[2] = {static_cast<unsigned char>(biz & 0xff), static_cast<unsigned char>(biz >> 8)};
  return XXH3_64bits_withSeed(key.data(), key.size(), XXH3_64bits(id, sizeof id)) | 1;
}

}  // namespace

struct RecentDenials::Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t slots;
  uint32_t slot_bytes;
  uint32_t minutes;
  uint32_t reserved0;
  uint64_t checksum;  // of the fields above
  uint64_t dropped;   // denials no slot could take
  uint8_t reserved[16];
};
static_assert(sizeof(RecentDenials::Header) == 64);
static_assert(offsetof(RecentDenials::Header, checksum) == kDenialsFormat.checksum_at);
static_assert(sizeof(RecentDenials::Header) == kDenialsFormat.header_bytes);

struct RecentDenials::Slot {
  uint64_t hash;  // 0: free; claimed by compare-and-swap
  // A ring of per-minute counters: the unix minute in the high 32 bits, the
  // count in the low 32, one word so that a minute's restart and its count
  // are one compare-and-swap (no increment lost between them).
  uint64_t bucket[kMinutes];
  uint16_t biz;
  uint8_t key_len;
  uint8_t reserved;
  char key[kMaxKeyBytes];
  uint8_t pad[384 - 8 - 8 * kMinutes - 4 - kMaxKeyBytes];
};
static_assert(sizeof(RecentDenials::Slot) == 384);
static_assert(offsetof(RecentDenials::Slot, biz) == 88);

namespace {
constexpr uint64_t kFileBytes =
    sizeof(RecentDenials::Header) + uint64_t{RecentDenials::kSlots} * sizeof(RecentDenials::Slot);

// This build's header: the one a new file gets, and the one an existing
// file's must match.
RecentDenials::Header WantDenialsHeader() {
  RecentDenials::Header h{};
  h.slots = RecentDenials::kSlots;
  h.slot_bytes = sizeof(RecentDenials::Slot);
  h.minutes = RecentDenials::kMinutes;
  os::SealHeader(&h, kDenialsFormat);
  return h;
}

uint32_t MinuteOf(uint64_t bucket) { return static_cast<uint32_t>(bucket >> 32); }
uint32_t CountOf(uint64_t bucket) { return static_cast<uint32_t>(bucket); }

// The newest minute a slot counted in (0: none).
uint32_t NewestMinute(const RecentDenials::Slot& s) {
  uint32_t newest = 0;
  for (const uint64_t& b : s.bucket) newest = std::max(newest, MinuteOf(Load(b)));
  return newest;
}
}  // namespace

RecentDenials::~RecentDenials() = default;

RecentDenials::Header* RecentDenials::header() const { return reinterpret_cast<Header*>(base_); }
RecentDenials::Slot* RecentDenials::slot(uint32_t i) const {
  return reinterpret_cast<Slot*>(base_ + sizeof(Header) + uint64_t{i} * sizeof(Slot));
}

Result<std::unique_ptr<RecentDenials>> RecentDenials::Open(const std::string& dir, bool read_only) {
  std::unique_ptr<RecentDenials> d(new RecentDenials());
  d->read_only_ = read_only;
  const Header want = WantDenialsHeader();
  auto t = os::OpenMappedTable(dir.empty() ? "" : os::store_dir::In(dir, os::store_dir::kRecentDenials), kDenialsFormat,
                               &want, kFileBytes, read_only);
  if (!t.ok()) return t.status();
  d->file_ = std::move(t->file);
  d->memory_ = std::move(t->memory);
  d->base_ = t->base;
  return d;
}

void RecentDenials::Count(uint16_t biz, std::string_view key, int64_t now_s) {
  if (read_only_ || key.empty() || key.size() > kMaxKeyBytes) return;
  const uint64_t h = HashOf(biz, key);
  const uint32_t minute = static_cast<uint32_t>(now_s / 60);
  const uint32_t start = static_cast<uint32_t>(h >> 32) % kSlots;
  Slot* target = nullptr;
  Slot* stalest = nullptr;
  uint32_t stalest_minute = UINT32_MAX;
  for (uint32_t p = 0; p < kProbe && target == nullptr; ++p) {
    Slot* s = slot((start + p) % kSlots);
    uint64_t have = Load(s->hash);
    if (have == h) {
      target = s;
      break;
    }
    if (have == 0 && std::atomic_ref<uint64_t>(s->hash).compare_exchange_strong(have, h, std::memory_order_acq_rel)) {
      // A fresh slot's buckets are zero: nothing to reset, so a racing
      // writer of the same key counts from the first instant.
      target = s;
      s->biz = biz;
      s->key_len = static_cast<uint8_t>(key.size());
      std::memcpy(s->key, key.data(), key.size());
      break;
    }
    if (have == h) {  // another process claimed it for this key meanwhile
      target = s;
      break;
    }
    const uint32_t newest = NewestMinute(*s);
    if (newest + kMinutes <= minute && newest < stalest_minute) {
      stalest = s;
      stalest_minute = newest;
    }
  }
  if (target == nullptr && stalest != nullptr) {
    uint64_t old = Load(stalest->hash);
    if (NewestMinute(*stalest) == stalest_minute &&
        std::atomic_ref<uint64_t>(stalest->hash).compare_exchange_strong(old, h, std::memory_order_acq_rel)) {
      // Its buckets are all older than the window: they restart as the new
      // key counts into them, each by its own compare-and-swap.
      target = stalest;
      target->biz = biz;
      target->key_len = static_cast<uint8_t>(key.size());
      std::memcpy(target->key, key.data(), key.size());
    }
  }
  if (target == nullptr) {
    std::atomic_ref<uint64_t>(header()->dropped).fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::atomic_ref<uint64_t> bucket(target->bucket[minute % kMinutes]);
  uint64_t was = bucket.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t now_word =
        MinuteOf(was) == minute ? was + (CountOf(was) == UINT32_MAX ? 0 : 1) : uint64_t{minute} << 32 | 1;
    if (bucket.compare_exchange_weak(was, now_word, std::memory_order_relaxed)) break;
  }
}

std::vector<RecentDenials::Row> RecentDenials::Top(uint32_t minutes, uint16_t biz, size_t n, int64_t now_s) const {
  minutes = std::clamp<uint32_t>(minutes, 1, kMinutes);
  const uint32_t now_minute = static_cast<uint32_t>(now_s / 60);
  std::vector<Row> rows;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const Slot& s = *slot(i);
    const uint64_t h = Load(s.hash);
    if (h == 0) continue;
    Row r;
    r.biz = s.biz;
    if (biz != 0 && r.biz != biz) continue;
    const uint8_t len = s.key_len;
    r.key.assign(s.key, std::min<size_t>(len, kMaxKeyBytes));
    // A slot whose text is not (yet, or any more) its key's is not shown.
    if (HashOf(r.biz, r.key) != h) continue;
    for (uint32_t m = 0; m < kMinutes; ++m) {
      const uint64_t b = Load(s.bucket[m]);
      const uint32_t stamp = MinuteOf(b);
      if (stamp == 0 || stamp > now_minute || stamp + minutes <= now_minute) continue;
      r.denied += CountOf(b);
      r.last_minute = std::max<int64_t>(r.last_minute, stamp);
    }
    if (r.denied != 0) rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    if (a.denied != b.denied) return a.denied > b.denied;
    return a.biz != b.biz ? a.biz < b.biz : a.key < b.key;
  });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

uint64_t RecentDenials::dropped() const { return Load(header()->dropped); }

}  // namespace frs::stats
