// <grpc>: where Envoy's rate limit service listens, its TLS, and
// envoyproxy/ratelimit's settings (docs/configuration.md, docs/integrations.md).
#include <charconv>

#include "base/cidr.h"
#include "config/srv_elements.h"

namespace frs::srv {
namespace {

// unix="PATH" mode="0660": a Unix socket in place of listen="host:port".
Status SetGrpcUnixSocket(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  if (n.attribute("unix") && n.attribute("listen"))
    return ctx.Error(n, "<grpc> takes listen=\"host:port\" or unix=\"PATH\", not both");
  if (n.attribute("unix")) {
    const std::string path = n.attribute("unix").value();
    // sun_path holds 108 bytes with its terminating NUL.
    if (path.empty() || path.size() > 107)
      return ctx.Error(n, "<grpc unix> must be the socket's path (at most 107 bytes), not \"" + path + "\"");
    cfg.grpc_unix = ctx.Resolve(path);
    if (cfg.grpc_unix.size() > 107)
      return ctx.Error(n,
                       "<grpc unix> resolves to " + cfg.grpc_unix + ", longer than a socket path may be (107 bytes)");
  }
  if (n.attribute("mode")) {
    const std::string text = n.attribute("mode").value();
    uint64_t mode = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mode, 8);
    if (cfg.grpc_unix.empty() || text.empty() || ec != std::errc() || end != text.data() + text.size() || mode > 0777)
      return ctx.Error(n, "<grpc mode> is the Unix socket's permissions in octal (0660), with unix=\"PATH\", not \"" +
                              text + "\"");
    cfg.grpc_unix_mode = static_cast<uint32_t>(mode);
  }
  return Status::OK();
}

// cert="PEM" key="PEM" client_ca="PEM" client_names="a,b".
Status SetGrpcTls(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  if (n.attribute("cert")) cfg.grpc_tls_cert = ctx.Resolve(n.attribute("cert").value());
  if (n.attribute("key")) cfg.grpc_tls_key = ctx.Resolve(n.attribute("key").value());
  if (n.attribute("client_ca")) cfg.grpc_tls_client_ca = ctx.Resolve(n.attribute("client_ca").value());
  if (cfg.grpc_tls_cert.empty() != cfg.grpc_tls_key.empty() || (n.attribute("cert") && !*n.attribute("cert").value()) ||
      (n.attribute("key") && !*n.attribute("key").value()))
    return ctx.Error(n, "<grpc cert> and <grpc key> go together: the server's certificate and its private key (PEM)");
  if (n.attribute("client_ca") && (cfg.grpc_tls_cert.empty() || !*n.attribute("client_ca").value()))
    return ctx.Error(n, "<grpc client_ca> (a required client certificate) needs TLS: cert=\"...\" key=\"...\"");
  if (n.attribute("client_names")) {
    cfg.grpc_tls_client_names = Words(n.attribute("client_names").value());
    if (cfg.grpc_tls_client_names.empty() || cfg.grpc_tls_client_ca.empty())
      return ctx.Error(n, "<grpc client_names> lists the client certificate names allowed, and needs client_ca");
  }
  return Status::OK();
}

// listen="host:port" (an IPv6 host in brackets), unless a Unix socket was named.
Status SetGrpcListen(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  cfg.grpc = true;
  if (!cfg.grpc_unix.empty()) {
    cfg.grpc_host.clear();
    cfg.grpc_port = 0;
    return Status::OK();
  }
  const std::string listen = n.attribute("listen").value();
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  IpAddress ip;
  uint64_t port = 0;
  const std::string port_text = colon == std::string::npos ? std::string() : listen.substr(colon + 1);
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (!IpAddress::Parse(host, &ip) || port_text.empty() || ec != std::errc() ||
      end != port_text.data() + port_text.size() || port > 65535)
    return ctx.Error(n, "<grpc listen> must be host:port (an IP address; port 0: the kernel chooses), not \"" + listen +
                            "\"");
  cfg.grpc_host = host;
  cfg.grpc_port = static_cast<uint16_t>(port);
  return Status::OK();
}

// envoyproxy/ratelimit's settings (its environment variables), each an
// attribute: the switches 0|1, the header names HTTP tokens, the near-limit
// ratio a share from 0 to 1.
Status SetGrpcEnvoySettings(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  const struct {
    const char* attr;
    bool SrvConfig::*field;
  } switches[] = {{"shadow", &SrvConfig::grpc_shadow},
                  {"quota", &SrvConfig::grpc_quota},
                  {"metadata", &SrvConfig::grpc_metadata},
                  {"stop_increment_when_over", &SrvConfig::grpc_stop_increment},
                  {"healthy_with_config", &SrvConfig::grpc_healthy_with_config},
                  {"merge_domains", &SrvConfig::grpc_merge_domains}};
  for (const auto& sw : switches) {
    uint64_t v = cfg.*sw.field ? 1 : 0;
    if (Status s = ctx.UInt(n, sw.attr, 0, 1, &v); !s.ok()) return s;
    cfg.*sw.field = v == 1;
  }
  const struct {
    const char* attr;
    std::string SrvConfig::*field;
  } header_names[] = {{"limit_header", &SrvConfig::grpc_limit_header},
                      {"remaining_header", &SrvConfig::grpc_remaining_header},
                      {"reset_header", &SrvConfig::grpc_reset_header}};
  for (const auto& h : header_names) {
    if (!n.attribute(h.attr)) continue;
    const std::string name = n.attribute(h.attr).value();
    const bool token = !name.empty() && name.size() <= 128 &&
                       name.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                           "!#$%&'*+-.^_`|~") == std::string::npos;
    if (!token)
      return ctx.Error(n, std::string("<grpc ") + h.attr +
                              "> must be an HTTP header name (1..128 token characters), not \"" + name + "\"");
    cfg.*h.field = name;
  }
  if (n.attribute("near_limit_ratio")) {
    const std::string text = n.attribute("near_limit_ratio").value();
    if (!ParseShare(text, &cfg.grpc_near_limit_ratio))
      return ctx.Error(n,
                       "<grpc near_limit_ratio> is a share of the limit from 0 to 1 (0.8 is envoyproxy/"
                       "ratelimit's NEAR_LIMIT_RATIO default), not \"" +
                           text + "\"");
  }
  return Status::OK();
}

}  // namespace

