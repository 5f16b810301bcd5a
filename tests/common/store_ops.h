// tests/common/store_ops.h: a store opened for a test, and a counter kept in
// a node's state, for the tests of the store itself (tests/store).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "frs/store.h"

namespace frs::testing {

inline StoreOptions Opts(const std::string& dir, uint32_t files = 2, uint32_t keynodes = 4096, uint32_t chain = 8) {
  StoreOptions o;
  o.dir = dir;
  o.geometry = {files, keynodes, chain};
  return o;
}

inline std::unique_ptr<Store> MustOpen(const StoreOptions& o) {
  auto s = Store::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s.value());
}

// Adds `by` to the counter in the first `bytes` (4 or 8) of k's state,
// creating the node; sets its expiry when `expire_s` is given.
inline Status AddToCounter(Store* s, const Key& k, uint32_t bytes, uint64_t by, uint32_t now_s = 1000,
                           std::optional<uint32_t> expire_s = std::nullopt, UpdateResult* r = nullptr) {
  return s->Update(
      k.ref(), bytes, now_s,
      [&](NodeRef& n) {
    uint64_t v = 0;  // little-endian: the low `bytes` bytes are the counter
    std::memcpy(&v, n.state, bytes);
    v += by;
    std::memcpy(n.state, &v, bytes);
    if (expire_s) n.expire_s = *expire_s;
    return Commit::kWrite;
      },
      r);
}

// A batch's writer: adds `by` to the 8-byte counter of every member.
inline void AddToEach(std::span<NodeRef> nodes, std::span<Commit> commits, uint64_t by) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    uint64_t v;
    std::memcpy(&v, nodes[i].state, 8);
    v += by;
    std::memcpy(nodes[i].state, &v, 8);
    commits[i] = Commit::kWrite;
  }
}

// The writer of AddToEach as UpdateBatch takes it.
inline auto AddingToEach(uint64_t by) {
  return [by](std::span<NodeRef> nodes, std::span<Commit> commits) { AddToEach(nodes, commits, by); };
}

// The counter of k (up to its first 8 bytes); 0 when there is no node.
inline uint64_t CountOf(Store* s, const Key& k) {
  auto n = s->Get(k.ref());
  if (!n.ok()) return 0;
  uint64_t v = 0;
  std::memcpy(&v, n->state.data(), std::min<size_t>(8, n->state.size()));
  return v;
}

// Verify finds nothing wrong.
inline void ExpectClean(Store* s) {
  auto v = s->Verify(false);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->problems.empty()) << v->problems[0];
}

}  // namespace frs::testing
