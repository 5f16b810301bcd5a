#include "server/rls_response.h"

#include <algorithm>
#include <cstdint>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace frs::server {

namespace {

using RlsResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;

// Protobuf's wire format (protobuf.dev/programming-guides/encoding): a
// field is its tag (number << 3 | wire type) and its value; varints carry
// 7 bits a byte, low first; an enum or int32 is the varint of its value
// sign-extended to 64 bits, an int64 of its two's complement.
constexpr uint8_t kVarint = 0, kLength = 2;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// Writes at `p` (sized beforehand: no bounds checked, no append per byte)
// and returns the position after what it wrote.
char* PutVarint(char* p, uint64_t v) {
  for (; v >= 0x80; v >>= 7) *p++ = static_cast<char>((v & 0x7f) | 0x80);
  *p++ = static_cast<char>(v);
  return p;
}

// Field numbers here are below 16: a tag is one byte.
char* PutTag(char* p, uint32_t field, uint8_t type) {
  *p++ = static_cast<char>(field << 3 | type);
  return p;
}

// A varint field of a proto3 scalar: left out when 0 (the default).
size_t ScalarSize(uint64_t v) { return v == 0 ? 0 : 1 + VarintSize(v); }
char* PutScalar(char* p, uint32_t field, uint64_t v) {
  if (v == 0) return p;
  return PutVarint(PutTag(p, field, kVarint), v);
}

// RateLimit{requests_per_unit = 1, unit = 2, name = 3}.
size_t RateLimitSize(const envoy::RlsStatus& st) {
  const envoy::Limit& l = st.limit_value();
  const size_t name = st.limit->name.size();
  return ScalarSize(l.requests_per_unit) + ScalarSize(static_cast<uint64_t>(l.rls_unit())) +
         (name == 0 ? 0 : 1 + VarintSize(name) + name);
}

// google.protobuf.Duration{seconds = 1} (nanos stay 0).
size_t DurationSize(const envoy::RlsStatus& st) { return ScalarSize(static_cast<uint64_t>(st.until_reset_s)); }

// DescriptorStatus{code = 1, current_limit = 2, limit_remaining = 3,
// duration_until_reset = 4}: the two messages are set together.
size_t StatusSize(const envoy::RlsStatus& st) {
  size_t n = ScalarSize(static_cast<uint64_t>(st.code)) + ScalarSize(st.remaining);
  if (st.has_limit) {
    const size_t l = RateLimitSize(st), d = DurationSize(st);
    n += 1 + VarintSize(l) + l + 1 + VarintSize(d) + d;
  }
  return n;
}

}  // namespace

void FillRateLimitResponse(const envoy::RlsAnswer& a, RlsResponse* r) {
  r->Clear();
  r->set_overall_code(static_cast<RlsResponse::Code>(a.overall));
  for (const envoy::RlsStatus& st : a.statuses) {
    auto* s = r->add_statuses();
    s->set_code(static_cast<RlsResponse::Code>(st.code));
    s->set_limit_remaining(st.remaining);
    if (st.has_limit) {
      auto* l = s->mutable_current_limit();
      const envoy::Limit& lim = st.limit_value();
      l->set_requests_per_unit(lim.requests_per_unit);
      l->set_unit(static_cast<RlsResponse::RateLimit::Unit>(lim.rls_unit()));
      if (!st.limit->name.empty()) l->set_name(st.limit->name);
      s->mutable_duration_until_reset()->set_seconds(st.until_reset_s);
    }
  }
}

void EncodeRateLimitResponse(const envoy::RlsAnswer& a, std::string* out) {
  size_t total = ScalarSize(static_cast<uint64_t>(a.overall));
  for (const envoy::RlsStatus& st : a.statuses) {
    const size_t n = StatusSize(st);
    total += 1 + VarintSize(n) + n;
  }
  out->resize(total);  // within its capacity when reused: no allocation
  char* p = out->data();
  p = PutScalar(p, 1, static_cast<uint64_t>(a.overall));  // overall_code
  for (const envoy::RlsStatus& st : a.statuses) {
    p = PutVarint(PutTag(p, 2, kLength), StatusSize(st));  // statuses
    p = PutScalar(p, 1, static_cast<uint64_t>(st.code));
    if (st.has_limit) {
      const envoy::Limit& l = st.limit_value();
      p = PutVarint(PutTag(p, 2, kLength), RateLimitSize(st));  // current_limit
      p = PutScalar(p, 1, l.requests_per_unit);
      p = PutScalar(p, 2, static_cast<uint64_t>(l.rls_unit()));
      if (const std::string& name = st.limit->name; !name.empty()) {
        p = PutVarint(PutTag(p, 3, kLength), name.size());
        p = std::copy(name.begin(), name.end(), p);
      }
    }
    p = PutScalar(p, 3, st.remaining);  // limit_remaining
    if (st.has_limit) {
      p = PutVarint(PutTag(p, 4, kLength), DurationSize(st));  // duration_until_reset
      p = PutScalar(p, 1, static_cast<uint64_t>(st.until_reset_s));
    }
  }
}

}  // namespace frs::server
