#include "limit/reservation.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "limit/calendar_window.h"
#include "limit/fixed_window.h"
#include "limit/lease_id.h"
#include "limit/rule_state.h"
#include "limit/sliding_window.h"
#include "limit/token_bucket.h"
#include "limit/window_counter.h"

namespace frs::limit {
namespace {

constexpr uint32_t kResNextAt = Reservations::kNextAt, kResNonceAt = Reservations::kNonceAt,
                   kResBeforeAt = Reservations::kBeforeAt;
static_assert(Reservations::kMaxPerKey <= 32, "one bit per entry in the word at kResBeforeAt");

// An entry given a new reservation (or freed) is no longer one taken
// before a rule: its bit goes.
// The word's high half marks the entries a copy adopted (Adopt: the other
// holder's), so that its own are told from them: bit kAdoptedShift + i.
// An earlier build reads the low bits only and clears bit i alone when it
// frees or reuses entry i: a store that build served keeps a mark on an
// entry it then took itself, which this build reads as adopted (a full
// copy may leave it out: docs/cluster.md, "Mixed versions").
constexpr uint32_t kAdoptedShift = 16;
static_assert(Reservations::kMaxPerKey <= kAdoptedShift, "the adopted marks above the entries' own");
void Unmark(uint8_t* table, uint32_t i) {
  Store32(table + kResBeforeAt, Load32(table + kResBeforeAt) & ~(1u << i) & ~(1u << (kAdoptedShift + i)));
}
bool Adopted(const uint8_t* table, uint32_t i) { return (Load32(table + kResBeforeAt) >> (kAdoptedShift + i)) & 1; }

// An estimate word with this bit is a settle that came before its take
// (Reservations::SettledAhead), its low 16 bits the seconds from its settle
// to the reservation's expiry (at most kMaxReserveS + 1); with kAheadNonce,
// bits 16..29 are those of its table's nonce (the sender said it).
constexpr uint32_t kAheadBit = 0x80000000u;
constexpr uint32_t kAheadNonce = 0x40000000u;
constexpr uint32_t kAheadNonceBits = 0x3FFF;
static_assert(Reservations::kMaxReserveS + 1 <= 0xFFFF, "the seconds from a settle to its expiry fit 16 bits");

struct EntrySlot {
  uint8_t* p;
  uint32_t Serial() const { return Load32(p); }
  bool Ahead() const { return (Load32(p + 4) & kAheadBit) != 0; }
  // Taken and held or expired: a record of a settle ahead is neither.
  bool Taken() const { return Serial() != 0 && !Ahead(); }
  Reservations::Entry Load() const {
    return Reservations::Entry{Load32(p), Load32(p + 4), Load32(p + 8), Load32(p + 12)};
  }
  void Store(const Reservations::Entry& e) {
    Store32(p, e.serial);
    Store32(p + 4, Clamp32(e.estimate));
    Store32(p + 8, Clamp32(e.taken_s));
    Store32(p + 12, Clamp32(e.expires));
  }
  void Clear() { std::memset(p, 0, Reservations::kEntryBytes); }
};

EntrySlot EntryAt(const uint8_t* table, uint32_t i) {
  return EntrySlot{const_cast<uint8_t*>(table) + Reservations::kHeaderBytes + Reservations::kEntryBytes * i};
}

}  // namespace

std::span<const uint8_t> Reservations::Find(std::span<const uint8_t> state) {
  std::span<const uint8_t> table;
  ForEachTaggedBlock(state, [&](uint32_t off, uint32_t tag, uint32_t bytes) {
    if (IsTag(tag)) table = state.subspan(off, bytes);
    return table.empty();
  });
  return table;
}

void Reservations::Rebuild(std::span<const uint8_t> old, uint8_t* table, uint32_t cap) {
  if (cap == 0) return;  // no table: nothing to write
  const uint32_t bytes = Bytes(cap);
  std::memset(table, 0, bytes);
  Store32(table, Tag(bytes));
  Store32(table + kResNextAt, 1);
  if (old.size() < kHeaderBytes) return;
  Store32(table + kResNextAt, std::max<uint32_t>(1, Load32(old.data() + kResNextAt)));
  Store32(table + kResNonceAt, Load32(old.data() + kResNonceAt));
  const uint32_t was_before = Load32(old.data() + kResBeforeAt);
  Entry kept[kMaxPerKey];
  bool before[kMaxPerKey] = {}, was_adopted[kMaxPerKey] = {};
  uint32_t n = 0;
  // Held entries first, then settles kept ahead (which only fill what is
  // left: a lowered bound never drops a held one for them).
  const uint32_t old_cap = std::min(Cap(static_cast<uint32_t>(old.size())), kMaxPerKey);
  for (uint32_t k = 0; k < 2 * old_cap; ++k) {
    const uint32_t i = k % old_cap;
    const bool ahead_pass = k >= old_cap;
    if (EntryAt(old.data(), i).Serial() == 0 || EntryAt(old.data(), i).Ahead() != ahead_pass) continue;
    if (ahead_pass && n == cap) break;
    const Entry e = EntryAt(old.data(), i).Load();
    const bool marked = (was_before >> i) & 1, adopted = (was_before >> (kAdoptedShift + i)) & 1;
    if (n < cap) {
      before[n] = marked;
      was_adopted[n] = adopted;
      kept[n++] = e;
      continue;
    }
    // Full: the one expiring first goes (it is charged its estimate, as at
    // its expiry, which is what a lowered bound means).
    auto first = std::min_element(kept, kept + n, [](const Entry& a, const Entry& b) { return a.expires < b.expires; });
    if (first != kept + n && first->expires < e.expires) {
      *first = e;
      before[first - kept] = marked;
      was_adopted[first - kept] = adopted;
    }
  }
  uint32_t now_before = 0;
  for (uint32_t i = 0; i < n; ++i) {
    EntryAt(table, i).Store(kept[i]);
    now_before |= static_cast<uint32_t>(before[i]) << i | static_cast<uint32_t>(was_adopted[i]) << (kAdoptedShift + i);
  }
  Store32(table + kResBeforeAt, now_before);
}

uint32_t Reservations::Sweep(uint8_t* table, uint32_t bytes, int64_t now_s) {
  uint32_t expired = 0;
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    EntrySlot s = EntryAt(table, i);
    if (s.Serial() == 0 || s.Load().expires > now_s) continue;
    expired += s.Taken();  // a settle ahead whose take never came is no expiry
    s.Clear();
    Unmark(table, i);
  }
  return expired;
}

