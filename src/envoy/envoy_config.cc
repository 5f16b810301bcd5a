#include "envoy/envoy_config.h"

#include <dirent.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "os/text_file.h"

namespace frs::envoy {

uint32_t UnitSeconds(Unit u) {
  switch (u) {
    case Unit::kSecond: return 1;
    case Unit::kMinute: return 60;
    case Unit::kHour: return 3600;
    case Unit::kDay: return 86400;
  }
  return 1;
}

const char* UnitName(Unit u) {
  switch (u) {
    case Unit::kSecond: return "second";
    case Unit::kMinute: return "minute";
    case Unit::kHour: return "hour";
    case Unit::kDay: return "day";
  }
  return "second";
}

namespace {

// Thrown inside this file only, caught in ParseEnvoyYaml: a message with
// the node's line.
struct ConfigError {
  int line;
  std::string message;
};

int LineOf(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

[[noreturn]] void Fail(const YAML::Node& n, std::string message) { throw ConfigError{LineOf(n), std::move(message)}; }

std::string Scalar(const YAML::Node& n, const char* what) {
  if (!n.IsScalar()) Fail(n, std::string(what) + " must be a string");
  return n.Scalar();
}

bool Bool(const YAML::Node& n, const char* what) {
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) Fail(n, std::string(what) + " must be true or false");
  return v;
}

// envoyproxy/ratelimit refuses unknown keys instead of ignoring a typo.
void OnlyKeys(const YAML::Node& map, std::initializer_list<std::string_view> allowed, const char* where) {
  if (!map.IsMap()) Fail(map, std::string(where) + " must be a map");
  for (const auto& kv : map) {
    const std::string k = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
      Fail(kv.first, "unknown key '" + k + "' in " + where);
  }
}

bool ParseUnit(std::string_view s, Unit* u) {
  std::string lower(s);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::pair<const char*, Unit> kUnits[] = {{"second", Unit::kSecond},
                                                            {"minute", Unit::kMinute},
                                                            {"hour", Unit::kHour},
                                                            {"day", Unit::kDay}};
  for (const auto& [name, unit] : kUnits)
    if (lower == name) {
      *u = unit;
      return true;
    }
  return false;
}

void ParseReplaces(const YAML::Node& r, DescriptorNode* d) {
  if (!r.IsSequence()) Fail(r, "replaces must be a list of {name: NAME}");
  for (const auto& item : r) {
    OnlyKeys(item, {"name"}, "replaces");
    if (!item["name"]) Fail(item, "replaces: an entry without a name");
    std::string name = Scalar(item["name"], "replaces name");
    if (name.empty()) Fail(item, "replaces: an empty name");
    d->replaces.push_back(std::move(name));
  }
}

void ParseLimit(const YAML::Node& n, DescriptorNode* d) {
  OnlyKeys(n, {"unit", "requests_per_unit", "unlimited", "name", "replaces"}, "rate_limit");
  // unlimited: may sit in rate_limit too (envoyproxy/ratelimit's own place for it)
  if (n["unlimited"]) d->unlimited = Bool(n["unlimited"], "unlimited");
  if (n["name"]) d->name = Scalar(n["name"], "name");
  if (n["replaces"]) ParseReplaces(n["replaces"], d);
  const bool has_unit = static_cast<bool>(n["unit"]), has_rpu = static_cast<bool>(n["requests_per_unit"]);
  if (d->unlimited) {
    if (has_unit || has_rpu) Fail(n, "an unlimited rate_limit must not give unit or requests_per_unit");
    return;
  }
  if (!has_unit) Fail(n, "rate_limit without a unit (second, minute, hour or day)");
  const std::string unit = Scalar(n["unit"], "unit");
  if (!ParseUnit(unit, &d->limit.unit)) {
    std::string lower = unit;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    // envoyproxy/ratelimit's week, month and year are windows aligned to the
    // Unix epoch (now % unit); FRS's calendar aligns weeks to Monday and
    // months to the calendar, so they would reset at other instants: refused
    // rather than answered with another duration_until_reset.
    if (lower == "week" || lower == "month" || lower == "year")
      Fail(n["unit"], "unit '" + unit + "' is not supported by frsd (second, minute, hour or day)");
    Fail(n["unit"], "unknown unit '" + unit + "' (second, minute, hour or day)");
  }
  if (!has_rpu) Fail(n, "rate_limit without requests_per_unit");
  uint64_t rpu = 0;
  const YAML::Node r = n["requests_per_unit"];
  if (!r.IsScalar() || !YAML::convert<uint64_t>::decode(r, rpu) || rpu > 2147483647)
    // The engine counts up to 2^31-1 (kMaxUses); a larger limit could never
    // be reached and would be a different limit than the one written.
    Fail(r, "requests_per_unit '" + (r.IsScalar() ? r.Scalar() : std::string()) + "' is not 0..2147483647");
  d->limit.requests_per_unit = static_cast<uint32_t>(rpu);
  d->has_limit = true;
}

void ParseDescriptors(const YAML::Node& list, const std::string& file, std::vector<DescriptorNode>* out);

DescriptorNode ParseDescriptor(const YAML::Node& n, const std::string& file) {
  OnlyKeys(n,
           {"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric", "unlimited", "name",
            "replaces"},
           "a descriptor");
  DescriptorNode d;
  d.file = file;
  d.line = LineOf(n);
  if (!n["key"]) Fail(n, "a descriptor without a key");
  d.key = Scalar(n["key"], "key");
  if (d.key.empty()) Fail(n["key"], "a descriptor with an empty key");
  if (n["value"]) d.value = Scalar(n["value"], "value");
  // In envoyproxy/ratelimit's files `name`, `replaces` and `unlimited` sit
  // in rate_limit; accepted beside it too, as its README's examples vary.
  YAML::Node limit = n["rate_limit"];
  if (n["unlimited"]) d.unlimited = Bool(n["unlimited"], "unlimited");
  if (n["name"]) d.name = Scalar(n["name"], "name");
  if (n["replaces"]) ParseReplaces(n["replaces"], &d);
  if (limit) ParseLimit(limit, &d);
  if (n["shadow_mode"]) d.shadow_mode = Bool(n["shadow_mode"], "shadow_mode");
  if (n["detailed_metric"]) d.detailed_metric = Bool(n["detailed_metric"], "detailed_metric");
  if (d.unlimited) d.has_limit = false;
  // An unlimited limit may replace others too (envoyproxy/ratelimit collects
  // replaces from every matched limit, unlimited ones included).
  if (!d.replaces.empty() && !d.has_limit && !d.unlimited)
    Fail(n, "replaces needs a rate_limit on the same descriptor");
  if (!d.name.empty() && std::find(d.replaces.begin(), d.replaces.end(), d.name) != d.replaces.end())
    Fail(n, "rate limit '" + d.name + "' replaces itself");
  if (n["descriptors"]) ParseDescriptors(n["descriptors"], file, &d.children);
  return d;
}

void ParseDescriptors(const YAML::Node& list, const std::string& file, std::vector<DescriptorNode>* out) {
  if (list.IsNull()) return;
  if (!list.IsSequence()) Fail(list, "descriptors must be a list");
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& item : list) {
    DescriptorNode d = ParseDescriptor(item, file);
    if (!seen.insert({d.key, d.value}).second)
      Fail(item, "duplicate descriptor '" + d.key + (d.value.empty() ? "" : "_" + d.value) + "' at this level");
    out->push_back(std::move(d));
  }
}

}  // namespace

