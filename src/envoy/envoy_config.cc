#include "envoy/envoy_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/json_escape.h"
#include "base/utf8.h"
#include "envoy/yaml_tree.h"
#include "envoy/yaml_v2_scalar.h"
#include "os/text_file.h"
#include "os/unique_dir.h"

namespace frs::envoy {

uint32_t UnitSeconds(Unit u) {
  switch (u) {
    case Unit::kSecond: return 1;
    case Unit::kMinute: return 60;
    case Unit::kHour: return 3600;
    case Unit::kDay: return 86400;
    case Unit::kWeek: return 7 * 86400;
    case Unit::kMonth: return 30 * 86400;
    case Unit::kYear: return 365 * 86400;
  }
  return 1;
}

bool UnitFromNumber(int64_t n, Unit* u) {
  if (n < 1 || n > 7) return false;
  *u = static_cast<Unit>(n);
  return true;
}

const char* UnitName(Unit u) {
  switch (u) {
    case Unit::kSecond: return "second";
    case Unit::kMinute: return "minute";
    case Unit::kHour: return "hour";
    case Unit::kDay: return "day";
    case Unit::kWeek: return "week";
    case Unit::kMonth: return "month";
    case Unit::kYear: return "year";
  }
  return "second";
}

namespace {

// The name envoyproxy/ratelimit files a descriptor under at its level.
std::string CompositeKey(const std::string& key, const std::string& value) {
  return value.empty() ? key : key + "_" + value;
}

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
  if (n.kind == Kind::kNull) Fail(n, std::string(what) + " has no value");
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
  static constexpr std::pair<const char*, Unit> kUnits[] = {{"second", Unit::kSecond}, {"minute", Unit::kMinute},
                                                            {"hour", Unit::kHour},     {"day", Unit::kDay},
                                                            {"week", Unit::kWeek},     {"month", Unit::kMonth},
                                                            {"year", Unit::kYear}};
  for (const auto& [name, unit] : kUnits)
    if (lower == name) {
      *u = unit;
      return true;
    }
  return false;
}

// Decimal digits only: yaml-cpp's reading of a number takes '5 ', '+5',
// 0x10 and more, each a limit the operator may not have meant. A leading
// zero too: envoyproxy/ratelimit's YAML 1.1 reader takes 010 for octal 8,
// and a file moved from it would count to 10 here.
bool ParseCount(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// Why a number's scalar is refused, beyond its range: a quoted one (text to
// upstream's YAML reader, which refuses it for a number) and one with a
// leading zero (octal to that reader) are named as such. "" for others.
std::string NumberForm(const YNode& n) {
  if (n.kind != Kind::kScalar) return "";
  if (!n.plain)
    return ": quoted, it is text, which envoyproxy/ratelimit's YAML reader refuses for a number; write it bare";
  if (n.scalar.size() > 1 && n.scalar[0] == '0' && n.scalar.find_first_not_of("0123456789") == std::string::npos)
    return ": a leading zero makes it octal to envoyproxy/ratelimit's YAML reader (010 is 8 there); write it without";
  return "";
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
    // `domain:` with nothing after it is upstream's "": an empty domain.
    if (domain->kind != Kind::kNull) d.name = Scalar(*domain, "domain");
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

  // A YAML node as JSON, for google.protobuf.Struct: maps (keys as text),
  // lists, and scalars typed as envoyproxy/ratelimit's YAML reader types a
  // plain one (yaml_v2_scalar.h); a quoted scalar is always a string. The
  // keys of a map inside the metadata are named as that service names them
  // (`010:` is "8" there); the metadata's own keys keep their text, as its
  // reader gives them to a map of strings.
  void Json(const YNode& n, std::string* out, bool nested = false) const {
    switch (n.kind) {
      case Kind::kNull: out->append("null"); return;
      case Kind::kScalar: return JsonScalar(n, out);
      case Kind::kSequence:
        out->push_back('[');
        for (size_t i = 0; i < n.items.size(); ++i) {
          if (i) out->push_back(',');
          Json(At(n.items[i]), out, true);
        }
        out->push_back(']');
        return;
      case Kind::kMap: {
        // Two keys one name upstream (`010:` and `8:`, `yes:` and `true:`,
        // a key written after a merge key `<<` that brought its twin) are
        // one key there, the later value kept, as its reader assigns them in
        // order: so here. Both in the JSON the answer's Struct is read
        // from, it refused the pair, and the descriptor's whole metadata
        // went missing from every answer (found from outside). A key
        // written twice alike is refused before this (yaml_tree.h).
        std::vector<std::pair<std::string, std::string>> entries;  // name, value as JSON
        std::map<std::string, size_t> at;                          // name (0 for -0) -> entries index
        for (size_t i = 0; i < n.items.size(); i += 2) {
          const YNode& k = At(n.items[i]);
          std::string name;
          if (k.kind == Kind::kNull) {
            // In a nested map a null is the key nil ("<nil>" by %v); the
            // metadata's own map is of strings, where its reader puts "".
            name = nested ? "<nil>" : "";
          } else {
            if (k.kind != Kind::kScalar) Fail(k, "a metadata key must be a string");
            CheckUtf8(k);
            name = nested && k.plain ? PlainKeyText(k.scalar) : k.scalar;
          }
          Spend(k, name.size() + 4);
          std::string value;
          Json(At(n.items[i + 1]), &value, true);
          // 0.0 and -0.0 are one key of a Go map (0 == -0), named as first
          // set: a float's only, a plain key of a nested map (a string "-0",
          // and every key of the metadata's own map of strings, are their
          // text: found by a review).
          const bool float_zero = nested && k.kind == Kind::kScalar && k.plain && name == "-0";
          auto [where, fresh] = at.try_emplace(float_zero ? "0" : name, entries.size());
          if (fresh) entries.emplace_back(std::move(name), std::move(value));
          else entries[where->second].second = std::move(value);
        }
        out->push_back('{');
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out->push_back(',');
          AppendJsonString(entries[i].first, out);
          out->push_back(':');
          out->append(entries[i].second);
        }
        out->push_back('}');
        return;
      }
    }
  }

  // Upstream's reader refuses a file that is not UTF-8; JSON's escape of a
  // stray byte made it another character, which could name two keys alike
  // and make the answer's Struct, and the whole metadata, go missing.
  static void CheckUtf8(const YNode& n) {
    if (Utf8ValidPrefix(n.scalar).size() != n.scalar.size())
      Fail(n, "metadata holds bytes that are not UTF-8 (envoyproxy/ratelimit's reader refuses the file)");
  }

  void JsonScalar(const YNode& n, std::string* out) const {
    CheckUtf8(n);
    Spend(n, n.scalar.size());
    if (!n.plain) return AppendJsonString(n.scalar, out);
    const YamlV2Scalar r = ResolvePlainScalar(n.scalar);
    switch (r.kind) {
      case YamlV2Scalar::Kind::kString: return AppendJsonString(n.scalar, out);
      case YamlV2Scalar::Kind::kNotFinite:
        Fail(n, "metadata value '" + n.scalar +
                    "' is a float envoyproxy/ratelimit reads as NaN or an infinity, which FRS cannot carry in the "
                    "answer's metadata: quote it to send the text");
      default: out->append(r.json);
    }
  }

  // The metadata's bound, counted on each scalar and key as it is written:
  // checked on the whole JSON only, a descriptor's aliases built up to 16
  // MiB of scalars (six times that escaped) before it was refused, once per
  // descriptor (found by a review).
  void Spend(const YNode& n, size_t bytes) const {
    json_bytes_ += bytes;
    if (json_bytes_ > kMaxEnvoyMetadataBytes)
      Fail(n, "metadata is more than " + std::to_string(kMaxEnvoyMetadataBytes) +
                  " bytes as JSON, aliases expanded (every answer that passes the descriptor carries it)");
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
    OnlyKeys(n, {"unit", "requests_per_unit", "unlimited", "name", "replaces", "lease"}, "rate_limit");
    // unlimited: may sit in rate_limit too (envoyproxy/ratelimit's own place for it)
    if (const YNode* u = Get(n, "unlimited")) d->unlimited = Bool(*u, "unlimited");
    if (const YNode* name = Get(n, "name")) d->name = Scalar(*name, "name");
    if (const YNode* r = Get(n, "replaces")) Replaces(*r, d);
    const YNode* unit_node = Get(n, "unit");
    const YNode* r = Get(n, "requests_per_unit");
    if (d->unlimited) {
      // As envoyproxy/ratelimit reads it: a unit it knows is refused, any
      // other (unknown, or a word it does not know) is not a unit and is
      // ignored, and so is requests_per_unit (still a uint32 to its YAML
      // reader): upstream's own files write `unit: unknown` or leave a
      // number beside `unlimited: true`.
      Unit ignored{};
      if (unit_node && unit_node->kind == Kind::kScalar && ParseUnit(unit_node->scalar, &ignored))
        Fail(*unit_node, "an unlimited rate_limit must not give a unit ('" + unit_node->scalar + "')");
      if (unit_node && unit_node->kind != Kind::kScalar && unit_node->kind != Kind::kNull)
        Fail(*unit_node, "unit must be a string");
      uint64_t rpu = 0;
      if (r && r->kind != Kind::kNull &&
          (r->kind != Kind::kScalar || !r->plain || !ParseCount(r->scalar, &rpu) || rpu > 4294967295u))
        Fail(*r, "requests_per_unit '" + r->scalar + "' is not 0..4294967295 (decimal digits only)" + NumberForm(*r));
      return;
    }
    if (!unit_node) Fail(n, "rate_limit without a unit (second, minute, hour, day, week, month, year or concurrent)");
    const std::string unit = Scalar(*unit_node, "unit");
    const YNode* lease = Get(n, "lease");
    if (unit == "concurrent") {
      Concurrent(n, r, lease, d);
      return;
    }
    if (lease) Fail(*lease, "lease belongs to unit: concurrent only");
    if (!ParseUnit(unit, &d->limit.unit))
      Fail(*unit_node, "unknown unit '" + unit + "' (second, minute, hour, day, week, month, year or concurrent)");
    if (!r || r->kind == Kind::kNull) {
      // As envoyproxy/ratelimit reads it (a uint32 left out, or ~, is 0): no
      // request.
      d->limit.requests_per_unit = 0;
      d->has_limit = true;
      return;
    }
    uint64_t rpu = 0;
    // rls.proto's requests_per_unit is a uint32, as envoyproxy/ratelimit's
    // YAML field is.
    if (r->kind != Kind::kScalar || !r->plain || !ParseCount(r->scalar, &rpu) || rpu > 4294967295u)
      Fail(*r, "requests_per_unit '" + r->scalar + "' is not 0..4294967295 (decimal digits only)" + NumberForm(*r));
    d->limit.requests_per_unit = static_cast<uint32_t>(rpu);
    d->has_limit = true;
  }

  // FRS's in-flight limit: requests_per_unit leases of `lease` seconds.
  void Concurrent(const YNode& n, const YNode* r, const YNode* lease, DescriptorNode* d) const {
    uint64_t max = 0, secs = 0;
    if (!r) Fail(n, "rate_limit without requests_per_unit");
    if (r->kind != Kind::kScalar || !r->plain || !ParseCount(r->scalar, &max) || max < 1 || max > kMaxConcurrent)
      Fail(*r, "requests_per_unit '" + r->scalar + "' of unit concurrent is not 1.." + std::to_string(kMaxConcurrent) +
                   " (the leases one counter key holds)" + NumberForm(*r));
    if (!lease) Fail(n, "unit concurrent without lease (seconds a request holds its place unless it ends sooner)");
    if (lease->kind != Kind::kScalar || !lease->plain || !ParseCount(lease->scalar, &secs) || secs < 1 ||
        secs > kMaxConcurrentLeaseS)
      Fail(*lease, "lease '" + lease->scalar + "' is not 1.." + std::to_string(kMaxConcurrentLeaseS) + " seconds" +
                       NumberForm(*lease));
    d->limit.requests_per_unit = static_cast<uint32_t>(max);
    d->limit.lease_s = static_cast<uint32_t>(secs);
    d->has_limit = true;
  }

  DescriptorNode Descriptor(const YNode& n) {
    OnlyKeys(n,
             {"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric",
              "value_to_metric", "share_threshold", "metadata", "unlimited", "name", "replaces"},
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
    // `value: ~` (or empty) is upstream's "" : the key alone.
    if (const YNode* v = Get(n, "value"); v && v->kind != Kind::kNull) d.value = Scalar(*v, "value");
    // In envoyproxy/ratelimit's files `name`, `replaces` and `unlimited` sit
    // in rate_limit; accepted beside it too, as its README's examples vary.
    if (const YNode* u = Get(n, "unlimited")) d.unlimited = Bool(*u, "unlimited");
    if (const YNode* name = Get(n, "name")) d.name = Scalar(*name, "name");
    if (const YNode* r = Get(n, "replaces")) Replaces(*r, &d);
    // An empty `rate_limit:` is upstream's nil: no limit on this descriptor.
    if (const YNode* limit = Get(n, "rate_limit"); limit && limit->kind != Kind::kNull) Limit(*limit, &d);
    if (const YNode* s = Get(n, "shadow_mode")) d.shadow_mode = Bool(*s, "shadow_mode");
    if (const YNode* m = Get(n, "detailed_metric")) d.detailed_metric = Bool(*m, "detailed_metric");
    if (const YNode* q = Get(n, "quota_mode")) d.quota_mode = Bool(*q, "quota_mode");
    if (const YNode* v = Get(n, "value_to_metric")) d.value_to_metric = Bool(*v, "value_to_metric");
    if (const YNode* s = Get(n, "share_threshold")) d.share_threshold = Bool(*s, "share_threshold");
    // As envoyproxy/ratelimit: one counter for every value a wildcard
    // matches needs a wildcard.
    if (d.share_threshold && d.value.find('*') == std::string::npos)
      Fail(n, "share_threshold needs a wildcard value (one holding '*'), not '" + d.value + "'");
    if (const YNode* m = Get(n, "metadata"); m && m->kind != Kind::kNull) {
      if (m->kind != Kind::kMap) Fail(*m, "metadata must be a map");
      json_bytes_ = 0;
      if (!m->items.empty()) Json(*m, &d.metadata_json);
      if (d.metadata_json.size() > kMaxEnvoyMetadataBytes)
        Fail(*m, "metadata is " + std::to_string(d.metadata_json.size()) +
                     " bytes as JSON, aliases expanded (at most " + std::to_string(kMaxEnvoyMetadataBytes) +
                     ": every answer that passes the descriptor carries it)");
    }
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
    // By the name envoyproxy/ratelimit files them under, key_value: key
    // `a_b` and key `a` with value `b` are one descriptor there, and a file
    // holding both is refused, so it is here (a file loaded here loads there).
    std::map<std::string, std::pair<std::string, std::string>> seen;
    for (uint32_t i : list.items) {
      const YNode& item = At(i);
      DescriptorNode d = Descriptor(item);
      const std::string composite = CompositeKey(d.key, d.value);
      if (auto [it, fresh] = seen.try_emplace(composite, d.key, d.value); !fresh) {
        const bool alike = it->second == std::pair(d.key, d.value);
        Fail(item, "duplicate descriptor '" + composite + "' at this level" +
                       (alike ? std::string()
                              : " (key '" + it->second.first + "'" +
                                    (it->second.second.empty() ? "" : " value '" + it->second.second + "'") +
                                    " above is named alike: envoyproxy/ratelimit joins key and value with '_')"));
      }
      out->push_back(std::move(d));
    }
  }

  const YamlTree& tree_;
  const std::string& file_;
  size_t descriptors_ = 0;
  mutable size_t json_bytes_ = 0;  // the metadata being written's, so far (Spend)
};

}  // namespace

Result<Domain> ParseEnvoyYaml(std::string_view text, const std::string& file) {
  if (text.size() > kMaxEnvoyFileBytes)
    return Status::InvalidArgument(file + ":0: " + std::to_string(text.size()) + " bytes, more than the " +
                                   std::to_string(kMaxEnvoyFileBytes) + " an Envoy configuration file may hold");
  Result<YamlTree> tree = YamlTree::Parse(text, file,
                                          YamlBounds{.max_nodes = kMaxEnvoyYamlNodes,
                                                     .max_depth = kMaxEnvoyYamlDepth,
                                                     .max_bytes = kMaxEnvoyYamlBytes});
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
  // Read as srv.xml is: a FIFO in the directory is refused, not waited on (the
  // master on SIGHUP, frsd -t); a larger file is refused as it is read.
  return os::ReadTextFile(path, kMaxEnvoyFileBytes);
}

namespace {

// Every file under `dir` (recursively) whose name and whose directories'
// names do not start with '.', as paths. A symbolic link to a file is read
// through; one to a directory is not walked, as envoyproxy/ratelimit's
// loader (a filepath walk) does not. A link to nothing is an error: skipped,
// its domain would answer OK with no limit and nobody would know why.
// `seen`: the directories read so far (device, inode), so that one reached
// twice (two links to it, a link to an ancestor) is read once.
Status ListEnvoyFiles(const std::string& dir, int depth, std::vector<std::string>* out,
                      std::set<std::pair<dev_t, ino_t>>* seen) {
  if (depth > 16) return Status::InvalidArgument("<grpc config> directory " + dir + ": nested deeper than 16 levels");
  struct stat self {};
  if (::stat(dir.c_str(), &self) == 0 && !seen->emplace(self.st_dev, self.st_ino).second) return Status::OK();
  std::vector<std::string> names;
  {
    const os::UniqueDir d = os::OpenDir(dir.c_str());
    if (d == nullptr) return Status::FromErrno("<grpc config> directory " + dir, errno);
    while (dirent* e = ::readdir(d.get())) {
      std::string_view n = e->d_name;
      if (!n.starts_with(".")) names.emplace_back(n);
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    const std::string path = dir + "/" + n;
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) != 0) continue;  // gone since readdir
    if (S_ISDIR(lst.st_mode)) {
      if (Status s = ListEnvoyFiles(path, depth + 1, out, seen); !s.ok()) return s;
      continue;
    }
    struct stat st {};
    if (S_ISLNK(lst.st_mode)) {
      if (::stat(path.c_str(), &st) != 0)
        return Status::FromErrno(path + ": a symbolic link whose target cannot be read", errno);
      // A link to a directory is read through, as a ConfigMap item whose
      // path has a "/" is laid out (team-a -> ..data/team-a): skipped, its
      // domains would answer OK with no limit.
      if (S_ISDIR(st.st_mode)) {
        if (Status s = ListEnvoyFiles(path, depth + 1, out, seen); !s.ok()) return s;
        continue;
      }
    }
    out->push_back(path);
  }
  return Status::OK();
}

}  // namespace

