#include "limit/concurrency.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "limit/lease_id.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace frs::limit {
namespace {

constexpr uint32_t kNextAt = Concurrency::kNextAt, kBaseAt = Concurrency::kBaseAt, kNonceAt = Concurrency::kNonceAt;

uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
void Store16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// The places of a block of `bytes`, read and written in place.
struct PlaceTable {
  uint8_t* b;
  uint32_t n;
  // The common 64 bytes (8 places) without the division.
  PlaceTable(const uint8_t* block, uint32_t bytes)
      : b(const_cast<uint8_t*>(block)), n(bytes == 64 ? 8 : Concurrency::Places(bytes)) {}
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

#if defined(__SSE2__)
// The common block, 64 bytes (any max up to 8), has 8 places: their serials
// (two 16-byte halves from kHeaderBytes) and offsets (the 16 bytes after)
// are judged in three SSE2 registers instead of a branch per place. A
// lease's two requests sweep, count and take the node's expiry about ten
// times; one at a time, that was more than a fixed window's whole work.
// The answers are the loops' (which every other length, and a machine
// without SSE2, still takes).
class EightPlaces {
 public:
  static constexpr uint32_t kPlaces = 8;
  explicit EightPlaces(const uint8_t* block) {
    low_ = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + Concurrency::kHeaderBytes));
    high_ = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + Concurrency::kHeaderBytes + 16));
    offset_ = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + Concurrency::kHeaderBytes + 32));
  }
  void StoreTo(uint8_t* block) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block + Concurrency::kHeaderBytes), low_);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block + Concurrency::kHeaderBytes + 16), high_);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(block + Concurrency::kHeaderBytes + 32), offset_);
  }
  // 0xFFFF in the 16-bit lane of each taken place (serial not 0).
  __m128i Taken() const {
    const __m128i zero = _mm_setzero_si128();
    const __m128i free = _mm_packs_epi32(_mm_cmpeq_epi32(low_, zero), _mm_cmpeq_epi32(high_, zero));
    return _mm_xor_si128(free, _mm_set1_epi32(-1));
  }
  // 0xFFFF in the lane of each place that no longer holds at base + d,
  // taken or not: offset <= d.
  __m128i EndedBy(uint16_t d) const {
    return _mm_cmpeq_epi16(_mm_subs_epu16(offset_, _mm_set1_epi16(static_cast<int16_t>(d))), _mm_setzero_si128());
  }
  // The base moves on by d: what holds counts its offset from there, what
  // ended is freed (serial and offset 0), a free place is left as it is.
  // Returns the places freed.
  uint32_t MoveBase(uint16_t d) {
    const __m128i taken = Taken();
    const __m128i gone = _mm_and_si128(taken, EndedBy(d));
    const __m128i moved = _mm_subs_epu16(offset_, _mm_set1_epi16(static_cast<int16_t>(d)));  // 0 where gone
    offset_ = _mm_or_si128(_mm_and_si128(taken, moved), _mm_andnot_si128(taken, offset_));
    low_ = _mm_andnot_si128(_mm_unpacklo_epi16(gone, gone), low_);
    high_ = _mm_andnot_si128(_mm_unpackhi_epi16(gone, gone), high_);
    return Lanes(gone);
  }
  // The places that hold at base + d, and the smallest offset among them.
  uint32_t HoldingAt(uint16_t d, uint16_t* first) const {
    const __m128i hold = _mm_andnot_si128(EndedBy(d), Taken());
    const uint32_t n = Lanes(hold);
    if (n != 0)
      *first = Fold(_mm_or_si128(_mm_and_si128(hold, offset_), _mm_andnot_si128(hold, _mm_set1_epi32(-1))),
                    /*min=*/true);
    return n;
  }
  // The place of `serial` (not 0), or -1.
  int PlaceOf(uint32_t serial) const {
    const __m128i want = _mm_set1_epi32(static_cast<int32_t>(serial));
    const uint32_t m = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi32(low_, want))) |
                       static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi32(high_, want))) << 16;
    return m == 0 ? -1 : std::countr_zero(m) / 4;
  }
  // How many places are taken, and the first free one (-1: none).
  uint32_t TakenCount(int* first_free) const {
    const __m128i taken = Taken();
    const uint32_t free = ~static_cast<uint32_t>(_mm_movemask_epi8(taken)) & 0xFFFF;
    *first_free = free == 0 ? -1 : std::countr_zero(free) / 2;
    return Lanes(taken);
  }
  // Whether any place is taken, and the largest offset of one.
  bool LastOffset(uint16_t* last) const {
    const __m128i taken = Taken();
    if (Lanes(taken) == 0) return false;
    *last = Fold(_mm_and_si128(taken, offset_), /*min=*/false);
    return true;
  }

 private:
  // How many lanes of `mask` (each 0 or 0xFFFF) are set: one bit per lane
  // of its byte mask, added up in place.
  static uint32_t Lanes(__m128i mask) {
    uint32_t m = static_cast<uint32_t>(_mm_movemask_epi8(mask)) & 0x5555;
    m = (m & 0x3333) + ((m >> 2) & 0x3333);
    m = (m & 0x0F0F) + ((m >> 4) & 0x0F0F);
    return (m & 0xFF) + (m >> 8);
  }
  // The smallest (or largest) of 8 unsigned 16-bit lanes: SSE2 compares
  // them signed, so each is moved by 0x8000 first and back after.
  static uint16_t Fold(__m128i v, bool min) {
    const __m128i bias = _mm_set1_epi16(static_cast<int16_t>(0x8000));
    v = _mm_xor_si128(v, bias);
    auto pick = [min](__m128i a, __m128i b) { return min ? _mm_min_epi16(a, b) : _mm_max_epi16(a, b); };
    v = pick(v, _mm_shuffle_epi32(v, 0x4E));    // lanes 4-7 onto 0-3
    v = pick(v, _mm_shuffle_epi32(v, 0xB1));    // 2-3 onto 0-1
    v = pick(v, _mm_shufflelo_epi16(v, 0xB1));  // 1 onto 0
    return static_cast<uint16_t>((_mm_cvtsi128_si32(v) & 0xFFFF) ^ 0x8000);
  }

  __m128i low_, high_, offset_;  // serials of places 0-3 and 4-7; offsets of 0-7
};

