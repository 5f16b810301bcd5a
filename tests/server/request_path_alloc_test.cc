// The whole request path (connection buffers, HTTP parser, XML protocol,
// handler, engine, store) allocates nothing per request once warm: a GET
// /acquire and every member of a POST batch, full or compact answer.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "common/request_path.h"
#include "limit/alloc_count.h"

namespace frs::server {
namespace {

class Path : public ::testing::Test {
 protected:
  static HandlerOptions Options() {
    HandlerOptions ho;
    ho.max_batch = 1024;
    return ho;
  }
  std::string_view RoundTrip(const std::string& req) { return path_.RoundTrip(req); }
  static std::string Post(const std::string& body) { return frs::testing::RequestPath::Post("/frs", body); }

  frs::testing::RequestPath path_{
      "<map><biz id=\"1\" name=\"login\"><rule interval=\"60\" max=\"1000000\"/></biz>"
      "<biz id=\"2\" name=\"ad\"><rule algo=\"calendar\" interval=\"86400\" max=\"3\"/>"
      "<rule algo=\"sliding\" interval=\"3600\" max=\"1\"/></biz></map>",
      Options()};
};

TEST_F(Path, AGetAcquireAllocatesNothingOnceWarm) {
  std::vector<std::string> reqs;
  for (int i = 0; i < 200; ++i)
    reqs.push_back("GET /acquire?biz=login&key=user" + std::to_string(i % 50) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  for (const std::string& r : reqs) ASSERT_EQ(RoundTrip(r), "HTTP/1.1 200 OK");  // warm-up
  limit::testing::AllocCount allocs;
  for (const std::string& r : reqs) RoundTrip(r);
  EXPECT_EQ(allocs.count(), 0) << "allocations in 200 GET /acquire";
}

// The other single-decision forms: GET /query, /auth (204 and 403), a
// denial (429 with Retry-After), a %-encoded key, and one POST <request>.
TEST_F(Path, EverySingleDecisionFormAllocatesNothingOnceWarm) {
  std::vector<std::string> reqs;
  for (int i = 0; i < 20; ++i) {
    const std::string k = std::to_string(i);
    reqs.push_back("GET /query?biz=login&key=q" + k + " HTTP/1.1\r\nHost: x\r\n\r\n");
    reqs.push_back("GET /auth?biz=ad&key=a" + k + " HTTP/1.1\r\nHost: x\r\n\r\n");     // 204, then 403
    reqs.push_back("GET /acquire?biz=ad&key=d" + k + " HTTP/1.1\r\nHost: x\r\n\r\n");  // 200, then 429
    reqs.push_back("GET /acquire?biz=login&key=user%3A" + k + "+x HTTP/1.1\r\nHost: x\r\n\r\n");
    reqs.push_back(Post("<request cmd=\"acquire\" biz=\"login\" key=\"p" + k + "\" n=\"2\"/>"));
  }
  for (const std::string& r : reqs) RoundTrip(r);  // warm-up: every node exists
  const std::string_view want[] = {"HTTP/1.1 200 OK", "HTTP/1.1 403 Forbidden", "HTTP/1.1 429 Too Many Requests",
                                   "HTTP/1.1 200 OK", "HTTP/1.1 200 OK"};
  size_t mismatches = 0;
  limit::testing::AllocCount allocs;
  for (size_t i = 0; i < reqs.size(); ++i) mismatches += RoundTrip(reqs[i]) != want[i % 5];
  EXPECT_EQ(allocs.count(), 0) << "allocations in " << reqs.size() << " requests";
  EXPECT_EQ(mismatches, 0u);
}

TEST_F(Path, BatchMembersAllocateNothingOnceWarm) {
  for (const char* form : {"full", "compact"}) {
    SCOPED_TRACE(form);
    for (int members : {64, 256}) {
      std::string body = std::string("<batch answer=\"") + form + "\">";
      for (int i = 0; i < members; ++i)
        body += "<request cmd=\"query\" biz=\"" + std::string(i % 2 ? "ad" : "login") + "\" key=\"k" +
                std::to_string(i) + "\"/>";
      body += "</batch>";
      const std::string req = Post(body);
      for (int i = 0; i < 3; ++i) ASSERT_EQ(RoundTrip(req), "HTTP/1.1 200 OK");
      limit::testing::AllocCount allocs;
      for (int i = 0; i < 10; ++i) RoundTrip(req);
      EXPECT_EQ(allocs.count(), 0) << members << " members";
    }
  }
}

}  // namespace
}  // namespace frs::server
