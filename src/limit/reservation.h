// limit/reservation.h: estimates held on a key's rate rules until settled.
//
// An acquire with reserve="S" records its n (the estimate) on every rule of
// the biz, as any acquire, and keeps a reservation: the estimate, the second
// it was taken at and when it expires (S + 1 s later). A settle with the
// real amount R then changes each rate rule whose window the reservation was
// taken in is still in force (InWindow, per algorithm: docs/rules.md):
// R below the estimate gives the difference back; R above it charges the
// excess as the rule's `overrun` says. A rule whose window has ended keeps
// what it counted (the estimate) and no other window changes. A reservation
// not settled by its expiry is settled at its estimate: nothing changes but
// the table, and the expiry is counted (at the node's next write that looks).
// Since the estimate is counted from the acquire on, a rule's count is at
// every instant settled + held, and the acquire's check keeps it within
// the limit; only an overrun="charge" settle takes it beyond (by at most its
// excess over the estimate).
//
// The table lives in the key's node, after the rules' blocks, and only in
// the nodes that took a reservation (a node without one is as before):
//   [0]  tag: the length in 16-byte units in bits 27..30, every other bit 0
//        (no rule's tag has interval 0, so a reload's matching never takes it
//        for a rule, and MigrateState walks past it)
//   [4]  the next serial (1.., never 0)
//   [8]  nonce: drawn when the table is made, so that ids of an erased node
//        do not settle its successor's reservations
//   [12] the entries (bit i: entry i) held when a reload gave the biz a
//        rate rule that started from zero in this node: that rule never
//        counted them, and its count now holds other clients' uses, so a
//        settle of one changes no rule (settled at its estimate; 0 in a
//        table written before this bit existed: none is); bit 16 + i: entry
//        i was adopted from the route's other holder (Adopt), not taken here
//   [16] `cap` entries of 16 bytes: serial (0: free), estimate, taken at
//        (unix s), expires (unix s). On a replica's copy an entry whose
//        estimate has its top bit set (no estimate has: n <= 2^31 - 1) is
//        a settle that arrived before its take (SettledAhead): its low 16
//        bits say how long before the expiry it was settled, bit 30 that
//        bits 16..29 hold its table nonce's low 14 bits, `taken at` holds
//        the real amount. It is never held, listed or counted.
// A biz holds `reservations` (default 8, at most kMaxPerKey and what the node
// has room for beside the rules) per key: 16 + 16 x 8 = 144 bytes. A node's
// table has `cap` entries for the most its key has held at once (the tag
// says how many, from 1 to the biz's bound: made with one, grown by one when
// every entry is held, shrunk only by a reload's lower bound), so that a key
// holding one reservation at a time takes 32 bytes of table, not 144.
//
// Ids: 24 lowercase hex digits, the serial then a SipHash-2-4 keyed with the
// store's lease.key over ("r", biz, nonce, serial, key) (limit/lease_id.h):
// a lease's id never settles a reservation, nor one key's id another's.
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "limit/lease_id.h"
#include "limit/map_config.h"
#include "limit/rule_block.h"

namespace frs::limit {

struct Reservations {
  static constexpr uint32_t kHeaderBytes = 16;
  // Where the header keeps the next serial, the nonce, and the bits of the
  // entries taken before a rule.
  static constexpr uint32_t kNextAt = 4, kNonceAt = 8, kBeforeAt = 12;
  static constexpr uint32_t kEntryBytes = 16;
  static constexpr uint32_t kMaxPerKey = (15 * kBlockUnit - kHeaderBytes) / kEntryBytes;  // 14: the tag's length
  static constexpr uint32_t kDefaultPerKey = 8;
  static constexpr uint32_t kMaxReserveS = 65534;  // as a lease

  static uint32_t Bytes(uint32_t cap) { return cap == 0 ? 0 : kHeaderBytes + kEntryBytes * cap; }
  static uint32_t Tag(uint32_t bytes) { return (bytes / kBlockUnit) << 27; }
  static bool IsTag(uint32_t tag) { return tag != 0 && (tag & ~(15u << 27)) == 0; }
  static uint32_t Cap(uint32_t bytes) { return bytes < kHeaderBytes ? 0 : (bytes - kHeaderBytes) / kEntryBytes; }

  struct Entry {
    uint32_t serial = 0;
    int64_t estimate = 0;
    int64_t taken_s = 0;
    int64_t expires = 0;  // unix s: no longer held from this second
  };

  // The table in `state` (a node's whole state, `bytes` long) after its
  // rules' blocks, walking their tags; empty when there is none.
  static std::span<const uint8_t> Find(std::span<const uint8_t> state);
  // A table of `cap` entries made from `old` (any length, or empty): held
  // entries kept up to cap (those expiring last), its serial and nonce kept.
  static void Rebuild(std::span<const uint8_t> old, uint8_t* table, uint32_t cap);