// A block's words as one load or store each (SSE2 is x86's: little-endian,
// as a block is). Load32 and Store32 alone compile to one move as well, but
// not everywhere they are inlined here: with them in place of these, a
// lease use cost about 65 instructions more (lease_callgrind.sh).
uint32_t WordAt(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
void SetWord(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }
// Whether a block takes the eight-at-once path at t (never before its base).
bool EightAtOnce(uint32_t places, const uint8_t* block, int64_t t) {
  return places == EightPlaces::kPlaces && t >= WordAt(block + kBaseAt);
}
uint16_t SinceBase(const uint8_t* block, int64_t t) {
  return static_cast<uint16_t>(std::min<int64_t>(t - WordAt(block + kBaseAt), 65535));
}
#endif

// Now as the block sees it: a clock stepped back behind its last write is
// held there (a lease never lasts longer for a clock that went back).
int64_t ClampedNow(const uint8_t* block, const Now& now) { return std::max<int64_t>(now.s, Load32(block + kBaseAt)); }

struct Count {
  int64_t held = 0;
  int64_t first_end = 0;  // the earliest expiry of a held lease (0: none)
};
Count CountHeld(const PlaceTable& p, int64_t t) {
  Count c;
#if defined(__SSE2__)
  if (EightAtOnce(p.n, p.b, t)) {
    uint16_t first = 0;
    c.held = EightPlaces(p.b).HoldingAt(SinceBase(p.b, t), &first);
    if (c.held > 0) c.first_end = int64_t{WordAt(p.b + kBaseAt)} + first;
    return c;
  }
#endif
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) == 0) continue;
    const int64_t e = p.Expires(i);
    if (e <= t) continue;
    ++c.held;
    c.first_end = c.first_end == 0 ? e : std::min(c.first_end, e);
  }
  return c;
}

// When a place frees for one more lease: the earliest expiry of those held,
// or, above max (a reload lowered it: Convert keeps what is held), the one
// after which the count is under max, the (held - max + 1)-th.
int64_t NextPlaceFrees(const PlaceTable& p, int64_t t, const Count& c, int64_t max) {
  if (c.held <= max) return c.first_end;
  int64_t ends[Concurrency::kMaxLeases] = {};  // (gcc 12 cannot see that n > 0 here)
  uint32_t n = 0;
  for (uint32_t i = 0; i < p.n && n < std::size(ends); ++i)
    if (p.Serial(i) != 0 && p.Expires(i) > t) ends[n++] = p.Expires(i);
  const auto k = static_cast<uint32_t>(std::min<int64_t>(c.held - max, n - 1));
  std::nth_element(ends, ends + k, ends + n);
  return ends[k];
}

