#include "envoy/envoy_rules.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
#include <unordered_map>

#include <xxhash.h>

#include "frs/decision.h"
#include "frs/key.h"
#include "frs/percent_encode.h"
#include "limit/map_config.h"

namespace frs::envoy {

namespace {

// A tree lookup's key for an entry's key and value: the key's length first,
// so that no key, whatever bytes it holds, reads as another key and a value.
void ValueLookup(std::string_view key, std::string_view value, std::string* out) {
  char len[24];
  const auto end = std::to_chars(len, len + sizeof len, key.size()).ptr;
  out->assign(len, end);
  out->push_back(':');
  out->append(key);
  out->append(value);
}

// One component of a PathIdentity: every byte but [A-Za-z0-9_.*-] as %XX,
// so '/', '=', '%' and ' ' never appear raw.
void AppendIdentity(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_' || c == '.' || c == '*' || c == '-') {
      out->push_back(ch);
    } else {
      out->push_back('%');
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    }
  }
}

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

// '*' is any run of bytes (none included); every other byte itself.
// Linear backtracking to the last '*': O(|pattern| x |value|) at worst, and
// patterns come from the configuration.
bool GlobMatch(std::string_view pattern, std::string_view value) {
  size_t p = 0, v = 0, star = std::string_view::npos, mark = 0;
  while (v < value.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = v;
    } else if (p < pattern.size() && pattern[p] == value[v]) {
      ++p;
      ++v;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      v = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// Where map.xml's closing </map> is: the last one outside a comment, so
// that a "</map>" in a trailing comment cannot take the Envoy bizzes into
// the comment.
size_t ClosingMapTag(std::string_view xml) {
  size_t last = std::string_view::npos, i = 0;
  while (i < xml.size()) {
    if (xml.compare(i, 4, "<!--") == 0) {
      const size_t end = xml.find("-->", i + 4);
      if (end == std::string_view::npos) break;
      i = end + 3;
    } else if (xml.compare(i, 9, "<![CDATA[") == 0) {
      const size_t end = xml.find("]]>", i + 9);
      if (end == std::string_view::npos) break;
      i = end + 3;
    } else {
      // "</map" then blanks before the '>': XML allows them ("</map >"),
      // which was refused as no </map> with <grpc config> and taken without.
      if (xml.compare(i, 5, "</map") == 0) {
        size_t j = i + 5;
        while (j < xml.size() && (xml[j] == ' ' || xml[j] == '\t' || xml[j] == '\r' || xml[j] == '\n')) ++j;
        if (j < xml.size() && xml[j] == '>') last = i;
      }
      ++i;
    }
  }
  return last;
}

// An empty map written as one element (<map/>, <map />): the offset of its
// "/>", else npos. Outside comments; a '>' within quotes is not the tag's
// end (the map takes no attribute, but one refused later must not be read
// as the end here).
size_t SelfClosingMapTag(std::string_view xml) {
  size_t i = 0;
  while (i < xml.size()) {
    if (xml.compare(i, 4, "<!--") == 0) {
      const size_t end = xml.find("-->", i + 4);
      if (end == std::string_view::npos) return std::string_view::npos;
      i = end + 3;
      continue;
    }
    if (xml.compare(i, 4, "<map") != 0 || i + 4 >= xml.size() ||
        std::string_view(" \t\r\n/>").find(xml[i + 4]) == std::string_view::npos) {
      ++i;
      continue;
    }
    char quote = 0;
    for (size_t j = i + 4; j < xml.size(); ++j) {
      const char c = xml[j];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        return j > 0 && xml[j - 1] == '/' ? j - 1 : std::string_view::npos;
      }
    }
    return std::string_view::npos;
  }
  return std::string_view::npos;
}

}  // namespace

size_t EnvoyRules::Hash::operator()(std::string_view s) const { return XXH3_64bits(s.data(), s.size()); }

std::string XmlCommentText(std::string_view s) { return XmlEscape(s); }

