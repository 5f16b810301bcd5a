#include "server/connection.h"

#include <cstring>
#include <utility>

namespace frs::server {

namespace {
constexpr size_t kMinReadRoom = 2048;
constexpr size_t kShrinkOutputAbove = 1 << 20;
}  // namespace

Connection::Connection(os::UniqueFd fd, const ConnectionLimits& limits, Handler* handler)
    : fd_(std::move(fd)),
      handler_(handler),
      parser_(limits.max_header_bytes, limits.max_body_bytes),
      // Room for one maximal request plus the start of the next.
      max_buffer_(size_t{limits.max_header_bytes} + limits.max_body_bytes + 4096),
      in_(std::make_unique<char[]>(kInitialBuffer)),
      cap_(kInitialBuffer) {}

Connection::~Connection() = default;

void Connection::UseGrpc(std::unique_ptr<GrpcSession> session) {
  grpc_ = std::move(session);
  grpc_->Drain(&out_);  // the server's SETTINGS go first
}

void Connection::UseTls(std::unique_ptr<TlsStream> tls) { tls_ = std::move(tls); }

char* Connection::RawScratch() {
  // One per worker (a worker is one thread): the socket's bytes are fed to
  // the connection's TLS stream as soon as they are read, so no connection
  // keeps a read buffer of its own while idle.
  static thread_local char raw[kRawBuffer];
  return raw;
}

void Connection::Seal() {
  if (!tls_) return;
  if (tls_->handshake_done() && !tls_->failed()) {
    // A record at a time, so that the stream's output buffer never holds
    // more than one record's worth.
    // Answers held for replicas stay plaintext until they are released.
    const size_t limit = WriteLimit();
    for (size_t at = sent_; at < limit && !tls_->failed();) {
      const size_t n = std::min(limit - at, kRawBuffer - 512);
      tls_->Encrypt(std::string_view(out_).substr(at, n));
      tls_->TakeOutput(&tls_out_);
      at += n;
    }
    if (repl_held_) {
      out_.erase(0, limit);
      repl_from_ = 0;
    } else {
      out_.clear();
      if (out_.capacity() > kShrinkOutputAbove) out_.shrink_to_fit();
    }
    sent_ = 0;
  }
  tls_->TakeOutput(&tls_out_);
  tls_->Trim();
  if (tls_->failed() && state_ != State::kClosed) {
    // The alert (if any) goes out, then the connection closes; the
    // plaintext that was not sealed never will be.
    state_ = State::kClosing;
    linger_ = false;
  }
}

void Connection::Unseal(int64_t now_ns) {
  while (state_ == State::kOpen && OutputBacklog() < kOutputHighWater) {
    const bool shaking = !tls_->handshake_done();
    // Into the room the buffer has, never growing it: the session takes
    // any piece of its input, and a record not taken whole waits in the
    // stream (Process() hands the buffer over and decrypts the rest).
    Compact();
    const size_t n = tls_->Decrypt({in_.get() + end_, cap_ - end_});
    if (n > 0) PlainProduced(n, now_ns);
    // The client's Finished and its first frames often come in one read:
    // on to them once the handshake is done.
    else if (!shaking || !tls_->handshake_done()) break;
  }
  if (tls_->closed()) PeerClosed();
}

void Connection::ProcessGrpc() {
  const uint64_t noted = repl_ != nullptr ? repl_->noted() : 0;
  if (state_ == State::kOpen && (req_ < end_ || grpc_->HasBacklog()) && OutputBacklog() < kOutputHighWater) {
    const uint64_t before = grpc_->answered();
    grpc_->set_peer(has_peer_ ? &peer_ : nullptr);
    // A failed session (false) has queued its GOAWAY: Finished() below
    // closes the connection once it is out.
    grpc_->Receive(std::string_view(in_.get() + req_, end_ - req_), last_read_ns_);
    req_ = end_ = 0;
    progress_ += grpc_->answered() - before;
  }
  // A client that ended its side with a request half sent can never finish
  // it: without this its connection (and the bytes its streams declared)
  // stayed until the request time-out, as a closed socket's slot.
  // Only once every byte it sent is in the session: a turn that could not
  // take input (output backed up, TLS records still sealed) keeps them.
  if (peer_closed_ && req_ == end_ && (!tls_ || !tls_->HasPendingInput())) grpc_->PeerEnded();
  if (state_ == State::kOpen && (peer_closed_ || shutting_down_) && !grpc_->HasOpenStreams()) {
    if (!peer_closed_) grpc_->Shutdown();
    state_ = State::kClosing;
  }
  const size_t out_before = out_.size();
  grpc_->Drain(&out_);
  // An answer that changed a count waits for the other holder (sync
  // replicas), and with it every frame drained after it.
  if (repl_ != nullptr) NoteReplica(noted, out_before);
  grpc_busy_ = grpc_->HasOpenStreams() || grpc_->MidFrame();
  if (state_ == State::kOpen && grpc_->Finished()) {
    state_ = State::kClosing;
    // A connection error's GOAWAY says why: closed with the client's bytes
    // unread, the kernel would reset the connection and the client might
    // never read it. Our side is shut and the rest drained instead, as after
    // an HTTP/1.1 refusal.
    if (grpc_->Failed()) linger_ = !peer_closed_;
  }
}

bool Connection::WantsRead() const {
  if (state_ == State::kLingering) return true;
  return state_ == State::kOpen && !peer_closed_ && !repl_paused_ && OutputBacklog() < kOutputHighWater;
}

void Connection::Compact() {
  if (req_ == end_) {
    req_ = end_ = 0;
    return;
  }
  if (req_ > 0 && cap_ - end_ < kMinReadRoom) {
    std::memmove(in_.get(), in_.get() + req_, end_ - req_);
    end_ -= req_;
    req_ = 0;
  }
}

std::span<char> Connection::ReadSpace() {
  if (state_ == State::kLingering) return {in_.get(), cap_};  // read to drop
  if (!WantsRead()) return {};
  if (tls_) return {RawScratch(), kRawBuffer};
  return PlainSpace();
}

std::span<char> Connection::PlainSpace() {
  Compact();
  if (cap_ - end_ < kMinReadRoom && cap_ < max_buffer_) {
    size_t ncap = std::min(max_buffer_, cap_ * 2);
    auto nbuf = std::make_unique<char[]>(ncap);
    std::memcpy(nbuf.get(), in_.get() + req_, end_ - req_);
    end_ -= req_;
    req_ = 0;
    in_ = std::move(nbuf);
    cap_ = ncap;
  }
  return {in_.get() + end_, cap_ - end_};
}

void Connection::Produced(size_t n, int64_t now_ns) {
  if (n == 0 || state_ == State::kLingering) return;
  if (tls_) {
    last_read_ns_ = now_ns;
    tls_->Feed(RawScratch(), n);
    Unseal(now_ns);
    Seal();  // the handshake's records, an alert
    return;
  }
  PlainProduced(n, now_ns);
}

void Connection::PlainProduced(size_t n, int64_t now_ns) {
  if (req_ == end_) req_start_ns_ = now_ns;
  last_read_ns_ = now_ns;
  end_ += n;
}

void Connection::PeerClosed() {
  peer_closed_ = true;
  if (state_ == State::kLingering) state_ = State::kClosed;
}

void Connection::Process() {
  if (repl_paused_) return;
  if (grpc_) {
    ProcessGrpc();
    // Records left undecrypted for want of room: a buffer at a time, all of
    // one read (at most 16.5 KB) before the turn ends.
    while (tls_ && tls_->HasPendingInput() && state_ == State::kOpen && req_ == end_ &&
           OutputBacklog() < kOutputHighWater) {
      Unseal(last_read_ns_);
      if (req_ == end_) break;  // nothing came of it
      ProcessGrpc();
    }
    Seal();
    return;
  }
  while (state_ == State::kOpen && req_ < end_ && OutputBacklog() < kOutputHighWater) {
    HttpRequestParser::Outcome o = parser_.Feed(in_.get() + req_, end_ - req_);
    if (o == HttpRequestParser::Outcome::kNeedMore) {
      const HttpHead& h = parser_.head();
      if (parser_.header_done() && h.expect_continue && !continue_sent_ && h.version >= 11) {
        out_.append("HTTP/1.1 100 Continue\r\n\r\n");
        continue_sent_ = true;
      }
      break;
    }
    if (o == HttpRequestParser::Outcome::kError) {
      // The framing is lost: answer and close, never guess where the next
      // request starts.
      handler_->HandleFailure(parser_.error_status(), parser_.error_message(), req_start_ns_, &out_, PathSoFar());
      state_ = State::kClosing;
      linger_ = !peer_closed_;
      break;
    }
    bool keep = parser_.head().keep_alive && !shutting_down_;
    const uint64_t noted = repl_ != nullptr ? repl_->noted() : 0;
    const size_t out_before = out_.size();
    keep = handler_->Handle(parser_.head(), in_.get() + req_, keep, req_start_ns_, &out_, has_peer_ ? &peer_ : nullptr);
    if (repl_ != nullptr) NoteReplica(noted, out_before);
    req_ += parser_.consumed();
    parser_.Reset();
    continue_sent_ = false;
    ++progress_;
    // Pipelined bytes behind it arrived with the last read.
    req_start_ns_ = last_read_ns_;
    if (!keep) state_ = State::kClosing;
  }
  // Nothing more can arrive (EOF) or be accepted (shutdown, idle). After an
  // EOF, requests already buffered are still answered: the loop above
  // stops at the output high-water mark with whole requests left, and
  // only a request cut short by the EOF is dropped.
  const bool paused = req_ < end_ && OutputBacklog() >= kOutputHighWater;
  if (state_ == State::kOpen && (peer_closed_ || shutting_down_) && (req_ == end_ || (peer_closed_ && !paused)))
    state_ = State::kClosing;
  if (req_ == end_) req_ = end_ = 0;
}

bool Connection::PollGrpcWatches() {
  if (!grpc_ || !grpc_->HasWatches() || state_ != State::kOpen) return false;
  grpc_->PollWatches();
  grpc_->Drain(&out_);
  Seal();
  return WantsWrite();
}

void Connection::NoteReplica(uint64_t noted_before, size_t out_before) {
  const uint64_t links = repl_->TakeTouched();
  if (repl_->sync() && repl_->noted() != noted_before) {
    if (!repl_held_) {
      repl_held_ = true;
      repl_from_ = out_before;
      repl_answers_.clear();
      repl_links_ = 0;
    }
    repl_ticket_ = repl_->noted();
    repl_links_ |= links;
  }
  // Where each answer that changed a count lies, from the held region's
  // start (which TLS moves): a refusal replaces these and nothing else of
  // the region (a query's or a health check's answer, which changed
  // nothing, goes as it was; a HEAD's has no body, which a 503 would add).
  if (repl_held_ && !grpc_ && repl_->noted() != noted_before)
    repl_answers_.push_back({out_before - repl_from_, out_.size() - repl_from_});
}

namespace {

// The Connection header line of an answer of ours ("" when it has none):
// handler_response.cc writes "close", or "keep-alive" to an HTTP/1.0 client.
std::string_view ConnectionLine(std::string_view answer) {
  const size_t head = answer.find("\r\n\r\n");
  const std::string_view h = answer.substr(0, head == std::string_view::npos ? answer.size() : head + 2);
  for (std::string_view line :
       {std::string_view("\r\nConnection: close\r\n"), std::string_view("\r\nConnection: keep-alive\r\n")})
    if (h.find(line) != std::string_view::npos) return line.substr(2);
  return {};
}

}  // namespace

void Connection::RefuseReplica(std::string_view response) {
  if (!repl_held_) return;
  repl_held_ = false;
  repl_paused_ = false;
  if (grpc_) {
    // Its frames cannot be taken back one stream at a time: the client sees
    // the connection fail, as Envoy's failure_mode expects of a lost service.
    state_ = State::kClosed;
    return;
  }
  // Only the answers that changed a count become 503s, each with the
  // Connection header it had (a close, or an HTTP/1.0 keep-alive): the rest
  // of the region, a 100 Continue, a framing error's answer or a time-out's
  // 408 among them, goes as it was.
  const std::string held = out_.substr(repl_from_);
  out_.resize(repl_from_);
  const size_t head = response.find("\r\n\r\n");
  size_t at = 0;
  for (const auto& [begin, end] : repl_answers_) {
    out_.append(held, at, begin - at);
    const std::string_view line = ConnectionLine(std::string_view(held).substr(begin, end - begin));
    if (line.empty() || head == std::string_view::npos) {
      out_.append(response);
    } else {
      out_.append(response.substr(0, head + 2));
      out_.append(line);
      out_.append(response.substr(head + 2));
    }
    at = end;
  }
  out_.append(held, at);
  repl_answers_.clear();
}

void Connection::Consumed(size_t n) {
  if (tls_) {
    tls_sent_ += n;
    if (tls_sent_ == tls_out_.size()) {
      tls_out_.clear();
      tls_sent_ = 0;
      if (tls_out_.capacity() > kShrinkOutputAbove) tls_out_.shrink_to_fit();
    }
    return;
  }
  sent_ += n;
  if (n > 0 && !grpc_) ++progress_;  // gRPC: answers only (progress())
  if (sent_ == out_.size()) {
    out_.clear();
    sent_ = 0;
    if (out_.capacity() > kShrinkOutputAbove) out_.shrink_to_fit();
  }
}

void Connection::BeginShutdown() {
  shutting_down_ = true;
  if (grpc_) {
    // GOAWAY now; streams open are still answered (ProcessGrpc).
    if (state_ == State::kOpen) grpc_->Shutdown();
    if (state_ == State::kOpen && !grpc_->HasOpenStreams()) state_ = State::kClosing;
    grpc_->Drain(&out_);
    Seal();
    return;
  }
  if (state_ == State::kOpen && req_ == end_) state_ = State::kClosing;
}

void Connection::Refuse(std::string_view response) {
  out_.append(response);
  state_ = State::kClosing;
  linger_ = !peer_closed_;
}

bool Connection::OnTimeout() {
  const bool first = !std::exchange(timed_out_, true);
  if (grpc_) {
    // A stream left unfinished, or an idle connection: GOAWAY, then close.
    if (state_ == State::kOpen) {
      grpc_->Terminate(grpc_busy_ ? 0x1 /* PROTOCOL_ERROR */ : 0x0);
      grpc_->Drain(&out_);
      Seal();
      state_ = State::kClosing;
      // The GOAWAY read before the close (above): a client may be sending,
      // a stream's rest or, on an idle connection, the call it makes just
      // as the time-out passes; closed with that unread, the kernel would
      // reset the connection and the GOAWAY could be lost, and the client
      // would not know its call was never processed. A TLS handshake never
      // finished closes now: nothing could be sealed.
      linger_ = !peer_closed_ && (!tls_ || tls_->handshake_done());
      brief_linger_ = linger_ && !grpc_busy_;
      return first;
    }
    state_ = State::kClosed;
    return first;
  }
  if (state_ == State::kOpen && req_ < end_ && !WantsWrite()) {
    handler_->HandleFailure(408, "the request was not received completely in time", req_start_ns_, &out_, PathSoFar());
    state_ = State::kClosing;
    linger_ = !peer_closed_;
    return first;
  }
  state_ = State::kClosed;
  return first;
}

std::string_view Connection::PathSoFar() const {
  const HttpHead& h = parser_.head();
  if (h.target_len == 0 || h.target_off + h.target_len > end_ - req_) return {};
  const std::string_view target(in_.get() + req_ + h.target_off, h.target_len);
  return target.substr(0, target.find('?'));
}

}  // namespace frs::server
