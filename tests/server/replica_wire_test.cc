// The body of POST /replicate (server/replica_wire.h): every change comes
// back as it was sent, keys of any bytes included, and a hostile line is
// refused naming its line.
#include "server/replica_wire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace frs::server {
namespace {

TEST(ReplicaWire, ChangesRoundTrip) {
  const std::string odd_key = std::string("a b%c\x01\xff\n{t}", 10);
  std::vector<Change> in(4);
  in[0] = Change{Change::Kind::kAdd, 1, "user:42", 123456789u, true, 3, 1764547200123};
  in[1] = Change{Change::Kind::kSet, 65535, odd_key, 0, false, 0, 1};
  in[2] = Change{Change::Kind::kErase, 7, "k", 4294967295u, true, 0, 5};
  in[3] = Change{Change::Kind::kResetBiz, 9, {}, 0, false, 0, 6};
  std::string body;
  for (const Change& c : in) AppendChangeLine(c, &body);
  std::vector<Change> out;
  std::vector<std::string> keys;
  ASSERT_TRUE(DecodeChangeLines(body, &out, &keys).ok()) << body;
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].kind, in[i].kind) << i;
    EXPECT_EQ(out[i].biz_id, in[i].biz_id) << i;
    EXPECT_EQ(out[i].key, in[i].key) << i;
    EXPECT_EQ(out[i].route_known, in[i].route_known) << i;
    if (in[i].route_known) {
      EXPECT_EQ(out[i].route_pos, in[i].route_pos) << i;
    }
    EXPECT_EQ(out[i].n, in[i].n) << i;
    EXPECT_EQ(out[i].at_ms, in[i].at_ms) << i;
  }
}

TEST(ReplicaWire, RuleEventsRoundTrip) {
  std::vector<Change> in(4);
  for (Change& c : in) {
    c.kind = Change::Kind::kEvent;
    c.biz_id = 3;
    c.key = "user 7";
    c.at_ms = 1764547200123;
  }
  in[0].event = Change::Event::kLeaseGrant;
  in[0].item = 4294967295u;
  in[0].until = 1764547261;
  in[0].nonce = 2882400001u;
  in[1].event = Change::Event::kLeaseRelease;
  in[1].item = 1;
  in[2].event = Change::Event::kLeaseRenew;
  in[2].item = 2;
  in[2].until = 1764547300;
  in[3].event = Change::Event::kLeaseSweep;
  std::string body;
  for (const Change& c : in) AppendChangeLine(c, &body);
  EXPECT_NE(body.find("V 3 - 0 1764547200123 user%207 lease-grant 4294967295 1764547261 2882400001\n"),
            std::string::npos)
      << body;
  std::vector<Change> out;
  std::vector<std::string> keys;
  ASSERT_TRUE(DecodeChangeLines(body, &out, &keys).ok()) << body;
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].kind, Change::Kind::kEvent) << i;
    EXPECT_EQ(out[i].event, in[i].event) << i;
    EXPECT_EQ(out[i].key, in[i].key) << i;
    EXPECT_EQ(out[i].item, in[i].item) << i;
    EXPECT_EQ(out[i].until, in[i].until) << i;
    EXPECT_EQ(out[i].nonce, in[i].nonce) << i;
    EXPECT_EQ(out[i].at_ms, in[i].at_ms) << i;
  }
}

// A reservation's events carry N (the estimate taken, the real amount
// settled) beside the lease's fields.
TEST(ReplicaWire, ReservationEventsRoundTripWithTheirAmounts) {
  std::vector<Change> in(3);
  for (Change& c : in) {
    c.kind = Change::Kind::kEvent;
    c.biz_id = 6;
    c.key = "k";
    c.at_ms = 1764547200123;
  }
  in[0].event = Change::Event::kResTake;
  in[0].item = 7;
  in[0].n = 4000;
  in[0].until = 1764547801;
  in[0].nonce = 99;
  in[1].event = Change::Event::kResSettle;
  in[1].item = 7;
  in[1].n = 0;
  in[2].event = Change::Event::kResSweep;
  std::string body;
  for (const Change& c : in) AppendChangeLine(c, &body);
  EXPECT_NE(body.find("V 6 - 4000 1764547200123 k res-take 7 1764547801 99\n"), std::string::npos) << body;
  EXPECT_NE(body.find("V 6 - 0 1764547200123 k res-settle 7 0 0\n"), std::string::npos) << body;
  std::vector<Change> out;
  std::vector<std::string> keys;
  ASSERT_TRUE(DecodeChangeLines(body, &out, &keys).ok()) << body;
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].event, in[i].event) << i;
    EXPECT_EQ(out[i].item, in[i].item) << i;
    EXPECT_EQ(out[i].n, in[i].n) << i;
    EXPECT_EQ(out[i].until, in[i].until) << i;
    EXPECT_EQ(out[i].nonce, in[i].nonce) << i;
  }
}

TEST(ReplicaWire, HostileLinesAreRefusedNamingTheLine) {
  const struct {
    const char* body;
    const char* says;
  } cases[] = {
      {"", "no change"},
      {"A 1 - 1 5 k", "no newline"},
      {"X 1 - 1 5 k\n", "kind"},
      {"A 0 - 1 5 k\n", "biz"},
      {"A 65536 - 1 5 k\n", "biz"},
      {"A 1 4294967296 1 5 k\n", "route"},
      {"A 1 - -1 5 k\n", "n is"},
      {"A 1 - 1 x k\n", "time"},
      {"A 1 - 1 5 %zz\n", "hex"},
      {"A 1 - 1 5 %4\n", "hex"},
      {"A 1 - 1 5 \n", "an empty field"},
      {"A  1 - 1 0 k\n", "an empty field"},
      {" A 1 - 1 0 k\n", "an empty field"},
      {"A 1 - 1 5 k extra\n", "more than six"},
      {"R 1 - 0 5 notdash\n", "a reset's key is -"},
      {"A 1 - 1 5 k\nA 1 - 1 5\n", "line 2"},
      {"V 1 - 0 5 k lease-grant 1 9\n", "ten fields"},
      {"V 1 - 0 5 k lease-grant 1 9 3 x\n", "ten fields"},
      {"V 1 - 0 5 k lease-steal 1 9 3\n", "unknown event"},
      {"V 1 - 0 5 k - 1 9 3\n", "unknown event"},
      {"V 1 - 0 5 k lease-grant 1 -9 3\n", "whole numbers"},
      {"V 1 - 0 5 k lease-grant 4294967296 9 3\n", "whole numbers"},
  };
  for (const auto& c : cases) {
    std::vector<Change> out;
    std::vector<std::string> keys;
    Status s = DecodeChangeLines(c.body, &out, &keys);
    EXPECT_FALSE(s.ok()) << c.body;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.body << " -> " << s.message();
  }
}

}  // namespace
}  // namespace frs::server
