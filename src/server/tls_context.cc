#include "server/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <strings.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <ctime>

namespace frs::server {

namespace {

// OpenSSL's error queue as one sentence (and emptied, so that the next
// failure says its own words).
std::string SslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    // "error:0A00018F:SSL routines::ee key too small": the reason is the last field.
    const char* reason = std::strrchr(buf, ':');
    out += reason && reason[1] ? reason + 1 : buf;
  }
  return out.empty() ? "unknown error" : out;
}

Status Readable(const std::string& path, const char* what) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::FromErrno(std::string("cannot read the ") + what + " " + path, errno);
  std::fclose(f);
  return Status::OK();
}

// Days from 1970-01-01 to a proleptic Gregorian date, in 64 bits (timegm
// would wrap past 2038 where time_t is 32 bits): years counted in eras of
// 400 years (146,097 days), March first so that February's leap day ends
// a year.
int64_t DaysSinceEpoch(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// An ASN.1 time as unix seconds; 0 when it does not convert (and then no
// warning and no metric is made of it).
int64_t UnixOf(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  const int64_t days = DaysSinceEpoch(int64_t{tm.tm_year} + 1900, tm.tm_mon + 1, tm.tm_mday);
  const int64_t s = days * 86400 + tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
  return s == 0 ? 1 : s;
}

std::string UtcText(int64_t unix) {
  const std::time_t t = static_cast<std::time_t>(unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// ALPN: "h2" or nothing. A client offering only other protocols (http/1.1)
// is refused in the handshake with no_application_protocol, which says
// more than an HTTP/2 preface error after it.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
               void*) {
  static const unsigned char kH2[] = {2, 'h', '2'};
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kH2, sizeof kH2, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// The chain's own verdict stands; on the client's certificate itself
// (depth 0) the configured names are checked too.
int VerifyClient(int preverify_ok, X509_STORE_CTX* store) {
  if (!preverify_ok || X509_STORE_CTX_get_error_depth(store) != 0) return preverify_ok;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  const auto* tls = static_cast<const TlsContext*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
  if (tls && !tls->NameAllowed(X509_STORE_CTX_get_current_cert(store))) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  return 1;
}

std::string Text(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<size_t>(ASN1_STRING_length(s)));
}

}  // namespace

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

bool TlsContext::NameAllowed(const void* x509) const {
  if (files_.client_names.empty()) return true;
  auto* cert = static_cast<X509*>(const_cast<void*>(x509));
  bool has_san = false;
  bool ok = false;
  if (auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names) && !ok; ++i) {
      const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
      if (g->type != GEN_DNS && g->type != GEN_URI) continue;
      has_san = true;
      const std::string v = Text(g->type == GEN_DNS ? g->d.dNSName : g->d.uniformResourceIdentifier);
      // An embedded NUL would let "good.example\0.evil" pass a C compare.
      if (v.find('\0') != std::string::npos) continue;
      for (const std::string& want : files_.client_names) {
        if (g->type == GEN_DNS ? want.size() == v.size() && strncasecmp(want.c_str(), v.c_str(), v.size()) == 0
                               : want == v) {
          ok = true;
          break;
        }
      }
    }
    GENERAL_NAMES_free(names);
  }
  if (ok || has_san) return ok;
  // One common name, or none of them: with several, which one is the
  // client's is every checker's own rule (OpenSSL's host check takes any,
  // Go's parser the last), and "/CN=attacker/CN=envoy-client" passed for
  // envoy-client here (found from outside). A CA that signs such a subject
  // for a client can give it a subjectAltName instead.
  const X509_NAME* subject = X509_get_subject_name(cert);
  int last = -1, count = 0;
  for (int i = -1; (i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) >= 0; ++count) last = i;
  if (count != 1) return false;
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, last)));
  if (n < 0) return false;
  const std::string cn(reinterpret_cast<const char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  if (cn.find('\0') != std::string::npos) return false;
  for (const std::string& want : files_.client_names)
    if (want == cn) return true;
  return false;
}

