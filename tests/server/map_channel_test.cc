// The master's channel to its workers: each publication reads back whole,
// its four parts apart, the newest one current.
#include "server/map_channel.h"

#include <gtest/gtest.h>

namespace frs::server {
namespace {

TEST(MapChannel, EachPublicationReadsBackWithItsPartsApart) {
  auto channel = MapChannel::Create();
  ASSERT_TRUE(channel.ok()) << channel.status().ToString();
  auto none = channel->Read();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->generation, 0u);

  ASSERT_TRUE(channel->Publish("<frs/>", "<map/>", "domain: d\n", "1 a:1\n2 b:2\n").ok());
  auto m = channel->Read();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->generation, 1u);
  EXPECT_EQ(m->srv_text, "<frs/>");
  EXPECT_EQ(m->text, "<map/>");
  EXPECT_EQ(m->envoy_text, "domain: d\n");
  EXPECT_EQ(m->previous_list, "1 a:1\n2 b:2\n");

  // Without a previous list (no <cluster> change yet) or an Envoy bundle,
  // and shorter than the last: nothing of the last one shows through.
  ASSERT_TRUE(channel->Publish("<frs></frs>", "<m/>").ok());
  m = channel->Read();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->generation, 2u);
  EXPECT_EQ(m->srv_text, "<frs></frs>");
  EXPECT_EQ(m->text, "<m/>");
  EXPECT_EQ(m->envoy_text, "");
  EXPECT_EQ(m->previous_list, "");

  ASSERT_TRUE(channel->Publish("", "<map/>", "", "1 c:3\n").ok());
  m = channel->Read();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->text, "<map/>");
  EXPECT_EQ(m->envoy_text, "");
  EXPECT_EQ(m->previous_list, "1 c:3\n");
}

}  // namespace
}  // namespace frs::server
