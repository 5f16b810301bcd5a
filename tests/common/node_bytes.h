// tests/common/node_bytes.h: how many state bytes a store holds for a key's
// node, read through ForEach as an admin tool reads it (a table sized by
// what the key holds shows here).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frs/store.h"

namespace frs::testing {

// The state bytes of the node of `key` (of biz `biz`, -1: any), 0 when none.
inline size_t NodeStateBytes(Store& store, std::string_view key, int32_t biz = -1) {
  size_t bytes = 0;
  Store::Filter f;
  f.biz = biz;
  const auto note = [&](const NodeInfo& node) {
    if (node.key == key) bytes = node.state.size();
  };
  EXPECT_TRUE(store.ForEach(f, note).ok());
  return bytes;
}

}  // namespace frs::testing
