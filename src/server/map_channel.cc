#include "server/map_channel.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include <xxhash.h>

namespace frs::server {
namespace {

constexpr uint32_t kMagic = 0x4d53524Bu;  // "KRSM"
constexpr size_t kHeaderBytes = 64;

struct Header {
  uint32_t magic;
  uint32_t reserved;
  uint64_t generation;
  uint64_t length;  // srv.xml's bytes, map.xml's, the Envoy bundle's, then the previous list's
  uint64_t checksum;
  uint64_t srv_length;       // of srv.xml
  uint64_t envoy_length;     // of the Envoy bundle
  uint64_t previous_length;  // of the previous shard list (the last bytes)
  uint8_t pad[8];
};
static_assert(sizeof(Header) == kHeaderBytes);
static_assert(offsetof(Header, previous_length) == 48);

// All `n` bytes at `off` through `io` (pread or pwrite), across
// interruptions and short transfers; false on an error or end of file.
template <class Char, class Io>
bool TransferAll(Io io, int fd, Char* p, size_t n, off_t off) {
  while (n > 0) {
    const ssize_t done = io(fd, p, n, off);
    if (done < 0 && errno == EINTR) continue;
    if (done <= 0) return false;
    p += done;
    n -= static_cast<size_t>(done);
    off += done;
  }
  return true;
}

bool PreadAll(int fd, void* buf, size_t n, off_t off) {
  return TransferAll(::pread, fd, static_cast<char*>(buf), n, off);
}

bool PwriteAll(int fd, const void* buf, size_t n, off_t off) {
  return TransferAll(::pwrite, fd, static_cast<const char*>(buf), n, off);
}

}  // namespace

Result<MapChannel> MapChannel::Create() {
  MapChannel c;
  c.fd_.reset(::memfd_create("frs-map", MFD_CLOEXEC));
  if (!c.fd_.valid()) return Status::FromErrno("memfd_create (the map channel)", errno);
  Header h{};
  h.magic = kMagic;
  if (!PwriteAll(c.fd_.get(), &h, sizeof h, 0)) return Status::FromErrno("the map channel", errno);
  return c;
}

Status MapChannel::Publish(std::string_view srv_xml, std::string_view map_xml, std::string_view envoy,
                           std::string_view previous) {
  // The bytes after the header, then the header that makes them current.
  std::string both;
  both.reserve(srv_xml.size() + map_xml.size() + envoy.size() + previous.size());
  both.append(srv_xml).append(map_xml).append(envoy).append(previous);
  if (!PwriteAll(fd_.get(), both.data(), both.size(), kHeaderBytes)) return Status::FromErrno("the map channel", errno);
  Header h{};
  h.magic = kMagic;
  h.generation = ++generation_;
  h.length = both.size();
  h.srv_length = srv_xml.size();
  h.envoy_length = envoy.size();
  h.previous_length = previous.size();
  h.checksum = XXH3_64bits(both.data(), both.size());
  if (!PwriteAll(fd_.get(), &h, sizeof h, 0)) return Status::FromErrno("the map channel", errno);
  return Status::OK();
}

Result<MapChannel::Map> MapChannel::Read() const {
  for (int attempt = 0; attempt < 200; ++attempt) {
    Header h{};
    if (!PreadAll(fd_.get(), &h, sizeof h, 0) || h.magic != kMagic)
      return Status::IOError("the map channel cannot be read");
    Map m;
    m.generation = h.generation;
    if (h.generation == 0) return m;
    m.text.resize(h.length);
    if (PreadAll(fd_.get(), m.text.data(), m.text.size(), kHeaderBytes) &&
        XXH3_64bits(m.text.data(), m.text.size()) == h.checksum) {
      Header again{};
      if (PreadAll(fd_.get(), &again, sizeof again, 0) && again.generation == h.generation &&
          h.srv_length + h.envoy_length + h.previous_length <= m.text.size()) {
        m.srv_text = m.text.substr(0, h.srv_length);
        m.previous_list = m.text.substr(m.text.size() - h.previous_length);
        m.text.resize(m.text.size() - h.previous_length);
        m.envoy_text = m.text.substr(m.text.size() - h.envoy_length);
        m.text.resize(m.text.size() - h.envoy_length);
        m.text.erase(0, h.srv_length);
        return m;
      }
    }
    // The master is publishing a newer map right now: read it when done.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Busy("the map channel kept changing while read");
}

}  // namespace frs::server
