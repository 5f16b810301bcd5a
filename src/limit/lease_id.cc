#include "limit/lease_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "frs/decision.h"
#include "os/store_dir.h"
#include "os/unique_fd.h"
#include "os/whole_file.h"

namespace frs::limit {
namespace {

// Eight lowercase hex digits (an id's, as FormatLeaseId writes them) to
// their value, the first the most significant; false when any byte is not
// one of [0-9a-f]. Each byte is judged in its own lane: with the high bits
// clear no lane carries into the next.
bool HexWord(const char* p, uint64_t* out) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  uint64_t x;
  std::memcpy(&x, p, sizeof x);
  if constexpr (std::endian::native == std::endian::big) x = __builtin_bswap64(x);  // the first digit in the low lane
  if ((x & kHigh) != 0) return false;
  // A lane's high bit set: at least c (x + 0x80 - c), or below c (the complement).
  auto at_least = [&](uint8_t c) { return (x + (0x80 - c) * kOnes) & kHigh; };
  const uint64_t digit = at_least('0') & ~at_least('9' + 1);
  const uint64_t letter = at_least('a') & ~at_least('f' + 1);
  if ((digit | letter) != kHigh) return false;
  // '0'-'9' are 0x30-0x39, 'a'-'f' 0x61-0x66: the low nibble, plus 9 for a letter (bit 6).
  uint64_t v = (x & 0x0f * kOnes) + ((x >> 6) & kOnes) * 9;
  // Pairs, then quads, then all eight lanes, the first lane the high digits.
  v = ((v << 4) | (v >> 8)) & 0x00ff00ff00ff00ffull;
  v = ((v << 8) | (v >> 16)) & 0x0000ffff0000ffffull;
  v = ((v << 16) | (v >> 32)) & 0xffffffffull;
  *out = v;
  return true;
}

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// *mode (when given): the file's permission bits.
Status ReadSecret(const std::string& path, LeaseSecret* out, mode_t* mode = nullptr) {
  // O_NONBLOCK: a FIFO named here must not hold a start or a reload up.
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) return Status::FromErrno(path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno(path, errno);
  if (!S_ISREG(st.st_mode))
    return Status::InvalidArgument(path + ": a lease secret is a regular file; this is not one");
  if (mode != nullptr) *mode = st.st_mode & 07777;
  uint8_t buf[17];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n < 0) return Status::FromErrno(path, errno);
  if (n != 16)
    return Status::Corruption(path + ": a lease secret is 16 bytes; this file holds " + std::to_string(st.st_size));
  out->k0 = LoadLe64(buf);
  out->k1 = LoadLe64(buf + 8);
  return Status::OK();
}

Status RandomSecret(LeaseSecret* out) {
  uint8_t buf[16];
  size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::getrandom(buf + got, sizeof buf - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("getrandom", errno);
    got += static_cast<size_t>(n);
  }
  out->k0 = LoadLe64(buf);
  out->k1 = LoadLe64(buf + 8);
  return Status::OK();
}

}  // namespace

uint64_t LeaseMac(const LeaseSecret& secret, uint16_t biz, uint32_t nonce, uint32_t serial, std::string_view key) {
  // Fixed-width fields first, the key last: no two inputs share bytes.
  uint8_t buf[10 + 256];
  const size_t klen = key.size() < 256 ? key.size() : 256;
  if constexpr (std::endian::native == std::endian::little) {
    // The fields' little-endian bytes as they lie in memory: three stores.
    std::memcpy(buf, &biz, 2);
    std::memcpy(buf + 2, &nonce, 4);
    std::memcpy(buf + 6, &serial, 4);
  } else {
    buf[0] = static_cast<uint8_t>(biz);
    buf[1] = static_cast<uint8_t>(biz >> 8);
    for (int i = 0; i < 4; ++i) {
      buf[2 + i] = static_cast<uint8_t>(nonce >> (8 * i));
      buf[6 + i] = static_cast<uint8_t>(serial >> (8 * i));
    }
  }
  std::memcpy(buf + 10, key.data(), klen);
  return SipHash24(secret.k0, secret.k1, buf, 10 + klen);
}

std::string LeaseIdText(uint32_t serial, uint64_t mac) {
  std::string s(kLeaseIdChars, '0');
  FormatLeaseId(serial, mac, s.data());
  return s;
}

bool ParseLeaseId(std::string_view text, uint32_t* serial, uint64_t* mac) {
  // Every release, renew and settle parses its id (the request's check,
  // which hands the parts on to the node's operation): eight digits at a
  // time.
  if (text.size() != kLeaseIdChars) return false;
  uint64_t value[3];
  for (int i = 0; i < 3; ++i)
    if (!HexWord(text.data() + 8 * i, &value[i])) return false;
  if (value[0] == 0) return false;
  *serial = static_cast<uint32_t>(value[0]);
  *mac = value[1] << 32 | value[2];
  return true;
}

