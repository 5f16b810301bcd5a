// The authentication of /replicate between the shards of a <cluster
// replicas="1">, without the admin token on the wire.
//
// The shards share srv.xml's <admin token>. Sent as a bearer token on
// every request of a link (plain HTTP), it was readable by anyone on the
// path, and handed whole to whatever listened at a peer's address (a
// machine given that address after the peer's, a spoofed neighbour): both
// then held every shard's admin commands. A link instead signs each request
// with an HMAC-SHA256 under the token:
//
//   Authorization: FRS-HMAC-SHA256 t=UNIX_SECONDS, n=NONCE, mac=HEX
//
// over the shard it is meant for, the time, a nonce, the method, the target
// and the body; the receiver checks it with its own token and its own
// <cluster self> (so a request taken to another shard does not verify
// there) and refuses it (403) when the clocks are more than
// kReplicaAuthSkewS apart. Its answer carries
//
//   FRS-Replica-Proof: HEX
//
// an HMAC under the token over the request's nonce, the status and the
// body: the sender takes an acknowledgement, a probe's answer or a snapshot
// only from a shard that holds the token, so a listener at a peer's address
// can neither drop changes by acknowledging them nor hand a starting shard
// counts of its own. The bodies stay readable (no encryption): counts and
// keys, not secrets. A request replayed within the window is a batch the
// receiver has (answered "duplicate": its stream and seq are signed) or a
// question it answers again.
//
// frsctl and curl keep `Authorization: Bearer T`: an operator's act, with
// the token in hand.
//
// Thread safety: the functions may run on any thread: the HMAC's digest context
// and the nonce's counter are per thread (the nonce's random part is drawn
// again in each forked process). A ReplicaSigner belongs to the HttpClient it
// signs for, and so to that client's one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "frs/http_client.h"

namespace frs::server {

inline constexpr std::string_view kReplicaAuthScheme = "FRS-HMAC-SHA256";
inline constexpr std::string_view kReplicaProofHeader = "FRS-Replica-Proof";
// How far apart the two shards' clocks may be (NTP keeps them within a
// second; a VM resumed from a pause may be minutes behind until it steps).
inline constexpr int64_t kReplicaAuthSkewS = 300;

// HMAC-SHA256 of `head` then `body` under `key`, in lower-case hex (64).
std::string HmacSha256Hex(std::string_view key, std::string_view head, std::string_view body = {});

// The Authorization value of a request to shard `to` (its name in the
// <cluster> list), made at `now_s`; *nonce is its nonce (the answer's proof
// is bound to it).
std::string SignReplicaRequest(std::string_view token, std::string_view to, std::string_view method,
                               std::string_view target, std::string_view body, int64_t now_s, std::string* nonce);

struct ReplicaAuthCheck {
  enum class Kind : uint8_t {
    kNotSigned,  // another scheme (Bearer) or none: checked as an admin token
    kOk,
    kMalformed,  // the scheme, but not its three fields
    kSkewed,     // signed, but skew_s from this shard's clock
    kWrong,      // another token signed it, or for another shard, or it was changed on the way
  };
  Kind kind = Kind::kNotSigned;
  std::string nonce;   // kOk: the answer's proof is bound to it
  int64_t skew_s = 0;  // kSkewed: the sender's time minus this shard's
};

// Checks a request's Authorization value against this shard's token and
// its own name (`self`), as SignReplicaRequest made it.
ReplicaAuthCheck CheckReplicaRequest(std::string_view authorization, std::string_view token, std::string_view self,
                                     std::string_view method, std::string_view target, std::string_view body,
                                     int64_t now_s);

// The FRS-Replica-Proof value of an answer to the request of `nonce`.
std::string ReplicaAnswerProof(std::string_view token, std::string_view nonce, int status, std::string_view body);
// Whether `proof` is that value (compared in constant time).
bool ReplicaAnswerProven(std::string_view proof, std::string_view token, std::string_view nonce, int status,
                         std::string_view body);

// Signs the requests of one HttpClient to shard `to` and checks their
// answers' proofs. Attach() hands the client a signer that calls back into
// this object: it must outlive the client's calls.
class ReplicaSigner {
 public:
  ReplicaSigner(std::string token, std::string to) : token_(std::move(token)), to_(std::move(to)) {}
  void Attach(HttpClient* http);
  // A reload's token, for the requests from now on.
  void SetToken(std::string token) { token_ = std::move(token); }
  // Whether `r`, the answer to the client's last request, carries that
  // request's proof.
  bool Proven(const HttpResponse& r) const;

 private:
  std::string token_, to_, nonce_;
};

}  // namespace frs::server
