// server/connection.h: one client connection as an explicit state machine.
//
// States:
//   kOpen     reading and answering requests (keep-alive, pipelining)
//   kClosing  no further request will be read: the last response is queued
//             (Connection: close, HTTP/1.0, an error, EOF from the peer, or
//             shutdown); the connection closes once the output is sent
//   kLingering the answer to a broken request is sent and our side is shut
//             down; unread request bytes are read and dropped until the
//             peer closes (or a short deadline), because closing a socket
//             with unread input sends a reset that can destroy the answer
//             before the client reads it
//   kClosed   close now, whatever is left (timeout of a stalled reader, I/O
//             error)
//
// Input buffer cursors (in_[0, cap)):
//   [0, req_)        consumed: requests already answered
//   [req_, end_)     the current request's bytes (and pipelined ones behind
//                    it); the parser has consumed [req_, req_ + parser.consumed())
//   [end_, cap)      free space for the next read
// The current request stays contiguous so the parser's offsets (target,
// body) hold; when it is complete, req_ advances past it and the parser is
// reset. When everything is consumed both cursors return to 0 (the common
// case, no copy); otherwise the partial request is moved to the front when
// room runs out, and the buffer doubles up to header + body limits.
//
// Output: out_[sent_, size) is still to be written. Responses are appended in
// request order, so pipelined requests are answered in order. Past a high
// water mark no further request is processed until the client reads
// (backpressure without unbounded memory).
//
// The connection does no I/O itself: the worker reads into ReadSpace() and
// writes PendingOutput(), so the fuzz target drives exactly this code with
// in-memory bytes.
//
// Thread safety: none; owned by one worker.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frs/key.h"
#include "os/unique_fd.h"
#include "server/deadline_list.h"
#include "server/grpc_session.h"
#include "server/handler.h"
#include "server/http_parser.h"
#include "server/replicator.h"
#include "server/tls_stream.h"

namespace frs::server {

struct ConnectionLimits {
  uint32_t max_header_bytes = 16 * 1024;
  uint32_t max_body_bytes = 64 * 1024;
};

class Connection : public DeadlineNode {
 public:
  enum class State : uint8_t { kOpen, kClosing, kLingering, kClosed };
  static constexpr size_t kInitialBuffer = 4096;
  static constexpr size_t kOutputHighWater = 256 * 1024;

  Connection(os::UniqueFd fd, const ConnectionLimits& limits, Handler* handler);
  ~Connection();
  // A connection of the <grpc> listener: its bytes are HTTP/2 frames for
  // `session` (grpc_session.h), not HTTP/1.1 requests. The states, buffers,
  // deadlines and limits stay those described above; every byte read is
  // handed to the session at once, so "a request partly received" is "a
  // stream begun and not answered".
  void UseGrpc(std::unique_ptr<GrpcSession> session);
  // TLS under the connection (the <grpc cert> listener): ReadSpace() and
  // Produced() then take the socket's bytes, which the stream decrypts
  // into the input buffer; PendingOutput() is the records to send. The
  // plaintext side (HTTP/2 session, buffers, limits) is unchanged, and
  // nothing goes out in plaintext: what the session queues before the
  // handshake ends (its SETTINGS) is encrypted when it does.
  void UseTls(std::unique_ptr<TlsStream> tls);
  // The TLS handshake or a record failed, or is not finished (null: none).
  const TlsStream* tls() const { return tls_.get(); }

  int fd() const { return fd_.get(); }
  // The peer's address, for the decision log's "client".
  void set_peer(const IpAddress& peer) {
    peer_ = peer;
    has_peer_ = true;
  }
  const IpAddress* peer() const { return has_peer_ ? &peer_ : nullptr; }
  State state() const { return state_; }

  // --- input
  // Room to read into; empty when no read should happen now.
  std::span<char> ReadSpace();
  // `n` bytes were read into ReadSpace() at `now_ns`.
  void Produced(size_t n, int64_t now_ns);
  // The peer shut down its side: answer what is buffered, then close.
  void PeerClosed();
  // Parses and answers every complete buffered request, in order.
  void Process();

