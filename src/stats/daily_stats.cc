#include "stats/daily_stats.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "os/mapped_file.h"
#include "os/mapped_table.h"
#include "os/store_dir.h"

namespace frs::stats {
namespace {

// 2: 1024 slots (was 4096). FNV-1a: the checksum of this file's format.
constexpr os::TableFormat kDailyFormat{.magic = "FRSSTATS",
                                       .version = 2,
                                       .header_bytes = 64,
                                       .checksum_at = 32,
                                       .sum = os::HeaderSum::kFnv1a};
constexpr uint64_t kValueMask = (uint64_t{1} << 48) - 1;

}  // namespace

struct DailyStats::Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint32_t slots;
  uint32_t days;
  uint32_t slot_bytes;
  uint32_t fields;
  uint64_t checksum;  // of the fields above
  uint64_t overflow;  // updated atomically
  uint8_t reserved[16];
};
static_assert(sizeof(DailyStats::Header) == 64);
static_assert(offsetof(DailyStats::Header, checksum) == kDailyFormat.checksum_at);
static_assert(sizeof(DailyStats::Header) == kDailyFormat.header_bytes);

struct DailyStats::Slot {
  uint32_t biz;  // 0: free; claimed by compare-and-swap
  uint32_t reserved;
  uint64_t counters[DailyStats::kDays][DailyStats::kFields];
};
static_assert(sizeof(DailyStats::Slot) == 8 + 8 * DailyStats::kDays * DailyStats::kFields);
static_assert(alignof(DailyStats::Slot) == 8);

namespace {
constexpr uint64_t kFileBytes = sizeof(DailyStats::Header) + uint64_t{DailyStats::kSlots} * sizeof(DailyStats::Slot);

// This build's header: the one a new file gets, and the one an existing
// file's must match.
DailyStats::Header WantDailyHeader() {
  DailyStats::Header h{};
  h.slots = DailyStats::kSlots;
  h.days = DailyStats::kDays;
  h.slot_bytes = sizeof(DailyStats::Slot);
  h.fields = DailyStats::kFields;
  os::SealHeader(&h, kDailyFormat);
  return h;
}
}  // namespace

// What no run of this code writes, however it stopped: a slot of a biz id
// no map has (ids are 16 bits), a counter of a day in another entry of the
// ring than its own (day % kDays; the 16-bit day tag keeps it, 65,536
// being a multiple of kDays). Each is one aligned word, written whole, so
// neither a kill -9 nor a power loss (which may keep one page of the file
// and not the next) makes one. Not checked, because a power loss can: a
// free slot holding counters (the claim's page lost, the counters' kept),
// two slots of one biz (a claim lost, the biz claiming again further on).
// The header's checksum covers only the layout: without this a smashed
// body was served as counts, and frsctl verify called it clean. Each word
// is read atomically: a file frsd writes meanwhile only gains claims and
// counters that follow these rules.
namespace {
Status CheckDailyBody(const DailyStats::Slot* slots, const std::string& path) {
  uint64_t bad = 0;
  std::string first;
  auto fault = [&](uint32_t i, const std::string& what) {
    if (bad++ == 0) first = "slot " + std::to_string(i) + ": " + what;
  };
  for (uint32_t i = 0; i < DailyStats::kSlots; ++i) {
    const DailyStats::Slot& s = slots[i];
    const uint32_t biz = std::atomic_ref<uint32_t>(const_cast<uint32_t&>(s.biz)).load(std::memory_order_relaxed);
    if (biz > 0xffff) {
      fault(i, "biz id " + std::to_string(biz) + " is not one (ids are 1 to 65535)");
      continue;
    }
    for (uint32_t d = 0; d < DailyStats::kDays; ++d) {
      for (uint32_t f = 0; f < DailyStats::kFields; ++f) {
        const uint64_t w =
            std::atomic_ref<uint64_t>(const_cast<uint64_t&>(s.counters[d][f])).load(std::memory_order_relaxed);
        if (w != 0 && (w >> 48) % DailyStats::kDays != d)
          fault(i, "entry " + std::to_string(d) + " of its days holds day " + std::to_string(w >> 48) +
                       " (mod 65536), which belongs in entry " + std::to_string((w >> 48) % DailyStats::kDays));
      }
    }
  }
  if (bad == 0) return Status::OK();
  return Status::Corruption(path + ": damaged counters: " + first +
                            (bad > 1 ? " (and " + std::to_string(bad - 1) + " more)" : std::string()));
}
}  // namespace

DailyStats::~DailyStats() = default;

DailyStats::Header* DailyStats::header() const { return reinterpret_cast<Header*>(base_); }
DailyStats::Slot* DailyStats::slot(uint32_t i) const {
  return reinterpret_cast<Slot*>(base_ + sizeof(Header) + uint64_t{i} * sizeof(Slot));
}