uint32_t Reservations::Held(const uint8_t* table, uint32_t bytes, int64_t now_s, std::span<Entry> out) {
  uint32_t held = 0;
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    if (!EntryAt(table, i).Taken()) continue;
    const Entry e = EntryAt(table, i).Load();
    if (e.expires <= now_s) continue;
    if (held < out.size()) out[held] = e;
    ++held;
  }
  return held;
}

int64_t Reservations::LastExpiry(const uint8_t* table, uint32_t bytes) {
  int64_t last = 0;
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    const Entry e = EntryAt(table, i).Load();
    if (e.serial != 0) last = std::max(last, e.expires);
  }
  return last;
}

std::string Reservations::TimeProblem(std::span<const uint8_t> table, int64_t now_s, int64_t ahead_s) {
  constexpr int64_t kLongest = kMaxReserveS + 1;
  for (uint32_t i = 0; i < Cap(static_cast<uint32_t>(table.size())); ++i) {
    const EntrySlot slot = EntryAt(table.data(), i);
    const Entry e = slot.Load();
    if (e.serial == 0) continue;
    const std::string which = "reservation #" + std::to_string(e.serial);
    if (!slot.Taken()) {
      if (e.expires > now_s + ahead_s + kLongest)
        return which + " (a settle kept before its take) that expires " + std::to_string(e.expires - now_s) +
               " s after this machine's clock (at most " + std::to_string(ahead_s + kLongest) + ")";
      continue;
    }
    if (e.taken_s > now_s + ahead_s)
      return which + " taken " + std::to_string(e.taken_s - now_s) + " s after this machine's clock (at most " +
             std::to_string(ahead_s) + ")";
    if (e.expires > e.taken_s + kLongest)
      return which + " that expires " + std::to_string(e.expires - e.taken_s) + " s after its take (at most " +
             std::to_string(kLongest) + ")";
  }
  return {};
}

uint32_t Reservations::InUse(const uint8_t* table, uint32_t bytes, int64_t* first_expiry, uint32_t* occupied) {
  uint32_t n = 0, busy = 0;
  int64_t first = 0;
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    const EntrySlot s = EntryAt(table, i);
    busy += s.Serial() != 0;
    if (!s.Taken()) continue;
    const int64_t expires = Load32(s.p + 12);
    first = n == 0 ? expires : std::min(first, expires);
    ++n;
  }
  *first_expiry = first;
  if (occupied != nullptr) *occupied = busy;
  return n;
}

