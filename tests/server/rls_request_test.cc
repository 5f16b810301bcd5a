// DecodeRateLimitRequest against protobuf as the oracle: every message
// protobuf writes is decoded directly and means what protobuf parses of it;
// damaged messages are either decoded to what protobuf parses of them or
// declined (the caller then parses with protobuf); and the shapes the
// direct decoder declines on purpose.
#include "server/rls_request.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "server/rls_request_compare.h"

namespace frs::server {
namespace {

using Req = ::envoy::service::ratelimit::v3::RateLimitRequest;

std::string RandomBytes(std::mt19937& g, size_t max) {
  std::string s(std::uniform_int_distribution<size_t>(0, max)(g), '\0');
  for (char& c : s) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(g));
  return s;
}

uint64_t RandomVarint(std::mt19937& g) {
  // Zeros, small numbers and the largest: every varint length.
  switch (std::uniform_int_distribution<int>(0, 3)(g)) {
    case 0: return 0;
    case 1: return std::uniform_int_distribution<uint64_t>(1, 300)(g);
    case 2: return std::uniform_int_distribution<uint64_t>(0, UINT32_MAX)(g);
    default: return std::uniform_int_distribution<uint64_t>()(g);
  }
}

Req RandomRequest(std::mt19937& g) {
  Req r;
  r.set_domain(RandomBytes(g, 20));
  r.set_hits_addend(static_cast<uint32_t>(RandomVarint(g)));
  const int n = std::uniform_int_distribution<int>(0, 4)(g);
  for (int i = 0; i < n; ++i) {
    auto* d = r.add_descriptors();
    const int m = std::uniform_int_distribution<int>(0, 4)(g);
    for (int k = 0; k < m; ++k) {
      auto* e = d->add_entries();
      e->set_key(RandomBytes(g, 12));
      e->set_value(RandomBytes(g, 140));  // past 127: two-byte lengths
    }
    if (g() % 2) {
      d->mutable_limit()->set_requests_per_unit(static_cast<uint32_t>(RandomVarint(g)));
      d->mutable_limit()->set_unit(static_cast<int32_t>(RandomVarint(g)));  // negatives too
    }
    if (g() % 2) d->mutable_hits_addend()->set_value(RandomVarint(g));
    d->set_is_negative_hits(g() % 2);
  }
  return r;
}

// What protobuf makes of `bytes`, or nullopt when it refuses them.
std::optional<envoy::RlsRequest> ByProtobuf(const std::string& bytes, Req* holder) {
  holder->Clear();
  if (!holder->ParseFromString(bytes)) return std::nullopt;
  envoy::RlsRequest out;
  RlsRequestFromProto(*holder, &out);
  return out;
}

TEST(RlsRequest, WhatProtobufWritesIsDecodedDirectlyAsProtobufParsesIt) {
  std::mt19937 g(20261206);
  Req holder;
  envoy::RlsRequest direct;  // reused, as the worker reuses its own
  for (int i = 0; i < 3000; ++i) {
    const std::string bytes = RandomRequest(g).SerializeAsString();
    const auto want = ByProtobuf(bytes, &holder);
    ASSERT_TRUE(want.has_value());
    ASSERT_TRUE(DecodeRateLimitRequest(bytes, &direct)) << i;
    ASSERT_TRUE(Same(direct, *want)) << i << "\n direct   " << Show(direct) << "\n protobuf " << Show(*want);
  }
}

TEST(RlsRequest, ADamagedMessageIsDecodedAsProtobufParsesItOrDeclined) {
  std::mt19937 g(7);
  Req holder;
  envoy::RlsRequest direct;
  int decoded = 0, declined = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes = RandomRequest(g).SerializeAsString();
    for (int k = 0; k < 8; ++k) {
      std::string d = bytes;
      const size_t at = d.empty() ? 0 : std::uniform_int_distribution<size_t>(0, d.size() - 1)(g);
      switch (g() % 4) {
        case 0:  // a byte changed
          if (!d.empty()) d[at] = static_cast<char>(g());
          break;
        case 1:  // cut short
          d.resize(at);
          break;
        case 2:  // a byte inserted
          d.insert(d.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(g()));
          break;
        default:  // a stretch repeated (fields twice)
          d += d.substr(at, 1 + g() % 16);
          break;
      }
      if (!DecodeRateLimitRequest(d, &direct)) {
        ++declined;
        continue;
      }
      ++decoded;
      const auto want = ByProtobuf(d, &holder);
      ASSERT_TRUE(want.has_value()) << "decoded what protobuf refuses, case " << i << "." << k;
      ASSERT_TRUE(Same(direct, *want)) << i << "." << k << "\n direct   " << Show(direct) << "\n protobuf "
                                       << Show(*want);
    }
  }
  // Both sides were exercised.
  EXPECT_GT(decoded, 2000);
  EXPECT_GT(declined, 2000);
}