Result<std::string> ReadEnvoyDir(const std::string& dir) {
  std::vector<std::string> paths;
  std::set<std::pair<dev_t, ino_t>> seen;
  if (Status s = ListEnvoyFiles(dir, 0, &paths, &seen); !s.ok()) return s;
  return BundleOfFiles(paths);
}

Result<std::vector<std::string>> ExpandEnvoyPaths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      std::set<std::pair<dev_t, ino_t>> seen;
      if (Status s = ListEnvoyFiles(p, 0, &files, &seen); !s.ok()) return s;
    } else {
      files.push_back(p);  // read (or refused, named) as a file
    }
  }
  return files;
}

namespace {
// A path in the bundle, whose entries it ends with a newline: a name may
// hold one ("a\nb.yaml" is a file of any name), which ended the entry
// there and made the whole bundle unreadable, naming no file. '\n' is
// written "\\n" and '\\' "\\\\"; UnescapeBundlePath gives the name back.
void AppendBundlePath(const std::string& path, std::string* out) {
  for (char c : path) {
    if (c == '\n') out->append("\\n");
    else if (c == '\\') out->append("\\\\");
    else out->push_back(c);
  }
}
std::string UnescapeBundlePath(std::string_view text) {
  std::string path;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      path.push_back(text[i + 1] == 'n' ? '\n' : text[i + 1]);
      ++i;
    } else {
      path.push_back(text[i]);
    }
  }
  return path;
}
}  // namespace

