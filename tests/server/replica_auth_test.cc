// The signature of /replicate requests and the proof of their answers
// (server/replica_auth.h): what verifies, what each change of a signed
// request does to it, and that the token itself is never in a request.
#include "server/replica_auth.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
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

TEST(ReplicaAuth, AProcessForkedAfterSigningMakesNoncesOfItsOwn) {
  // frsd's master signs its start's questions, then forks workers (and
  // respawns them): a child must not repeat the nonces its parent makes.
  std::string before, parent, child;
  SignReplicaRequest(kToken, "b", "GET", "/x", "", kNow, &before);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string n;
    SignReplicaRequest(kToken, "b", "GET", "/x", "", kNow, &n);
    const bool sent = ::write(fds[1], n.data(), n.size()) == static_cast<ssize_t>(n.size());
    ::_exit(sent ? 0 : 1);
  }
  char buf[64] = {};
  const ssize_t got = ::read(fds[0], buf, sizeof buf);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_EQ(got, 32);
  child.assign(buf, 32);
  SignReplicaRequest(kToken, "b", "GET", "/x", "", kNow, &parent);
  EXPECT_NE(child, parent);
  EXPECT_NE(child.substr(0, 16), before.substr(0, 16)) << "the child kept its parent's random part";
  EXPECT_EQ(parent.substr(0, 16), before.substr(0, 16));
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
  // The largest time 63 bits hold is far off; past it, or signed, it is no
  // time (found by a check from outside: 2^64-1 was read as 0).
  const std::string mac(64, 'a');
  const auto at = [&](const std::string& t) {
    return CheckReplicaRequest("FRS-HMAC-SHA256 t=" + t + ", n=00, mac=" + mac, kToken, "b", "GET", "/x", "", kNow);
  };
  EXPECT_EQ(at("9223372036854775807").kind, Kind::kSkewed);
  EXPECT_EQ(at("9223372036854775807").skew_s, INT64_MAX - kNow);
  for (const char* t : {"9223372036854775808", "18446744073709551615", "-1", "+1764547200", "1e9", ""})
    EXPECT_EQ(at(t).kind, Kind::kMalformed) << t;
}

TEST(ReplicaAuth, TheMacIsOverTheDocumentedText) {
  // docs/protocol.md, "Signed requests": the text a MAC covers, by hand.
  std::string nonce;
  const std::string auth = SignReplicaRequest(kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow, &nonce);
  const std::string text = "FRS replica request\n10.0.0.2:8300\n1764547200\n" + nonce + "\nPOST\n" +
                           std::string(kTarget) + "\n" + std::to_string(kBody.size()) + "\n" + std::string(kBody);
  EXPECT_EQ(auth.substr(auth.find("mac=") + 4), HmacSha256Hex(kToken, text));
  // t is read as its text came: a sender's leading zeros are signed so.
  const std::string zeros = "FRS replica request\nb\n01764547200\n0a\nGET\n/x\n0\n";
  EXPECT_EQ(CheckReplicaRequest("FRS-HMAC-SHA256 t=01764547200, n=0a, mac=" + HmacSha256Hex(kToken, zeros), kToken, "b",
                                "GET", "/x", "", kNow)
                .kind,
            Kind::kOk);
  // The scheme's name in any case (RFC 9110 11.1); the MAC's hex in lower case only.
  std::string lower = auth;
  lower.replace(0, 15, "frs-hmac-sha256");
  EXPECT_EQ(CheckReplicaRequest(lower, kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow).kind, Kind::kOk);
  std::string upper = auth;
  for (size_t i = upper.find("mac=") + 4; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_EQ(CheckReplicaRequest(upper, kToken, "10.0.0.2:8300", "POST", kTarget, kBody, kNow).kind, Kind::kMalformed);
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