void EnvoyRules::Add(const std::string& domain, const std::string& prefix, const std::string& identity_prefix,
                     const DescriptorNode& d, uint32_t parent, bool value_to_metric) {
  value_to_metric = value_to_metric || d.value_to_metric;
  const std::string step = d.value.empty() ? d.key : d.key + "_" + d.value;
  const std::string path = prefix.empty() ? step : prefix + "." + step;
  std::string identity = identity_prefix + "/";
  AppendIdentity(d.key, &identity);
  if (!d.value.empty()) {
    identity += "=";
    AppendIdentity(d.value, &identity);
  }
  const uint32_t index = static_cast<uint32_t>(nodes_.size());
  nodes_.emplace_back();
  nodes_[index].value_to_metric = d.value_to_metric;
  nodes_[index].share_threshold = d.share_threshold;
  nodes_[index].pattern = d.value;
  if (d.value.find('*') != std::string::npos) {
    // Matched after the exact values, before the key alone (Find).
    nodes_[parent].wildcards.push_back(Wildcard{d.key, d.value, index});
  } else if (d.value.empty()) {
    nodes_[parent].keys.emplace(d.key, index);
  } else {
    std::string lookup;
    ValueLookup(d.key, d.value, &lookup);
    nodes_[parent].values.emplace(std::move(lookup), index);
  }
  if (d.unlimited) {
    nodes_[index].limit = kUnlimited - static_cast<int32_t>(unlimited_.size());
    unlimited_.push_back(UnlimitedLimit{d.name, d.replaces});
  } else if (d.has_limit) {
    CompiledLimit l;
    l.domain = domain;
    l.path = path;
    l.identity = identity;
    l.biz = BizName(domain, path);
    l.limit = d.limit;
    l.shadow_mode = d.shadow_mode;
    l.detailed_metric = d.detailed_metric;
    l.quota_mode = d.quota_mode;
    l.value_to_metric = value_to_metric;
    l.metadata_json = d.metadata_json;
    l.name = d.name;
    l.replaces = d.replaces;
    l.file = d.file;
    l.line = d.line;
    nodes_[index].limit = static_cast<int32_t>(limits_.size());
    limits_.push_back(std::move(l));
  }
  for (const DescriptorNode& c : d.children) Add(domain, path, identity, c, index, value_to_metric);
}

uint32_t EnvoyIdSlot(std::string_view biz) {
  return static_cast<uint32_t>(XXH3_64bits(biz.data(), biz.size()) % kEnvoyBizIds);
}

Status AssignEnvoyIds(const std::vector<std::string>& names, const std::vector<std::string>& paths, EnvoyIds* table,
                      std::vector<uint16_t>* ids) {
  std::unordered_map<std::string_view, size_t> known;  // name -> entry of *table
  std::vector<bool> taken(kEnvoyBizIds);
  size_t free = kEnvoyBizIds;
  EnvoyIds kept;
  {
    std::unordered_map<std::string_view, bool> seen;
    for (const EnvoyIdEntry& e : *table) {
      // A damaged table (an id out of range, or one id under two names) keeps
      // the first claim: an id is never shared.
      if (e.id < kFirstEnvoyBizId || taken[e.id - kFirstEnvoyBizId] || !seen.emplace(e.name, true).second) continue;
      kept.push_back(e);
      taken[e.id - kFirstEnvoyBizId] = true;
      --free;
    }
  }
  *table = std::move(kept);
  for (size_t k = 0; k < table->size(); ++k) known.emplace((*table)[k].name, k);
  ids->assign(names.size(), 0);
  // New names in name order, so that the outcome does not depend on the
  // files' order.
  std::vector<size_t> fresh;
  for (size_t i = 0; i < names.size(); ++i) {
    auto k = known.find(names[i]);
    if (k == known.end()) {
      fresh.push_back(i);
      continue;
    }
    EnvoyIdEntry& e = (*table)[k->second];
    const std::string& path = i < paths.size() ? paths[i] : std::string();
    if (!path.empty() && !e.path.empty() && e.path != path)
      return Status::InvalidArgument("the Envoy biz name " + names[i] + " is bound to the descriptor path " + e.path +
                                     ", not " + path);
    if (e.path.empty()) e.path = path;  // bound now, by its first claimer
    (*ids)[i] = e.id;
  }
  std::sort(fresh.begin(), fresh.end(), [&](size_t a, size_t b) { return names[a] < names[b]; });
  for (size_t i : fresh) {
    if (free == 0)
      return Status::InvalidArgument("the " + std::to_string(kEnvoyBizIds) +
                                     " biz ids reserved for Envoy's descriptors are all taken, some by descriptors no "
                                     "longer configured (the store directory's envoy.ids keeps them so that their "
                                     "counts are never given to another descriptor); remove their lines to free them");
    uint32_t slot = EnvoyIdSlot(names[i]);
    while (taken[slot]) slot = (slot + 1) % kEnvoyBizIds;
    taken[slot] = true;
    --free;
    (*ids)[i] = static_cast<uint16_t>(kFirstEnvoyBizId + slot);
    table->push_back(EnvoyIdEntry{names[i], (*ids)[i], i < paths.size() ? paths[i] : std::string()});
  }
  return Status::OK();
}

