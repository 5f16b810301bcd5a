#include "envoy/envoy_rules.h"

#include <cstdio>
#include <set>

#include <xxhash.h>

#include "frs/key.h"
#include "limit/map_config.h"

namespace frs::envoy {

namespace {

constexpr char kSep = '\x1f';  // between key and value in a tree lookup

std::string Hex8(std::string_view s) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(XXH3_64bits(s.data(), s.size()) >> 32));
  return buf;
}

// A biz name from the descriptor path: [A-Za-z0-9_.-]{1,64}.
std::string BizName(const std::string& domain, const std::string& path) {
  std::string full = "envoy." + domain + "." + path;
  std::string name = full;
  for (char& c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '_';
  if (name.size() > limit::kMaxBizNameBytes) name = name.substr(0, limit::kMaxBizNameBytes - 9) + "." + Hex8(full);
  return name;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '"': out += "&quot;"; break;
      // "--" may not appear inside an XML comment
      case '-': out += (!out.empty() && out.back() == '-') ? "_" : "-"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

void EnvoyRules::Add(const std::string& domain, const std::string& prefix, const DescriptorNode& d, uint32_t parent) {
  const std::string step = d.value.empty() ? d.key : d.key + "_" + d.value;
  const std::string path = prefix.empty() ? step : prefix + "." + step;
  const uint32_t index = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  std::string lookup = d.value.empty() ? d.key : d.key + kSep + d.value;
  nodes_[parent].children.emplace(std::move(lookup), index);
  if (d.unlimited) {
    nodes_[index].limit = kUnlimited;
  } else if (d.has_limit) {
    CompiledLimit l;
    l.domain = domain;
    l.path = path;
    l.biz = BizName(domain, path);
    l.limit = d.limit;
    l.shadow_mode = d.shadow_mode;
    l.detailed_metric = d.detailed_metric;
    l.name = d.name;
    l.replaces = d.replaces;
    l.file = d.file;
    l.line = d.line;
    nodes_[index].limit = static_cast<int32_t>(limits_.size());
    limits_.push_back(std::move(l));
  }
  for (const DescriptorNode& c : d.children) Add(domain, path, c, index);
}

Result<std::shared_ptr<const EnvoyRules>> EnvoyRules::Compile(const EnvoyConfig& cfg) {
  auto rules = std::make_shared<EnvoyRules>();
  for (const Domain& dom : cfg.domains) {
    const uint32_t root = static_cast<uint32_t>(rules->nodes_.size());
    rules->nodes_.emplace_back();
    rules->domains_.emplace(dom.name, root);
    for (const DescriptorNode& d : dom.descriptors) rules->Add(dom.name, "", d, root);
  }
  if (rules->limits_.size() > kEnvoyBizIds)
    return Status::InvalidArgument("the Envoy configuration has " + std::to_string(rules->limits_.size()) +
                                   " rate limits, more than the " + std::to_string(kEnvoyBizIds) +
                                   " biz ids reserved for them");
  // Names unique (two paths that differ only in characters a biz name
  // cannot hold get hashed names), then ids from the names, probing in
  // name order so the outcome does not depend on file order.
  std::set<std::string> names;
  for (CompiledLimit& l : rules->limits_) {
    if (!names.insert(l.biz).second) {
      const std::string full = l.domain + "." + l.path;
      l.biz = BizName(l.domain, l.path).substr(0, limit::kMaxBizNameBytes - 9) + "." + Hex8(full);
      if (!names.insert(l.biz).second)
        return Status::InvalidArgument(l.file + ":" + std::to_string(l.line) + ": descriptor path '" + l.path +
                                       "' of domain '" + l.domain + "' is configured twice");
    }
  }
  std::vector<CompiledLimit*> by_name;
  for (CompiledLimit& l : rules->limits_) by_name.push_back(&l);
  std::sort(by_name.begin(), by_name.end(), [](auto* a, auto* b) { return a->biz < b->biz; });
  std::vector<bool> taken(kEnvoyBizIds);
  for (CompiledLimit* l : by_name) {
    uint32_t slot = static_cast<uint32_t>(XXH3_64bits(l->biz.data(), l->biz.size()) % kEnvoyBizIds);
    while (taken[slot]) slot = (slot + 1) % kEnvoyBizIds;
    taken[slot] = true;
    l->biz_id = static_cast<uint16_t>(kFirstEnvoyBizId + slot);
  }
  return std::shared_ptr<const EnvoyRules>(std::move(rules));
}

Result<std::shared_ptr<const EnvoyRules>> EnvoyRules::FromBundle(std::string_view bundle) {
  Result<EnvoyConfig> cfg = ParseEnvoyBundle(bundle);
  if (!cfg.ok()) return cfg.status();
  return Compile(cfg.value());
}

std::string EnvoyRules::MapXmlBizzes() const {
  std::string out;
  for (const CompiledLimit& l : limits_) {
    // requests_per_unit 0 denies everything: max="0" is not a rule, so it
    // is a rule no request fits (see Decide: a limit of 0 is answered
    // OVER_LIMIT without asking the engine).
    const uint32_t max = l.limit.requests_per_unit == 0 ? 1 : l.limit.requests_per_unit;
    out += "  <biz id=\"" + std::to_string(l.biz_id) + "\" name=\"" + l.biz + "\"" +
           (l.shadow_mode ? " mode=\"shadow\"" : "") + ">  <!-- " + XmlEscape(l.file) + ":" +
           std::to_string(l.line) + ": domain " + XmlEscape(l.domain) + ", " + XmlEscape(l.path) + ", " +
           std::to_string(l.limit.requests_per_unit) + " per " + UnitName(l.limit.unit) + " -->\n";
    out += "    <rule algo=\"calendar\" interval=\"" + std::to_string(UnitSeconds(l.limit.unit)) + "\" max=\"" +
           std::to_string(max) + "\" zone=\"UTC\"/>\n  </biz>\n";
  }
  return out;
}

int32_t EnvoyRules::Find(std::string_view domain, std::span<const Entry> entries, std::string* scratch) const {
  auto d = domains_.find(domain);
  if (d == domains_.end() || entries.empty()) return kNoLimit;
  uint32_t at = d->second;
  int32_t found = kNoLimit;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Node& n = nodes_[at];
    scratch->assign(entries[i].key);
    scratch->push_back(kSep);
    scratch->append(entries[i].value);
    auto c = n.children.find(std::string_view(*scratch));
    if (c == n.children.end()) c = n.children.find(entries[i].key);
    if (c == n.children.end()) return kNoLimit;
    at = c->second;
    if (i + 1 == entries.size()) found = nodes_[at].limit;
    if (nodes_[at].children.empty()) break;
  }
  return found;
}

Result<std::string> ComposeMap(std::string_view map_xml, const std::string& map_path, const EnvoyRules& rules) {
  Result<limit::MapConfig> map = limit::ParseMap(map_xml, map_path);
  if (!map.ok()) return map.status();
  for (const limit::BizConfig& b : map->bizzes) {
    if (b.id >= kFirstEnvoyBizId)
      return Status::InvalidArgument(map_path + ":" + std::to_string(b.line) + ": biz id " + std::to_string(b.id) +
                                     " is in the range " + std::to_string(kFirstEnvoyBizId) +
                                     "..65535 reserved for <grpc config> (Envoy's descriptors): renumber it");
    if (b.name.starts_with("envoy."))
      return Status::InvalidArgument(map_path + ":" + std::to_string(b.line) + ": biz name '" + b.name +
                                     "': names envoy.* are reserved for <grpc config> (Envoy's descriptors)");
  }
  const size_t end = map_xml.rfind("</map>");
  if (end == std::string_view::npos) return Status::InvalidArgument(map_path + ": no </map>");
  std::string out;
  out.reserve(map_xml.size() + rules.limits().size() * 200);
  out.append(map_xml.substr(0, end));
  out += "<!-- <grpc config>: Envoy's descriptors -->\n";
  out += rules.MapXmlBizzes();
  out.append(map_xml.substr(end));
  return out;
}

void CounterKey(std::span<const Entry> entries, std::string* out) {
  out->clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out->push_back('_');
    out->append(entries[i].key);
    out->push_back('_');
    out->append(entries[i].value);
  }
  if (out->size() > kMaxKeyBytes) {
    const std::string whole = *out;
    out->resize(kMaxKeyBytes - 17);
    out->push_back('#');
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(XXH3_64bits(whole.data(), whole.size())));
    out->append(buf);
  }
}

}  // namespace frs::envoy
