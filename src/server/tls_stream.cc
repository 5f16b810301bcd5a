#include "server/tls_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <openssl/buffer.h>

#include <climits>

namespace frs::server {

Result<std::unique_ptr<TlsStream>> TlsStream::Create(std::shared_ptr<const TlsContext> ctx) {
  std::unique_ptr<TlsStream> t(new TlsStream());
  t->ctx_ = std::move(ctx);
  t->ssl_ = SSL_new(t->ctx_->ctx());
  if (!t->ssl_) return Status::IOError("TLS: cannot make a session");
  t->in_ = BIO_new(BIO_s_mem());
  t->out_ = BIO_new(BIO_s_mem());
  if (!t->in_ || !t->out_) {
    BIO_free(t->in_);
    BIO_free(t->out_);
    t->in_ = t->out_ = nullptr;
    return Status::IOError("TLS: cannot make a session");
  }
  // An empty memory BIO reports "retry" (WANT_READ), not end of file.
  BIO_set_mem_eof_return(t->in_, -1);
  SSL_set_bio(t->ssl_, t->in_, t->out_);
  SSL_set_accept_state(t->ssl_);
  return t;
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

void TlsStream::Feed(const char* data, size_t n) {
  began_ = began_ || n > 0;
  while (n > 0 && !failed_) {
    const int chunk = static_cast<int>(n > INT_MAX ? INT_MAX : n);
    const int w = BIO_write(in_, data, chunk);
    if (w <= 0) {
      failed_ = true;
      error_ = "out of memory";
      return;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void TlsStream::Fail(int rc) {
  const int err = SSL_get_error(ssl_, rc);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;
  if (err == SSL_ERROR_ZERO_RETURN) {
    closed_ = true;
    return;
  }
  failed_ = true;
  const unsigned long e = ERR_get_error();
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    error_ = buf;
  } else {
    error_ = "TLS error " + std::to_string(err);
  }
  // "certificate verify failed" reads the same for every reason a client
  // certificate is refused: name the one the verification found.
  if (const long v = SSL_get_verify_result(ssl_); v != X509_V_OK) {
    error_ += v == X509_V_ERR_APPLICATION_VERIFICATION ? ": the client certificate names none of <grpc client_names>"
                                                       : std::string(": ") + X509_verify_cert_error_string(v);
  }
  ERR_clear_error();
}

size_t TlsStream::Decrypt(std::span<char> room) {
  if (failed_ || closed_) return 0;
  if (!handshake_done_) {
    const int rc = SSL_do_handshake(ssl_);
    if (rc != 1) {
      Fail(rc);
      return 0;
    }
    handshake_done_ = true;
  }
  if (room.empty()) return 0;
  const int want = static_cast<int>(room.size() > INT_MAX ? INT_MAX : room.size());
  const int rc = SSL_read(ssl_, room.data(), want);
  if (rc > 0) return static_cast<size_t>(rc);
  Fail(rc);
  return 0;
}

bool TlsStream::HasPendingInput() const {
  return !failed_ && !closed_ && (BIO_ctrl_pending(in_) > 0 || SSL_pending(ssl_) > 0);
}

bool TlsStream::Encrypt(std::string_view plain) {
  while (!plain.empty() && !failed_) {
    const int chunk = static_cast<int>(plain.size() > INT_MAX ? INT_MAX : plain.size());
    const int rc = SSL_write(ssl_, plain.data(), chunk);
    if (rc <= 0) {
      Fail(rc);
      return false;
    }
    plain.remove_prefix(static_cast<size_t>(rc));
  }
  return !failed_;
}

namespace {

bool Oversized(BIO* b) {
  BUF_MEM* m = nullptr;
  BIO_get_mem_ptr(b, &m);
  return m != nullptr && m->max > TlsStream::kKeepBioBytes && BIO_ctrl_pending(b) == 0;
}

}  // namespace

void TlsStream::Trim() {
  if (Oversized(in_)) {
    BIO* fresh = BIO_new(BIO_s_mem());
    if (fresh) {
      BIO_set_mem_eof_return(fresh, -1);
      SSL_set0_rbio(ssl_, fresh);  // frees the old one
      in_ = fresh;
    }
  }
  if (Oversized(out_)) {
    BIO* fresh = BIO_new(BIO_s_mem());
    if (fresh) {
      SSL_set0_wbio(ssl_, fresh);
      out_ = fresh;
    }
  }
}

void TlsStream::TakeOutput(std::string* out) {
  const size_t n = BIO_ctrl_pending(out_);
  if (n == 0) return;
  const size_t at = out->size();
  out->resize(at + n);
  const int r = BIO_read(out_, out->data() + at, static_cast<int>(n));
  out->resize(at + (r > 0 ? static_cast<size_t>(r) : 0));
}

}  // namespace frs::server