Result<std::shared_ptr<const TlsContext>> TlsContext::Load(const TlsFiles& files) {
  ERR_clear_error();
  if (Status s = Readable(files.cert, "certificate"); !s.ok()) return s;
  if (Status s = Readable(files.key, "key"); !s.ok()) return s;
  if (!files.client_ca.empty())
    if (Status s = Readable(files.client_ca, "client CA file"); !s.ok()) return s;
  std::shared_ptr<TlsContext> t(new TlsContext());
  t->files_ = files;
  t->ctx_ = SSL_CTX_new(TLS_server_method());
  if (!t->ctx_) return Status::IOError("TLS: " + SslErrors());
  SSL_CTX* c = t->ctx_;
  SSL_CTX_set_app_data(c, t.get());
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION |
                             SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_num_tickets(c, 0);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  // Buffers of an idle connection given back (16 KB and more each).
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS);
  // A client's certificate chain bounded (OpenSSL's default is 100 KB).
  SSL_CTX_set_max_cert_list(c, 32 * 1024);
  // TLS 1.2: only the AEAD suites with forward secrecy HTTP/2 allows (RFC
  // 9113 section 9.2.2); TLS 1.3's suites are all allowed.
  if (SSL_CTX_set_cipher_list(c, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1)
    return Status::IOError("TLS: cannot set the cipher list: " + SslErrors());
  SSL_CTX_set_alpn_select_cb(c, SelectAlpn, nullptr);
  if (SSL_CTX_use_certificate_chain_file(c, files.cert.c_str()) != 1)
    return Status::InvalidArgument("the certificate " + files.cert + " does not load: " + SslErrors());
  if (SSL_CTX_use_PrivateKey_file(c, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL compares the key with the certificate as it loads it.
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    return Status::InvalidArgument("the key " + files.key +
                                   (mismatch ? " does not match the certificate " + files.cert : " does not load") +
                                   ": " + SslErrors());
  }
  if (SSL_CTX_check_private_key(c) != 1)
    return Status::InvalidArgument("the key " + files.key + " does not match the certificate " + files.cert + ": " +
                                   SslErrors());
  if (const X509* leaf = SSL_CTX_get0_certificate(c)) {
    t->not_before_ = UnixOf(X509_get0_notBefore(leaf));
    t->not_after_ = UnixOf(X509_get0_notAfter(leaf));
  }
  if (struct stat st{}; ::stat(files.key.c_str(), &st) == 0) t->key_mode_ = static_cast<unsigned>(st.st_mode);
  if (!files.client_ca.empty()) {
    if (SSL_CTX_load_verify_locations(c, files.client_ca.c_str(), nullptr) != 1)
      return Status::InvalidArgument("the client CA file " + files.client_ca + " does not load: " + SslErrors());
    // The CA names sent in CertificateRequest: the client picks a matching certificate.
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str());
    if (!names)
      return Status::InvalidArgument("the client CA file " + files.client_ca + " holds no certificate: " + SslErrors());
    SSL_CTX_set_client_CA_list(c, names);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, VerifyClient);
    SSL_CTX_set_verify_depth(c, 8);
  } else if (!files.client_names.empty()) {
    return Status::InvalidArgument("client names need a client CA file to check certificates against");
  }
  ERR_clear_error();
  return std::shared_ptr<const TlsContext>(std::move(t));
}

std::vector<std::string> TlsContext::Warnings(int64_t now) const {
  std::vector<std::string> out;
  const std::string& cert = files_.cert;
  if (not_after_ != 0 && now >= not_after_) {
    out.push_back("the certificate " + cert + " expired at " + UtcText(not_after_) +
                  ": a client that checks it (Envoy does) refuses every handshake; put a renewed one in its place "
                  "and reload (SIGHUP)");
  } else if (not_before_ != 0 && now < not_before_) {
    out.push_back("the certificate " + cert + " is not valid before " + UtcText(not_before_) +
                  ": a client that checks it refuses every handshake until then (or this machine's clock is wrong)");
  } else if (not_after_ != 0 && not_after_ - now < kSoonDays * 86400) {
    const int64_t days = (not_after_ - now) / 86400;
    const std::string in = days == 0 ? "less than a day" : days == 1 ? "1 day" : std::to_string(days) + " days";
    out.push_back("the certificate " + cert + " expires at " + UtcText(not_after_) + " (in " + in +
                  "): renew it and reload (SIGHUP) before then");
  }
  // Group read is Debian's way (/etc/ssl/private, group ssl-cert); others not.
  if ((key_mode_ & 007) != 0) {
    char octal[16];
    std::snprintf(octal, sizeof octal, "%04o", key_mode_ & 07777);
    out.push_back("the key " + files_.key + " has mode " + octal +
                  ": any user of this machine may read it and pose as this server; chmod 600 " + files_.key +
                  " (or 640 with a group of its readers, as Debian's ssl-cert)");
  }
  return out;
}

}  // namespace frs::server