std::string Tag(int field, int type) { return std::string(1, static_cast<char>(field << 3 | type)); }
std::string Len(const std::string& s) { return std::string(1, static_cast<char>(s.size())) + s; }

TEST(RlsRequest, ShapesLeftToProtobuf) {
  envoy::RlsRequest direct;
  Req holder;
  const std::string entry = Tag(1, 2) + Len(Tag(1, 2) + Len("k") + Tag(2, 2) + Len("v"));
  const std::string base = Tag(1, 2) + Len("d") + Tag(2, 2) + Len(entry);
  ASSERT_TRUE(DecodeRateLimitRequest(base, &direct));
  // A field rls.proto does not have: protobuf skips it.
  EXPECT_FALSE(DecodeRateLimitRequest(base + Tag(9, 0) + "\x05", &direct));
  EXPECT_TRUE(ByProtobuf(base + Tag(9, 0) + "\x05", &holder).has_value());
  // The domain with another wire type: an unknown field to protobuf.
  EXPECT_FALSE(DecodeRateLimitRequest(Tag(1, 0) + "\x05" + base, &direct));
  // A descriptor's limit twice: protobuf merges the two.
  const std::string limit = Tag(2, 2) + Len(Tag(1, 0) + "\x05");
  const std::string twice = Tag(1, 2) + Len("d") + Tag(2, 2) + Len(entry + limit + Tag(2, 2) + Len(Tag(2, 0) + "\x02"));
  EXPECT_FALSE(DecodeRateLimitRequest(twice, &direct));
  const auto merged = ByProtobuf(twice, &holder);
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->descriptors[0].limit_rpu, 5u);
  EXPECT_EQ(merged->descriptors[0].limit_unit, 2);
  // A varint of eleven bytes: protobuf refuses the message.
  const std::string long_varint = base + Tag(3, 0) + std::string(10, '\xff') + "\x01";
  EXPECT_FALSE(DecodeRateLimitRequest(long_varint, &direct));
  EXPECT_FALSE(ByProtobuf(long_varint, &holder).has_value());
  // A length past the end.
  EXPECT_FALSE(DecodeRateLimitRequest(Tag(1, 2) + "\x09" + "abc", &direct));
  // A length in six bytes: protobuf refuses the message (it reads at most
  // five); in two, padded: protobuf takes it, and parses it itself.
  const std::string six = Tag(1, 2) + std::string("\x81\x80\x80\x80\x80\x00", 6) + "d";
  EXPECT_FALSE(DecodeRateLimitRequest(six, &direct));
  EXPECT_FALSE(ByProtobuf(six, &holder).has_value());
  const std::string padded = Tag(1, 2) + std::string("\x81\x00", 2) + "d";
  EXPECT_FALSE(DecodeRateLimitRequest(padded, &direct));
  ASSERT_TRUE(ByProtobuf(padded, &holder).has_value());
  EXPECT_EQ(ByProtobuf(padded, &holder)->domain, "d");
  // A tag in two bytes (10 padded): left to protobuf too.
  EXPECT_FALSE(DecodeRateLimitRequest(std::string("\x8a\x00", 2) + Len("d"), &direct));
  // What it takes as protobuf does: a 64-bit hits_addend is cut to its low
  // 32 bits, a bool of 2 is true, a field given twice keeps the last.
  const std::string odd =
      base + Tag(3, 0) + "\x81\x80\x80\x80\x10" + Tag(1, 2) + Len("e") + Tag(2, 2) + Len(entry + Tag(4, 0) + "\x02");
  ASSERT_TRUE(DecodeRateLimitRequest(odd, &direct));
  const auto want = ByProtobuf(odd, &holder);
  ASSERT_TRUE(want.has_value());
  EXPECT_TRUE(Same(direct, *want)) << Show(direct) << " / " << Show(*want);
  EXPECT_EQ(direct.domain, "e");
  EXPECT_EQ(direct.hits, 1u);
  ASSERT_EQ(direct.descriptors.size(), 2u);
  EXPECT_TRUE(direct.descriptors[1].negative);
}

}  // namespace
}  // namespace frs::server