// Moves base to t, freeing what expired by then; returns how many.
uint32_t Rebase(const RuleSpec& spec, uint8_t* block, int64_t t) {
  PlaceTable p(block, spec.bytes);
#if defined(__SSE2__)
  if (EightAtOnce(p.n, block, t)) {
    EightPlaces w(block);
    const uint32_t expired = w.MoveBase(SinceBase(block, t));
    w.StoreTo(block);
    SetWord(block + kBaseAt, Clamp32(t));
    SetWord(block, spec.tag);
    return expired;
  }
#endif
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

// Moves base to t keeping what expired by then, at offset 0 (expired at or
// before the base), for this holder's next write to sweep and count: what
// a replica applies (the other holder's events) changes its copy without
// counting, and a copy that freed expired leases there lost the count of
// those the other holder never counts (one it granted that expired before
// this copy's next event reached it, or one it held while that holder was
// away). Scalar: the replica's path, not a request's.
void RebaseKeepingExpired(const RuleSpec& spec, uint8_t* block, int64_t t) {
  PlaceTable p(block, spec.bytes);
  for (uint32_t i = 0; i < p.n; ++i) {
    const uint32_t serial = p.Serial(i);
    if (serial != 0) p.Set(i, serial, p.Expires(i) - t);  // clamped to 0: expired
  }
  Store32(block + kBaseAt, Clamp32(t));
  Store32(block, spec.tag);
}

// Frees the place of `serial`; false when none holds it.
bool FreePlace(const RuleSpec& spec, uint8_t* block, uint32_t serial) {
  PlaceTable p(block, spec.bytes);
#if defined(__SSE2__)
  if (p.n == EightPlaces::kPlaces) {
    const int i = EightPlaces(block).PlaceOf(serial);
    if (i < 0) return false;
    p.Set(static_cast<uint32_t>(i), 0, 0);
    return true;
  }
#endif
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) != serial) continue;
    p.Set(i, 0, 0);
    return true;
  }
  return false;
}

// Grants a lease at a free place, on a block just rebased to now (every
// serial in it is held); false when `max` are held. The block's length is
// rounded up to 32 bytes, so it has more places than max: a free place is
// not a free lease, and every path that adds one (record, set, merge)
// checks max here or as Merge does. Its serial is the next one in `half`.
bool Grant(const RuleSpec& spec, uint8_t* block, SerialHalf half) {
  PlaceTable p(block, spec.bytes);
  int64_t held = 0;
  uint32_t from = 0;  // the first place that may be free
#if defined(__SSE2__)
  if (p.n == EightPlaces::kPlaces) {
    int first_free = -1;
    held = EightPlaces(block).TakenCount(&first_free);
    if (first_free < 0) return false;
    from = static_cast<uint32_t>(first_free);
  } else
#endif
  {
    for (uint32_t i = 0; i < p.n; ++i) held += p.Serial(i) != 0;
  }
  if (held >= spec.max) return false;
  for (uint32_t i = from; i < p.n; ++i) {
    if (p.Serial(i) != 0) continue;
    uint32_t serial = Load32(block + kNextAt);
    if (serial == 0 || serial > Concurrency::kMaxSerial) serial = 1;
    serial = SerialInHalf(serial, half, Concurrency::AfterSerial);
    Store32(block + kNextAt, Concurrency::AfterSerial(serial));
    if (Load32(block + kNonceAt) == 0) Store32(block + kNonceAt, NewIdNonce());
    p.Set(i, serial, int64_t{spec.interval} + 1);
    return true;
  }
  return false;
}

