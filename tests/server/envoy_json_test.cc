// POST /json's reading of a RateLimitRequest (server/envoy_json.h): a field
// given twice is refused as protojson refuses it, not taken from its last
// copy, which a filter reading the first one would not have judged.
#include "server/envoy_json.h"

#include <gtest/gtest.h>

namespace frs::server {
namespace {

TEST(EnvoyJson, AFieldGivenTwiceIsRefusedUnderEitherName) {
  EnvoyJson codec;
  envoy::RlsRequest req;
  const std::pair<const char*, const char*> twice[] = {
      {R"({"domain":"rl","domain":"x","descriptors":[]})", "field 'domain' is given twice"},
      {R"({"domain":"rl","hits_addend":1,"hitsAddend":1})", "field 'hitsAddend' is given twice"},
      {R"({"domain":"rl","descriptors":[{"hitsAddend":0,"hitsAddend":4}]})", "field 'hitsAddend' is given twice"},
      {R"({"domain":"rl","descriptors":[{"entries":[{"key":"a","key":"b"}]}]})", "field 'key' is given twice"},
  };
  for (const auto& [body, why] : twice) {
    Status s = codec.Decode(body, &req);
    EXPECT_FALSE(s.ok()) << body;
    EXPECT_EQ(s.message(), why) << body;
  }
  // An object of more fields than any message of rls.proto has is refused
  // before its names are compared each to each.
  std::string many = R"({"domain":"rl","descriptors":[{"entries":[{)";
  for (int i = 0; i < 20; ++i) many += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":0";
  many += "}]}]}";
  Status s = codec.Decode(many, &req);
  EXPECT_EQ(s.message(), "an object has more than 16 fields (rls.proto's have 4)") << many;
  // The same names in different objects are not twice.
  ASSERT_TRUE(codec
                  .Decode(R"({"domain":"rl","hitsAddend":2,"descriptors":[{"entries":[{"key":"a","value":"1"},)"
                          R"({"key":"b","value":"2"}],"hitsAddend":3},{"entries":[{"key":"a","value":"1"}]}]})",
                          &req)
                  .ok());
  EXPECT_EQ(req.domain, "rl");
  EXPECT_EQ(req.hits, 2u);
  ASSERT_EQ(req.descriptors.size(), 2u);
  EXPECT_EQ(req.descriptors[0].entries.size(), 2u);
  EXPECT_EQ(req.descriptors[0].hits, 3u);
  EXPECT_EQ(req.descriptors[1].entries[0].value, "1");
}

}  // namespace
}  // namespace frs::server