Result<std::shared_ptr<const EnvoyRules>> EnvoyRules::Compile(const EnvoyConfig& cfg, EnvoyIds* ids_out) {
  auto rules = std::make_shared<EnvoyRules>();
  for (const Domain& dom : cfg.domains) {
    const uint32_t root = static_cast<uint32_t>(rules->nodes_.size());
    rules->nodes_.emplace_back();
    rules->domains_.emplace(dom.name, root);
    std::string identity;
    AppendIdentity(dom.name, &identity);
    for (const DescriptorNode& d : dom.descriptors) rules->Add(dom.name, "", identity, d, root, false);
  }
  // A request's own limit (RateLimitDescriptor.limit) counts in one biz per
  // unit, shared by every domain: only with a domain configured, as
  // envoyproxy/ratelimit applies it only in a known domain.
  if (!cfg.domains.empty())
    for (int u = 1; u <= 7; ++u) {
      CompiledLimit l;
      l.limit.unit = static_cast<Unit>(u);
      l.limit.requests_per_unit = static_cast<uint32_t>(kMaxUses);
      l.path = std::string("override_") + UnitName(l.limit.unit);
      l.identity = std::string("%7Eoverride/") + UnitName(l.limit.unit);
      l.biz = std::string("envoy._override.") + UnitName(l.limit.unit);
      l.is_override = true;
      l.file = "(a request's own limit)";
      rules->overrides_[u - 1] = static_cast<int32_t>(rules->limits_.size());
      rules->limits_.push_back(std::move(l));
    }
  // An in-flight limit (unit: concurrent) needs somewhere to note the
  // requests it denied: Envoy sends their stream-done give-back all the
  // same (its filter does on every stream it asked for), and that one must
  // not end another request's lease (RateLimitService::Decide). One biz,
  // shared by every such limit, the counter key prefixed with the limit's.
  bool concurrent = false;
  for (const CompiledLimit& l : rules->limits_) concurrent = concurrent || l.limit.concurrent();
  if (concurrent) {
    CompiledLimit l;
    l.limit.unit = Unit::kHour;
    l.limit.requests_per_unit = static_cast<uint32_t>(kMaxUses);
    l.path = "pending_give_backs";
    l.identity = "%7Epending";
    l.biz = "envoy._pending";
    l.is_pending = true;
    l.file = "(denials of unit: concurrent awaiting their give-back)";
    rules->pending_ = static_cast<int32_t>(rules->limits_.size());
    rules->limits_.push_back(std::move(l));
  }
  if (rules->limits_.size() > kEnvoyBizIds)
    return Status::InvalidArgument("the Envoy configuration has " + std::to_string(rules->limits_.size()) +
                                   " rate limits, more than the " + std::to_string(kEnvoyBizIds) +
                                   " biz ids reserved for them");
  // Names one-to-one with paths, across reloads too. Today's spelling
  // (BizName) is not: "envoy.x.z.z" is domain x.z's z and domain x's z.z;
  // key a_b and key a with value b are both "a_b"; a byte a name cannot
  // hold becomes '_'. So a name, once given, is bound to its path's
  // identity in the table (envoy.ids) for good: a path takes the name
  // bound to it, else its spelling when no other path holds that, else the
  // spelling cut and ended in a hash of its identity (another hash on the
  // rare collision). In the order of the limits (domains by name, then the
  // files' order), so that a worker, given the master's table, finds the
  // names the master gave.
  std::unordered_map<std::string_view, const EnvoyIdEntry*> by_name, by_path;
  for (const EnvoyIdEntry& e : cfg.ids) {
    by_name.emplace(e.name, &e);
    if (!e.path.empty()) by_path.emplace(e.path, &e);
  }
  std::set<std::string> names;
  std::set<std::string_view> identities;
  for (CompiledLimit& l : rules->limits_) {
    if (!identities.insert(l.identity).second)
      return Status::InvalidArgument(l.file + ":" + std::to_string(l.line) + ": descriptor path '" + l.path +
                                     "' of domain '" + l.domain + "' is configured twice");
    auto available = [&](const std::string& name) {
      auto b = by_name.find(name);
      return !names.count(name) && (b == by_name.end() || b->second->path.empty() || b->second->path == l.identity);
    };
    if (auto bound = by_path.find(l.identity); bound != by_path.end() && !names.count(bound->second->name)) {
      l.biz = bound->second->name;
    } else if (!available(l.biz)) {
      const std::string base = l.biz.substr(0, std::min(l.biz.size(), limit::kMaxBizNameBytes - 9));
      // First the name earlier releases gave the second of two paths spelled
      // alike in one configuration (a hash of the spelling), so that it
      // keeps its id on the upgrade; then hashes of the identity.
      l.biz = base + "." + Hex8(l.domain + "." + l.path);
      for (uint32_t salt = 0; !available(l.biz); ++salt)
        l.biz = base + "." + Hex8(salt == 0 ? l.identity : l.identity + "#" + std::to_string(salt));
    }
    names.insert(l.biz);
  }
  // The same spellings would be two series with one label set in /metrics
  // (descriptor="a_b" twice), which a scraper refuses: the later path's
  // label ends in a hash of its identity.
  std::set<std::pair<std::string, std::string>> labels;
  for (CompiledLimit& l : rules->limits_)
    if (!labels.emplace(l.domain, l.path).second) l.path += "~" + Hex8(l.identity);
  std::vector<std::string> biz_names, paths;
  for (const CompiledLimit& l : rules->limits_) {
    biz_names.push_back(l.biz);
    paths.push_back(l.identity);
  }
  EnvoyIds table = cfg.ids;
  std::vector<uint16_t> ids;
  if (Status s = AssignEnvoyIds(biz_names, paths, &table, &ids); !s.ok()) return s;
  for (size_t i = 0; i < ids.size(); ++i) rules->limits_[i].biz_id = ids[i];
  if (ids_out) *ids_out = std::move(table);
  return std::shared_ptr<const EnvoyRules>(std::move(rules));
}