// Keeps at most `count` taken places (the ones that would end first go
// first); returns how many are left, and the serials it ended in `*ended`
// (as many as it has room for). On a block just rebased, each is held.
// Which held lease a set or a give-back ends first, by `half` (the
// request's, frs/decision.h): a lone holder's, the first to expire, the
// lower serial of two alike; a replicated route's holder's, its own half's
// first to expire, then the other half's last to expire. Both holders
// giving back at once ended the same lease before, the first to expire on
// both, and the key kept a lease no client held (found from outside:
// Envoy's give-backs spread over a pair locked a key at its limit).
bool EndsBefore(const PlaceTable& p, uint32_t i, uint32_t j, SerialHalf half) {
  if (half != SerialHalf::kAll) {
    const uint32_t own = half == SerialHalf::kOdd ? 1 : 0;
    const bool i_own = (p.Serial(i) & 1) == own, j_own = (p.Serial(j) & 1) == own;
    if (i_own != j_own) return i_own;
    if (!i_own) return p.Expires(i) > p.Expires(j) || (p.Expires(i) == p.Expires(j) && p.Serial(i) > p.Serial(j));
  }
  return p.Expires(i) < p.Expires(j) || (p.Expires(i) == p.Expires(j) && p.Serial(i) < p.Serial(j));
}

int64_t KeepLatest(const RuleSpec& spec, uint8_t* block, int64_t count, Concurrency::Ended* ended = nullptr,
                   SerialHalf half = SerialHalf::kAll) {
  PlaceTable p(block, spec.bytes);
  int64_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) held += p.Serial(i) != 0;
  for (; held > count; --held) {
    uint32_t pick = p.n;
    for (uint32_t i = 0; i < p.n; ++i)
      if (p.Serial(i) != 0 && (pick == p.n || EndsBefore(p, i, pick, half))) pick = i;
    if (ended != nullptr) ended->Add(p.Serial(pick));
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
  const PlaceTable p(block, spec.bytes);
  const Count c = CountHeld(p, t);
  RuleResult& r = *out;
  r.algo = spec.algo;
  r.interval = spec.interval;
  r.count = c.held;
  r.limit = spec.max;
  r.remaining = std::max<int64_t>(0, spec.max - c.held);
  r.reset = c.held > 0 ? c.first_end : t;
  r.allowed = c.held < spec.max;
  // Denied: a place frees at the earliest expiry (a release may free one
  // sooner), or past max, once enough have ended.
  r.retry_after = r.allowed ? 0 : std::max<int64_t>(1, NextPlaceFrees(p, t, c, spec.max) - t);
  WaitFromNow(&r, t, now.s);
}

void Concurrency::Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n) {
  (void)n;
  const int64_t t = ClampedNow(block, now);
  Rebase(spec, block, t);
  Grant(spec, block, now.serial_half);
}

void Concurrency::SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count, Ended* ended) {
  const int64_t t = ClampedNow(block, now);
  Rebase(spec, block, t);
  int64_t held = KeepLatest(spec, block, count, ended, now.serial_half);
  while (held < count && Grant(spec, block, now.serial_half)) ++held;
}

int64_t Concurrency::BaseS(std::span<const uint8_t> block) {
  return block.size() < kHeaderBytes ? 0 : Load32(block.data() + kBaseAt);
}

int64_t Concurrency::ExpireS(const RuleSpec& spec, const uint8_t* block) {
  // With no lease held the node keeps nothing worth keeping (its serial and
  // nonce only make ids, and a new node draws a new nonce, so an old id
  // never frees a new lease): it may go at once. 0 would mean "never": every
  // key that once held a lease would stay for good, and evicting those
  // nodes count as live evictions ("grow the store").
  constexpr int64_t kGoneAlready = 1;
  PlaceTable p(block, spec.bytes);
#if defined(__SSE2__)
  if (p.n == EightPlaces::kPlaces) {
    uint16_t last = 0;
    return EightPlaces(block).LastOffset(&last) ? int64_t{WordAt(block + kBaseAt)} + last : kGoneAlready;
  }
#endif
  int64_t e = kGoneAlready;
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
  out->next_allowed_ms = r.allowed ? now.ms : (now.s + r.retry_after) * 1000;  // from now (WaitFromNow)
}