  // --- output
  // Output up to the first answer held for replicas (see HoldsForReplica);
  // with TLS, the records sealed from it.
  std::string_view PendingOutput() const {
    return tls_ ? std::string_view(tls_out_).substr(tls_sent_)
                : std::string_view(out_).substr(sent_, WriteLimit() - sent_);
  }
  void Consumed(size_t n);

  // --- replicas (<cluster replicas="1" replica_mode="sync">)
  // An answer that changed a count is held, with every answer after it,
  // until the other holder of its route has the change: the worker
  // releases the connection once the replicator's SafeThrough() reaches
  // ReplicaTicket(). Null: nothing is held.
  void set_replicator(Replicator* r) { repl_ = r; }
  bool HoldsForReplica() const { return repl_held_; }
  uint64_t ReplicaTicket() const { return repl_ticket_; }
  uint64_t ReplicaLinks() const { return repl_links_; }  // the links whose acknowledgement it waits for
  void ReleaseReplica() {
    repl_held_ = false;
    repl_paused_ = false;
  }
  // Its held answers wait on a replicator a <cluster> reload retired: their
  // tickets are that replicator's, and a request answered now would note
  // its changes in the new one, which no ticket of this connection can say.
  // So nothing more is read or answered until ReleaseReplica or
  // RefuseReplica.
  void PauseForRetiredReplicator() { repl_paused_ = repl_held_; }
  // on_replica_down="refuse": each held answer that changed a count becomes
  // `response` (a complete HTTP 503 without a Connection header), given the
  // Connection header that answer had; the region's other output stays. A
  // gRPC connection closes.
  void RefuseReplica(std::string_view response);

  // --- state for the worker
  bool WantsRead() const;
  bool WantsWrite() const { return tls_ ? tls_sent_ < tls_out_.size() : sent_ < WriteLimit(); }
  // A request is partly received, a response is not fully sent, or the
  // connection lingers: the request timeout applies (else the idle timeout).
  bool Busy() const { return req_ < end_ || grpc_busy_ || WantsWrite() || repl_held_ || state_ == State::kLingering; }
  // Close now.
  bool Done() const {
    return state_ == State::kClosed || (state_ == State::kClosing && !WantsWrite() && !repl_held_ && !linger_);
  }
  // The answer is out; shut our side down and drain (see kLingering).
  bool NeedsLinger() const { return state_ == State::kClosing && !WantsWrite() && !repl_held_ && linger_; }
  void StartLinger() { state_ = State::kLingering; }
  // Lingering after an idle gRPC connection's GOAWAY (no stream under way):
  // a client that reads has it at once, so the slot is held a second at
  // most, not a whole request time-out more for a client that never closes.
  bool LingersBriefly() const { return brief_linger_ && state_ == State::kLingering; }
  // Grows when a request completes or output drains: a busy connection that
  // makes progress gets a fresh request deadline. gRPC: only when a call is
  // answered (output there includes the session's own PING ACKs and
  // WINDOW_UPDATEs, which a client can provoke at will).
  uint64_t progress() const { return progress_; }
  // gRPC: when the oldest stream not yet answered began (the request
  // time-out runs from there, whatever else the connection does); -1: no
  // such stream, or HTTP/1.1.
  // Only while open: a connection closing (a GOAWAY's linger) has its own
  // full time-out from when it began to close.
  int64_t BusySinceNs() const { return grpc_ && state_ == State::kOpen ? grpc_->OldestUnansweredNs() : -1; }
  // Bytes the HTTP/2 session makes the worker hold (GrpcSession::held()).
  size_t GrpcHeld() const { return grpc_ ? grpc_->held() : 0; }
  // gRPC: calls received whole and not yet answered (a bounded number is
  // answered per Process()): process again next turn, without a read.
  // TLS: records fed and not yet decrypted (no room for their plaintext).
  // HTTP/1.1: requests buffered when the client half-closed, left for want
  // of room for their answers (no read event is due for them).
  // Only while open and under the output high-water mark, as Process()
  // works on them: otherwise the worker would come back every loop turn to
  // do nothing (a lingering connection; answers past the mark held for a
  // replica, which no write event releases).
  bool HasBacklog() const {
    return state_ == State::kOpen && !repl_paused_ && OutputBacklog() < kOutputHighWater &&
           ((grpc_ && grpc_->HasBacklog()) || (tls_ && tls_->HasPendingInput()) ||
            (!grpc_ && peer_closed_ && req_ < end_));
  }
  // gRPC: health watches hear what a reload changed (true: output queued).
  bool PollGrpcWatches();

