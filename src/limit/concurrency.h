// limit/concurrency.h: at most `max` leases held at once (algo="concurrency").
//
// An acquire takes a lease when fewer than `max` are held; the lease holds
// for `lease` seconds (the rule's interval field) unless released earlier or
// renewed. A lease nobody released frees its place by itself at its expiry,
// and the next write to the node counts it as expired (Sweep).
//
// Block (its length in 32-byte units, rule_block.h):
//   [0]  tag
//   [4]  the next lease's serial (1.., never 0; a key's serials never repeat
//        while its node lives)
//   [8]  base: the unix second the expiry offsets count from (the last write)
//   [12] nonce: drawn when the node's first lease is granted, so that a node
//        erased and made again tells its old ids apart (limit/lease_id.h)
//   [16] `places` serials (u32, 0: a free place), then `places` expiry
//        offsets (u16, seconds from base): a lease holds while now < base + offset.
// places = (bytes - 16) / 6, so the layout follows from the block's length
// alone: 32 bytes hold 2 leases, 64 hold 8, 416 hold 66, 480 (the most a
// tag can say) 77. Every write moves base to now, so an offset never
// exceeds lease + 1 <= 65,535 (the lease a lease was granted under: a
// reload that shortens it keeps the leases held to their expiries).
//
// Time: a lease granted at second t expires at t + lease + 1, so it holds
// between `lease` and `lease` + 1 s; a clock stepped back is held at base.
//
// Thread safety: plain functions over caller-owned bytes; the store's chain
// lock serializes access to one node.
#pragma once

#include <span>

#include "limit/rule_block.h"

namespace frs::limit {

struct Concurrency {
  static constexpr uint32_t kHeaderBytes = 16;
  // Where the header keeps the next serial, the base time and the nonce.
  static constexpr uint32_t kNextAt = 4, kBaseAt = 8, kNonceAt = 12;
  static constexpr uint32_t kPlaceBytes = 6;
  static constexpr int64_t kMaxLeases = (kMaxLeaseBlockBytes - kHeaderBytes) / kPlaceBytes;  // 77
  static constexpr uint32_t kMaxLeaseS = 65534;                                              // lease + 1 fits an offset

  static uint32_t Bytes(int64_t max);
  static uint32_t Places(uint32_t bytes) { return bytes < kHeaderBytes ? 0 : (bytes - kHeaderBytes) / kPlaceBytes; }

  struct Lease {
    uint32_t serial = 0;
    int64_t expires = 0;  // unix s: no longer held from this second
  };
  enum class Found : uint8_t { kHeld, kExpired, kNone };

  // The rule interface (rule_state.h). A concurrency rule judges one lease
  // per request whatever n is (n counts the biz's rate rules' units).
  static void Evaluate(const RuleSpec& spec, const uint8_t* block, const Now& now, int64_t n, RuleResult* out);
  // Grants one lease when a place is free (an update past max grants none).
  static void Record(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t n);
  // The serials of the leases a set or a give-back ended, for the other
  // holder of the route: it ends those leases, by serial, and no others
  // (limit/rule_event.h). Past kMax only the count goes on. A lease of
  // another series (kOtherSeries) is not named: the other holder knows it
  // under a serial of its own nonce, which this node does not keep, and a
  // serial sent under this node's nonce would end another lease there; it
  // holds that one until its expiry (more than here, never fewer).
  struct Ended {
    static constexpr uint32_t kMax = 16;
    uint32_t serial[kMax] = {};
    uint32_t n = 0;      // serials kept, at most kMax
    uint32_t total = 0;  // leases ended
    void Add(uint32_t s) {
      if (n < kMax && (s & kOtherSeries) == 0) serial[n++] = s;
      ++total;
    }
  };
  // Admin set (and a give-back, limit/node_op.h): keeps `count` leases (the
  // latest to expire, the higher serial of two alike), or grants leases
  // without ids up to `count`; the leases it ended in `*ended`.
  static void SetCount(const RuleSpec& spec, uint8_t* block, const Now& now, int64_t count, Ended* ended = nullptr);
  static int64_t ExpireS(const RuleSpec& spec, const uint8_t* block);
  // A block from outside (any length, its tag checked): the second its
  // expiries count from. Every write here moves the base to now, so it is
  // never ahead of the clock that wrote it.
  static int64_t BaseS(std::span<const uint8_t> block);
  static void Explain(const RuleSpec& spec, const uint8_t* block, const Now& now, RuleView* out);
  // Handoff: the incoming leases join this block's, as far as max allows.
  // Under the same nonce a serial already held here is the same lease, sent
  // again; under another (the node made here meanwhile) each is another
  // lease, given a serial of this node's: held and counted until its
  // expiry, its old id no longer verifying. A block holding no lease takes
  // the sent one whole, nonce included, so its ids verify here.
  static void Merge(const RuleSpec& spec, uint8_t* block, const uint8_t* incoming, const Now& now);
  // A reload changed max (the block's length) or lease: the held leases are
  // kept, with their ids and expiries, up to the new max (those expiring last).
  static void Convert(const RuleSpec& spec, std::span<const uint8_t> old_block, uint8_t* block, const Now& now);

