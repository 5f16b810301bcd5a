// config/srv_elements.h: srv.xml's elements, one row and one setter each.
//
// As nginx's ngx_command_t arrays: a row names an element, where it may
// stand, the attributes it takes, and the function that checks its text and
// attributes and sets SrvConfig's fields. LoadSrvConfigText walks the
// document and calls the rows; what holds across elements (<map> and
// <store> required, replicas needing <admin token>) is checked once the
// walk is done, in srv_config.cc.
//
// Thread safety: plain values and functions; the table is constant.
#pragma once

#include <pugixml.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/srv_config.h"
#include "frs/status.h"
#include "os/text_file.h"

namespace frs::srv {

// What a setter works with: the file's lines (for "file:line: what" errors),
// the folder relative paths are resolved against, and the config it fills.
class Context {
 public:
  Context(const os::LineIndex& lines, std::filesystem::path base, SrvConfig* cfg)
      : lines_(lines), base_(std::move(base)), cfg_(cfg) {}

  SrvConfig& cfg() const { return *cfg_; }

  // "file:line: msg" at the element `n`.
  Status Error(const pugi::xml_node& n, const std::string& msg) const;

  // An unsigned attribute of `n` in [lo, hi] into *out; *out is left alone
  // when the attribute is absent.
  Status UInt(const pugi::xml_node& n, const char* attr, uint64_t lo, uint64_t hi, uint64_t* out) const;

  // `text` (blanks around it ignored) as a whole number in [lo, hi];
  // `what` names it in the error ("<workers>", "<limits batch>").
  Status ParseUInt(const pugi::xml_node& n, const std::string& what, std::string_view text, uint64_t lo, uint64_t hi,
                   uint64_t* out) const;

  // A path as srv.xml names it, absolute ("" stays "").
  std::string Resolve(const std::string& p) const;

 private:
  const os::LineIndex& lines_;
  std::filesystem::path base_;
  SrvConfig* cfg_;
};

// Where an element may stand.
enum class Place : uint8_t {
  kOnce,      // a child of <frs>, at most once
  kRepeated,  // a child of <frs>, any number of times (<allow>)
  kInCluster  // a child of <cluster> (<shard>)
};

struct Element {
  std::string_view name;
  Place place;
  // The attributes it takes; anything else is refused before the setter
  // runs. `text`: its value is its text (<workers>2</workers>); the others
  // take none.
  std::span<const char* const> attributes;
  bool text;
  Status (*set)(const Context& ctx, const pugi::xml_node& n);
  // Whether it holds elements (<cluster> its <shard>s, which its setter
  // reads); any other element inside one is refused.
  bool holds_elements = false;
};

// The row of element `name` as a child of <cluster> (`in_cluster`) or of
// <frs>; null when srv.xml has no such element there. The rows are
// srv_elements.cc's kElements (docs/configuration.md documents each one, as
// tests/config/configuration_doc_test.py checks).
const Element* FindElement(std::string_view name, bool in_cluster);

// Checks `n`'s attributes against its row, then runs its setter.
Status Apply(const Context& ctx, const Element& e, const pugi::xml_node& n);

// <grpc>: Envoy's rate limit service (srv_grpc.cc).
Status SetGrpc(const Context& ctx, const pugi::xml_node& n);

// A share from 0 to 1 written plainly ("0.01", "1", ".5"; no exponent,
// sign or words); false when `text` is not one.
bool ParseShare(const std::string& text, double* out);

// "a, b\tc" as its items; commas, tabs and newlines separate as spaces do.
std::vector<std::string> Words(std::string list);

}  // namespace frs::srv
