// server/tls_stream.h: one connection's TLS, as a transform of bytes in
// memory (OpenSSL over two memory BIOs).
//
// As GrpcSession, it does no I/O: the connection hands it what the worker
// read from the socket (Feed) and takes the plaintext out (Decrypt); the
// plaintext to send goes in (Encrypt) and the records to write come out
// (TakeOutput). So the handshake never blocks the worker: it advances
// with each read that brings its bytes, inside the worker's epoll loop,
// and the worker's deadlines (the request time-out set at accept runs
// until the first call is answered) bound how long it may take. The worker
// still makes exactly one recv per readable turn and one send per flush.
//
// Memory: OpenSSL's buffers for one record each way (released while idle,
// SSL_MODE_RELEASE_BUFFERS), a client certificate chain of at most 32 KB,
// and what was fed and not yet decrypted (at most one read, since the
// connection reads only when it has room for the plaintext).
//
// Thread safety: none; owned by one connection.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "frs/status.h"
#include "server/tls_context.h"

struct ssl_st;
struct bio_st;

namespace frs::server {

class TlsStream {
 public:
  static Result<std::unique_ptr<TlsStream>> Create(std::shared_ptr<const TlsContext> ctx);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Bytes read from the socket.
  void Feed(const char* data, size_t n);
  // Advances the handshake, then decrypts into `room`: the bytes written
  // (0: none ready now; see failed() and closed()).
  size_t Decrypt(std::span<char> room);
  // Fed bytes (or decrypted ones) not yet taken by Decrypt.
  bool HasPendingInput() const;
  // Encrypts all of `plain` (only once handshake_done()).
  bool Encrypt(std::string_view plain);
  // Appends the records to send (handshake, data, alerts) to *out.
  void TakeOutput(std::string* out);
  // Memory BIOs keep the largest buffer they ever held: an empty one past
  // kKeepBioBytes is replaced by a fresh one, so an idle connection holds
  // no read's or answer's worth of memory.
  void Trim();
  static constexpr size_t kKeepBioBytes = 4096;

  bool handshake_done() const { return handshake_done_; }
  // The peer sent bytes: a handshake began (a connection closed before its
  // first byte, a port probe, began none).
  bool began() const { return began_; }
  // The handshake or a record failed (an alert may be in TakeOutput's
  // bytes): send them, then close.
  bool failed() const { return failed_; }
  // The peer sent close_notify.
  bool closed() const { return closed_; }
  // Why it failed, for a log line.
  const std::string& error() const { return error_; }

 private:
  TlsStream() = default;
  void Fail(int rc);

  std::shared_ptr<const TlsContext> ctx_;
  ssl_st* ssl_ = nullptr;
  bio_st* in_ = nullptr;   // owned by ssl_
  bio_st* out_ = nullptr;  // owned by ssl_
  bool handshake_done_ = false;
  bool began_ = false;
  bool failed_ = false;
  bool closed_ = false;
  std::string error_;
};

}  // namespace frs::server
