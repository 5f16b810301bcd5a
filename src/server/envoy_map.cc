#include "server/envoy_map.h"

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "envoy/envoy_config.h"
#include "envoy/envoy_rules.h"
#include "frs/envoy_map.h"
#include "frs/service.h"
#include "os/store_dir.h"
#include "os/text_file.h"
#include "os/whole_file.h"

namespace frs::server {

namespace {

// The whole file, or "" when there is none yet.
// A FIFO or a device in its place is refused, never waited on or read
// without end (os/text_file.h).
Result<std::string> ReadIds(const std::string& path) {
  Result<std::string> text = os::ReadTextFile(path);
  if (!text.ok() && text.status().IsNotFound()) return std::string();
  return text;
}

// Written whole and synced, file and directory: a crash leaves the old table
// or the new one, never a part, and an id once given survives a power cut.
Status WriteIds(const std::string& dir, const std::string& text) {
  auto written = os::WriteFileWhole(os::store_dir::In(dir, os::store_dir::kEnvoyIds), text,
                                    os::WholeFileOptions{.sync_file = true, .sync_dir = true});
  return written.status();
}

}  // namespace

Result<ComposedMap> ComposeEnvoyMap(const SrvConfig& cfg, std::string map_xml, bool persist_ids) {
  ComposedMap out;
  out.map_digest = MapDigest(map_xml);
  if (!cfg.grpc) {
    out.map_text = std::move(map_xml);
    return out;
  }
  Result<std::string> bundle = envoy::ReadEnvoyDir(cfg.grpc_config);
  if (!bundle.ok()) {
    // At the line of the <grpc> that names the directory, as srv.xml's own
    // errors are.
    const std::string at = cfg.Where("grpc") + ": " + bundle.status().message();
    return bundle.status().code() == Status::Code::kIOError ? Status::IOError(at) : Status::InvalidArgument(at);
  }
  Result<envoy::EnvoyConfig> parsed = envoy::ParseEnvoyBundle(bundle.value(), cfg.grpc_merge_domains);
  if (!parsed.ok()) return parsed.status();
  Result<std::string> saved = ReadIds(os::store_dir::In(cfg.store_dir, os::store_dir::kEnvoyIds));
  if (!saved.ok()) return saved.status();
  parsed->ids = envoy::ParseEnvoyIds(saved.value());
  envoy::EnvoyIds ids;
  auto rules = envoy::EnvoyRules::Compile(parsed.value(), &ids);
  if (!rules.ok()) return rules.status();
  Result<std::string> composed = envoy::ComposeMap(map_xml, cfg.map_path, *rules.value());
  if (!composed.ok()) return composed.status();
  const std::string text = envoy::FormatEnvoyIds(ids);
  // Persisted before any process counts under a new id.
  if (persist_ids && text != saved.value())
    if (Status s = WriteIds(cfg.store_dir, text); !s.ok()) return s;
  out.map_text = std::move(composed.value());
  out.envoy_bundle = std::move(bundle.value()) + envoy::BundleIdsEntry(ids);
  // The YAML's limits, not the bizzes that count a descriptor's own limit.
  out.envoy_limits = static_cast<size_t>(std::count_if((*rules)->limits().begin(), (*rules)->limits().end(),
                                                       [](const envoy::CompiledLimit& l) { return !l.is_override; }));
  out.envoy_domains = parsed->domains.size();
  return out;
}

std::string RulesDigest(std::string_view map_text) {
  // The text with comments left out and blanks only where they separate
  // a tag's name and attributes (one space): values in quotes as they are.
  std::string text;
  text.reserve(map_text.size());
  bool in_tag = false, space = false;
  auto blank = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'; };
  for (size_t at = 0; at < map_text.size(); ++at) {
    const char ch = map_text[at];
    if (!in_tag) {
      if (map_text.compare(at, 4, "<!--") == 0) {
        const size_t close = map_text.find("-->", at + 4);
        if (close == std::string_view::npos) break;  // not well-formed: the map was refused before this
        at = close + 2;
      } else if (!blank(ch)) {
        in_tag = ch == '<';
        text.push_back(ch);
      }
      continue;
    }
    if (ch == '"' || ch == '\'') {
      const size_t close = map_text.find(ch, at + 1);
      if (close == std::string_view::npos) break;
      if (space && text.back() != '=') text.push_back(' ');
      space = false;
      text.append(map_text.substr(at, close + 1 - at));
      at = close;
    } else if (blank(ch)) {
      space = true;
    } else {
      if (space && ch != '>' && ch != '/' && ch != '=' && text.back() != '=') text.push_back(' ');
      space = false;
      text.push_back(ch);
      in_tag = ch != '>';
    }
  }
  return MapDigest(text);
}

}  // namespace frs::server

namespace frs {

Result<std::string> ServedMapText(const std::string& srv_xml) {
  Result<SrvConfig> cfg = LoadSrvConfig(srv_xml);
  if (!cfg.ok()) return cfg.status();
  Result<std::string> text = os::ReadTextFile(cfg->map_path);
  if (!text.ok()) return text.status();
  Result<server::ComposedMap> composed =
      server::ComposeEnvoyMap(cfg.value(), std::move(text).value(), /*persist_ids=*/false);
  if (!composed.ok()) return composed.status();
  return std::move(composed->map_text);
}

std::string_view EnvoyPartOf(std::string_view served_map_text) {
  // The last marker: ComposeMap puts it right before map.xml's closing tag,
  // so a copy of the line in a comment of map.xml's bizzes is passed over.
  const size_t at = served_map_text.rfind(envoy::kComposedMarker);
  if (at == std::string_view::npos) return {};
  const size_t end = served_map_text.find("</map", at);  // "</map >" too
  return served_map_text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
}

}  // namespace frs