bool Reservations::Take(uint8_t* table, uint32_t bytes, int64_t estimate, int64_t now_s, int64_t reserve_s, Entry* out,
                        SerialHalf half) {
  // A free entry, else one a settle ahead holds (InUse does not count
  // those: its take is likely never to come here now).
  uint32_t pick = Cap(bytes);
  for (uint32_t i = 0; i < Cap(bytes) && pick == Cap(bytes); ++i)
    if (EntryAt(table, i).Serial() == 0) pick = i;
  for (uint32_t i = 0; i < Cap(bytes) && pick == Cap(bytes); ++i)
    if (EntryAt(table, i).Ahead()) pick = i;
  if (pick == Cap(bytes)) return false;
  constexpr auto after = [](uint32_t s) { return s == UINT32_MAX ? 1 : s + 1; };
  uint32_t serial = Load32(table + kResNextAt);
  if (serial == 0) serial = 1;
  serial = SerialInHalf(serial, half, after);
  Store32(table + kResNextAt, after(serial));
  if (Load32(table + kResNonceAt) == 0) Store32(table + kResNonceAt, NewIdNonce());
  // Held for at least reserve_s whole seconds, as a lease.
  *out = Entry{serial, estimate, now_s, now_s + reserve_s + 1};
  EntryAt(table, pick).Store(*out);
  Unmark(table, pick);
  return true;
}

void Reservations::SkipSerials(uint8_t* table, uint32_t n) {
  const uint64_t next = std::max<uint32_t>(Load32(table + kResNextAt), 1);
  Store32(table + kResNextAt, static_cast<uint32_t>((next - 1 + n) % UINT32_MAX + 1));
}

bool Reservations::Get(const uint8_t* table, uint32_t bytes, uint32_t serial, Entry* out) {
  if (serial == 0) return false;
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    if (EntryAt(table, i).Serial() != serial || !EntryAt(table, i).Taken()) continue;
    *out = EntryAt(table, i).Load();
    return true;
  }
  return false;
}

void Reservations::Free(uint8_t* table, uint32_t bytes, uint32_t serial) {
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    if (EntryAt(table, i).Serial() != serial) continue;
    EntryAt(table, i).Clear();
    Unmark(table, i);
  }
}

void Reservations::MarkHeldBeforeARule(uint8_t* table, uint32_t bytes) {
  uint32_t before = Load32(table + kResBeforeAt);
  for (uint32_t i = 0; i < Cap(bytes); ++i)
    if (EntryAt(table, i).Serial() != 0) before |= 1u << i;
  Store32(table + kResBeforeAt, before);
}

bool Reservations::Predates(const uint8_t* table, uint32_t bytes, uint32_t serial) {
  const uint32_t before = Load32(table + kResBeforeAt);
  for (uint32_t i = 0; i < Cap(bytes); ++i)
    if (EntryAt(table, i).Serial() == serial) return (before >> i) & 1;
  return false;
}