Result<std::shared_ptr<const EnvoyRules>> EnvoyRules::FromBundle(std::string_view bundle, bool merge_domains) {
  Result<EnvoyConfig> cfg = ParseEnvoyBundle(bundle, merge_domains);
  if (!cfg.ok()) return cfg.status();
  return Compile(cfg.value());
}

namespace {

// Where a biz of the map came from, for its comment: the YAML file and line
// with the domain and descriptor path, or, for the bizzes that count a
// request's own `limit` (Envoy's override), which has neither, that.
std::string OriginOf(const CompiledLimit& l) {
  if (l.is_override) return "a descriptor's own limit (Envoy's limit override), in any configured domain";
  return XmlEscape(l.file) + ":" + std::to_string(l.line) + ": domain " + XmlEscape(l.domain) + ", " +
         XmlEscape(l.path);
}

}  // namespace

std::string RuleNameOf(const CompiledLimit& l) {
  return l.limit.concurrent() ? l.biz + "_1" : std::string("per_") + UnitName(l.limit.unit);
}

std::string EnvoyRules::MapXmlBizzes() const {
  std::string out;
  for (const CompiledLimit& l : limits_) {
    // The service counts every hit (an update) and compares the count with
    // requests_per_unit itself, as envoyproxy/ratelimit does; the rule's max
    // is the limit where the engine can hold it (frsctl explain shows it):
    // 0 is not a rule's max (1 then), and the engine counts up to 2^31-1.
    if (l.limit.concurrent()) {
      out += "  <biz id=\"" + std::to_string(l.biz_id) + "\" name=\"" + l.biz + "\"" +
             (l.shadow_mode ? " mode=\"shadow\"" : "") + ">  <!-- " + OriginOf(l) + ", " +
             std::to_string(l.limit.requests_per_unit) + " in flight -->\n";
      out += "    <rule algo=\"concurrency\" max=\"" + std::to_string(l.limit.requests_per_unit) + "\" lease=\"" +
             std::to_string(l.limit.lease_s) + "\"/>\n  </biz>\n";
      continue;
    }
    const uint64_t max = std::clamp<uint64_t>(l.limit.requests_per_unit, 1, static_cast<uint64_t>(kMaxUses));
    // week, month and year windows count from the Unix epoch, as upstream's.
    const bool epoch = l.limit.unit == Unit::kWeek || l.limit.unit == Unit::kMonth || l.limit.unit == Unit::kYear;
    // What the rule cannot say, said beside it: the map is printed to be
    // taken as FRS's own rules (frsctl envoy-config), where a max of 1 for
    // Envoy's 0 lets one request a window through.
    std::string unsaid;
    if (max != l.limit.requests_per_unit)
      unsaid += l.limit.requests_per_unit == 0
                    ? "; a rule's max is at least 1: as FRS's own rule this lets one through "
                      "a window, where Envoy's 0 denies every request"
                    : "; a rule counts up to 2147483647";
    if (l.quota_mode) unsaid += "; quota_mode (the overall code only) has no rule of its own";
    out += "  <biz id=\"" + std::to_string(l.biz_id) + "\" name=\"" + l.biz + "\"" +
           (l.shadow_mode ? " mode=\"shadow\"" : "") + ">  <!-- " + OriginOf(l) + ", " +
           (l.is_override ? std::string("up to ") : std::string()) + std::to_string(l.limit.requests_per_unit) +
           " per " + UnitName(l.limit.unit) + unsaid + " -->\n";
    // Named for its unit: a reload that changes the unit then starts the
    // count from zero, as upstream's cache key (which holds the window)
    // does, where a map.xml rule of the same name carries it over.
    out += "    <rule algo=\"calendar\" interval=\"" + std::to_string(UnitSeconds(l.limit.unit)) + "\" max=\"" +
           std::to_string(max) + "\" zone=\"" + (epoch ? "epoch" : "UTC") + "\" name=\"" + RuleNameOf(l) +
           "\"/>\n  </biz>\n";
  }
  return out;
}

