// server/replica_wire.h: the body of POST /replicate, one change per line.
//
//   KIND BIZ ROUTE N AT_MS KEY\n
//
// KIND is A (n uses recorded), S (count set to n), E (node erased) or R
// (every node of the biz erased; KEY is "-"); ROUTE the route's ring
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

// Appends one change's line to *out.
void AppendChangeLine(const Change& c, std::string* out);

// Decodes a body into *changes, whose keys point into *keys (kept alive by
// the caller; reserved here so they never move). Names the line at fault.
Status DecodeChangeLines(std::string_view body, std::vector<Change>* changes, std::vector<std::string>* keys);

}  // namespace frs::server
