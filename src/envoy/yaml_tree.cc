#include "envoy/yaml_tree.h"

#include <algorithm>
#include <exception>
#include <sstream>
#include <unordered_map>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

namespace frs::envoy {

namespace {

// Thrown from the event handler through yaml-cpp's parser, caught in Parse.
struct Refusal {
  int line;
  std::string message;
};

}  // namespace

class YamlTreeBuilder : public YAML::EventHandler {
 public:
  YamlTreeBuilder(YamlTree* tree, const YamlBounds& bounds) : tree_(tree), bounds_(bounds) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    // YAML::Load reads the first document and drops the others.
    if (documents_++ > 0) throw Refusal{mark.line + 1, "a second YAML document: a file holds one domain"};
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const uint32_t index = Leaf(mark, YamlTree::Kind::kNull, std::string(), anchor);
    // A value left out (`domain:` and the line's end) is marked by yaml-cpp
    // where the next token starts, often the next line: an error about it
    // names its key's line instead.
    if (open_.empty()) return;
    const YamlTree::Node& parent = tree_->nodes_[open_.back().index];
    if (parent.kind == YamlTree::Kind::kMap && parent.items.size() % 2 == 0) {
      const int key_line = tree_->nodes_[parent.items[parent.items.size() - 2]].line;
      if (key_line < tree_->nodes_[index].line) tree_->nodes_[index].line = key_line;
    }
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    const uint32_t index = Leaf(mark, YamlTree::Kind::kScalar, value, anchor);
    // yaml-cpp tags a plain scalar "?" and a quoted one "!".
    tree_->nodes_[index].plain = tag == "?";
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    // yaml-cpp registers an anchor when its node starts: an alias inside the
    // node names a node not yet closed, a cycle for whoever walks the tree.
    if (anchor >= anchors_.size() || anchors_[anchor] == kOpen)
      throw Refusal{mark.line + 1, "an alias of the node that contains it"};
    const uint32_t target = anchors_[anchor];
    Count(mark, extents_[target].size, extents_[target].bytes);
    if (open_.size() + extents_[target].height > bounds_.max_depth) TooDeep(mark);
    Attach(target, extents_[target].height);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Start(mark, YamlTree::Kind::kSequence, anchor);
  }
  void OnSequenceEnd() override { End(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Start(mark, YamlTree::Kind::kMap, anchor);
  }
  void OnMapEnd() override {
    const YamlTree::Node& map = tree_->nodes_[open_.back().index];
    // The node API keeps one of two equal keys silently: a second `unit`
    // or `domain` would be a limit other than the one the operator reads.
    std::vector<std::pair<std::string_view, uint32_t>> keys;  // (key, position)
    for (uint32_t i = 0; i < map.items.size(); i += 2) {
      const YamlTree::Node& k = tree_->nodes_[map.items[i]];
      if (k.kind == YamlTree::Kind::kScalar && !IsMergeKey(k)) keys.emplace_back(k.scalar, i);
    }
    std::sort(keys.begin(), keys.end());
    for (size_t i = 1; i < keys.size(); ++i)
      if (keys[i].first == keys[i - 1].first) {
        const uint32_t later = std::max(keys[i].second, keys[i - 1].second);
        throw Refusal{tree_->nodes_[map.items[later]].line, "duplicate key '" + std::string(keys[i].first) + "'"};
      }
    Merge(open_.back().index);
    End();
  }

  bool has_root() const { return has_root_; }

  // YAML's merge key (`<<: *defaults`, `<<: [*a, *b]`), as envoyproxy/
  // ratelimit's reader (gopkg.in/yaml.v2) applies it: where it stands, so a
  // merged map's keys replace the map's own keys written before the `<<`
  // and yield to those written after it, and of a list the earlier map
  // wins. The merged maps were closed, and so expanded, before this one:
  // their nodes are reused, as an alias reuses its anchor's. One pass with
  // a table of the keys so far: linear in the keys, however many merge.
  void Merge(uint32_t index) {
    std::vector<uint32_t>& items = tree_->nodes_[index].items;
    bool any = false;
    for (size_t i = 0; i + 1 < items.size() && !any; i += 2) any = IsMergeKey(tree_->nodes_[items[i]]);
    if (!any) return;
    std::vector<uint32_t> out;
    std::unordered_map<std::string_view, size_t> at;  // key -> its value's place in `out`
    auto set = [&](uint32_t key, uint32_t value) {
      const YamlTree::Node& k = tree_->nodes_[key];
      if (k.kind == YamlTree::Kind::kScalar) {
        auto [it, fresh] = at.try_emplace(k.scalar, out.size() + 1);
        if (!fresh) {
          out[it->second] = value;
          return;
        }
      }
      out.push_back(key);
      out.push_back(value);
    };
    for (size_t i = 0; i + 1 < items.size(); i += 2) {
      const YamlTree::Node& k = tree_->nodes_[items[i]];
      if (!IsMergeKey(k)) {
        set(items[i], items[i + 1]);
        continue;
      }
      const YamlTree::Node& v = tree_->nodes_[items[i + 1]];
      std::vector<uint32_t> sources;
      if (v.kind == YamlTree::Kind::kMap) sources.push_back(items[i + 1]);
      else if (v.kind == YamlTree::Kind::kSequence) sources = v.items;
      else throw Refusal{k.line, "the merge key '<<' takes a map or a list of maps"};
      // The last of a list first: an earlier map's keys then replace a later's.
      for (auto src = sources.rbegin(); src != sources.rend(); ++src) {
        const YamlTree::Node& m = tree_->nodes_[*src];
        if (m.kind != YamlTree::Kind::kMap) throw Refusal{k.line, "the merge key '<<' takes a map or a list of maps"};
        for (size_t j = 0; j + 1 < m.items.size(); j += 2) set(m.items[j], m.items[j + 1]);
      }
    }
    items = std::move(out);
  }
  static bool IsMergeKey(const YamlTree::Node& k) {
    return k.kind == YamlTree::Kind::kScalar && k.plain && k.scalar == "<<";
  }

 private:
  static constexpr uint32_t kOpen = UINT32_MAX;
  struct Extent {
    uint64_t size = 1;    // nodes, aliases expanded
    uint32_t height = 0;  // nested collections, aliases expanded (a scalar: 0)
    uint64_t bytes = 0;   // its scalars' bytes, aliases expanded
  };
  struct Open {
    uint32_t index;
    uint64_t total_before;
    uint64_t bytes_before;
    uint32_t child_height = 0;
    YAML::anchor_t anchor;
  };

  // The running total of nodes the document means, checked as it grows.
  void Count(const YAML::Mark& mark, uint64_t nodes, uint64_t bytes) {
    total_ += nodes;
    bytes_ += bytes;
    if (total_ > bounds_.max_nodes)
      throw Refusal{mark.line + 1, "the file expands to more than " + std::to_string(bounds_.max_nodes) +
                                       " YAML nodes (an alias counts the nodes of its anchor each time it is used)"};
    if (bounds_.max_bytes != 0 && bytes_ > bounds_.max_bytes)
      throw Refusal{mark.line + 1, "the file expands to more than " + std::to_string(bounds_.max_bytes) +
                                       " bytes of scalars (an alias counts its anchor's each time it is used)"};
  }
  [[noreturn]] void TooDeep(const YAML::Mark& mark) {
    throw Refusal{mark.line + 1, "YAML nested deeper than " + std::to_string(bounds_.max_depth) + " levels"};
  }
  uint32_t Add(const YAML::Mark& mark, YamlTree::Kind kind, std::string scalar) {
    const uint32_t index = static_cast<uint32_t>(tree_->nodes_.size());
    YamlTree::Node n;
    n.kind = kind;
    n.line = mark.line + 1;
    n.scalar = std::move(scalar);
    tree_->nodes_.push_back(std::move(n));
    extents_.emplace_back();
    return index;
  }
  void Anchor(YAML::anchor_t anchor, uint32_t index) {
    if (anchor == YAML::NullAnchor) return;
    if (anchors_.size() <= anchor) anchors_.resize(anchor + 1, kOpen);
    anchors_[anchor] = index;
  }
  void Attach(uint32_t index, uint32_t height) {
    if (open_.empty()) {
      tree_->root_ = index;
      has_root_ = true;
      return;
    }
    tree_->nodes_[open_.back().index].items.push_back(index);
    open_.back().child_height = std::max(open_.back().child_height, height);
  }
  uint32_t Leaf(const YAML::Mark& mark, YamlTree::Kind kind, std::string value, YAML::anchor_t anchor) {
    Count(mark, 1, value.size());
    const uint64_t bytes = value.size();
    const uint32_t index = Add(mark, kind, std::move(value));
    extents_[index].bytes = bytes;
    Anchor(anchor, index);
    Attach(index, 0);
    return index;
  }
  void Start(const YAML::Mark& mark, YamlTree::Kind kind, YAML::anchor_t anchor) {
    const uint64_t before = total_, bytes_before = bytes_;
    Count(mark, 1, 0);
    const uint32_t index = Add(mark, kind, std::string());
    if (anchor != YAML::NullAnchor) {
      if (anchors_.size() <= anchor) anchors_.resize(anchor + 1, kOpen);
      anchors_[anchor] = kOpen;
    }
    Attach(index, 0);
    open_.push_back(Open{index, before, bytes_before, 0, anchor});
    if (open_.size() > bounds_.max_depth) TooDeep(mark);
  }
  void End() {
    const Open o = open_.back();
    open_.pop_back();
    extents_[o.index].size = total_ - o.total_before;
    extents_[o.index].bytes = bytes_ - o.bytes_before;
    extents_[o.index].height = o.child_height + 1;
    Anchor(o.anchor, o.index);
    if (!open_.empty()) open_.back().child_height = std::max(open_.back().child_height, extents_[o.index].height);
  }

  YamlTree* tree_;
  const YamlBounds bounds_;
  std::vector<Extent> extents_;    // parallel to tree_->nodes_
  std::vector<uint32_t> anchors_;  // yaml-cpp's anchor id -> node (kOpen until it closes)
  std::vector<Open> open_;         // the collections being read, outermost first
  uint64_t total_ = 0;
  uint64_t bytes_ = 0;  // scalars' bytes so far, aliases expanded
  int documents_ = 0;
  bool has_root_ = false;
};

Result<YamlTree> YamlTree::Parse(std::string_view text, const std::string& file, const YamlBounds& bounds) {
  YamlTree tree;
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    YamlTreeBuilder builder(&tree, bounds);
    while (parser.HandleNextDocument(builder)) {
    }
    if (!builder.has_root()) {  // an empty file: one null, as YAML::Load reads it
      tree.nodes_.assign(1, Node{Kind::kNull, 1, {}, false, {}});
      tree.root_ = 0;
    }
    return tree;
  } catch (const Refusal& r) {
    return Status::InvalidArgument(file + ":" + std::to_string(r.line) + ": " + r.message);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": " + e.what());
  }
}

const YamlTree::Node* YamlTree::Find(const Node& map, std::string_view key) const {
  if (map.kind != Kind::kMap) return nullptr;
  for (size_t i = 0; i + 1 < map.items.size(); i += 2) {
    const Node& k = nodes_[map.items[i]];
    if (k.kind == Kind::kScalar && k.scalar == key) return &nodes_[map.items[i + 1]];
  }
  return nullptr;
}

}  // namespace frs::envoy