Result<Domain> ParseEnvoyYaml(std::string_view text, const std::string& file) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) return Status::InvalidArgument(file + ":1: the file must be a map with domain and descriptors");
    OnlyKeys(root, {"domain", "descriptors"}, "the file");
    Domain d;
    d.file = file;
    if (!root["domain"]) Fail(root, "no domain");
    d.name = Scalar(root["domain"], "domain");
    d.line = LineOf(root["domain"]);
    if (d.name.empty()) Fail(root["domain"], "an empty domain");
    if (root["descriptors"]) ParseDescriptors(root["descriptors"], file, &d.descriptors);
    return d;
  } catch (const ConfigError& e) {
    return Status::InvalidArgument(file + ":" + std::to_string(e.line) + ": " + e.message);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": " + e.what());
  }
}

Result<std::string> ReadEnvoyDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::FromErrno("<grpc config> directory " + dir, errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.starts_with(".")) continue;
    if (n.ends_with(".yaml") || n.ends_with(".yml")) names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  // Each file: "path\n" "length\n" bytes.
  std::string bundle;
  for (const std::string& n : names) {
    const std::string path = dir + "/" + n;
    // Read as srv.xml is: a FIFO named *.yaml is refused, not waited on.
    Result<std::string> bytes = os::ReadTextFile(path);
    if (!bytes.ok()) return Status::IOError("cannot read " + path + ": " + bytes.status().message());
    bundle += path + "\n" + std::to_string(bytes->size()) + "\n" + *bytes;
  }
  return bundle;
}