int32_t EnvoyRules::Find(std::string_view domain, std::span<const Entry> entries, std::string* scratch,
                         MatchInfo* info) const {
  if (info) info->Clear(entries.size());
  auto d = domains_.find(domain);
  if (d == domains_.end() || entries.empty()) return kNoLimit;
  uint32_t at = d->second;
  int32_t found = kNoLimit;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Node& n = nodes_[at];
    ValueLookup(entries[i].key, entries[i].value, scratch);
    auto c = n.values.find(std::string_view(*scratch));
    uint32_t next = 0;
    bool hit = c != n.values.end();
    const bool by_value = hit;
    bool by_wildcard = false;
    if (hit) next = c->second;
    for (size_t w = 0; !hit && w < n.wildcards.size(); ++w)
      if (n.wildcards[w].key == entries[i].key && GlobMatch(n.wildcards[w].pattern, entries[i].value)) {
        hit = by_wildcard = true;
        next = n.wildcards[w].node;
      }
    if (!hit && (c = n.keys.find(entries[i].key)) != n.keys.end()) {
      hit = true;
      next = c->second;
    }
    if (!hit) return kNoLimit;
    at = next;
    if (info) {
      // envoyproxy/ratelimit's value_to_metric path, level by level: the
      // configured spelling, but the request's value where a
      // value_to_metric descriptor matched it by wildcard or by key alone.
      const Node& m = nodes_[at];
      if (by_wildcard && m.share_threshold) info->share[i] = m.pattern;
      if (i) info->metric_path.push_back('.');
      info->metric_path.append(entries[i].key);
      std::string_view v;
      if (by_value) v = entries[i].value;
      else if (by_wildcard)
        v = m.share_threshold || !m.value_to_metric ? std::string_view(m.pattern) : entries[i].value;
      else if (m.value_to_metric) v = entries[i].value;
      if (!v.empty()) info->metric_path.append("_").append(v);
      if (m.value_to_metric && !by_value && !m.share_threshold && v != std::string_view(m.pattern))
        info->metric_path_changed = true;
    }
    if (i + 1 == entries.size()) found = nodes_[at].limit;
    if (nodes_[at].values.empty() && nodes_[at].keys.empty() && nodes_[at].wildcards.empty()) break;
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
  std::string out;
  out.reserve(map_xml.size() + rules.limits().size() * 200);
  const std::string bizzes = std::string(kComposedMarker) + rules.MapXmlBizzes();
  if (const size_t end = ClosingMapTag(map_xml); end != std::string_view::npos) {
    out.append(map_xml.substr(0, end));
    out += bizzes;
    out.append(map_xml.substr(end));
  } else if (const size_t slash = SelfClosingMapTag(map_xml); slash != std::string_view::npos) {
    // An empty map as one element (found from outside: refused as "no
    // </map>" once <grpc config> was set, and accepted without it).
    out.append(map_xml.substr(0, slash));
    out += ">\n" + bizzes + "</map>";
    out.append(map_xml.substr(slash + 2));
  } else {
    return Status::InvalidArgument(map_path + ": no </map>");
  }
  // Parsed again: whatever map.xml holds, every Envoy descriptor must be a
  // biz of the map the engine gets, or its limit would silently not apply.
  Result<limit::MapConfig> composed = limit::ParseMap(out, map_path);
  if (!composed.ok()) return composed.status();
  std::unordered_map<uint16_t, std::string_view> present;
  for (const limit::BizConfig& b : composed->bizzes) present.emplace(b.id, b.name);
  for (const CompiledLimit& l : rules.limits()) {
    auto p = present.find(l.biz_id);
    if (p == present.end() || p->second != l.biz)
      return Status::InvalidArgument(map_path + ": the Envoy descriptor biz " + l.biz + " (id " +
                                     std::to_string(l.biz_id) + ") could not be added to the map (" + l.file + ":" +
                                     std::to_string(l.line) + ")");
  }
  return out;
}

