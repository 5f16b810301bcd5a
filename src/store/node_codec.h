// store/node_codec.h: what a node's bytes say, read without the store.
//
// A node is a 24-byte header (format.h NodeHeader), then a compact node's
// packed state (packed_state.h) or a general node's lengths, state and key
// bytes (format.h GeneralExt). These read one node from its first slot,
// trusting its fields only as far as its span allows; whether the node is
// whole is ExtentAt's question (chain_map.h), asked first. The store reads
// its nodes through them, and so does the reader of format-4 stores
// (format4_reader.h). Writing a node is StoreImpl::ComposeNode (nodes.cc).
//
// Thread safety: pure functions of the bytes given.
#pragma once

#include <cstdint>

#include "frs/store.h"

namespace frs::store {

// The node's state as a caller sees it (a compact one unpacked): up to
// `state_bytes` of it into `state`, and how many bytes it holds.
void ReadNodeState(const uint8_t* p, uint8_t* state, uint32_t state_bytes, uint32_t* stored_bytes);
// The key bytes the node keeps (a short key from its identity, up to
// kMaxKeyBytes); returns how many, and the full key's length (0: unknown).
uint32_t ReadNodeKey(const uint8_t* p, uint8_t* key, uint8_t* key_len);
// Everything NodeInfo says of a node but where it is (file, key-node, slot).
void DecodeNode(const uint8_t* p, NodeInfo* out);

}  // namespace frs::store