Result<LeaseSecret> LoadLeaseKeyFile(const std::string& path, std::string_view attribute) {
  LeaseSecret secret;
  mode_t mode = 0;
  Status s = ReadSecret(path, &secret, &mode);
  const std::string named = "<cluster " + std::string(attribute) + ">: ";
  if (!s.ok())
    return Status::InvalidArgument(named + s.message() +
                                   " (16 random bytes, the same file on every shard, readable by frsd's user only: "
                                   "(umask 077; head -c 16 /dev/urandom > FILE))");
  // Whoever reads the key can forge every lease and reservation id of the
  // cluster: a file others may read is refused, as ssh refuses such a
  // private key, rather than trusted until someone notices.
  if (std::string words = ReadableSecretWords(path, mode); !words.empty())
    return Status::InvalidArgument(named + words + " (frsd refuses a key readable by anyone but its owner)");
  return secret;
}

std::string SameKeyWords(const std::string& key_file, const std::string& also) {
  return "<cluster lease_key_also>: " + also + " holds the key " + key_file +
         " holds: a rotation's second key is a new one (docs/cluster.md, \"The shared secret\")";
}

std::string ReadableSecretWords(const std::string& path, unsigned mode) {
  if ((mode & 077) == 0) return "";
  char octal[16];
  std::snprintf(octal, sizeof octal, "%04o", mode & 07777);
  return path + " has mode " + octal +
         ": its group or others may read it, and a reader can forge lease and reservation ids; chmod 600 " + path;
}

uint32_t NewIdNonce() {
  uint32_t v = 0;
  while (v == 0) {
    const ssize_t got = ::getrandom(&v, sizeof v, 0);
    if (got == static_cast<ssize_t>(sizeof v)) continue;
    if (got < 0 && errno == EINTR) continue;  // a signal while the kernel's pool was filling, at boot
    // No getrandom (a kernel older than 3.17, a seccomp filter): a new
    // random_device each time (/dev/urandom or the CPU's), never a
    // generator whose state a fork would copy into every worker.
    v = static_cast<uint32_t>(std::random_device{}());
  }
  return v;
}

uint64_t LeaseKeyCheckOf(const LeaseSecret& secret) {
  static constexpr char kText[] = "frs lease key check";
  const uint64_t v = SipHash24(secret.k0, secret.k1, reinterpret_cast<const uint8_t*>(kText), sizeof kText - 1);
  return v == 0 ? 1 : v;
}

Result<LeaseSecret> LoadLeaseSecret(const std::string& dir, bool create) {
  LeaseSecret secret;
  if (dir.empty()) {
    Status s = RandomSecret(&secret);
    if (!s.ok()) return s;
    return secret;
  }
  const std::string path = os::store_dir::In(dir, os::store_dir::kLeaseKey);
  Status s = ReadSecret(path, &secret);
  if (!s.ok() && !create && ::access(path.c_str(), F_OK) != 0 && errno == ENOENT)
    return Status::NotFound(path + ": no lease secret was made here");
  if (s.ok() || !create || ::access(path.c_str(), F_OK) == 0) {
    if (!s.ok()) return s;
    return secret;
  }
  // Made whole, synced, then linked into place: a reader never sees a short
  // file, of two processes making it at once one wins and the other reads
  // the winner's, and a lease id handed out survives a power cut.
  s = RandomSecret(&secret);
  if (!s.ok()) return s;
  std::string buf(16, '\0');
  for (int i = 0; i < 8; ++i) {
    buf[i] = static_cast<char>(secret.k0 >> (8 * i));
    buf[8 + i] = static_cast<char>(secret.k1 >> (8 * i));
  }
  auto made =
      os::WriteFileWhole(path, buf,
                         os::WholeFileOptions{.sync_file = true, .sync_dir = true, .exclusive = true, .mode = 0600});
  if (!made.ok()) return made.status();
  s = ReadSecret(path, &secret);
  if (!s.ok()) return s;
  return secret;
}

}  // namespace frs::limit

// The public face of the ids (frs/decision.h).
namespace frs {

std::string LeaseId(const Decision& d) {
  return d.lease_serial == 0 ? std::string() : limit::LeaseIdText(d.lease_serial, d.lease_mac);
}
std::string ReservationId(const Decision& d) {
  return d.res_serial == 0 ? std::string() : limit::LeaseIdText(d.res_serial, d.res_mac);
}

}  // namespace frs
