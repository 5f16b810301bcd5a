// The signature of /replicate requests and the proof of their answers
// (server/replica_auth.h): what verifies, what each change of a signed
// request does to it, and that the token itself is never in a request.
#include "server/replica_auth.h"

#include <gtest/gtest.h>

#include <string>

namespace frs::server {
namespace {

using Kind = ReplicaAuthCheck::Kind;

constexpr int64_t kNow = 1764547200;
constexpr std::string_view kToken = "s3cret-admin-token";
constexpr std::string_view kTarget = "/replicate?from=10.0.0.1%3A8300&stream=a&seq=7&digest=0badf00d";
constexpr std::string_view kBody = "A 1 - 1 1764547200123 user:42\n";

TEST(ReplicaAuth, HmacSha256IsRfc4231s) {
  // RFC 4231, test case 2 (a key shorter than the block).
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want ", "for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(ReplicaAuth, ASignedRequestVerifiesOnTheShardItIsFor) {
  std::string nonce;
  const std::string auth = SignReplicaRequest(kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow, &nonce);
  EXPECT_TRUE(auth.starts_with("FRS-HMAC-SHA256 t=1764547200, n=" + nonce + ", mac=")) << auth;
  EXPECT_EQ(auth.find(kToken), std::string::npos) << "the token itself is on the wire";
  EXPECT_EQ(nonce.size(), 32u);
  const ReplicaAuthCheck ok = CheckReplicaRequest(auth, kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow + 5);
  EXPECT_EQ(ok.kind, Kind::kOk);
  EXPECT_EQ(ok.nonce, nonce);
  // Each request has its own nonce.
  std::string again;
  SignReplicaRequest(kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow, &again);
  EXPECT_NE(again, nonce);
}

TEST(ReplicaAuth, AnyChangeOfWhatIsSignedFailsIt) {
  std::string nonce;
  const std::string auth = SignReplicaRequest(kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow, &nonce);
  const auto check = [&](std::string_view token, std::string_view self, std::string_view method,
                         std::string_view target, std::string_view body) {
    return CheckReplicaRequest(auth, token, self, method, target, body, kNow).kind;
  };
  EXPECT_EQ(check("another-token", "10.0.0.2:8300", "POST", kTarget, kBody), Kind::kWrong);
  EXPECT_EQ(check(kToken, "10.0.0.3:8300", "POST", kTarget, kBody), Kind::kWrong) << "taken to another shard";
  EXPECT_EQ(check(kToken, "10.0.0.2:8300", "GET", kTarget, kBody), Kind::kWrong);
  EXPECT_EQ(check(kToken, "10.0.0.2:8300", "POST", "/replicate?from=10.0.0.1%3A8300&stream=a&seq=8&digest=0badf00d",
                  kBody),
            Kind::kWrong);
  EXPECT_EQ(check(kToken, "10.0.0.2:8300", "POST", kTarget, "A 1 - 9 1764547200123 user:42\n"), Kind::kWrong);
  EXPECT_EQ(check(kToken, "10.0.0.2:8300", "POST", kTarget, ""), Kind::kWrong);
  // Its own time changed, the MAC kept.
  std::string later = auth;
  later.replace(later.find("t=") + 2, 10, std::to_string(kNow + 1));
  EXPECT_EQ(CheckReplicaRequest(later, kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow).kind, Kind::kWrong);
}

TEST(ReplicaAuth, ClocksFurtherApartThanTheWindowAreSaidSo) {
  std::string nonce;
  const std::string auth = SignReplicaRequest(kToken, "b", "GET", "/replicate?for=a&digest=1", "", kNow, &nonce);
  EXPECT_EQ(CheckReplicaRequest(auth, kToken, "b", "GET", "/replicate?for=a&digest=1", "", kNow + kReplicaAuthSkewS)
                .kind,
            Kind::kOk);
  const ReplicaAuthCheck behind =
      CheckReplicaRequest(auth, kToken, "b", "GET", "/replicate?for=a&digest=1", "", kNow + kReplicaAuthSkewS + 1);
  EXPECT_EQ(behind.kind, Kind::kSkewed);
  EXPECT_EQ(behind.skew_s, -(kReplicaAuthSkewS + 1));
  const ReplicaAuthCheck ahead = CheckReplicaRequest(auth, kToken, "b", "GET", "/replicate?for=a&digest=1", "", 0);
  EXPECT_EQ(ahead.kind, Kind::kSkewed);
  EXPECT_EQ(ahead.skew_s, kNow);
  // Times at either end of 64 bits are refused as such, not overflowed.
  const std::string mac(64, 'a');
  for (const char* t : {"-9223372036854775808", "9223372036854775807"}) {
    const ReplicaAuthCheck far = CheckReplicaRequest(std::string("FRS-HMAC-SHA256 t=") + t + ", n=00, mac=" + mac,
                                                     kToken, "b", "GET", "/x", "", kNow);
    EXPECT_EQ(far.kind, Kind::kSkewed) << t;
    EXPECT_EQ(far.skew_s < 0, t[0] == '-') << t;
  }
}

TEST(ReplicaAuth, OtherSchemesAreLeftToTheTokenCheckAndBrokenOnesRefused) {
  const auto kind = [](std::string_view a) { return CheckReplicaRequest(a, kToken, "b", "GET", "/x", "", kNow).kind; };
  EXPECT_EQ(kind(""), Kind::kNotSigned);
  EXPECT_EQ(kind("Bearer s3cret-admin-token"), Kind::kNotSigned);
  EXPECT_EQ(kind("FRS-HMAC-SHA256x t=1"), Kind::kNotSigned);
  const std::string mac(64, 'a');
  EXPECT_EQ(kind("FRS-HMAC-SHA256"), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=1764547200, n=00ff"), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=1764547200, n=00ff, mac=abc"), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=17645x7200, n=00ff, mac=" + mac), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=1764547200, n=00FF, mac=" + mac), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=1764547200, n=, mac=" + mac), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 n=00ff, t=1764547200, mac=" + mac), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=1764547200, n=00ff, mac=" + mac + ", x=1"), Kind::kMalformed);
  EXPECT_EQ(kind("FRS-HMAC-SHA256 t=1764547200, n=00ff, mac=" + mac), Kind::kWrong);
}

TEST(ReplicaAuth, AnAnswersProofIsBoundToItsRequestStatusAndBody) {
  const std::string proof = ReplicaAnswerProof(kToken, "00ff", 200, "applied\nseq 7\n");
  EXPECT_EQ(proof.size(), 64u);
  EXPECT_TRUE(ReplicaAnswerProven(proof, kToken, "00ff", 200, "applied\nseq 7\n"));
  EXPECT_FALSE(ReplicaAnswerProven(proof, "another-token", "00ff", 200, "applied\nseq 7\n"));
  EXPECT_FALSE(ReplicaAnswerProven(proof, kToken, "00fe", 200, "applied\nseq 7\n")) << "another request's answer";
  EXPECT_FALSE(ReplicaAnswerProven(proof, kToken, "00ff", 503, "applied\nseq 7\n"));
  EXPECT_FALSE(ReplicaAnswerProven(proof, kToken, "00ff", 200, "applied\nseq 8\n"));
  EXPECT_FALSE(ReplicaAnswerProven("", kToken, "00ff", 200, "applied\nseq 7\n"));
  EXPECT_FALSE(ReplicaAnswerProven(proof, kToken, "", 200, "applied\nseq 7\n")) << "no request was signed";
}

}  // namespace
}  // namespace frs::server