void Reservations::Adopt(uint8_t* table, uint32_t bytes, uint32_t nonce, const Entry& e) {
  if (e.serial == 0 || Cap(bytes) == 0) return;
  // The sender's nonce, so that its ids verify here after a failover;
  // unless this table holds reservations it took itself (not adopted)
  // under a nonce of its own (both holders made the key's table at the same
  // instant): their ids are its clients', and a nonce replaced made every
  // one of them refused here (found from outside). The sender's then verify
  // on the sender only until this table holds none of its own. (Counting
  // the adopted ones too, a busy key's two tables never came to one nonce;
  // told by the serial's half, a holder whose role a ring change turned
  // lost its own: both found by a review.)
  bool own = false;
  for (uint32_t i = 0; i < Cap(bytes) && !own; ++i) own = EntryAt(table, i).Taken() && !Adopted(table, i);
  if (Load32(table + kResNonceAt) == 0 || !own) Store32(table + kResNonceAt, nonce);
  // Never taken here again: the next serial passes it (a wrap excepted).
  // Only forward: the sender's workers send on links of their own, so a
  // take of an earlier serial can arrive after a later one, and a serial
  // moved back would give a reservation taken here after a failover the
  // id of one the sender took.
  if (e.serial >= Load32(table + kResNextAt)) Store32(table + kResNextAt, e.serial == UINT32_MAX ? 1 : e.serial + 1);
  int64_t place = -1;
  for (uint32_t i = 0; i < Cap(bytes) && place < 0; ++i)
    if (EntryAt(table, i).Serial() == e.serial) place = i;
  for (uint32_t i = 0; i < Cap(bytes) && place < 0; ++i)
    if (EntryAt(table, i).Serial() == 0) place = i;
  for (uint32_t i = 0; i < Cap(bytes) && place < 0; ++i)
    if (EntryAt(table, i).Ahead()) place = i;  // a settle kept ahead gives its place before a held one
  if (place < 0) {
    // Every entry held: both holders took at the same instant (each table
    // holds the reservations of both), more than the biz's bound. The one
    // that goes is one this copy adopted, the one expiring first, this one
    // included: the sender holds it and settles it, and here its estimate
    // stays counted as at its expiry. Never one this holder took: its
    // client's settle here would answer 410 (found from outside, 12
    // clients on a key of 8).
    int64_t first = e.expires;
    for (uint32_t i = 0; i < Cap(bytes); ++i) {
      const Entry held = EntryAt(table, i).Load();
      if (Adopted(table, i) && held.expires < first) {
        first = held.expires;
        place = i;
      }
    }
    if (place < 0) return;  // this one expires first: left out here
  }
  // The same reservation again keeps its mark; another one in its place
  // was taken after any rule this node has.
  if (EntryAt(table, static_cast<uint32_t>(place)).Serial() != e.serial) Unmark(table, static_cast<uint32_t>(place));
  EntryAt(table, static_cast<uint32_t>(place)).Store(e);
  Store32(table + kResBeforeAt, Load32(table + kResBeforeAt) | 1u << (kAdoptedShift + static_cast<uint32_t>(place)));
}

void Reservations::SeenFromTheOtherHolder(uint8_t* table, uint32_t bytes) {
  uint32_t marks = Load32(table + kResBeforeAt) & ((1u << kAdoptedShift) - 1);
  for (uint32_t i = 0; i < Cap(bytes); ++i)
    if (EntryAt(table, i).Taken() && !Adopted(table, i)) marks |= 1u << (kAdoptedShift + i);
  Store32(table + kResBeforeAt, marks);
}

void Reservations::SettledAhead(uint8_t* table, uint32_t bytes, uint32_t serial, int64_t real, int64_t settled_s,
                                int64_t expires, uint32_t nonce) {
  if (serial == 0 || Cap(bytes) == 0 || expires <= settled_s || expires - settled_s > kMaxReserveS + 1) return;
  if (serial >= Load32(table + kResNextAt)) Store32(table + kResNextAt, serial == UINT32_MAX ? 1 : serial + 1);
  for (uint32_t i = 0; i < Cap(bytes); ++i)
    if (EntryAt(table, i).Serial() == serial) return;  // held here after all, or recorded already
  // A free entry, else the settle kept ahead that expires first: never a
  // held reservation (pushed out, its own settle would find it gone).
  uint32_t place = Cap(bytes);
  for (uint32_t i = 0; i < Cap(bytes) && place == Cap(bytes); ++i)
    if (EntryAt(table, i).Serial() == 0) place = i;
  if (place == Cap(bytes))
    for (uint32_t i = 0; i < Cap(bytes); ++i)
      if (EntryAt(table, i).Ahead() &&
          (place == Cap(bytes) || Load32(EntryAt(table, i).p + 12) < Load32(EntryAt(table, place).p + 12)))
        place = i;
  if (place == Cap(bytes)) return;
  EntrySlot s = EntryAt(table, place);
  Store32(s.p, serial);
  const uint32_t said = nonce == 0 ? 0 : kAheadNonce | (nonce & kAheadNonceBits) << 16;
  Store32(s.p + 4, kAheadBit | said | static_cast<uint32_t>(expires - settled_s));
  Store32(s.p + 8, Clamp32(real));
  Store32(s.p + 12, Clamp32(expires));
  Unmark(table, place);
}

bool Reservations::TakeSettledAhead(uint8_t* table, uint32_t bytes, uint32_t serial, int64_t expires, uint32_t nonce,
                                    int64_t* real, int64_t* settled_s) {
  for (uint32_t i = 0; i < Cap(bytes); ++i) {
    EntrySlot s = EntryAt(table, i);
    if (s.Serial() != serial || !s.Ahead()) continue;
    // Its reservation's, not one of the same serial in a node made again
    // since: the same table nonce, when the settle said it (an expiry is
    // moved by as many seconds as its change's sender is ahead of this
    // clock when it arrives, which differ for a take and its settle); else
    // the same expiry, within 2 s.
    const uint32_t word = Load32(s.p + 4);
    if ((word & kAheadNonce) != 0 && nonce != 0) {
      if ((word >> 16 & kAheadNonceBits) != (nonce & kAheadNonceBits)) continue;
    } else if (std::abs(int64_t{Load32(s.p + 12)} - expires) > 2) {
      continue;
    }
    *real = Load32(s.p + 8);
    *settled_s = int64_t{Load32(s.p + 12)} - (Load32(s.p + 4) & 0xFFFF);
    s.Clear();
    Unmark(table, i);
    return true;
  }
  return false;
}

