#include "limit/concurrency.h"

#include <algorithm>
#include <cstring>

#include "limit/lease_id.h"

namespace frs::limit {
namespace {

constexpr uint32_t kNextAt = 4, kBaseAt = 8, kNonceAt = 12;

uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
void Store16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// The places of a block of `bytes`, read and written in place.
struct PlaceTable {
  uint8_t* b;
  uint32_t n;
  PlaceTable(const uint8_t* block, uint32_t bytes) : b(const_cast<uint8_t*>(block)), n(Concurrency::Places(bytes)) {}
  uint32_t Serial(uint32_t i) const { return Load32(b + Concurrency::kHeaderBytes + 4 * i); }
  int64_t Expires(uint32_t i) const {
    return int64_t{Load32(b + kBaseAt)} + Load16(b + Concurrency::kHeaderBytes + 4 * n + 2 * i);
  }
  void Set(uint32_t i, uint32_t serial, int64_t offset) {
    Store32(b + Concurrency::kHeaderBytes + 4 * i, serial);
    Store16(b + Concurrency::kHeaderBytes + 4 * n + 2 * i,
            static_cast<uint32_t>(std::clamp<int64_t>(offset, 0, 65535)));
  }
};

// Now as the block sees it: a clock stepped back behind its last write is
// held there (a lease never lasts longer for a clock that went back).
int64_t ClampedNow(const uint8_t* block, const Now& now) { return std::max<int64_t>(now.s, Load32(block + kBaseAt)); }

struct Count {
  int64_t held = 0;
  int64_t first_end = 0;  // the earliest expiry of a held lease (0: none)
};
Count CountHeld(const PlaceTable& p, int64_t t) {
  Count c;
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) == 0) continue;
    const int64_t e = p.Expires(i);
    if (e <= t) continue;
    ++c.held;
    c.first_end = c.first_end == 0 ? e : std::min(c.first_end, e);
  }
  return c;
}

// Moves base to t, freeing what expired by then; returns how many.
uint32_t Rebase(const RuleSpec& spec, uint8_t* block, int64_t t) {
  PlaceTable p(block, spec.bytes);
  uint32_t expired = 0;
  for (uint32_t i = 0; i < p.n; ++i) {
    const uint32_t serial = p.Serial(i);
    if (serial == 0) continue;
    const int64_t e = p.Expires(i);
    if (e <= t) {
      p.Set(i, 0, 0);
      ++expired;
    } else {
      p.Set(i, serial, e - t);  // each place is read before it is written
    }
  }
  Store32(block + kBaseAt, Clamp32(t));
  Store32(block, spec.tag);
  return expired;
}

// Grants a lease at a free place, on a block just rebased to now (every
// serial in it is held); false when `max` are held. The block's length is
// rounded up to 32 bytes, so it has more places than max: a free place is
// not a free lease, and every path that adds one (record, set, merge)
// checks max here or as Merge does.
bool Grant(const RuleSpec& spec, uint8_t* block) {
  PlaceTable p(block, spec.bytes);
  int64_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) held += p.Serial(i) != 0;
  if (held >= spec.max) return false;
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) != 0) continue;
    uint32_t serial = Load32(block + kNextAt);
    if (serial == 0) serial = 1;
    Store32(block + kNextAt, serial == UINT32_MAX ? 1 : serial + 1);
    if (Load32(block + kNonceAt) == 0) Store32(block + kNonceAt, NewIdNonce());
    p.Set(i, serial, int64_t{spec.interval} + 1);
    return true;
  }
  return false;
}

// Keeps at most `count` taken places (the ones that would end first go
// first); returns how many are left. On a block just rebased, each is held.
int64_t KeepLatest(const RuleSpec& spec, uint8_t* block, int64_t count) {
  PlaceTable p(block, spec.bytes);
  int64_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) held += p.Serial(i) != 0;
  for (; held > count; --held) {
    uint32_t pick = p.n;
    for (uint32_t i = 0; i < p.n; ++i)
      if (p.Serial(i) != 0 && (pick == p.n || p.Expires(i) < p.Expires(pick))) pick = i;
    p.Set(pick, 0, 0);
  }
  return held;
}

}  // namespace

uint32_t Concurrency::Bytes(int64_t max) {
  const int64_t raw = kHeaderBytes + kPlaceBytes * std::clamp<int64_t>(max, 1, kMaxLeases);
  return static_cast<uint32_t>((raw + kLeaseBlockUnit - 1) / kLeaseBlockUnit * kLeaseBlockUnit);
}

void Concurrency::Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out) {
  (void)n;
  const int64_t t = ClampedNow(block, now);
  const Count c = CountHeld(PlaceTable(block, spec.bytes), t);
  RuleResult& r = *out;
  r.algo = spec.algo;
  r.interval = spec.interval;
  r.count = c.held;
  r.limit = spec.max;
  r.remaining = std::max<int64_t>(0, spec.max - c.held);
  r.reset = c.held > 0 ? c.first_end : t;
  r.allowed = c.held < spec.max;
  // Denied: the first place frees at the earliest expiry (a release may free one sooner).
  r.retry_after = r.allowed ? 0 : std::max<int64_t>(1, c.first_end - t);
}

void Concurrency::Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  (void)n;
  const int64_t t = ClampedNow(block, now);
  Rebase(spec, block, t);
  Grant(spec, block);
}

void Concurrency::SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count) {
  const int64_t t = ClampedNow(block, now);
  Rebase(spec, block, t);
  int64_t held = KeepLatest(spec, block, count);
  while (held < count && Grant(spec, block)) ++held;
}

int64_t Concurrency::ExpireS(const RuleSpec& spec, const uint8_t* block) {
  PlaceTable p(block, spec.bytes);
  int64_t e = 0;
  for (uint32_t i = 0; i < p.n; ++i)
    if (p.Serial(i) != 0) e = std::max(e, p.Expires(i));
  return e;
}

