// envoyproxy/ratelimit's YAML read (envoy/envoy_config.h): bounded in size
// and work while it is parsed, and strict where YAML is lenient.
#include "envoy/envoy_config.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/temp_dir.h"

namespace frs::envoy {
namespace {

// `levels` lists of `fan` descriptors, each list but the innermost made of
// descriptors whose children are one alias of the list below: fan^levels
// descriptor paths from a file of a few hundred bytes.
std::string AliasBomb(int levels, int fan, const std::string& leaf) {
  std::string list;
  for (int level = 0; level < levels; ++level) {
    std::string next = "&l" + std::to_string(level) + " [";
    for (int i = 0; i < fan; ++i) {
      if (i) next += ", ";
      next += "{key: k" + std::to_string(i);
      if (level == 0) next += leaf;
      else next += ", descriptors: " + (i == 0 ? list : "*l" + std::to_string(level - 1));
      next += "}";
    }
    list = next + "]";
  }
  return "domain: d\ndescriptors: " + list + "\n";
}

std::string Message(const Result<Domain>& r) { return r.ok() ? std::string("(accepted)") : r.status().message(); }

TEST(EnvoyYamlBounds, AnAliasBombIsRefusedWhileParsing) {
  const std::string bomb = AliasBomb(6, 8, ", rate_limit: {unit: second, requests_per_unit: 1}");
  ASSERT_LT(bomb.size(), 2000u);
  Result<Domain> r = ParseEnvoyYaml(bomb, "bomb.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r),
            "bomb.yaml:2: the file expands to more than 1000000 YAML nodes (an alias counts the nodes of its anchor "
            "each time it is used)");
}

// Found from outside: 10,000 uses of an alias of a 100 kB scalar under
// `metadata` (11,000 nodes, under the node bound) meant a gigabyte, which
// the loader built and every answer carried. The scalars' expanded bytes are
// bounded as the nodes are, and a descriptor's metadata as the answer
// carries it.
TEST(EnvoyYamlBounds, AliasesOfALargeScalarAndLargeMetadataAreRefused) {
  std::string yaml =
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
      "    metadata:\n      s: &s " +
      std::string(100000, 'x') + "\n      l0: &l0 [";
  for (int i = 0; i < 10; ++i) yaml += i ? ", *s" : "*s";
  yaml += "]\n";
  for (int level = 1; level < 4; ++level) {
    yaml += "      l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += (i ? ", *l" : "*l") + std::to_string(level - 1);
    yaml += "]\n";
  }
  ASSERT_LT(yaml.size(), size_t{110000});
  Result<Domain> r = ParseEnvoyYaml(yaml, "big.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Message(r).find("big.yaml:9: the file expands to more than 16777216 bytes of scalars"), std::string::npos)
      << Message(r);
  // Under that bound, a metadata past 64 KiB as JSON.
  const std::string big =
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
      "    metadata:\n      s: &s " +
      std::string(40000, 'x') + "\n      t: *s\n";
  r = ParseEnvoyYaml(big, "meta.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Message(r).find("meta.yaml:6: metadata is more than 65536 bytes as JSON, aliases expanded"),
            std::string::npos)
      << Message(r);
  // Each file within its bounds, every descriptor's metadata together past
  // 16 MiB (found by a review: many small files came to gigabytes).
  std::string bundle;
  for (const char* domain : {"d1", "d2"}) {
    std::string yaml = std::string("domain: ") + domain + "\ndescriptors:\n  - key: anchor\n    metadata: {s: &s " +
                       std::string(30000, 'x') + "}\n";
    for (int i = 0; i < 150; ++i) yaml += "  - key: k" + std::to_string(i) + "\n    metadata: {t: *s, u: *s}\n";
    ASSERT_TRUE(ParseEnvoyYaml(yaml, std::string(domain) + ".yaml").ok());
    bundle += std::string(domain) + ".yaml\n" + std::to_string(yaml.size()) + "\n" + yaml;
  }
  Result<EnvoyConfig> all = ParseEnvoyBundle(bundle);
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("the descriptors' metadata come to more than 16 MiB as JSON in all"),
            std::string::npos)
      << all.status().message();
}

TEST(EnvoyYamlBounds, DescriptorPathsAreBounded) {
  // Small descriptors: under the node bound, over the descriptor bound.
  Result<Domain> r = ParseEnvoyYaml(AliasBomb(4, 17, ""), "many.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r), "many.yaml:2: more than 65536 descriptors in one file");
}

TEST(EnvoyYamlBounds, NestingIsBounded) {
  std::string deep = "domain: d\ndescriptors: ";
  for (int i = 0; i < 40; ++i) deep += "[{key: a, descriptors: ";
  deep += "[]";
  for (int i = 0; i < 40; ++i) deep += "}]";
  Result<Domain> r = ParseEnvoyYaml(deep + "\n", "deep.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r), "deep.yaml:2: YAML nested deeper than 64 levels");
  // An alias cannot nest past the bound either.
  std::string aliased = "domain: d\ndescriptors: [{key: a, descriptors: &x ";
  for (int i = 0; i < 28; ++i) aliased += "[{key: a, descriptors: ";
  aliased += "[]";
  for (int i = 0; i < 28; ++i) aliased += "}]";
  aliased +=
      "}, {key: b, descriptors: [{key: c, descriptors: [{key: d, descriptors: [{key: e, descriptors: *x}]}]}]}]\n";
  r = ParseEnvoyYaml(aliased, "alias.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r), "alias.yaml:2: YAML nested deeper than 64 levels");
}

TEST(EnvoyYamlBounds, AnAliasInsideItsOwnAnchorIsRefused) {
  Result<Domain> r = ParseEnvoyYaml("domain: d\ndescriptors: &x [{key: a, descriptors: *x}]\n", "loop.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r), "loop.yaml:2: an alias of the node that contains it");
}

TEST(EnvoyYamlBounds, AnAliasUsedWithinTheBoundsIsRead) {
  Result<Domain> r = ParseEnvoyYaml(
      "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &std {unit: minute, requests_per_unit: 7}\n"
      "  - key: b\n    rate_limit: *std\n",
      "ok.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->descriptors.size(), 2u);
  EXPECT_EQ(r->descriptors[1].limit.requests_per_unit, 7u);
  EXPECT_EQ(r->descriptors[1].limit.unit, Unit::kMinute);
}

TEST(EnvoyYamlBounds, ALargeFileIsRefusedBeforeItIsParsed) {
  std::string big = "domain: d\n#" + std::string(kMaxEnvoyFileBytes, 'x') + "\n";
  Result<Domain> r = ParseEnvoyYaml(big, "big.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(Message(r), "big.yaml:0: 4194316 bytes, more than the 4194304 an Envoy configuration file may hold");
  testing::TempDir dir;
  std::ofstream(dir / "big.yaml") << big;
  Result<std::string> read = ReadEnvoyDir(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), dir / "big.yaml" + ":0: larger than 4 MiB");
}

// A FIFO (or a device) would block the reader in open(2) or read(2): the
// master on SIGHUP, frsd -t.
TEST(EnvoyYamlBounds, AFileThatIsNotRegularIsRefusedWithItsName) {
  testing::TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo.yaml").c_str(), 0600), 0);
  Result<std::string> read = ReadEnvoyDir(dir.path());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), dir / "fifo.yaml" + ":0: this is a FIFO, not a regular file");
}

// A ConfigMap item whose path has a "/" is a link to a directory
// (team-a -> ..data/team-a): read through, once, however many ways it is
// reached; skipped, its domain would answer OK with no limit.
TEST(EnvoyYamlBounds, ALinkToADirectoryIsReadThroughOnce) {
  testing::TempDir dir;
  const std::string version = dir / "..2026_12_03";
  ASSERT_TRUE(std::filesystem::create_directories(version + "/team-a"));
  std::ofstream(version + "/team-a/messaging.yaml")
      << "domain: messaging\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";
  std::filesystem::create_directory_symlink("..2026_12_03", dir / "..data");
  std::filesystem::create_directory_symlink("..data/team-a", dir / "team-a");
  std::filesystem::create_directory_symlink("team-a", dir / "also-team-a");  // the same directory again
  std::filesystem::create_directory_symlink(".", version + "/team-a/loop");  // and a loop
  Result<std::string> read = ReadEnvoyDir(dir.path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  Result<EnvoyConfig> cfg = ParseEnvoyBundle(*read, /*merge_domains=*/false);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg->domains.size(), 1u);
  EXPECT_EQ(cfg->domains[0].name, "messaging");
}

// Files of any name are read, a newline or a backslash in it included: a
// newline ended the name's entry in the bundle the master hands on, and the
// whole directory was refused as "the Envoy configuration bundle is
// damaged", naming no file. Its errors name it as it is.
TEST(EnvoyYamlBounds, AFileWhoseNameHoldsANewlineIsRead) {
  testing::TempDir dir;
  std::ofstream(dir / "new\nline.yaml")
      << "domain: nl\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";
  std::ofstream(dir / "back\\slash\\n.yaml")
      << "domain: bs\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 3}\n";
  Result<std::string> read = ReadEnvoyDir(dir.path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  Result<EnvoyConfig> cfg = ParseEnvoyBundle(*read, /*merge_domains=*/false);
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  ASSERT_EQ(cfg->domains.size(), 2u);
  std::set<std::string> files;
  for (const Domain& d : cfg->domains) files.insert(d.file);
  EXPECT_EQ(files, (std::set<std::string>{dir / "new\nline.yaml", dir / "back\\slash\\n.yaml"}));
  std::ofstream(dir / "new\nline.yaml") << "domain: nl\ndescriptors: [\n";
  read = ReadEnvoyDir(dir.path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  cfg = ParseEnvoyBundle(*read, /*merge_domains=*/false);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message().rfind(dir / "new\nline.yaml:", 0), 0u) << cfg.status().message();
}

TEST(EnvoyYamlStrict, DuplicateKeysAreRefusedWithFileLineAndKey) {
  const struct {
    const char* yaml;
    const char* message;
  } cases[] = {
      {"domain: a\ndomain: b\n", "dup.yaml:2: duplicate key 'domain'"},
      {"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1}\n"
       "    rate_limit: {unit: second, requests_per_unit: 9}\n",
       "dup.yaml:5: duplicate key 'rate_limit'"},
      {"domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n      requests_per_unit: 1\n"
       "      unit: second\n",
       "dup.yaml:7: duplicate key 'unit'"},
      {"domain: d\ndescriptors:\n  - {key: a, key: b}\n", "dup.yaml:3: duplicate key 'key'"},
      {"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1, "
       "replaces: [{name: x, name: y}]}\n",
       "dup.yaml:4: duplicate key 'name'"},
  };
  for (const auto& c : cases) {
    Result<Domain> r = ParseEnvoyYaml(c.yaml, "dup.yaml");
    EXPECT_EQ(Message(r), c.message) << c.yaml;
  }
}

TEST(EnvoyYamlStrict, RequestsPerUnitIsDigitsOnly) {
  for (const char* v : {"'5 '", "' 5'", "+5", "0x10", "5.0", "1_000", "-1", "''", "'5'", "\"5\"", "010", "00"}) {
    const std::string yaml =
        std::string(
            "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n      requests_per_unit: ") +
        v + "\n";
    Result<Domain> r = ParseEnvoyYaml(yaml, "n.yaml");
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_NE(Message(r).find("n.yaml:6: requests_per_unit '"), std::string::npos) << Message(r);
  }
  // Upstream's YAML reader refuses a quoted number for this uint32, and
  // reads a leading zero as octal (010 is 8 there): each is named, not
  // taken as the decimal it looks like.
  auto message = [](const char* v) {
    return Message(ParseEnvoyYaml(std::string("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: day\n "
                                              "     requests_per_unit: ") +
                                      v + "\n",
                                  "n.yaml"));
  };
  EXPECT_NE(message("'5'").find("quoted, it is text"), std::string::npos) << message("'5'");
  EXPECT_NE(message("010").find("a leading zero makes it octal"), std::string::npos) << message("010");
  for (const char* v : {"5", "0", "4294967295"}) {
    Result<Domain> r = ParseEnvoyYaml(std::string("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: "
                                                  "day\n      requests_per_unit: ") +
                                          v + "\n",
                                      "n.yaml");
    ASSERT_TRUE(r.ok()) << v << ": " << r.status().ToString();
    EXPECT_EQ(r->descriptors[0].limit.requests_per_unit, std::stoul(v));
  }
}

// FRS's own unit: concurrent: 1..77 places, a lease of 1..65534 s, and
// `lease` nowhere else.
TEST(EnvoyYamlStrict, ConcurrentNeedsPlacesAndALeaseWithinBounds) {
  auto parse = [](const std::string& limit) {
    return ParseEnvoyYaml("domain: d\ndescriptors:\n  - key: a\n    rate_limit: " + limit + "\n", "c.yaml");
  };
  Result<Domain> ok = parse("{unit: concurrent, requests_per_unit: 77, lease: 65534}");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->descriptors[0].limit.requests_per_unit, 77u);
  EXPECT_EQ(ok->descriptors[0].limit.lease_s, 65534u);
  EXPECT_TRUE(ok->descriptors[0].limit.concurrent());
  const std::pair<const char*, const char*> bad[] = {
      {"{unit: concurrent, requests_per_unit: 0, lease: 60}", "requests_per_unit '0' of unit concurrent is not 1..77"},
      {"{unit: concurrent, requests_per_unit: 78, lease: 60}", "is not 1..77"},
      {"{unit: concurrent, requests_per_unit: 3}", "unit concurrent without lease"},
      {"{unit: concurrent, requests_per_unit: 3, lease: 0}", "lease '0' is not 1..65534 seconds"},
      {"{unit: concurrent, requests_per_unit: 3, lease: 65535}", "lease '65535' is not 1..65534 seconds"},
      {"{unit: minute, requests_per_unit: 3, lease: 60}", "lease belongs to unit: concurrent only"},
  };
  for (const auto& [limit, why] : bad) {
    Result<Domain> r = parse(limit);
    ASSERT_FALSE(r.ok()) << limit;
    EXPECT_NE(Message(r).find(why), std::string::npos) << limit << ": " << Message(r);
    EXPECT_EQ(Message(r).rfind("c.yaml:", 0), 0u) << Message(r);
  }
}

// `unlimited: true` as envoyproxy/ratelimit reads it (config_impl.go): a unit
// it knows is refused; anything else beside it is ignored, requests_per_unit
// included (still a number), so upstream's files load unchanged.
TEST(EnvoyYamlStrict, UnlimitedIgnoresWhatUpstreamIgnores) {
  auto parse = [](const std::string& limit) {
    return ParseEnvoyYaml("domain: d\ndescriptors:\n  - key: a\n    rate_limit: " + limit + "\n", "u.yaml");
  };
  for (const char* ok : {"{unlimited: true, requests_per_unit: 5}", "{unlimited: true, unit: unknown}",
                         "{unlimited: true, unit: UNKNOWN, requests_per_unit: 0}", "{unlimited: true, unit: ''}",
                         "{unlimited: true, unit: ~}", "{unlimited: true}"}) {
    Result<Domain> r = parse(ok);
    ASSERT_TRUE(r.ok()) << ok << ": " << r.status().ToString();
    EXPECT_TRUE(r->descriptors[0].unlimited) << ok;
    EXPECT_FALSE(r->descriptors[0].has_limit) << ok;
  }
  const std::pair<const char*, const char*> bad[] = {
      {"{unlimited: true, unit: minute}", "u.yaml:4: an unlimited rate_limit must not give a unit ('minute')"},
      {"{unlimited: true, unit: Day, requests_per_unit: 5}",
       "u.yaml:4: an unlimited rate_limit must not give a unit ('Day')"},
      {"{unlimited: true, requests_per_unit: -1}", "u.yaml:4: requests_per_unit '-1' is not 0..4294967295"},
  };
  for (const auto& [limit, why] : bad) {
    Result<Domain> r = parse(limit);
    ASSERT_FALSE(r.ok()) << limit;
    EXPECT_EQ(Message(r).rfind(why, 0), 0u) << limit << ": " << Message(r);
  }
}

// A value left out names its key's line, not the next one's.
TEST(EnvoyYamlStrict, AValueLeftOutNamesItsKeysLine) {
  EXPECT_EQ(Message(ParseEnvoyYaml("domain:\ndescriptors:\n  - key: a\n", "e.yaml")), "e.yaml:1: an empty domain");
  EXPECT_EQ(Message(ParseEnvoyYaml("domain: d\ndescriptors:\n  - key:\n    value: v\n", "e.yaml")),
            "e.yaml:3: key has no value");
}

TEST(EnvoyYamlStrict, ASecondDocumentIsRefused) {
  Result<Domain> r = ParseEnvoyYaml("domain: a\n---\ndomain: b\n", "two.yaml");
  EXPECT_EQ(Message(r), "two.yaml:2: a second YAML document: a file holds one domain");
  // One document, marked as such, is read.
  r = ParseEnvoyYaml("---\ndomain: a\n...\n", "one.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "a");
}

}  // namespace
}  // namespace frs::envoy