uint64_t Reservations::Mac(const LeaseSecret& secret, uint16_t biz, uint32_t nonce, uint32_t serial,
                           std::string_view key) {
  // A leading 'r' and one byte more than a lease's input: no reservation
  // input is a lease's, whatever the key.
  uint8_t buf[11 + 256];
  const size_t klen = std::min<size_t>(key.size(), 256);
  buf[0] = 'r';
  buf[1] = static_cast<uint8_t>(biz);
  buf[2] = static_cast<uint8_t>(biz >> 8);
  for (int i = 0; i < 4; ++i) {
    buf[3 + i] = static_cast<uint8_t>(nonce >> (8 * i));
    buf[7 + i] = static_cast<uint8_t>(serial >> (8 * i));
  }
  std::memcpy(buf + 11, key.data(), klen);
  return SipHash24(secret.k0, secret.k1, buf, 11 + klen);
}

bool Reservations::InWindow(const RuleSpec& spec, const uint8_t* block, const Now& now, const Entry& e) {
  if (Load32(block) == 0) return false;
  switch (spec.algo) {
    case Algo::kFixed: {
      // The window open now is the one the reservation was taken in.
      const Frame f = FixedWindow::FrameAt(spec, CounterBlock::Load(block), now.s);
      return f.open && f.start <= e.taken_s && e.taken_s < f.end;
    }
    case Algo::kCalendar: {
      const Frame f = CalendarWindow::FrameAt(spec, CounterBlock::Load(block), now);
      return f.held && f.start <= e.taken_s && e.taken_s < f.end;
    }
    case Algo::kSliding:
      // Its uses are in every window ending before taken_s + interval.
      return now.s < e.taken_s + spec.interval;
    case Algo::kTokenBucket:
      // Tokens given back are capped at a full bucket, which makes a late
      // give-back exact (TokenBucket::GiveBack): the window is the
      // reservation's life.
      return true;
    case Algo::kConcurrency: return false;
  }
  return false;
}

Reservations::RuleSettle Reservations::SettleRule(const RuleSpec& spec, uint8_t* block, const Now& now, const Entry& e,
                                                  int64_t real) {
  RuleSettle out;
  if (spec.algo == Algo::kConcurrency || !InWindow(spec, block, now, e)) return out;
  out.in_window = true;
  if (real < e.estimate) {
    const int64_t back = e.estimate - real;
    switch (spec.algo) {
      case Algo::kFixed:
      case Algo::kCalendar: {
        CounterBlock b = CounterBlock::Load(block);
        out.returned = std::min<int64_t>(back, b.count);
        b.count -= static_cast<uint32_t>(out.returned);
        b.Store(block);
        break;
      }
      case Algo::kSliding: out.returned = SlidingWindow::GiveBack(spec, block, now, e.taken_s, back); break;
      case Algo::kTokenBucket:
        out.returned = TokenBucket::GiveBack(spec, block, now, back, e.taken_s * 1000, e.estimate);
        break;
      case Algo::kConcurrency: break;
    }
    return out;
  }
  int64_t extra = real - e.estimate;
  if (extra == 0 || spec.overrun == Overrun::kEstimate) return out;
  if (spec.overrun == Overrun::kLimit) {
    RuleResult r;
    Evaluate(spec, block, now, 1, &r);
    extra = std::min(extra, r.remaining);
  }
  if (extra <= 0) return out;
  // In the reservation's window (checked above): a fixed or calendar window
  // adds to its count; a sliding window and a token bucket count the excess
  // as used now, which holds it no shorter than at taken_s would. What is
  // reported is what the count took: a count at its top (2^32-1) takes no
  // more.
  RuleResult before, after;
  Evaluate(spec, block, now, 1, &before);
  Record(spec, block, now, extra);
  Evaluate(spec, block, now, 1, &after);
  out.overrun = std::clamp<int64_t>(after.count - before.count, 0, extra);
  return out;
}

}  // namespace frs::limit