Result<std::unique_ptr<DailyStats>> DailyStats::Open(const std::string& dir, bool read_only, bool check_body) {
  std::unique_ptr<DailyStats> s(new DailyStats());
  s->read_only_ = read_only;
  const Header want = WantDailyHeader();
  auto t = os::OpenMappedTable(dir.empty() ? "" : os::store_dir::In(dir, os::store_dir::kDailyStats), kDailyFormat,
                               &want, kFileBytes, read_only);
  if (!t.ok()) return t.status();
  if (t->file && check_body) {
    const auto* slots = reinterpret_cast<const Slot*>(t->base + sizeof(Header));
    if (Status body = CheckDailyBody(slots, t->file->path()); !body.ok()) return body;
  }
  if (t->file) s->path_ = t->file->path();
  s->file_ = std::move(t->file);
  s->memory_ = std::move(t->memory);
  s->base_ = t->base;
  return s;
}

int32_t DailyStats::FindSlot(uint16_t biz) const {
  uint32_t i = (uint32_t{biz} * 2654435761u) % kSlots;
  for (uint32_t probe = 0; probe < kSlots; ++probe, i = (i + 1) % kSlots) {
    uint32_t v = std::atomic_ref<uint32_t>(slot(i)->biz).load(std::memory_order_acquire);
    if (v == biz) return static_cast<int32_t>(i);
    if (v == 0) return kNoSlot;
  }
  return kNoSlot;
}

int32_t DailyStats::SlotFor(uint16_t biz) {
  // 0 marks a free slot: no map biz has it (ids are 1 to 65535).
  if (biz == 0) return kNoSlot;
  if (read_only_) return FindSlot(biz);
  uint32_t i = (uint32_t{biz} * 2654435761u) % kSlots;
  for (uint32_t probe = 0; probe < kSlots; ++probe, i = (i + 1) % kSlots) {
    std::atomic_ref<uint32_t> owner(slot(i)->biz);
    uint32_t v = owner.load(std::memory_order_acquire);
    if (v == 0 && owner.compare_exchange_strong(v, biz, std::memory_order_acq_rel)) return static_cast<int32_t>(i);
    if (v == biz) return static_cast<int32_t>(i);
  }
  return kNoSlot;
}

void DailyStats::Add(int32_t slot_index, uint32_t day, const uint64_t (&delta)[kFields]) {
  if (read_only_) return;
  if (slot_index == kNoSlot) {
    std::atomic_ref<uint64_t>(header()->overflow).fetch_add(delta[kRequests], std::memory_order_relaxed);
    return;
  }
  const uint64_t tag = uint64_t{day & 0xffff} << 48;
  uint64_t* counters = slot(static_cast<uint32_t>(slot_index))->counters[day % kDays];
  for (uint32_t f = 0; f < kFields; ++f) {
    if (delta[f] == 0) continue;
    std::atomic_ref<uint64_t> c(counters[f]);
    uint64_t old = c.load(std::memory_order_relaxed);
    uint64_t next;
    do {
      if ((old & ~kValueMask) == tag) next = tag | std::min(kValueMask, (old & kValueMask) + delta[f]);
      else next = tag | std::min(kValueMask, delta[f]);  // a new day starts this counter over
    } while (!c.compare_exchange_weak(old, next, std::memory_order_relaxed));
  }
}

std::vector<BizStatsDay> DailyStats::Days(uint16_t biz, uint32_t today) const {
  std::vector<BizStatsDay> out;
  int32_t i = FindSlot(biz);
  if (i == kNoSlot) return out;
  const Slot* s = slot(static_cast<uint32_t>(i));
  for (uint32_t d = 0; d < kDays; ++d) {
    uint64_t words[kFields];
    uint32_t day = 0;
    for (uint32_t f = 0; f < kFields; ++f) {
      words[f] = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(s->counters[d][f])).load(std::memory_order_relaxed);
      if (words[f] != 0) day = std::max<uint32_t>(day, static_cast<uint32_t>(words[f] >> 48));
    }
    // Days are kept in 16 bits: compare relative to today.
    uint32_t age = (today - day) & 0xffff;
    if (day == 0 || age >= kDays) continue;
    BizStatsDay e;
    e.day = today - age;
    uint64_t* fields[kFields] = {&e.requests, &e.allowed, &e.denied, &e.new_keys};
    for (uint32_t f = 0; f < kFields; ++f) {
      if ((words[f] >> 48) == day) *fields[f] = words[f] & kValueMask;
    }
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const BizStatsDay& a, const BizStatsDay& b) { return a.day > b.day; });
  return out;
}

uint64_t DailyStats::overflow() const {
  return std::atomic_ref<uint64_t>(header()->overflow).load(std::memory_order_relaxed);
}

}  // namespace frs::stats
