// limit/lease_id.h: a lease's id, and the per-store secret that makes it
// unguessable.
//
// An id is 24 lowercase hex digits: the lease's serial (8, as its node
// numbers its leases) then a 64-bit SipHash-2-4 (16) keyed with the store's
// secret over (biz id, the node's nonce, serial, key). The serial alone
// names a place; the hash proves the id was issued for this very key and
// this incarnation of its node: ids of one key tell nothing of another's,
// an id of an erased node does not match its successor's leases, and
// forging one is guessing 64 bits. The secret is `lease.key` in the store
// directory (16 random bytes, mode 0600, made by the first engine that
// opens the store to serve it, or by frsctl's first engine of a store that
// never served; never by frsctl beside one that did): every frsd worker and
// restart reads the same one. A
// cluster names one file for every shard instead (<cluster lease_key>,
// LoadLeaseKeyFile), so that a route's two holders verify each other's ids.
//
// Thread safety: pure functions, except LoadLeaseSecret (file system).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/siphash.h"
#include "frs/status.h"

namespace frs::limit {

struct LeaseSecret {
  uint64_t k0 = 0, k1 = 0;
};

inline constexpr size_t kLeaseIdChars = 24;

// SipHash-2-4 (base/siphash.h): ids are its MACs.
using frs::SipHash24;

uint64_t LeaseMac(const LeaseSecret& secret, uint16_t biz, uint32_t nonce, uint32_t serial, std::string_view key);
// A node's id nonce (its leases' block, its reservations' table): random,
// never 0, from the kernel each time (once per block made, not per request):
// a generator seeded in one process and copied by fork would give two
// workers the same nonces.
uint32_t NewIdNonce();
// Eight lowercase hex digits of v, the most significant first. Every lease
// and reservation granted writes three such words (a digit at a time from a
// table cost about 9 instructions a digit): the nibbles are spread one to a
// byte and turned into digits in all eight lanes at once.
inline void FormatHexWord(uint32_t v, char* out) {
  uint64_t x = v;
  x = (x | x << 16) & 0x0000ffff0000ffffull;
  x = (x | x << 8) & 0x00ff00ff00ff00ffull;
  x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;  // lane i: nibble i (the least significant first)
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  const uint64_t letter = ((x + 6 * kOnes) >> 4) & kOnes;  // 1 in each lane of 10..15: no lane carries
  x += '0' * kOnes + letter * ('a' - '0' - 10);
  if constexpr (std::endian::native == std::endian::little) x = __builtin_bswap64(x);  // the high digit first
  std::memcpy(out, &x, sizeof x);
}
// Writes exactly kLeaseIdChars characters (no NUL). Inline: the server's
// encoder writes ids without linking the engine.
inline void FormatLeaseId(uint32_t serial, uint64_t mac, char* out) {
  FormatHexWord(serial, out);
  FormatHexWord(static_cast<uint32_t>(mac >> 32), out + 8);
  FormatHexWord(static_cast<uint32_t>(mac), out + 16);
}
std::string LeaseIdText(uint32_t serial, uint64_t mac);
// Exactly kLeaseIdChars of [0-9a-f], serial not 0; else false.
bool ParseLeaseId(std::string_view text, uint32_t* serial, uint64_t* mac);
// An id taken apart once, by the request's check, and handed on to the
// node's operation, which would otherwise parse it again under the node's
// lock. serial 0 (never a valid id's): not parsed.
struct ParsedLeaseId {
  uint32_t serial = 0;
  uint64_t mac = 0;
};

// Reads `dir`/lease.key, making it first when it is missing and `create`
// (missing and not `create`: NotFound).
// An empty `dir` (an engine without a store directory) gets a random
// secret of its own: its ids last as long as the engine.
Result<LeaseSecret> LoadLeaseSecret(const std::string& dir, bool create);
// Reads an operator's key file (<cluster lease_key>): exactly 16 bytes,
// never made here, the same file on every shard of a cluster, and readable
// by its owner only (a mode with any group or other bit is refused, naming
// the file and its mode: frsd -t, the start and a reload alike). Errors
// name `attribute`, the one of <cluster> that named the file.
Result<LeaseSecret> LoadLeaseKeyFile(const std::string& path, std::string_view attribute = "lease_key");
// Why lease_key_also's file `also` is refused when it holds the key
// `key_file` holds (a rotation's second key must be another one).
std::string SameKeyWords(const std::string& key_file, const std::string& also);
// "PATH has mode 0644: ... chmod 600 PATH" for a secret file its group or
// others may read (a reader can forge every id); "" when only its owner may.
std::string ReadableSecretWords(const std::string& path, unsigned mode);
// A check of `secret` that tells two secrets apart and reveals neither: its
// SipHash of a fixed text (never 0).
uint64_t LeaseKeyCheckOf(const LeaseSecret& secret);

}  // namespace frs::limit