Result<EnvoyConfig> ParseEnvoyBundle(std::string_view bundle) {
  EnvoyConfig cfg;
  while (!bundle.empty()) {
    const size_t nl1 = bundle.find('\n');
    const size_t nl2 = nl1 == std::string_view::npos ? nl1 : bundle.find('\n', nl1 + 1);
    if (nl2 == std::string_view::npos) return Status::Corruption("the Envoy configuration bundle is damaged");
    const std::string path(bundle.substr(0, nl1));
    size_t len = 0;
    for (char c : bundle.substr(nl1 + 1, nl2 - nl1 - 1)) len = len * 10 + static_cast<size_t>(c - '0');
    if (len > bundle.size() - nl2 - 1) return Status::Corruption("the Envoy configuration bundle is damaged");
    if (path.empty()) {  // the ids entry (BundleIdsEntry)
      cfg.ids = ParseEnvoyIds(bundle.substr(nl2 + 1, len));
      bundle.remove_prefix(nl2 + 1 + len);
      continue;
    }
    Result<Domain> d = ParseEnvoyYaml(bundle.substr(nl2 + 1, len), path);
    if (!d.ok()) return d.status();
    for (const Domain& other : cfg.domains)
      if (other.name == d->name)
        return Status::InvalidArgument(path + ":" + std::to_string(d->line) + ": domain '" + d->name +
                                       "' is already configured in " + other.file);
    cfg.domains.push_back(std::move(d.value()));
    bundle.remove_prefix(nl2 + 1 + len);
  }
  std::sort(cfg.domains.begin(), cfg.domains.end(), [](const Domain& a, const Domain& b) { return a.name < b.name; });
  return cfg;
}

std::string FormatEnvoyIds(const EnvoyIds& ids) {
  std::string out =
      "# biz-name biz-id of Envoy's descriptors: written by frsd's master, never moved (docs/integrations.md)\n";
  for (const auto& [name, id] : ids) out += name + " " + std::to_string(id) + "\n";
  return out;
}

EnvoyIds ParseEnvoyIds(std::string_view text) {
  EnvoyIds out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string_view::npos || sp == 0) continue;
    uint32_t id = 0;
    bool digits = sp + 1 < line.size();
    for (char c : line.substr(sp + 1)) {
      if (c < '0' || c > '9' || id > 65535) digits = false;
      else id = id * 10 + static_cast<uint32_t>(c - '0');
    }
    if (!digits || id > 65535) continue;
    out.emplace_back(std::string(line.substr(0, sp)), static_cast<uint16_t>(id));
  }
  return out;
}

std::string BundleIdsEntry(const EnvoyIds& ids) {
  const std::string text = FormatEnvoyIds(ids);
  return "\n" + std::to_string(text.size()) + "\n" + text;
}

}  // namespace frs::envoy
