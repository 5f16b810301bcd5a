#include "server/replica_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <memory>

namespace frs::server {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* p, size_t n) {
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kHex[p[i] >> 4];
    s[2 * i + 1] = kHex[p[i] & 15];
  }
  return s;
}

// SHA-256, looked up once per process (a lookup takes the provider
// store's lock).
const EVP_MD* Sha256() {
  static EVP_MD* const md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

// A nonce unique to each request: 8 random bytes drawn per thread and
// process, then a count. A worker forked after the master signed (its
// start's catch-up; a worker respawned) inherits the master's thread state,
// so the bytes are drawn again in each new process. Unique is all a nonce
// must be (it binds an answer to its request); it need not be unpredictable.
std::string NextNonce() {
  thread_local pid_t drawn_in = 0;
  thread_local uint64_t prefix = 0, count = 0;
  if (const pid_t pid = getpid(); pid != drawn_in) {
    if (getrandom(&prefix, sizeof prefix, 0) != sizeof prefix)
      prefix = static_cast<uint64_t>(pid) << 32 ^ static_cast<uint64_t>(time(nullptr));
    count = 0;
    drawn_in = pid;
  }
  unsigned char b[16];
  const uint64_t c = ++count;
  std::memcpy(b, &prefix, 8);
  std::memcpy(b + 8, &c, 8);
  return Hex(b, sizeof b);
}

// What a request's MAC covers, before its body: `t` as its text came (so a
// sender that writes leading zeros is read as it signed). Its fields hold no
// line break: a shard's name, digits, hex, a method, a request target.
std::string RequestHead(std::string_view to, std::string_view t, std::string_view nonce, std::string_view method,
                        std::string_view target, size_t body_size) {
  std::string h = "FRS replica request\n";
  h.append(to).append("\n").append(t).append("\n").append(nonce).append("\n");
  h.append(method).append("\n").append(target).append("\n").append(std::to_string(body_size)).append("\n");
  return h;
}

std::string AnswerHead(std::string_view nonce, int status, size_t body_size) {
  std::string h = "FRS replica answer\n";
  h.append(nonce).append("\n").append(std::to_string(status)).append("\n").append(std::to_string(body_size));
  h.append("\n");
  return h;
}

bool EqualConstantTime(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// One "name=value" of the scheme's list; the value runs to the next comma.
bool Field(std::string_view* rest, std::string_view name, std::string_view* value) {
  while (!rest->empty() && (rest->front() == ' ' || rest->front() == ',')) rest->remove_prefix(1);
  if (!rest->starts_with(name) || rest->size() <= name.size() || (*rest)[name.size()] != '=') return false;
  rest->remove_prefix(name.size() + 1);
  const size_t end = rest->find(',');
  *value = rest->substr(0, end);
  while (!value->empty() && value->back() == ' ') value->remove_suffix(1);
  rest->remove_prefix(end == std::string_view::npos ? rest->size() : end);
  return true;
}

bool IsDigits(std::string_view s) {
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return !s.empty();
}

bool IsLowerHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string HmacSha256Hex(std::string_view key, std::string_view head, std::string_view body) {
  // HMAC (RFC 2104) over OpenSSL's SHA-256 with one digest context per
  // thread, reused: OpenSSL 3's EVP_MAC allocates and sets up a context per
  // message (1 to 1.4 us a message here), and a batch of changes costs four
  // messages (its signature, its check, its answer's proof and that
  // proof's check); this way each is about 0.5 us. The key's two padded
  // blocks are kept per thread while the token stays the same.
  constexpr size_t kBlock = 64;
  struct State {
    std::string key;
    unsigned char ipad[kBlock], opad[kBlock];
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx{EVP_MD_CTX_new()};
  };
  thread_local State st;
  const EVP_MD* md = Sha256();
  if (md == nullptr || !st.ctx) return std::string();  // verifies against nothing: every check fails closed
  unsigned int len = 0;
  if (st.key != key || key.empty()) {
    unsigned char k[kBlock] = {};
    if (key.size() > kBlock) {
      if (EVP_Digest(key.data(), key.size(), k, &len, md, nullptr) != 1) return std::string();
    } else {
      std::memcpy(k, key.data(), key.size());
    }
    for (size_t i = 0; i < kBlock; ++i) {
      st.ipad[i] = k[i] ^ 0x36;
      st.opad[i] = k[i] ^ 0x5c;
    }
    st.key = std::string(key);
  }
  unsigned char inner[32], out[32];
  EVP_MD_CTX* c = st.ctx.get();
  if (EVP_DigestInit_ex2(c, md, nullptr) != 1 || EVP_DigestUpdate(c, st.ipad, kBlock) != 1 ||
      EVP_DigestUpdate(c, head.data(), head.size()) != 1 || EVP_DigestUpdate(c, body.data(), body.size()) != 1 ||
      EVP_DigestFinal_ex(c, inner, &len) != 1 || len != sizeof inner || EVP_DigestInit_ex2(c, md, nullptr) != 1 ||
      EVP_DigestUpdate(c, st.opad, kBlock) != 1 || EVP_DigestUpdate(c, inner, sizeof inner) != 1 ||
      EVP_DigestFinal_ex(c, out, &len) != 1 || len != sizeof out)
    return std::string();
  return Hex(out, sizeof out);
}

std::string SignReplicaRequest(std::string_view token, std::string_view to, std::string_view method,
                               std::string_view target, std::string_view body, int64_t now_s, std::string* nonce) {
  *nonce = NextNonce();
  const std::string t = std::to_string(now_s);
  const std::string mac = HmacSha256Hex(token, RequestHead(to, t, *nonce, method, target, body.size()), body);
  std::string v(kReplicaAuthScheme);
  v.append(" t=").append(t).append(", n=").append(*nonce).append(", mac=").append(mac);
  return v;
}

ReplicaAuthCheck CheckReplicaRequest(std::string_view authorization, std::string_view token, std::string_view self,
                                     std::string_view method, std::string_view target, std::string_view body,
                                     int64_t now_s) {
  ReplicaAuthCheck r;
  std::string_view rest = authorization;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  // A scheme's name is case-insensitive (RFC 9110 11.1).
  if (rest.size() < kReplicaAuthScheme.size() ||
      strncasecmp(rest.data(), kReplicaAuthScheme.data(), kReplicaAuthScheme.size()) != 0 ||
      (rest.size() > kReplicaAuthScheme.size() && rest[kReplicaAuthScheme.size()] != ' '))
    return r;
  rest.remove_prefix(kReplicaAuthScheme.size());
  std::string_view t, n, mac;
  int64_t at = 0;
  // t: decimal digits that fit 63 bits (no sign: a time before 1970 is
  // none of a shard's, and at - now_s cannot overflow).
  if (!Field(&rest, "t", &t) || !Field(&rest, "n", &n) || !Field(&rest, "mac", &mac) ||
      rest.find_first_not_of(" ,") != std::string_view::npos || n.empty() || n.size() > 64 || !IsLowerHex(n) ||
      mac.size() != 64 || !IsLowerHex(mac) || !IsDigits(t) ||
      std::from_chars(t.data(), t.data() + t.size(), at).ec != std::errc()) {
    r.kind = ReplicaAuthCheck::Kind::kMalformed;
    return r;
  }
  if (at > now_s + kReplicaAuthSkewS || at < now_s - kReplicaAuthSkewS) {
    r.kind = ReplicaAuthCheck::Kind::kSkewed;
    r.skew_s = at - now_s;
    return r;
  }
  const std::string want = HmacSha256Hex(token, RequestHead(self, t, n, method, target, body.size()), body);
  if (want.empty() || !EqualConstantTime(want, mac)) {
    r.kind = ReplicaAuthCheck::Kind::kWrong;
    return r;
  }
  r.kind = ReplicaAuthCheck::Kind::kOk;
  r.nonce = std::string(n);
  return r;
}

std::string ReplicaAnswerProof(std::string_view token, std::string_view nonce, int status, std::string_view body) {
  return HmacSha256Hex(token, AnswerHead(nonce, status, body.size()), body);
}

bool ReplicaAnswerProven(std::string_view proof, std::string_view token, std::string_view nonce, int status,
                         std::string_view body) {
  if (nonce.empty() || proof.size() != 64) return false;
  const std::string want = ReplicaAnswerProof(token, nonce, status, body);
  return !want.empty() && EqualConstantTime(want, proof);
}

void ReplicaSigner::Attach(HttpClient* http) {
  http->SetSigner([this](std::string_view method, std::string_view target, std::string_view body) {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return SignReplicaRequest(token_, to_, method, target, body, ts.tv_sec, &nonce_);
  });
  http->KeepHeader(std::string(kReplicaProofHeader));
}

bool ReplicaSigner::Proven(const HttpResponse& r) const {
  return ReplicaAnswerProven(r.kept, token_, nonce_, r.status, r.body);
}

}  // namespace frs::server
