// EncodeRateLimitResponse writes what protobuf serializes of
// FillRateLimitResponse's message, byte for byte, for every shape of
// answer: no status, statuses with and without a limit, named and not, a
// request's own limit, every code and unit, zeros (left out) and the
// largest values (multi-byte varints, lengths past 127).
#include "server/rls_response.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "envoy/envoy_rules.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace frs::server {
namespace {

using envoy::Code;
using envoy::RlsAnswer;
using envoy::RlsStatus;

std::string ProtobufBytes(const RlsAnswer& a) {
  ::envoy::service::ratelimit::v3::RateLimitResponse r;
  FillRateLimitResponse(a, &r);
  std::string out;
  EXPECT_TRUE(r.SerializeToString(&out));
  return out;
}

std::string DirectBytes(const RlsAnswer& a) {
  std::string out = "left over from the last call";
  EncodeRateLimitResponse(a, &out);
  return out;
}

std::string WireHex(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h.push_back(kHex[c >> 4]);
    h.push_back(kHex[c & 15]);
  }
  return h;
}

RlsStatus LimitedStatus(const envoy::CompiledLimit* l, Code code, uint32_t remaining, int64_t until) {
  RlsStatus st;
  st.code = code;
  st.has_limit = true;
  st.limit = l;
  st.remaining = remaining;
  st.until_reset_s = until;
  return st;
}

TEST(RlsResponse, DirectBytesAreProtobufsForEveryShapeOfAnswer) {
  envoy::CompiledLimit plain, named, own, long_name;
  plain.limit = envoy::Limit{envoy::Unit::kSecond, 10};
  named.limit = envoy::Limit{envoy::Unit::kWeek, std::numeric_limits<uint32_t>::max()};
  named.name = "per_user";
  own.is_override = true;
  own.name = "ignored-limit-stays-named";
  long_name.limit = envoy::Limit{envoy::Unit::kMonth, 128};
  long_name.name = std::string(300, 'n');  // a length of two varint bytes, a status past 127 bytes

  std::vector<RlsAnswer> answers;
  answers.emplace_back();  // overall OK, no status
  {
    RlsAnswer a;
    a.overall = Code::kUnknown;  // 0: left out
    answers.push_back(a);
  }
  {
    RlsAnswer a;  // the bench's answer: one limited descriptor, OK
    a.statuses.push_back(LimitedStatus(&plain, Code::kOk, 9, 1));
    answers.push_back(a);
  }
  {
    RlsAnswer a;  // nothing limited: a status of code OK alone, then zeros everywhere
    a.statuses.emplace_back();
    RlsStatus zero;
    zero.code = Code::kUnknown;
    a.statuses.push_back(zero);
    RlsStatus unlimited;
    unlimited.remaining = std::numeric_limits<uint32_t>::max();
    a.statuses.push_back(unlimited);
    answers.push_back(a);
  }
  {
    RlsAnswer a;  // over the limit, remaining 0, reset 0: empty Duration, still present
    a.overall = Code::kOverLimit;
    a.statuses.push_back(LimitedStatus(&plain, Code::kOverLimit, 0, 0));
    a.statuses.push_back(LimitedStatus(&named, Code::kOk, std::numeric_limits<uint32_t>::max(), 604800));
    answers.push_back(a);
  }
  {
    RlsAnswer a;  // a request's own limit (its unit and count), a long name, a huge reset
    RlsStatus o = LimitedStatus(&own, Code::kOk, 5, std::numeric_limits<int64_t>::max());
    o.own = envoy::Limit{envoy::Unit::kHour, 200};
    a.statuses.push_back(o);
    a.statuses.push_back(LimitedStatus(&long_name, Code::kOverLimit, 127, 128));
    answers.push_back(a);
  }
  {
    RlsAnswer a;  // 64 descriptors, every unit
    for (int i = 0; i < 64; ++i) {
      RlsStatus st = LimitedStatus(&own, i % 3 == 0 ? Code::kOverLimit : Code::kOk, static_cast<uint32_t>(i * 1000), i);
      st.own = envoy::Limit{static_cast<envoy::Unit>(1 + i % 7), static_cast<uint32_t>(1) << (i % 32)};
      a.statuses.push_back(st);
    }
    answers.push_back(a);
  }
  for (size_t i = 0; i < answers.size(); ++i) {
    const std::string want = ProtobufBytes(answers[i]);
    EXPECT_EQ(WireHex(DirectBytes(answers[i])), WireHex(want)) << "answer " << i;
  }
  // The bench's answer, as the wire has it (a check of the test itself).
  EXPECT_EQ(WireHex(DirectBytes(answers[2])), "0801120e08011204080a1001180922020801");
}

}  // namespace
}  // namespace frs::server
