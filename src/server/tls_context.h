// server/tls_context.h: the TLS settings of the <grpc> listener, loaded from
// its files (Debian's OpenSSL 3).
//
// One TlsContext is one loaded set of files: the server's certificate chain
// and key, and (mTLS) the CA file that client certificates must chain to and
// the client names allowed. TLS 1.2 and 1.3 only; ALPN "h2" (a client that
// offers ALPN without "h2" is refused in the handshake; one that offers none
// speaks HTTP/2 with prior knowledge, as before). No renegotiation, no
// session tickets or cache (Envoy keeps its connections: a resumption would
// save little, and a cache is memory any client can fill).
//
// Client names (`client_names`): a client certificate is accepted when it
// chains to the CA and, when names are configured, one of them equals
// - a subjectAltName DNS entry (ASCII case-insensitive, no wildcards), or
// - a subjectAltName URI entry (byte for byte: a SPIFFE ID, as Envoy's
//   workload certificates carry), or
// - the subject's common name, only when the certificate has no DNS or URI
//   subjectAltName at all (as RFC 6125 falls back for server names).
// A refused certificate fails the handshake with an alert.
//
// Validity: a certificate past its notAfter (or before its notBefore)
// still loads: refusing it would turn an expired certificate into a server
// that does not start at all, where clients that do not check dates still
// work. Warnings() says so, and frsd logs it at start and at each reload,
// frsd -t prints it, and /metrics publishes the notAfter of the certificate
// every worker serves (frs_tls_certificate_expiry_timestamp_seconds) for an
// alert before the day.
//
// Immutable once loaded; a reload (SIGHUP) loads a new one and swaps it in,
// and connections already made keep theirs (shared_ptr) to their end.
//
// Thread safety: const methods only; shared by one worker's connections.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/srv_config.h"
#include "frs/status.h"

struct ssl_ctx_st;

namespace frs::server {

struct TlsFiles {
  std::string cert;                       // PEM: the server's certificate, then its chain
  std::string key;                        // PEM: its private key
  std::string client_ca;                  // PEM: CA(s) of client certificates; "": none asked for
  std::vector<std::string> client_names;  // allowed client names; empty: any the CA signed
};

// <grpc cert key client_ca client_names> of srv.xml.
inline TlsFiles TlsFilesOf(const SrvConfig& cfg) {
  return TlsFiles{cfg.grpc_tls_cert, cfg.grpc_tls_key, cfg.grpc_tls_client_ca, cfg.grpc_tls_client_names};
}

class TlsContext {
 public:
  // Reads and checks every file (readable, PEM, the key matches the
  // certificate, the CA file loads); an error names the file and what is
  // wrong with it.
  static Result<std::shared_ptr<const TlsContext>> Load(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* ctx() const { return ctx_; }
  const TlsFiles& files() const { return files_; }
  // Whether `cert`'s names (X509*) match client_names as documented above.
  bool NameAllowed(const void* x509) const;
  // The served certificate's validity, unix seconds (its first one: the
  // chain's others are the CAs').
  int64_t not_before() const { return not_before_; }
  int64_t not_after() const { return not_after_; }
  // What is wrong with files that load all the same, one sentence each, at
  // unix time `now`: the certificate expired, not valid yet, or expiring
  // within kSoonDays; the key readable by any user of the machine.
  std::vector<std::string> Warnings(int64_t now) const;
  static constexpr int64_t kSoonDays = 14;

 private:
  TlsContext() = default;
  ssl_ctx_st* ctx_ = nullptr;
  TlsFiles files_;
  int64_t not_before_ = 0, not_after_ = 0;
  unsigned key_mode_ = 0;  // st_mode of the key file as loaded
};

}  // namespace frs::server