Result<std::string> BundleOfFiles(const std::vector<std::string>& paths) {
  // Each file: "path\n" "length\n" bytes (the path escaped: AppendBundlePath).
  std::string bundle;
  for (const std::string& path : paths) {
    Result<std::string> bytes = ReadEnvoyFile(path);
    if (!bytes.ok()) return bytes.status();
    if (bundle.size() + bytes->size() > kMaxEnvoyBundleBytes)
      return Status::InvalidArgument(path + ":0: the files hold more than the " + std::to_string(kMaxEnvoyBundleBytes) +
                                     " bytes an Envoy configuration may hold in all");
    AppendBundlePath(path, &bundle);
    bundle += "\n" + std::to_string(bytes->size()) + "\n" + bytes.value();
  }
  return bundle;
}

namespace {

// Every descriptor's metadata together, file by file as each is parsed
// (`*total` so far): each is bounded, and so is each file, but a directory
// of many small files whose aliases repeat the largest metadata a
// descriptor may carry came to gigabytes, held by every worker (found by a
// review; checked after the last file, they were built first).
Status CheckMetadataInAll(const Domain& domain, uint64_t* total) {
  const DescriptorNode* last = nullptr;
  const auto walk = [&](const auto& self, const std::vector<DescriptorNode>& nodes) -> void {
    for (const DescriptorNode& n : nodes) {
      if (*total > kMaxEnvoyMetadataTotalBytes) return;
      *total += n.metadata_json.size();
      if (!n.metadata_json.empty()) last = &n;
      self(self, n.children);
    }
  };
  walk(walk, domain.descriptors);
  if (*total <= kMaxEnvoyMetadataTotalBytes || last == nullptr) return Status::OK();
  return Status::InvalidArgument(
      last->file + ":" + std::to_string(last->line) + ": the descriptors' metadata come to more than " +
      std::to_string(kMaxEnvoyMetadataTotalBytes >> 20) + " MiB as JSON in all (every worker holds them)");
}

}  // namespace

