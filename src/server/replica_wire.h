// server/replica_wire.h: the body of POST /replicate, one change per line.
//
//   KIND BIZ ROUTE N AT_MS KEY\n
//   V BIZ ROUTE 0 AT_MS KEY EVENT ITEM UNTIL NONCE\n
//
// KIND is A (n uses recorded), S (count set to n), E (node erased) or R
// (every node of the biz erased; KEY is "-"). V is one of a rule's own
// events (frs/change.h): EVENT a word (lease-grant, lease-release,
// lease-renew, lease-sweep), ITEM the item it names (a lease's serial),
// UNTIL the unix second it holds until (0: none), NONCE the rule's
// incarnation (0: none). ROUTE the route's ring
// position in decimal, or "-" when the request named none (the key's own
// route); AT_MS the sender's clock when it decided. KEY is percent-encoded:
// every byte outside printable ASCII, and ' ' and '%', as %XX. Text, so
// that a batch can be read in a capture and typed with curl
// (docs/protocol.md, "Replicas").
//
// Thread safety: plain functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frs/change.h"
#include "frs/status.h"

namespace frs::server {

// The words of the 409 a receiver answers a batch of its own streams with
// (handler_replica.cc), which its sender drops on (Replicator::DropOwn).
inline constexpr std::string_view kOwnBatchWords = "this batch is this shard's own";

// Appends one change's line to *out.
void AppendChangeLine(const Change& c, std::string* out);

// Decodes a body into *changes, whose keys point into *keys (kept alive by
// the caller; reserved here so they never move). Names the line at fault.
Status DecodeChangeLines(std::string_view body, std::vector<Change>* changes, std::vector<std::string>* keys);

}  // namespace frs::server