  // Frees every entry past its expiry; returns how many.
  static uint32_t Sweep(uint8_t* table, uint32_t bytes, int64_t now_s);
  static uint32_t Held(const uint8_t* table, uint32_t bytes, int64_t now_s, std::span<Entry> out);
  static int64_t LastExpiry(const uint8_t* table, uint32_t bytes);
  // What is wrong with the times of a table from outside (an import, a node
  // another shard sent), "" when nothing: a reservation taken more than
  // `ahead_s` after `now_s`, or one that expires more than kMaxReserveS + 1
  // after it was taken (a settle kept ahead of its take: after now_s +
  // ahead_s + kMaxReserveS + 1). Here every take is at the clock's now and
  // expires at most that long after it; one from far ahead held its place
  // until then (a year, found from outside).
  static std::string TimeProblem(std::span<const uint8_t> table, int64_t now_s, int64_t ahead_s);
  // The entries in use (after a Sweep: those held) and the first of their
  // expiries (0: none), in one pass and without copying them; *occupied
  // (when given): those and the settles kept ahead (SettledAhead), every
  // entry that is not free.
  static uint32_t InUse(const uint8_t* table, uint32_t bytes, int64_t* first_expiry, uint32_t* occupied = nullptr);
  // Takes a free entry for `estimate` (false: all held), its serial the
  // next one in `half` (frs/decision.h); makes the nonce.
  static bool Take(uint8_t* table, uint32_t bytes, int64_t estimate, int64_t now_s, int64_t reserve_s, Entry* out,
                   SerialHalf half = SerialHalf::kAll);
  // The entry of `serial`, held or not (false: none has it now).
  static bool Get(const uint8_t* table, uint32_t bytes, uint32_t serial, Entry* out);
  static void Free(uint8_t* table, uint32_t bytes, uint32_t serial);
  // Marks every entry held now as taken before a rule that never counted
  // it; Predates says whether `serial`'s entry is so marked.
  static void MarkHeldBeforeARule(uint8_t* table, uint32_t bytes);
  static bool Predates(const uint8_t* table, uint32_t bytes, uint32_t serial);
  // The other holder's reservation `e`, taken under its table's `nonce`
  // (a replica's copy): kept under the same serial, the serials after it
  // are the sender's next; when every entry is held (both holders took at
  // once), the adopted one expiring first, `e` included, is left out here
  // (charged its estimate, as at its expiry): never one this holder took.
  static void Adopt(uint8_t* table, uint32_t bytes, uint32_t nonce, const Entry& e);
  // A table the route's other holder sent whole (a replica snapshot): the
  // marks it holds are its own view, so what it took itself is adopted here,
  // and what it adopted, this holder took (before it lost its store: its
  // clients hold those ids and settle them here).
  static void SeenFromTheOtherHolder(uint8_t* table, uint32_t bytes);
  // A replica's copy: the other holder settled `serial` (expiring at
  // `expires`) at `real` at second `settled_s`, and its take has not come
  // yet (each of the sender's workers sends on a link of its own, and the
  // take was made on another). Kept until the take comes or the expiry
  // passes, in a free entry (else the one expiring first).
  static void SettledAhead(uint8_t* table, uint32_t bytes, uint32_t serial, int64_t real, int64_t settled_s,
                           int64_t expires, uint32_t nonce);
  // A take arriving (its reservation expiring at `expires`, of the table
  // `nonce`): whether it was settled ahead (then that record goes, and says
  // the real amount and when it was settled). A settle that said its
  // table's nonce (`nonce` above; 0: an earlier sender) is this take's when
  // the nonces agree (in 14 bits), else when the expiries do (within 2 s).
  static bool TakeSettledAhead(uint8_t* table, uint32_t bytes, uint32_t serial, int64_t expires, uint32_t nonce,
                               int64_t* real, int64_t* settled_s);
  static uint32_t Nonce(const uint8_t* table) { return Load32(table + kNonceAt); }
  static uint32_t NextSerial(const uint8_t* table) { return Load32(table + kNextAt); }
  // The next serial moved `n` on (within 1..2^32-1), as Concurrency's.
  static void SkipSerials(uint8_t* table, uint32_t n);

  static uint64_t Mac(const LeaseSecret& secret, uint16_t biz, uint32_t nonce, uint32_t serial, std::string_view key);

  // What one rule did with a settle.
  struct RuleSettle {
    bool in_window = false;  // the reservation's window was still in force
    int64_t returned = 0;    // given back (real below the estimate)
    int64_t overrun = 0;     // charged beyond the estimate
  };
  // Settles `e` at `real` on one rule's block (concurrency rules: nothing).
  static RuleSettle SettleRule(const RuleSpec& spec, uint8_t* block, const Now& now, const Entry& e, int64_t real);
  // Whether the window `e` was taken in is still in force on this rule.
  static bool InWindow(const RuleSpec& spec, const uint8_t* block, const Now& now, const Entry& e);
};

}  // namespace frs::limit
