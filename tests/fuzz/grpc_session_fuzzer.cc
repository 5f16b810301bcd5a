// libFuzzer target: bytes from a client of the <grpc> listener, through a
// Connection in gRPC mode (HTTP/2 frames, HPACK, gRPC framing, protobuf
// decoding of ShouldRateLimit and Health/Check). The methods run without
// Envoy rules, so no engine is touched: what is fuzzed is everything before
// a decision. Whatever the bytes, nothing may crash, leak or grow without
// bound; the connection ends answered or closed.
#include <cstdint>
#include <cstring>
#include <memory>

#include "server/connection.h"
#include "server/grpc_methods.h"
#include "server/grpc_session.h"
#include "server/handler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace frs::server;
  static GrpcMethods methods(nullptr, GrpcOptions{});
  auto session = GrpcSession::Create(&methods, GrpcLimits{8, 4096, 4096});
  if (!session.ok()) return 0;
  Connection c(frs::os::UniqueFd(), ConnectionLimits{4096, 4096}, nullptr);
  c.UseGrpc(std::move(session.value()));
  size_t at = 0;
  int64_t now = 1;
  // Fed in slices of varying size, as reads of a socket would come.
  while (at < size && c.state() == Connection::State::kOpen) {
    std::span<char> room = c.ReadSpace();
    if (room.empty()) break;
    const size_t n = std::min({room.size(), size - at, size_t{1} + (data[at] % 97) * 13});
    std::memcpy(room.data(), data + at, n);
    at += n;
    c.Produced(n, now++);
    c.Process();
    c.Consumed(c.PendingOutput().size());
  }
  c.PeerClosed();
  c.Process();
  return 0;
}
