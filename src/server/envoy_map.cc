#include "server/envoy_map.h"

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "envoy/envoy_config.h"
#include "envoy/envoy_rules.h"

namespace frs::server {

namespace {

// The whole file, or "" when there is none yet.
Result<std::string> ReadIds(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Written whole: a temp file, fsync, rename, fsync of the directory, so
// that a crash leaves the old table or the new one, never a part.
Status WriteIds(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/" + kEnvoyIdsFile;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("cannot write " + tmp, errno);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::FromErrno("cannot write " + tmp, e);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno("cannot write " + tmp, e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::FromErrno("cannot rename " + tmp, e);
  }
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return Status::OK();
}

}  // namespace

Result<ComposedMap> ComposeEnvoyMap(const SrvConfig& cfg, std::string map_xml, bool persist_ids) {
  ComposedMap out;
  if (!cfg.grpc) {
    out.map_text = std::move(map_xml);
    return out;
  }
  Result<std::string> bundle = envoy::ReadEnvoyDir(cfg.grpc_config);
  if (!bundle.ok()) return bundle.status();
  Result<envoy::EnvoyConfig> parsed = envoy::ParseEnvoyBundle(bundle.value(), cfg.grpc_merge_domains);
  if (!parsed.ok()) return parsed.status();
  Result<std::string> saved = ReadIds(cfg.store_dir + "/" + kEnvoyIdsFile);
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

}  // namespace frs::server