void Concurrency::Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out) {
  RuleResult r;
  Evaluate(spec, block, now, 1, &r);
  out->algo = spec.algo;
  out->interval = spec.interval;
  out->max = spec.max;
  out->count = r.count;
  out->limit = r.limit;
  out->denies = !r.allowed;
  out->next_allowed_ms = r.allowed ? now.ms : r.reset * 1000;
}

void Concurrency::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  if (Load32(incoming) == 0) return;
  if (Load32(block) == 0) {
    std::memcpy(block, incoming, spec.bytes);
    KeepLatest(spec, block, spec.max);  // expired ones end first, so go first
    return;
  }
  const int64_t t = std::max(ClampedNow(block, now), ClampedNow(incoming, now));
  Rebase(spec, block, t);
  PlaceTable mine(block, spec.bytes);
  const PlaceTable theirs(incoming, spec.bytes);
  int64_t held = 0;
  for (uint32_t i = 0; i < mine.n; ++i) held += mine.Serial(i) != 0;
  for (uint32_t j = 0; j < theirs.n && held < spec.max; ++j) {
    const uint32_t serial = theirs.Serial(j);
    if (serial == 0 || theirs.Expires(j) <= t) continue;
    uint32_t free = mine.n;
    bool same = false;
    for (uint32_t i = 0; i < mine.n && !same; ++i) {
      same = mine.Serial(i) == serial;
      if (mine.Serial(i) == 0 && free == mine.n) free = i;
    }
    if (same || free == mine.n) continue;
    mine.Set(free, serial, theirs.Expires(j) - t);
    ++held;
  }
  Store32(block + kNextAt, std::max(Load32(block + kNextAt), Load32(incoming + kNextAt)));
}

void Concurrency::Convert(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now) {
  const PlaceTable old(old_block.data(), static_cast<uint32_t>(old_block.size()));
  const int64_t t = ClampedNow(old_block.data(), now);
  std::memset(block, 0, spec.bytes);
  Store32(block + kNextAt, Load32(old_block.data() + kNextAt));
  Store32(block + kNonceAt, Load32(old_block.data() + kNonceAt));
  Store32(block + kBaseAt, Clamp32(t));
  Store32(block, spec.tag);
  PlaceTable p(block, spec.bytes);
  uint32_t k = 0;
  for (uint32_t i = 0; i < old.n && k < p.n; ++i)
    if (old.Serial(i) != 0 && old.Expires(i) > t) p.Set(k++, old.Serial(i), old.Expires(i) - t);
  // A lowered max within the same block length keeps no more than max.
  KeepLatest(spec, block, spec.max);
}

uint32_t Concurrency::Sweep(const RuleSpec& spec, uint8_t* block, const Now& now) {
  if (Load32(block) == 0) return 0;
  return Rebase(spec, block, ClampedNow(block, now));
}

Concurrency::Found Concurrency::Find(const RuleSpec& spec, const uint8_t* block, const Now& now, uint32_t serial,
                                     Lease* out) {
  if (serial == 0 || Load32(block) == 0) return Found::kNone;
  const PlaceTable p(block, spec.bytes);
  const int64_t t = ClampedNow(block, now);
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) != serial) continue;
    *out = Lease{serial, p.Expires(i)};
    return p.Expires(i) > t ? Found::kHeld : Found::kExpired;
  }
  return Found::kNone;
}

bool Concurrency::Free(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial) {
  if (serial == 0 || Load32(block) == 0) return false;
  Rebase(spec, block, ClampedNow(block, now));
  PlaceTable p(block, spec.bytes);
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) != serial) continue;
    p.Set(i, 0, 0);
    return true;
  }
  return false;
}

int64_t Concurrency::Extend(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial) {
  if (serial == 0 || Load32(block) == 0) return 0;
  const int64_t t = ClampedNow(block, now);
  Rebase(spec, block, t);
  PlaceTable p(block, spec.bytes);
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) != serial) continue;
    p.Set(i, serial, int64_t{spec.interval} + 1);
    return t + spec.interval + 1;
  }
  return 0;
}

void Concurrency::Adopt(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial, int64_t until,
                        uint32_t nonce) {
  if (serial == 0) return;
  const int64_t t = ClampedNow(block, now);
  Rebase(spec, block, t);
  PlaceTable p(block, spec.bytes);
  uint32_t at = p.n, free = p.n;
  int64_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) {
    const uint32_t s = p.Serial(i);
    held += s != 0;
    if (s == serial) at = i;
    if (s == 0 && free == p.n) free = i;
  }
  const uint32_t mine = Load32(block + kNonceAt);
  if (nonce != 0 && (mine == 0 || held == 0 || nonce < mine)) Store32(block + kNonceAt, nonce);
  // Never granted here again: the next serial passes it (a wrap excepted).
  if (serial >= Load32(block + kNextAt)) Store32(block + kNextAt, serial == UINT32_MAX ? 1 : serial + 1);
  if (until <= t) return;  // over by now, as the other holder's sweep will say
  if (at == p.n) at = free;
  if (at == p.n) return;
  p.Set(at, serial, until - t);
}

size_t Concurrency::Held(const RuleSpec& spec, const uint8_t* block, const Now& now, std::span<Lease> out) {
  if (Load32(block) == 0) return 0;
  const PlaceTable p(block, spec.bytes);
  const int64_t t = ClampedNow(block, now);
  size_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) == 0 || p.Expires(i) <= t) continue;
    if (held < out.size()) out[held] = Lease{p.Serial(i), p.Expires(i)};
    ++held;
  }
  return held;
}

}  // namespace frs::limit
