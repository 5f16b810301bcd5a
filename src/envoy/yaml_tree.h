// envoy/yaml_tree.h: one YAML document read into a small tree, bounded in
// size and work while yaml-cpp parses it, before anything is built from it.
//
// yaml-cpp's YAML::Load shares an aliased node, and a reader that walks the
// shared node once per use does the work of the fully expanded document: a
// file of 2.6 kB with nested aliases means billions of nodes. Here yaml-cpp's
// events (YAML::Parser, no YAML::Node) build the tree, an alias sharing its
// anchor's node as YAML::Load does, and each event adds what it means to a
// running total: a node counts 1, an alias its anchor's whole expanded size
// and height. The file is refused as soon as the total passes
// `max_nodes` or the expanded nesting passes `max_depth`, so any walk of the
// tree, however often it follows an alias, visits at most `max_nodes` nodes.
// The events also give what the node API hides: a duplicate mapping key (the
// node API keeps one silently), a second document (ignored by YAML::Load),
// an alias of a node that contains it (a cycle for a walker).
//
// Thread safety: values; parsing touches no global state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frs/status.h"

namespace frs::envoy {

struct YamlBounds {
  uint64_t max_nodes = 0;
  uint32_t max_depth = 0;
  // The scalars' bytes, aliases expanded (0: unbounded): a node bound alone
  // let an alias of a 100 kB scalar, used 10,000 times, mean a gigabyte
  // (found from outside).
  uint64_t max_bytes = 0;
};

class YamlTree {
 public:
  enum class Kind : uint8_t { kNull, kScalar, kSequence, kMap };
  struct Node {
    Kind kind = Kind::kNull;
    int line = 0;        // 1-based
    std::string scalar;  // kScalar
    bool plain = false;  // kScalar written without quotes (a quoted one is always text)
    // kSequence: the items; kMap: key, value, key, value... (indexes into
    // the tree; an alias is its anchor's index).
    std::vector<uint32_t> items;
  };

  // "file:line: message" on a refusal (yaml-cpp's syntax errors included).
  static Result<YamlTree> Parse(std::string_view text, const std::string& file, const YamlBounds& bounds);

  const Node& root() const { return nodes_[root_]; }
  const Node& at(uint32_t index) const { return nodes_[index]; }
  // A map's value for a scalar key, or null.
  const Node* Find(const Node& map, std::string_view key) const;

 private:
  friend class YamlTreeBuilder;
  std::vector<Node> nodes_;
  uint32_t root_ = 0;
};

}  // namespace frs::envoy