Result<EnvoyConfig> ParseEnvoyBundle(std::string_view bundle, bool merge_domains) {
  EnvoyConfig cfg;
  uint64_t metadata_bytes = 0;
  while (!bundle.empty()) {
    const size_t nl1 = bundle.find('\n');
    const size_t nl2 = nl1 == std::string_view::npos ? nl1 : bundle.find('\n', nl1 + 1);
    if (nl2 == std::string_view::npos) return Status::Corruption("the Envoy configuration bundle is damaged");
    const std::string path = UnescapeBundlePath(bundle.substr(0, nl1));
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
    if (Status s = CheckMetadataInAll(d.value(), &metadata_bytes); !s.ok()) return s;
    Domain* same = nullptr;
    for (Domain& other : cfg.domains)
      if (other.name == d->name) same = &other;
    if (same && !merge_domains)
      // Both files named, in the order they are read: which of the two is
      // the stray one is the operator's to say, not the reading order's.
      return Status::InvalidArgument(
          same->file + ":" + std::to_string(same->line) + ": domain '" + d->name +
          "' is configured in two files, here and in " + path + ":" + std::to_string(d->line) +
          " (one file per domain; <grpc merge_domains=\"1\">, and frsctl envoy-config --merge-domains, merge the files "
          "of one domain)");
    if (same) {
      // MERGE_DOMAIN_CONFIG: the later file's descriptors join the domain;
      // one both give is refused, as envoyproxy/ratelimit refuses it.
      for (DescriptorNode& n : d->descriptors) {
        for (const DescriptorNode& o : same->descriptors)
          if (CompositeKey(o.key, o.value) == CompositeKey(n.key, n.value))
            return Status::InvalidArgument(n.file + ":" + std::to_string(n.line) + ": duplicate descriptor '" +
                                           CompositeKey(n.key, n.value) + "' of domain '" + d->name + "', already in " +
                                           o.file);
        same->descriptors.push_back(std::move(n));
      }
    } else {
      cfg.domains.push_back(std::move(d.value()));
    }
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