namespace {

// `s` as bytes ValidateKeyBytes accepts: well-formed UTF-8 without control
// characters; '%' (the escape's own sign), controls, bytes that are not
// UTF-8 and the separators of the part's place as %XX (the domain, an
// entry's key, a value followed by another entry). One-to-one, so distinct
// values stay distinct keys.
constexpr PercentTable kDomainBytes(0x20, 0x7e, "%#|", PercentHigh::kKeyChars);
constexpr PercentTable kEntryKeyBytes(0x20, 0x7e, "%#", PercentHigh::kKeyChars);
constexpr PercentTable kInnerValueBytes(0x20, 0x7e, "%#_", PercentHigh::kKeyChars);

}  // namespace

void CounterKey(std::span<const Entry> entries, std::string* out, std::string_view domain) {
  out->clear();
  if (!domain.empty()) {
    AppendPercentEncoded(domain, kDomainBytes, out);
    out->push_back('|');
  }
  // Within one biz the keys are its descriptor path's, level by level, so
  // only a value can shift a separator: a '_' in any value but the last is
  // written %5F (envoyproxy/ratelimit's key would make a=1_b_2,b=3 and
  // a=1,b=2_b_3 one counter). '#' is written %23 everywhere, so no key that
  // was not cut can spell a cut key's '#' and hash.
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i) out->push_back('_');
    AppendPercentEncoded(entries[i].key, kEntryKeyBytes, out);
    out->push_back('_');
    AppendPercentEncoded(entries[i].value, i + 1 < entries.size() ? kInnerValueBytes : kEntryKeyBytes, out);
  }
  if (out->size() > kMaxKeyBytes) {
    const uint64_t whole = XXH3_64bits(out->data(), out->size());
    // A prefix on a character boundary: the cut must not leave half a
    // UTF-8 character, which the store would refuse.
    size_t cut = kMaxKeyBytes - 17;
    while (cut > 0 && (static_cast<unsigned char>((*out)[cut]) & 0xC0) == 0x80) --cut;
    out->resize(cut);
    out->push_back('#');
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(whole));
    out->append(buf);
  }
}

}  // namespace frs::envoy