  // Graceful stop: an idle connection closes at once, a busy one after the
  // response to the request in progress.
  void BeginShutdown();
  // The deadline passed: 408 for a partial request, plain close otherwise.
  // True the first time; false when it ends a close an earlier timeout
  // began (its 408 or GOAWAY lingering), which is not another timeout to
  // count. (A close the client asked for, whose answer it never read, is.)
  bool OnTimeout();
  // Answers `response` (a complete HTTP response that says Connection:
  // close) without reading a request, then lingers: our side is shut down
  // and what the client sends is read and dropped, so that the answer
  // reaches it instead of being destroyed by a reset (the worker's
  // connection-limit 503).
  void Refuse(std::string_view response);
  void Abort() { state_ = State::kClosed; }

 private:
  // The request's target without its query once its request line was read
  // (else empty): the door a failure's answer is written for.
  std::string_view PathSoFar() const;
  void Compact();
  void ProcessGrpc();
  size_t WriteLimit() const { return repl_held_ ? repl_from_ : out_.size(); }
  // After answering: hold what was just appended (from `out_before`) when
  // the answer noted changes (`noted_before` is the replicator's count
  // before it).
  void NoteReplica(uint64_t noted_before, size_t out_before);
  // Room in the input buffer (compacted, grown up to max_buffer_).
  std::span<char> PlainSpace();
  void PlainProduced(size_t n, int64_t now_ns);
  // TLS: decrypts what was fed into the input buffer, as room allows.
  void Unseal(int64_t now_ns);
  // TLS: encrypts the plaintext output into tls_out_ (once the handshake is
  // done), with the handshake's and alerts' records.
  void Seal();
  // TLS: one read of records (a full record and its header), shared by the
  // worker's connections: ReadSpace() hands it out, Produced() feeds it.
  static constexpr size_t kRawBuffer = 16 * 1024 + 512;
  static char* RawScratch();
  // Output not yet written: plaintext and, with TLS, records.
  size_t OutputBacklog() const { return out_.size() - sent_ + (tls_out_.size() - tls_sent_); }

  os::UniqueFd fd_;
  Handler* handler_;
  HttpRequestParser parser_;
  size_t max_buffer_;
  std::unique_ptr<char[]> in_;
  size_t cap_ = 0, req_ = 0, end_ = 0;
  std::string out_;
  size_t sent_ = 0;
  State state_ = State::kOpen;
  bool peer_closed_ = false;
  bool shutting_down_ = false;
  bool continue_sent_ = false;
  bool linger_ = false;        // close through kLingering
  bool brief_linger_ = false;  // that linger is brief (LingersBriefly)
  bool timed_out_ = false;     // a deadline has passed once: the next ends the close it began
  int64_t req_start_ns_ = 0;   // first byte of the current request arrived
  int64_t last_read_ns_ = 0;
  uint64_t progress_ = 0;
  IpAddress peer_;
  bool has_peer_ = false;
  std::unique_ptr<GrpcSession> grpc_;
  bool grpc_busy_ = false;  // the session has a stream not yet answered, or a frame begun
  Replicator* repl_ = nullptr;
  bool repl_held_ = false;
  bool repl_paused_ = false;  // PauseForRetiredReplicator
  uint64_t repl_links_ = 0;   // Replicator::TakeTouched() of the held answers
  uint64_t repl_ticket_ = 0;
  size_t repl_from_ = 0;  // out_[repl_from_, ...) is held
  // Each held answer that changed a count: [begin, end) from repl_from_.
  std::vector<std::pair<size_t, size_t>> repl_answers_;
  std::unique_ptr<TlsStream> tls_;
  std::string tls_out_;  // TLS: records to send
  size_t tls_sent_ = 0;
};

}  // namespace frs::server
