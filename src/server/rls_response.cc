#include "server/rls_response.h"

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

void PutVarint(std::string* out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>((v & 0x7f) | 0x80));
  out->push_back(static_cast<char>(v));
}

void PutTag(std::string* out, uint32_t field, uint8_t type) { PutVarint(out, field << 3 | type); }

// A varint field of a proto3 scalar: left out when 0 (the default).
size_t ScalarSize(uint64_t v) { return v == 0 ? 0 : 1 + VarintSize(v); }
void PutScalar(std::string* out, uint32_t field, uint64_t v) {
  if (v == 0) return;
  PutTag(out, field, kVarint);
  PutVarint(out, v);
}

// RateLimit{requests_per_unit = 1, unit = 2, name = 3}.
size_t RateLimitSize(const envoy::RlsStatus& st) {
  const envoy::Limit& l = st.limit_value();
  const size_t name = st.limit->name.size();
  return ScalarSize(l.requests_per_unit) + ScalarSize(static_cast<uint64_t>(l.unit)) +
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
      l->set_unit(static_cast<RlsResponse::RateLimit::Unit>(lim.unit));
      if (!st.limit->name.empty()) l->set_name(st.limit->name);
      s->mutable_duration_until_reset()->set_seconds(st.until_reset_s);
    }
  }
}

void EncodeRateLimitResponse(const envoy::RlsAnswer& a, std::string* out) {
  out->clear();
  PutScalar(out, 1, static_cast<uint64_t>(a.overall));  // overall_code
  for (const envoy::RlsStatus& st : a.statuses) {
    PutTag(out, 2, kLength);  // statuses
    PutVarint(out, StatusSize(st));
    PutScalar(out, 1, static_cast<uint64_t>(st.code));
    if (st.has_limit) {
      const envoy::Limit& l = st.limit_value();
      PutTag(out, 2, kLength);  // current_limit
      PutVarint(out, RateLimitSize(st));
      PutScalar(out, 1, l.requests_per_unit);
      PutScalar(out, 2, static_cast<uint64_t>(l.unit));
      if (!st.limit->name.empty()) {
        PutTag(out, 3, kLength);
        PutVarint(out, st.limit->name.size());
        out->append(st.limit->name);
      }
    }
    PutScalar(out, 3, st.remaining);  // limit_remaining
    if (st.has_limit) {
      PutTag(out, 4, kLength);  // duration_until_reset
      PutVarint(out, DurationSize(st));
      PutScalar(out, 1, static_cast<uint64_t>(st.until_reset_s));
    }
  }
}

}  // namespace frs::server