void Concurrency::Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now) {
  if (Load32(incoming) == 0) return;
  int64_t held = 0;
  int64_t t = ClampedNow(incoming, now);
  if (Load32(block) != 0) {
    t = std::max(ClampedNow(block, now), t);
    Rebase(spec, block, t);
    held = Taken(std::span<const uint8_t>(block, spec.bytes));
  }
  if (held == 0) {
    // Nothing held here: the sent block whole, its nonce with it, so that
    // the ids its holders were given verify here.
    std::memcpy(block, incoming, spec.bytes);
    KeepLatest(spec, block, spec.max);  // expired ones end first, so go first
    return;
  }
  PlaceTable mine(block, spec.bytes);
  const PlaceTable theirs(incoming, spec.bytes);
  // One series of ids (the nonce of both, as two holders of a route have):
  // a serial held on both is one lease. Two series (a new owner that granted
  // leases between a ring change and its handoff drew its own nonce): each
  // sent lease is another one, held here under a serial of this node's, as
  // far as max allows, until its expiry; its id verifies here no more.
  const bool one_series = Load32(block + kNonceAt) == Load32(incoming + kNonceAt);
  uint32_t next = Load32(block + kNextAt);
  for (uint32_t j = 0; j < theirs.n && held < spec.max; ++j) {
    uint32_t serial = theirs.Serial(j);
    if (serial == 0 || theirs.Expires(j) <= t) continue;
    // A lease the sender held of another series: of this node's, as the
    // sender had it from its other holder (this one, held here already),
    // or of a series neither node can name; not added twice.
    if (!one_series && (serial & kOtherSeries) != 0) continue;
    uint32_t free = mine.n;
    bool same = false;
    for (uint32_t i = 0; i < mine.n && !same; ++i) {
      same = one_series && mine.Serial(i) == serial;
      if (mine.Serial(i) == 0 && free == mine.n) free = i;
    }
    if (same || free == mine.n) continue;
    if (!one_series) {
      serial = next == 0 || next > kMaxSerial ? 1 : next;
      next = AfterSerial(serial);
    }
    mine.Set(free, serial, theirs.Expires(j) - t);
    ++held;
  }
  Store32(block + kNextAt, one_series ? std::max(next, Load32(incoming + kNextAt)) : next);
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
  // Every lease held is kept, a lowered max's excess too: its holders are
  // still running, and a new acquire is refused until they end. Only a
  // block of fewer places than leases held (max 9 or more lowered to 8 or
  // fewer, 3..8 to 1..2) keeps those that end last; the others end here
  // (map_config.h: HeldAReloadEnds says so in the reload's log).
  Lease held[kMaxLeases];
  uint32_t n = 0;
  for (uint32_t i = 0; i < old.n && n < std::size(held); ++i)
    if (old.Serial(i) != 0 && old.Expires(i) > t) held[n++] = Lease{old.Serial(i), old.Expires(i)};
  if (n > p.n) {
    std::nth_element(held, held + p.n, held + n, [](const Lease& a, const Lease& b) { return a.expires > b.expires; });
    n = p.n;
  }
  for (uint32_t i = 0; i < n; ++i) p.Set(i, held[i].serial, held[i].expires - t);
}

uint32_t Concurrency::Taken(std::span<const uint8_t> block) {
  if (block.size() < kHeaderBytes || Load32(block.data()) == 0) return 0;
  const PlaceTable p(block.data(), static_cast<uint32_t>(block.size()));
  uint32_t taken = 0;
  for (uint32_t i = 0; i < p.n; ++i) taken += p.Serial(i) != 0;
  return taken;
}

size_t Concurrency::HeldSerials(std::span<const uint8_t> block, const Now& now, std::span<uint32_t> out) {
  if (block.size() < kHeaderBytes || Load32(block.data()) == 0) return 0;
  const PlaceTable p(block.data(), static_cast<uint32_t>(block.size()));
  const int64_t t = ClampedNow(block.data(), now);
  size_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) == 0 || (p.Serial(i) & kOtherSeries) != 0 || p.Expires(i) <= t) continue;
    if (held < out.size()) out[held] = p.Serial(i);
    ++held;
  }
  return held;
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
#if defined(__SSE2__)
  if (p.n == EightPlaces::kPlaces) {
    const int i = EightPlaces(block).PlaceOf(serial);
    if (i < 0) return Found::kNone;
    *out = Lease{serial, p.Expires(static_cast<uint32_t>(i))};
    return out->expires > t ? Found::kHeld : Found::kExpired;
  }
#endif
  for (uint32_t i = 0; i < p.n; ++i) {
    if (p.Serial(i) != serial) continue;
    *out = Lease{serial, p.Expires(i)};
    return p.Expires(i) > t ? Found::kHeld : Found::kExpired;
  }
  return Found::kNone;
}

bool Concurrency::FreeAdopted(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial, uint32_t nonce) {
  if (serial == 0 || Load32(block) == 0) return false;
  const uint32_t mine = Load32(block + kNonceAt);
  if (nonce != 0 && mine != 0 && nonce != mine) serial = (serial & kMaxSerial) | kOtherSeries;
  // The other holder's release: this copy's expired leases stay for the
  // next write here to count (RebaseKeepingExpired).
  RebaseKeepingExpired(spec, block, ClampedNow(block, now));
  return FreePlace(spec, block, serial);
}

