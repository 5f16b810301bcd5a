// store/format.h: the on-disk (and in-memory) layout of one store file.
//
// A store file is a file format first: it outlives processes and builds, and
// frsctl maps it at another address than frsd, so everything here is
// fixed-width, explicitly laid out, addressed by offsets, and checked by
// static_assert. Any change to a struct below changes kLayoutSignature; a
// change of meaning must also bump kFormatVersion.
//
//   [0, 4096)            FileHeader: identity + geometry (checksummed),
//                        then counters and the recovery lock
//   [heads_offset, ...)  one head per key-node group: its 64-bit lock word,
//                        then one tag byte per slot (see ChainHead)
//   [writers_offset,...) kWriterEntries writer entries (one per writing
//                        thread, each journal sized for one update), then
//                        kBatchEntries batch entries (taken per batch, each
//                        journal sized for kMaxBatch members)
//   [chains_offset, ...) keynodes x chain slots of 32 bytes
#pragma once

#include <cstddef>
#include <cstdint>

#include "frs/store.h"
#include "frs/store_admin.h"
#include "os/shm_lock.h"

namespace frs::store {

inline constexpr uint64_t kMagic = 0x45524f5453535246ull;  // "FRSSTORE" read little-endian
// 2: 64-bit lock words (owner thread id and start time) and writer entries
// that record their owner's start time.
// 3: a node keeps its route's ring position (40-byte node header), so that
// `frsctl handoff` finds the shard that owns it without its key text.
// 4: 32-byte slots and nodes (a 24-byte header with a 64-bit identity; a
// one-rule state packed into the header's slot: store/packed_state.h), small
// keys kept whole in the identity, journals sized per writer kind.
// 5: key-node groups (frs/store.h KeynodeGroup): consecutive key-nodes share
// one lock and one head of tags, and a node may live in any chain of its
// key-node's group, so multi-slot nodes fill a store as one-slot nodes do.
// 6: keyed placement: the header holds a random placement key (place_key),
// and a node's file and key-nodes derive from a SipHash under it
// (identity.h LocationHash), so no client can work out which keys share a
// key-node with another's and evict it on purpose. The layout is format 5's:
// a store of format 5 (no key: placed as before) is opened, read and written
// as it is, and a build that knows only format 5 refuses a keyed store
// instead of looking for its nodes in the wrong places.
inline constexpr uint32_t kFormatVersion = kStoreFormatVersion;  // frs/store_admin.h publishes it
inline constexpr uint32_t kUnkeyedFormatVersion = 5;
static_assert(kFormatVersion == kUnkeyedFormatVersion + 1);
inline constexpr bool IsReadableFormat(uint32_t version) {
  return version == kFormatVersion || version == kUnkeyedFormatVersion;
}
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kWriterEntries = 32;  // one per writing thread
inline constexpr uint32_t kBatchEntries = 4;    // one per batch in progress
inline constexpr uint32_t kAllWriterEntries = kWriterEntries + kBatchEntries;
inline constexpr uint32_t kChecksummedBytes = 256;

// Undo records a journal can hold. One update writes only inside three
// chains (the key's two and one cuckoo destination), each slot saved once,
// plus each chain's tags once (see ChainHead below). A batch writes inside
// at most three chains per member, and never more than its members' nodes
// plus what making room for them moves or clears.
//
// Below the file header, "key-node" and "chain" are a group and its slots
// (GroupGeometry): the unit of locking, tags and layout.
inline StoreGeometry GroupGeometry(const StoreGeometry& g) {
  const uint32_t n = KeynodeGroup(g);
  return StoreGeometry{g.files, g.keynodes / n, g.chain * n};
}
// Journal records of a chain's tags: one per 32 tags (a record's image).
// A node's check byte is saved with its slot's record (JournalRecord).
inline constexpr uint32_t TagRecords(uint32_t chain) { return (chain + kSlotBytes - 1) / kSlotBytes; }
//
// Within a group of up to 64 slots the nodes bound it, not the chains: an
// update clears its old node (16 slots at most), then either evicts the
// nodes overlapping a window of its new span (16 + 2 x 15 slots) or moves
// one node (16 slots saved where it was and 16 where it goes) and writes
// the new one (16), each slot saved once: at most 5 x kMaxSpan slots, plus
// the tags of three chains.
inline constexpr uint32_t UpdateJournalCapacity(uint32_t chain) {
  const uint32_t by_chains = 3 * (chain + TagRecords(chain));
  const uint32_t by_nodes = 5 * kMaxSpan + 3 * TagRecords(chain);
  return by_chains < by_nodes ? by_chains : by_nodes;
}
inline constexpr uint32_t BatchJournalCapacity(uint32_t chain) {
  // A node never spans more than its chain.
  const uint32_t span = chain < kMaxSpan ? chain : kMaxSpan;
  const uint32_t tags = TagRecords(chain);
  const uint32_t by_chains = 3 * static_cast<uint32_t>(Store::kMaxBatch) * (chain + tags);
  const uint32_t by_nodes = UpdateJournalCapacity(chain) + 2 * static_cast<uint32_t>(Store::kMaxBatch) * (span + tags);
  return by_chains < by_nodes ? by_chains : by_nodes;
}
inline constexpr uint32_t JournalCapacity(uint32_t chain, uint32_t entry) {
  return entry < kWriterEntries ? UpdateJournalCapacity(chain) : BatchJournalCapacity(chain);
}

struct FileHeader {
  // --- identity and geometry: written once, covered by `checksum` ---
  uint64_t magic;         // kMagic; also exposes a byte-order mismatch
  uint32_t version;       // kFormatVersion
  uint32_t header_bytes;  // kHeaderBytes
  uint32_t files;         // geometry of the whole store
  uint32_t file_index;    // this file's place in it
  uint32_t keynodes;
  uint32_t chain;
  uint32_t slot_bytes;         // kSlotBytes
  uint32_t node_header_bytes;  // kNodeHeaderBytes
  uint32_t writer_entries;
  uint32_t writer_entry_bytes;
  uint64_t heads_offset;
  uint64_t writers_offset;
  uint64_t chains_offset;
  uint64_t file_bytes;
  uint64_t created_unix;
  uint64_t store_id;          // random, equal in every file of one store
  uint64_t layout_signature;  // kLayoutSignature of the build that made it
  uint32_t head_bytes;        // HeadBytes(chain)
  uint32_t batch_entries;     // kBatchEntries, after the writer entries
  uint32_t batch_entry_bytes;
  uint32_t keynode_group;  // KeynodeGroup(geometry): key-nodes per group
  // Format 6: the placement key (identity.h PlaceKey), random, equal in
  // every file of one store and never 0; format 5: 0 (reserved then). Twice
  // more after it: a header rebuilt with no intact file of its store to copy
  // the key from (verify --repair of a one-file store) takes each byte from
  // the copies that agree, where damage to the key alone lost every node.
  uint64_t place_key[2];
  uint64_t place_key_copies[2][2];
  uint8_t reserved0[kChecksummedBytes - 168];
  uint64_t checksum;  // XXH3-64 of bytes [0, kChecksummedBytes)
  uint8_t pad0[56];
  // --- counters: updated atomically, not checksummed ---
  alignas(64) uint64_t nodes_used;
  uint64_t slots_used;
  uint64_t evictions_stale;
  uint64_t evictions_live;
  uint64_t cuckoo_moves;
  uint64_t lock_recoveries;
  uint64_t damaged_nodes;  // damaged nodes met (and ignored) by lookups and walks
  // Threads waiting for a writer entry of this file: while it is not 0,
  // holders hand their entries back after each write (writer_table.h).
  uint64_t writer_waiters;
  // The lock held while a dead owner's journal is undone (own cache line).
  alignas(64) os::LockWord recovery_lock;
  uint8_t pad1[kHeaderBytes - 384 - 8];
};
static_assert(sizeof(FileHeader) == kHeaderBytes);
static_assert(offsetof(FileHeader, version) == 8);
static_assert(offsetof(FileHeader, heads_offset) == 48);
static_assert(offsetof(FileHeader, head_bytes) == 104);
static_assert(offsetof(FileHeader, batch_entries) == 108 && offsetof(FileHeader, batch_entry_bytes) == 112);
static_assert(offsetof(FileHeader, layout_signature) == 96 && offsetof(FileHeader, keynode_group) == 116);
static_assert(offsetof(FileHeader, place_key) == 120 && offsetof(FileHeader, place_key_copies) == 136);
static_assert(offsetof(FileHeader, checksum) == kChecksummedBytes);
static_assert(offsetof(FileHeader, nodes_used) == 320);
static_assert(offsetof(FileHeader, recovery_lock) == 384);

// The first 24 bytes of a node's first slot, common to both node forms:
//
//   compact (1 slot, form bit kFormCompact): the header, then the node's
//     state packed into 8 bytes (store/packed_state.h). Holds a biz of one
//     fixed, calendar or token-bucket rule: 32 bytes per key.
//   general (span slots): the header, a GeneralExt (state and key lengths),
//     the state bytes, then as many key bytes as the node keeps.
//
// A slot whose span bits are 0 is free; a node's other span-1 slots carry
// no header of their own.
//
// Identity: `id` is the low 64 bits of the key's XXH3-128 fingerprint
// (frs/key.h), or, when the key is short (KeyForm, store/identity.h), the key
// itself. Placement derives from the id and the biz alone (placement.h), so
// a node can be moved to a store of another geometry without its key text.
struct NodeHeader {
  uint64_t id;
  uint16_t biz;
  uint8_t form;            // bits 0..4 span (0: free), kFormCompact, kNodeInAlternate, kRouteKnown
  uint8_t heat_kind;       // bits 0..5 heat, bits 6..7 the key form (store/identity.h)
  uint32_t expire_s;       // stale at and after this unix second
  uint32_t last_access_s;  // for LRU eviction
  // The CRC-32 of the route the node was last written under: its position
  // on a cluster's ring (frs/ring.h). The route may be a `route=` parameter
  // or a hash tag, neither recoverable from the key, and the key text may
  // not be kept; handoff needs only this to find the node's owner.
  uint32_t route_pos;
};
static_assert(sizeof(NodeHeader) == kNodeHeaderBytes);
static_assert(offsetof(NodeHeader, biz) == 8 && offsetof(NodeHeader, form) == 10);
static_assert(offsetof(NodeHeader, expire_s) == 12 && offsetof(NodeHeader, route_pos) == 20);

// What a general node keeps after the common header.
struct GeneralExt {
  uint16_t state_len;  // bytes of caller state after this
  uint8_t key_len;     // the full key's length, 0 when unknown (an import by fingerprint)
  uint8_t key_stored;  // key bytes kept after the state (a prefix when < key_len)
};
static_assert(sizeof(GeneralExt) == kGeneralHeaderBytes - kNodeHeaderBytes);
inline constexpr uint32_t kCompactStateBytes = 16;  // the state a compact node packs
inline constexpr uint32_t kSpanMask = 0x1F;
inline constexpr uint8_t kFormCompact = 0x20;
inline constexpr uint8_t kNodeInAlternate = 0x40;
// Clear only for a node imported, without its route, from an export whose key
// text was cut: its owner cannot be known, and handoff leaves it alone.
inline constexpr uint8_t kRouteKnown = 0x80;
static_assert(kMaxSpan <= kSpanMask);

inline uint32_t SpanOf(const NodeHeader* h) { return h->form & kSpanMask; }
inline bool IsFree(const NodeHeader* h) { return (h->form & kSpanMask) == 0; }
inline bool IsCompact(const NodeHeader* h) { return (h->form & kFormCompact) != 0; }
inline const GeneralExt* ExtOf(const NodeHeader* h) {
  return reinterpret_cast<const GeneralExt*>(reinterpret_cast<const uint8_t*>(h) + kNodeHeaderBytes);
}

// A node's heat (heat_kind bits 0..5): how often it is used, so that eviction
// prefers cold nodes among those last used in the same second (the LRU clock
// has one-second resolution; before, ties broke by slot position and under
// insert churn a key used thousands of times a second was the one evicted).
// Each use adds one, up to 63; each second without use halves it, so a hot
// key carries its heat into the next second and a burst long past cools off.
inline constexpr uint8_t kMaxHeat = 63;
inline uint8_t HeatOf(const NodeHeader* h) { return h->heat_kind & kMaxHeat; }
inline uint8_t KindOf(const NodeHeader* h) { return h->heat_kind >> 6; }
inline uint8_t NextHeat(uint8_t heat, uint32_t last_s, uint32_t now_s) {
  if (now_s > last_s) heat = now_s - last_s >= 8 ? 0 : static_cast<uint8_t>(heat >> (now_s - last_s));
  return heat < kMaxHeat ? heat + 1 : kMaxHeat;
}
// Eviction cost: the last second of use, then the heat within it.
inline uint64_t RecencyOf(const NodeHeader* h) { return uint64_t{h->last_access_s} << 8 | HeatOf(h); }

// ChainHead. A key-node group's head: the group's 64-bit lock word
// (os/shm_lock.h), then tags[chain]: for the first slot of each node a
// one-byte digest of its fingerprint (1..254), kContTag for the node's other
// slots, 0 for free slots. A lookup reads the head and touches only the
// slots whose tag matches, instead of walking the chain's lines one miss
// after another; placement reads which slots are free, and how long each
// node is, from the tags alone (ChainMap::FromTags), so an insert into a
// group of 64 slots reads 64 bytes instead of 64 node headers. Tags are
// written with the node, under the lock and journaled like slots; readers
// may peek at them without the lock as a hint, confirmed under the lock.
//
// After the tags, checks[chain]: each node's check byte at its first slot
// (store/node_check.h), 0 elsewhere. A head is a power of two of 16 to 64
// bytes, or whole cache lines beyond: 32 bytes for a chain of 8, 192 for a
// group of 64 slots (the lock word and 56 tags in its first line).
inline constexpr uint32_t kHeadLockBytes = 8;
inline constexpr uint32_t HeadBytes(uint32_t chain) {
  const uint32_t need = kHeadLockBytes + 2 * chain;
  if (need > 64) return (need + 63) / 64 * 64;
  uint32_t b = 16;
  while (b < need) b *= 2;
  return b;
}
static_assert(HeadBytes(1) == 16 && HeadBytes(8) == 32 && HeadBytes(28) == 64 && HeadBytes(64) == 192);
inline uint8_t* ChecksOf(uint8_t* tags, uint32_t chain) { return tags + chain; }
inline const uint8_t* ChecksOf(const uint8_t* tags, uint32_t chain) { return tags + chain; }
inline constexpr uint8_t kContTag = 0xFF;  // a node's second and later slots
inline uint8_t TagOf(uint64_t place_hash) {
  // The place hash's (store/identity.h) low byte: the file and key-nodes
  // come from its other bits (placement.h). 0 and kContTag are taken.
  const uint8_t t = static_cast<uint8_t>(place_hash);
  return t == 0 ? 1 : t == kContTag ? kContTag - 1 : t;
}
// Journal records with a slot number of kTagsRecord + c hold a chain's tags
// [32c, 32c + 32), not a slot (Txn::Save of kTagsRecord saves them all).
inline constexpr uint32_t kTagsRecord = 0xFFFFFF00u;
inline constexpr bool IsTagsRecord(uint32_t slot) { return slot >= kTagsRecord; }

struct Slot {
  uint8_t bytes[kSlotBytes];
};
static_assert(sizeof(Slot) == 32);

// One undo record: where a slot lives and what it held before the write.
// A slot's record also keeps the slot's check byte (format 5): `slot` is
// the slot number in bits 0..7, kRecordHasCheck, and the check byte in bits
// 8..15 (undone together, so that an undo never gives a node whose check
// had failed a matching one).
struct JournalRecord {
  uint32_t keynode;
  uint32_t slot;
  uint8_t image[kSlotBytes];
};
inline constexpr uint32_t kRecordSlotMask = 0xFF;
inline constexpr uint32_t kRecordHasCheck = 1u << 16;
static_assert(sizeof(JournalRecord) == 40);

// A writer entry belongs to one thread (owner tid, and that thread's start
// time, so that a reused tid is not taken for the owner) while it writes to
// this file. `active` is set before the first in-place write of a critical
// section and cleared after the last; while it is set, `count` records are
// valid.
//
// A batch whose members live in several files is one transaction: every
// entry it uses records the batch's number and where its coordinator entry
// is (the entry in the batch's lowest file). The commit point is one store:
// the coordinator's `committed` = `batch`, after every file is written. A
// dead writer's active entry of such a batch is kept (not undone) exactly
// when its coordinator says committed; see WriterTable::RecoverDeadWriters.
struct WriterEntryHeader {
  uint64_t owner;  // os::Owner::word(): tid, and start time << 32; 0 = free
  uint32_t active;
  uint32_t count;
  uint64_t batch;      // 0: not part of a batch across files
  uint64_t committed;  // the coordinator's: == batch once the batch is committed
  uint32_t coord_file, coord_entry;
  uint32_t reserved[6];
};
static_assert(offsetof(WriterEntryHeader, active) == 8 && offsetof(WriterEntryHeader, count) == 12);
static_assert(offsetof(WriterEntryHeader, batch) == 16 && offsetof(WriterEntryHeader, committed) == 24);
static_assert(offsetof(WriterEntryHeader, coord_file) == 32 && offsetof(WriterEntryHeader, coord_entry) == 36);
static_assert(sizeof(WriterEntryHeader) == 64);

inline constexpr uint64_t WriterEntryBytes(uint32_t records) {
  return sizeof(WriterEntryHeader) + uint64_t{records} * sizeof(JournalRecord);
}

// Folds every layout constant, so files of an incompatible build are refused
// even if someone forgets to bump kFormatVersion.
inline constexpr uint64_t kLayoutSignature =
    (uint64_t{sizeof(FileHeader)} << 48) ^ (uint64_t{sizeof(NodeHeader)} << 40) ^
    (uint64_t{sizeof(JournalRecord)} << 32) ^ (uint64_t{sizeof(WriterEntryHeader)} << 24) ^
    (uint64_t{kSlotBytes} << 16) ^ (uint64_t{kMaxSpan} << 8) ^ uint64_t { kWriterEntries } ^
    (uint64_t{HeadBytes(8)} << 56) ^ (uint64_t{kBatchEntries} << 4) ^ (uint64_t{kGeneralHeaderBytes} << 12);

struct FileLayout {
  uint64_t heads_offset, writers_offset, chains_offset, file_bytes, writer_entry_bytes, batch_entry_bytes;
  uint32_t head_bytes;
};

// `user` is the configured geometry; the layout is its groups'.
inline FileLayout LayoutFor(const StoreGeometry& user) {
  const StoreGeometry g = GroupGeometry(user);
  auto align = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
  FileLayout l;
  l.heads_offset = kHeaderBytes;
  l.head_bytes = HeadBytes(g.chain);
  l.writers_offset = align(l.heads_offset + uint64_t{g.keynodes} * l.head_bytes, 4096);
  l.writer_entry_bytes = align(WriterEntryBytes(UpdateJournalCapacity(g.chain)), 64);
  l.batch_entry_bytes = align(WriterEntryBytes(BatchJournalCapacity(g.chain)), 64);
  l.chains_offset =
      align(l.writers_offset + kWriterEntries * l.writer_entry_bytes + kBatchEntries * l.batch_entry_bytes, 4096);
  l.file_bytes = l.chains_offset + uint64_t{g.keynodes} * g.chain * kSlotBytes;
  return l;
}

}  // namespace frs::store