  // Lease operations, on a block in spec's layout.
  // Frees every lease past its expiry; returns how many (to be counted).
  static uint32_t Sweep(const RuleSpec& spec, uint8_t* block, const Now& now);
  static uint32_t NextSerial(const uint8_t* block) { return Load32(block + kNextAt); }
  // The next serial moved `n` on (within 1..kMaxSerial): a node restored
  // from an export (EngineImpl::ImportNode) must not grant again the serials
  // its live predecessor granted after the export under the same nonce.
  static void SkipSerials(uint8_t* block, uint32_t n);
  static uint32_t Nonce(const uint8_t* block) { return Load32(block + kNonceAt); }
  static Found Find(const RuleSpec& spec, const uint8_t* block, const Now& now, uint32_t serial, Lease* out);
  // The lease of `serial` no longer held (false: none had it).
  static bool Free(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial);
  // A held lease of `serial` now holds `lease` + 1 s from now; its new expiry.
  static int64_t Extend(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial);
  // A replica's copy (limit/rule_event.h): the other holder granted lease
  // `serial`, or renewed it, held until `until` under its node's `nonce`.
  // The copy holds it as the same lease (the same id verifies on both
  // holders, the secret being shared), even past max (the other holder's
  // grants are counted as they are; Evaluate then denies); a copy without a
  // free place takes one whose lease expired, else drops it. Its serial is
  // never granted here again. One already past `until` is kept as expired
  // (the next write here counts it, rule_event.h), and the copy's own
  // expired leases stay for that write too: none is freed uncounted here.
  // The copy takes the nonce when it has none or holds no lease. A lease
  // of another nonce on a copy holding leases of its own (a new owner's,
  // granted between a ring change and its handoff; or both holders made
  // the node at once) is another lease: held under its serial with
  // kOtherSeries set, which no id of this node names, until the other
  // holder's release (FreeAdopted) or its expiry.
  static void Adopt(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial, int64_t until,
                    uint32_t nonce);
  // The other holder released `serial` of its node's `nonce` (0: a sender
  // that did not say; this node's then).
  static bool FreeAdopted(const RuleSpec& spec, uint8_t* block, const Now& now, uint32_t serial, uint32_t nonce);
  static constexpr uint32_t kOtherSeries = 0x80000000u;
  // A node's own serials stay below kOtherSeries: 1..kMaxSerial, then 1
  // again, so that no own serial is ever taken for another series'.
  static constexpr uint32_t kMaxSerial = kOtherSeries - 1;
  static constexpr uint32_t AfterSerial(uint32_t serial) { return serial >= kMaxSerial ? 1 : serial + 1; }
  // The serial a grant in `half` draws after `serial` (frs/decision.h): the
  // leases one set grants are not one after another for a holder of a
  // replicated route.
  static constexpr uint32_t NextInHalf(uint32_t serial, SerialHalf half) {
    return SerialInHalf(AfterSerial(serial), half, AfterSerial);
  }

  // The leases held now, up to out.size(); returns how many are held.
  static size_t Held(const RuleSpec& spec, const uint8_t* block, const Now& now, std::span<Lease> out);
  // The places a block of any length has taken, expired or not (what a
  // conversion may end: limit/node_op.h, LayoutEnded).
  static uint32_t Taken(std::span<const uint8_t> block);
  // The serials of the leases of this node's own series a block of any
  // length holds at `now`, up to out.size(); returns how many it holds.
  static size_t HeldSerials(std::span<const uint8_t> block, const Now& now, std::span<uint32_t> out);
};

}  // namespace frs::limit
