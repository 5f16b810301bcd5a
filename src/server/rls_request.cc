#include "server/rls_request.h"

#include <cstdint>
#include <limits>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace frs::server {

void RlsRequestFromProto(const ::envoy::service::ratelimit::v3::RateLimitRequest& in, envoy::RlsRequest* out) {
  out->domain = in.domain();
  // 0 (not set) is 1, as Envoy and envoyproxy/ratelimit take it; a
  // descriptor's own hits_addend, when set, wins, 0 included (a look).
  out->hits = in.hits_addend() == 0 ? 1 : in.hits_addend();
  out->descriptors.resize(static_cast<size_t>(in.descriptors_size()));
  for (int i = 0; i < in.descriptors_size(); ++i) {
    const auto& d = in.descriptors(i);
    envoy::RlsDescriptor& rd = out->descriptors[static_cast<size_t>(i)];
    rd.entries.clear();
    for (const auto& e : d.entries()) rd.entries.push_back(envoy::Entry{e.key(), e.value()});
    rd.has_hits = d.has_hits_addend();
    rd.hits = rd.has_hits ? d.hits_addend().value() : 0;
    rd.negative = d.is_negative_hits();
    rd.has_limit = d.has_limit();
    rd.limit_rpu = rd.has_limit ? d.limit().requests_per_unit() : 0;
    rd.limit_unit = rd.has_limit ? d.limit().unit() : 0;
  }
}

namespace {

// The protobuf wire format's pieces, each false where the fast path
// declines (protobuf then decides).
class Reader {
 public:
  explicit Reader(std::string_view b) : p_(reinterpret_cast<const uint8_t*>(b.data())), end_(p_ + b.size()) {}
  bool done() const { return p_ == end_; }
  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      // The tenth byte carries one bit; more is protobuf's to judge.
      if (shift == 63 && b > 1) return false;
      r |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  // A tag: one byte (every tag rls.proto has is below 16); a longer or
  // padded one is protobuf's to judge (its ReadTag takes at most five).
  bool Tag(uint64_t* v) {
    if (p_ == end_ || (*p_ & 0x80)) return false;
    *v = *p_++;
    return true;
  }
  bool Bytes(std::string_view* v) {
    // A length as protobuf's ReadSize takes it: at most five bytes and below
    // 2^31; taken here only in its shortest form (no trailing 0x80 bytes).
    uint64_t n = 0;
    const uint8_t* start = p_;
    if (!Varint(&n) || p_ - start > 5 || (p_ - start > 1 && p_[-1] == 0) ||
        n > uint64_t{std::numeric_limits<int32_t>::max()} || n > static_cast<uint64_t>(end_ - p_))
      return false;
    *v = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

// Tags: field number << 3 | wire type (0 varint, 2 length-delimited).
constexpr uint64_t kLen1 = 0x0a, kLen2 = 0x12, kLen3 = 0x1a, kVarint1 = 0x08, kVarint2 = 0x10, kVarint3 = 0x18,
                   kVarint4 = 0x20;

bool DecodeEntry(std::string_view m, envoy::Entry* e) {
  Reader r(m);
  uint64_t tag = 0;
  while (!r.done()) {
    if (!r.Tag(&tag)) return false;
    if (tag == kLen1) {
      if (!r.Bytes(&e->key)) return false;
    } else if (tag == kLen2) {
      if (!r.Bytes(&e->value)) return false;
    } else {
      return false;
    }
  }
  return true;
}

bool DecodeDescriptor(std::string_view m, envoy::RlsDescriptor* d) {
  d->entries.clear();
  d->has_hits = d->negative = d->has_limit = false;
  d->hits = 0;
  d->limit_rpu = 0;
  d->limit_unit = 0;
  Reader r(m);
  uint64_t tag = 0, v = 0;
  std::string_view sub;
  while (!r.done()) {
    if (!r.Tag(&tag)) return false;
    if (tag == kLen1) {
      if (!r.Bytes(&sub) || !DecodeEntry(sub, &d->entries.emplace_back())) return false;
    } else if (tag == kLen2) {
      // RateLimitOverride: a second one would be merged into the first.
      if (d->has_limit || !r.Bytes(&sub)) return false;
      d->has_limit = true;
      Reader o(sub);
      while (!o.done()) {
        if (!o.Tag(&tag)) return false;
        if (tag == kVarint1 && o.Varint(&v)) d->limit_rpu = static_cast<uint32_t>(v);
        else if (tag == kVarint2 && o.Varint(&v)) d->limit_unit = static_cast<int32_t>(static_cast<uint32_t>(v));
        else return false;
      }
    } else if (tag == kLen3) {
      // google.protobuf.UInt64Value, once.
      if (d->has_hits || !r.Bytes(&sub)) return false;
      d->has_hits = true;
      Reader h(sub);
      while (!h.done())
        if (!h.Tag(&tag) || tag != kVarint1 || !h.Varint(&d->hits)) return false;
    } else if (tag == kVarint4) {
      if (!r.Varint(&v)) return false;
      d->negative = v != 0;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

bool DecodeRateLimitRequest(std::string_view message, envoy::RlsRequest* out) {
  out->domain = {};
  uint64_t hits = 0;
  size_t n = 0;
  Reader r(message);
  uint64_t tag = 0;
  std::string_view sub;
  while (!r.done()) {
    if (!r.Tag(&tag)) return false;
    if (tag == kLen1) {
      if (!r.Bytes(&out->domain)) return false;
    } else if (tag == kLen2) {
      if (!r.Bytes(&sub)) return false;
      if (out->descriptors.size() <= n) out->descriptors.resize(n + 1);
      if (!DecodeDescriptor(sub, &out->descriptors[n++])) return false;
    } else if (tag == kVarint3) {
      if (!r.Varint(&hits)) return false;
    } else {
      return false;
    }
  }
  out->descriptors.resize(n);
  // uint32 on the wire: the low 32 bits, as protobuf reads it.
  const auto h = static_cast<uint32_t>(hits);
  out->hits = h == 0 ? 1 : h;
  return true;
}

}  // namespace frs::server
