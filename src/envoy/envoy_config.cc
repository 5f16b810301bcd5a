#include "envoy/envoy_config.h"

#include <dirent.h>

#include <algorithm>
#include <exception>
#include <set>

#include <yaml-cpp/yaml.h>

#include "envoy/yaml_tree.h"
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

using YNode = YamlTree::Node;
using Kind = YamlTree::Kind;

[[noreturn]] void Fail(const YNode& n, std::string message) { throw ConfigError{n.line, std::move(message)}; }

std::string Scalar(const YNode& n, const char* what) {
  if (n.kind != Kind::kScalar) Fail(n, std::string(what) + " must be a string");
  return n.scalar;
}

bool Bool(const YNode& n, const char* what) {
  bool v = false;
  // yaml-cpp's own reading of a boolean (true/yes/on/y and their negations,
  // in lower, Capitalized or UPPER case), as the node API gave it.
  if (n.kind != Kind::kScalar || !YAML::convert<bool>::decode(YAML::Node(n.scalar), v))
    Fail(n, std::string(what) + " must be true or false");
  return v;
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

// Decimal digits only: yaml-cpp's reading of a number takes '5 ', '+5',
// 0x10 and more, each a limit the operator may not have meant.
bool ParseCount(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// The walk over one file's tree. The tree is bounded in expanded nodes
// (yaml_tree.h), so the walk is too however often it follows an alias; the
// descriptors it builds are bounded on their own as well.
class Walker {
 public:
  Walker(const YamlTree& tree, const std::string& file) : tree_(tree), file_(file) {}

  Domain Root() {
    const YNode& root = tree_.root();
    if (root.kind != Kind::kMap) throw ConfigError{1, "the file must be a map with domain and descriptors"};
    OnlyKeys(root, {"domain", "descriptors"}, "the file");
    Domain d;
    d.file = file_;
    const YNode* domain = Get(root, "domain");
    if (!domain) Fail(root, "no domain");
    d.name = Scalar(*domain, "domain");
    d.line = domain->line;
    if (d.name.empty()) Fail(*domain, "an empty domain");
    if (const YNode* list = Get(root, "descriptors")) Descriptors(*list, &d.descriptors);
    return d;
  }

 private:
  const YNode* Get(const YNode& map, std::string_view key) const { return tree_.Find(map, key); }
  const YNode& At(uint32_t index) const { return tree_.at(index); }

  // envoyproxy/ratelimit refuses unknown keys instead of ignoring a typo.
  void OnlyKeys(const YNode& map, std::initializer_list<std::string_view> allowed, const char* where) const {
    if (map.kind != Kind::kMap) Fail(map, std::string(where) + " must be a map");
    for (size_t i = 0; i < map.items.size(); i += 2) {
      const YNode& k = At(map.items[i]);
      const std::string key = k.kind == Kind::kScalar ? k.scalar : std::string();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        Fail(k, "unknown key '" + key + "' in " + where);
    }
  }

  void Replaces(const YNode& r, DescriptorNode* d) const {
    if (r.kind != Kind::kSequence) Fail(r, "replaces must be a list of {name: NAME}");
    for (uint32_t i : r.items) {
      const YNode& item = At(i);
      OnlyKeys(item, {"name"}, "replaces");
      const YNode* n = Get(item, "name");
      if (!n) Fail(item, "replaces: an entry without a name");
      std::string name = Scalar(*n, "replaces name");
      if (name.empty()) Fail(item, "replaces: an empty name");
      d->replaces.push_back(std::move(name));
    }
  }

  void Limit(const YNode& n, DescriptorNode* d) const {
    OnlyKeys(n, {"unit", "requests_per_unit", "unlimited", "name", "replaces"}, "rate_limit");
    // unlimited: may sit in rate_limit too (envoyproxy/ratelimit's own place for it)
    if (const YNode* u = Get(n, "unlimited")) d->unlimited = Bool(*u, "unlimited");
    if (const YNode* name = Get(n, "name")) d->name = Scalar(*name, "name");
    if (const YNode* r = Get(n, "replaces")) Replaces(*r, d);
    const YNode* unit_node = Get(n, "unit");
    const YNode* r = Get(n, "requests_per_unit");
    if (d->unlimited) {
      if (unit_node || r) Fail(n, "an unlimited rate_limit must not give unit or requests_per_unit");
      return;
    }
    if (!unit_node) Fail(n, "rate_limit without a unit (second, minute, hour or day)");
    const std::string unit = Scalar(*unit_node, "unit");
    if (!ParseUnit(unit, &d->limit.unit)) {
      std::string lower = unit;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      // envoyproxy/ratelimit's week, month and year are windows aligned to the
      // Unix epoch (now % unit); FRS's calendar aligns weeks to Monday and
      // months to the calendar, so they would reset at other instants: refused
      // rather than answered with another duration_until_reset.
      if (lower == "week" || lower == "month" || lower == "year")
        Fail(*unit_node, "unit '" + unit + "' is not supported by frsd (second, minute, hour or day)");
      Fail(*unit_node, "unknown unit '" + unit + "' (second, minute, hour or day)");
    }
    if (!r) Fail(n, "rate_limit without requests_per_unit");
    uint64_t rpu = 0;
    if (r->kind != Kind::kScalar || !ParseCount(r->scalar, &rpu) || rpu > 2147483647)
      // The engine counts up to 2^31-1 (kMaxUses); a larger limit could never
      // be reached and would be a different limit than the one written.
      Fail(*r, "requests_per_unit '" + r->scalar + "' is not 0..2147483647 (decimal digits only)");
    d->limit.requests_per_unit = static_cast<uint32_t>(rpu);
    d->has_limit = true;
  }

  DescriptorNode Descriptor(const YNode& n) {
    OnlyKeys(n,
             {"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric", "unlimited", "name",
              "replaces"},
             "a descriptor");
    if (++descriptors_ > kMaxEnvoyDescriptors)
      Fail(n, "more than " + std::to_string(kMaxEnvoyDescriptors) + " descriptors in one file");
    DescriptorNode d;
    d.file = file_;
    d.line = n.line;
    const YNode* key = Get(n, "key");
    if (!key) Fail(n, "a descriptor without a key");
    d.key = Scalar(*key, "key");
    if (d.key.empty()) Fail(*key, "a descriptor with an empty key");
    if (const YNode* v = Get(n, "value")) d.value = Scalar(*v, "value");
    // In envoyproxy/ratelimit's files `name`, `replaces` and `unlimited` sit
    // in rate_limit; accepted beside it too, as its README's examples vary.
    if (const YNode* u = Get(n, "unlimited")) d.unlimited = Bool(*u, "unlimited");
    if (const YNode* name = Get(n, "name")) d.name = Scalar(*name, "name");
    if (const YNode* r = Get(n, "replaces")) Replaces(*r, &d);
    if (const YNode* limit = Get(n, "rate_limit")) Limit(*limit, &d);
    if (const YNode* s = Get(n, "shadow_mode")) d.shadow_mode = Bool(*s, "shadow_mode");
    if (const YNode* m = Get(n, "detailed_metric")) d.detailed_metric = Bool(*m, "detailed_metric");
    if (d.unlimited) d.has_limit = false;
    // An unlimited limit may replace others too (envoyproxy/ratelimit collects
    // replaces from every matched limit, unlimited ones included).
    if (!d.replaces.empty() && !d.has_limit && !d.unlimited)
      Fail(n, "replaces needs a rate_limit on the same descriptor");
    if (!d.name.empty() && std::find(d.replaces.begin(), d.replaces.end(), d.name) != d.replaces.end())
      Fail(n, "rate limit '" + d.name + "' replaces itself");
    if (const YNode* children = Get(n, "descriptors")) Descriptors(*children, &d.children);
    return d;
  }

  void Descriptors(const YNode& list, std::vector<DescriptorNode>* out) {
    if (list.kind == Kind::kNull) return;
    if (list.kind != Kind::kSequence) Fail(list, "descriptors must be a list");
    std::set<std::pair<std::string, std::string>> seen;
    for (uint32_t i : list.items) {
      const YNode& item = At(i);
      DescriptorNode d = Descriptor(item);
      if (!seen.insert({d.key, d.value}).second)
        Fail(item, "duplicate descriptor '" + d.key + (d.value.empty() ? "" : "_" + d.value) + "' at this level");
      out->push_back(std::move(d));
    }
  }

  const YamlTree& tree_;
  const std::string& file_;
  size_t descriptors_ = 0;
};

}  // namespace

Result<Domain> ParseEnvoyYaml(std::string_view text, const std::string& file) {
  if (text.size() > kMaxEnvoyFileBytes)
    return Status::InvalidArgument(file + ":0: " + std::to_string(text.size()) + " bytes, more than the " +
                                   std::to_string(kMaxEnvoyFileBytes) + " an Envoy configuration file may hold");
  Result<YamlTree> tree =
      YamlTree::Parse(text, file, YamlBounds{.max_nodes = kMaxEnvoyYamlNodes, .max_depth = kMaxEnvoyYamlDepth});
  if (!tree.ok()) return tree.status();
  try {
    return Walker(tree.value(), file).Root();
  } catch (const ConfigError& e) {
    return Status::InvalidArgument(file + ":" + std::to_string(e.line) + ": " + e.message);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(file + ": " + e.what());
  }
}

Result<std::string> ReadEnvoyFile(const std::string& path) {
  // Read as srv.xml is: a FIFO named *.yaml is refused, not waited on (the
  // master on SIGHUP, frsd -t); a larger file is refused as it is read.
  return os::ReadTextFile(path, kMaxEnvoyFileBytes);
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
  for (std::string& n : names) n = dir + "/" + n;
  return BundleOfFiles(names);
}

Result<std::string> BundleOfFiles(const std::vector<std::string>& paths) {
  // Each file: "path\n" "length\n" bytes.
  std::string bundle;
  for (const std::string& path : paths) {
    Result<std::string> bytes = ReadEnvoyFile(path);
    if (!bytes.ok()) return bytes.status();
    if (bundle.size() + bytes->size() > kMaxEnvoyBundleBytes)
      return Status::InvalidArgument(path + ":0: the files hold more than the " + std::to_string(kMaxEnvoyBundleBytes) +
                                     " bytes an Envoy configuration may hold in all");
    bundle += path + "\n" + std::to_string(bytes->size()) + "\n" + bytes.value();
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
      "# biz-name biz-id descriptor-path of Envoy's descriptors: written by frsd's master, never moved "
      "(docs/integrations.md)\n";
  for (const EnvoyIdEntry& e : ids)
    out += e.name + " " + std::to_string(e.id) + (e.path.empty() ? "" : " " + e.path) + "\n";
  return out;
}

EnvoyIds ParseEnvoyIds(std::string_view text) {
  EnvoyIds out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    // Names and paths hold no space (biz names are [A-Za-z0-9_.-], paths
    // are %-escaped).
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0) continue;
    std::string_view rest = line.substr(sp + 1);
    const size_t sp2 = rest.find(' ');
    const std::string_view digits_text = rest.substr(0, sp2);
    const std::string_view path = sp2 == std::string_view::npos ? std::string_view() : rest.substr(sp2 + 1);
    uint32_t id = 0;
    bool digits = !digits_text.empty() && digits_text.size() <= 5 && path.find(' ') == std::string_view::npos;
    for (char c : digits_text) {
      if (c < '0' || c > '9') digits = false;
      else id = id * 10 + static_cast<uint32_t>(c - '0');
    }
    if (!digits || id > 65535) continue;
    out.push_back(EnvoyIdEntry{std::string(line.substr(0, sp)), static_cast<uint16_t>(id), std::string(path)});
  }
  return out;
}

std::string BundleIdsEntry(const EnvoyIds& ids) {
  const std::string text = FormatEnvoyIds(ids);
  return "\n" + std::to_string(text.size()) + "\n" + text;
}

}  // namespace frs::envoy