bool Concurrency::Free(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial) {
  if (serial == 0 || Load32(block) == 0) return false;
  Rebase(spec, block, ClampedNow(block, now));
  return FreePlace(spec, block, serial);
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

void Concurrency::SkipSerials(uint8_t* block, uint32_t n) {
  if (Load32(block) == 0) return;  // no block: no lease was ever granted under it
  const uint64_t next = std::max<uint32_t>(Load32(block + kNextAt), 1);
  Store32(block + kNextAt, static_cast<uint32_t>((next - 1 + n) % kMaxSerial + 1));
}

void Concurrency::Adopt(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial, int64_t until,
                        uint32_t nonce) {
  if (serial == 0) return;
  const int64_t t = ClampedNow(block, now);
  RebaseKeepingExpired(spec, block, t);
  PlaceTable p(block, spec.bytes);
  const uint32_t mine = Load32(block + kNonceAt);
  // Of its own series only: the other holder's, kept with kOtherSeries,
  // held the copy's nonce for as long as any of them was held, and a busy
  // key's copy never took the sender's again (its ids refused there after a
  // failover; found by a review).
  int64_t held = 0;
  for (uint32_t i = 0; i < p.n; ++i) held += p.Serial(i) != 0 && (p.Serial(i) & kOtherSeries) == 0 && p.Expires(i) > t;
  // Another series (this node holds leases of its own nonce: a new owner
  // granted these between a ring change and its handoff, or both holders
  // made the node at once): another lease, never one of this node's of the
  // same serial, kept under the serial with its top bit set until the
  // other holder releases it or it expires.
  const bool other = nonce != 0 && mine != 0 && nonce != mine && held != 0;
  if (other) {
    serial = (serial & kMaxSerial) | kOtherSeries;
  } else if (nonce != 0 && (mine == 0 || held == 0)) {
    // The copy takes the sender's series: what it still keeps of its old
    // one (expired leases, for its next write to count) is another
    // series', never a lease of the new series' serials; what it kept as
    // another series' is the sender's, of the series it takes now.
    if (mine != 0 && nonce != mine)
      for (uint32_t i = 0; i < p.n; ++i)
        if (const uint32_t s = p.Serial(i); s != 0) p.Set(i, s ^ kOtherSeries, p.Expires(i) - t);
    Store32(block + kNonceAt, nonce);
  }
  uint32_t at = p.n, free = p.n, stale = p.n;
  for (uint32_t i = 0; i < p.n; ++i) {
    const uint32_t s = p.Serial(i);
    if (s == serial) at = i;
    if (s == 0 && free == p.n) free = i;
    if (s != 0 && p.Expires(i) <= t && stale == p.n) stale = i;
  }
  // A serial this copy never saw (the next serial has not passed it): one
  // it saw and no longer holds was released, or swept and counted here.
  const bool unseen = !other && serial >= Load32(block + kNextAt);
  // Never granted here again: the next serial passes it (a wrap excepted).
  if (unseen) Store32(block + kNextAt, AfterSerial(serial));
  if (until <= t) {
    // Over by now (it came late: the other holder granted or renewed it
    // while this one was away). Kept as expired where a place is free, so
    // that whichever holder writes the key next counts it: the other
    // holder's copy frees it uncounted when this one's sweep reaches it.
    // Only one this copy never saw: a renewal that arrives after this
    // holder swept the lease (and counted it) must not bring it back.
    if (at == p.n && free != p.n && unseen) p.Set(free, serial, 0);
    return;
  }
  // A lease lasts its rule's length from its grant or renewal, as one
  // granted here now would: an until further off (a batch with the admin
  // token, found by an attack: 2^32-1 held a 60-s lease 18 h) is cut to it.
  until = std::min<int64_t>(until, t + int64_t{spec.interval} + 1);
  // Held already: each of the sender's workers sends on a link of its own,
  // so a renewal made on one can arrive before the grant made on another.
  // A lease's expiry only ever moves later: the later one is the lease's.
  if (at != p.n) until = std::max(until, p.Expires(at));
  // No free place: one whose lease expired goes (uncounted: a full block
  // of the other holder's grants, the rare case).
  if (at == p.n) at = free != p.n ? free : stale;
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