Status SetGrpc(const Context& ctx, const pugi::xml_node& n) {
  SrvConfig& cfg = ctx.cfg();
  if (Status s = SetGrpcUnixSocket(ctx, n); !s.ok()) return s;
  if (Status s = SetGrpcTls(ctx, n); !s.ok()) return s;
  if (Status s = SetGrpcListen(ctx, n); !s.ok()) return s;
  const std::string dir = n.attribute("config").value();
  if (dir.empty()) return ctx.Error(n, "<grpc config> must name the directory of envoyproxy/ratelimit YAML files");
  cfg.grpc_config = ctx.Resolve(dir);
  uint64_t v = 0;
  if (Status s = ctx.UInt(n, "headers", 0, 1, &v); !s.ok()) return s;
  cfg.grpc_headers = v == 1;
  v = cfg.grpc_max_streams;
  if (Status s = ctx.UInt(n, "streams", 1, 1000, &v); !s.ok()) return s;
  cfg.grpc_max_streams = static_cast<uint32_t>(v);
  v = cfg.grpc_buffered_bytes;
  if (Status s = ctx.UInt(n, "buffered_bytes", uint64_t{1} << 20, uint64_t{64} << 30, &v); !s.ok()) return s;
  cfg.grpc_buffered_bytes = v;
  return SetGrpcEnvoySettings(ctx, n);
}

}  // namespace frs::srv
