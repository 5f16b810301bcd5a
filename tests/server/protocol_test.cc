#include "server/request_attrs.h"
#include "server/request_decoder.h"
#include "server/response_encoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/xml_bodies.h"

namespace frs::server {
namespace {

struct Decoded {
  bool ok = false;
  bool batch = false;
  std::vector<WireRequest> reqs;
  ProtocolError err;
};

// The decoder parses in place: keep the text alive in `buf`.
Decoded DecodeText(XmlRequestDecoder& d, std::string& buf, uint32_t max_batch = 64) {
  Decoded out;
  out.ok = d.Decode(buf.data(), buf.size(), max_batch, &out.reqs, &out.batch, &out.err);
  return out;
}

// A fresh decoder refuses `text` with a 400 and a sentence.
void ExpectRefusedWith400(const std::string& text) {
  XmlRequestDecoder d;
  std::string body = text;
  Decoded r = DecodeText(d, body);
  EXPECT_FALSE(r.ok) << text;
  EXPECT_EQ(r.err.status, 400) << text;
  EXPECT_FALSE(r.err.msg.empty()) << text;
}

TEST(Protocol, DecodesOneRequest) {
  XmlRequestDecoder d;
  std::string body = R"(<request cmd="acquire" biz="login" key="user:42" n="3"/>)";
  Decoded r = DecodeText(d, body);
  ASSERT_TRUE(r.ok) << r.err.msg;
  ASSERT_EQ(r.reqs.size(), 1u);
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(r.reqs[0].cmd, Cmd::kAcquire);
  EXPECT_EQ(r.reqs[0].biz, "login");
  EXPECT_EQ(r.reqs[0].key, "user:42");
  EXPECT_EQ(r.reqs[0].n, 3);
}

TEST(Protocol, DecodesEntitiesInKeys) {
  XmlRequestDecoder d;
  std::string body = R"(<request cmd="get" biz="1" key="a&amp;b&lt;c"/>)";
  Decoded r = DecodeText(d, body);
  ASSERT_TRUE(r.ok) << r.err.msg;
  EXPECT_EQ(r.reqs[0].key, "a&b<c");
}

// &#0; (or a raw NUL) cut attribute values short, so that key="alice&#0;x"
// counted on "alice" and a token with &#0;junk after it was accepted. Every
// attribute holding a control character after decoding, every body that is
// not exactly one element, and every undefined entity is a 400 now.
TEST(Protocol, ControlCharactersAndStrayContentAre400) {
  for (const std::string& b : RefusedXmlBodies()) ExpectRefusedWith400(b);
  // What stays allowed: the five entities, references to ordinary
  // characters, a declaration, comments and whitespace around the root.
  XmlRequestDecoder d;
  std::string body = "<?xml version=\"1.0\"?>\n<!-- c --><request cmd=\"get\" biz=\"1\" key=\"&#65;&#x42;&quot;\"/>\n";
  Decoded r = DecodeText(d, body);
  ASSERT_TRUE(r.ok) << r.err.msg;
  EXPECT_EQ(r.reqs[0].key, "AB\"");
}

TEST(Protocol, DecodesBatch) {
  XmlRequestDecoder d;
  std::string body =
      "<batch>\n  <request cmd=\"acquire\" biz=\"a\" key=\"k1\"/>\n  <!-- c -->\n  <request cmd=\"query\" biz=\"b\" "
      "key=\"k2\"/>\n</batch>";
  Decoded r = DecodeText(d, body);
  ASSERT_TRUE(r.ok) << r.err.msg;
  EXPECT_TRUE(r.batch);
  ASSERT_EQ(r.reqs.size(), 2u);
  EXPECT_EQ(r.reqs[1].cmd, Cmd::kQuery);
}

TEST(Protocol, RejectsBadRequestsWith400AndASentence) {
  const char* bad[] = {
      "",                                                        // empty
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\"",            // not well formed
      "<req cmd=\"acquire\"/>",                                  // wrong root
      "<request biz=\"a\" key=\"k\"/>",                          // no cmd
      "<request cmd=\"frobnicate\" biz=\"a\" key=\"k\"/>",       // unknown cmd
      "<request cmd=\"acquire\" key=\"k\"/>",                    // no biz
      "<request cmd=\"acquire\" biz=\"a\"/>",                    // no key
      "<request cmd=\"acquire\" biz=\"a\" key=\"\"/>",           // empty key
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\" n=\"0\"/>",  // n too small
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\" n=\"2147483648\"/>",
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\" n=\"-1\"/>",
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\" n=\"1x\"/>",
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\" color=\"red\"/>",  // unknown attribute
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\" key=\"j\"/>",      // duplicate (malformed XML)
      "<request cmd=\"set\" biz=\"a\" key=\"k\"/>",                    // set without count
      "<request cmd=\"get\" biz=\"a\" key=\"k\" n=\"2\"/>",            // n on get
      "<request cmd=\"acquire\" biz=\"a\" key=\"a&#1;b\"/>",           // control character in key
      "<batch></batch>",
      "<batch><request cmd=\"stats\"/></batch>",
      "<batch><foo/></batch>",
      "<request cmd=\"acquire\" biz=\"a\" key=\"k\">text</request>",
  };
  for (const char* text : bad) ExpectRefusedWith400(text);
}

// A body that is no XML at all (a form, JSON, text) is said to be that, with
// where its kind of request goes, not reported as XML gone wrong at some
// byte; one that starts as XML (after whitespace or a byte order mark) is
// judged as XML.
TEST(Protocol, ABodyThatIsNoXmlIsSaidToBeNone) {
  const std::pair<std::string, std::string> cases[] = {
      {"biz=login&key=1.2.3.4", "the body is not XML (it starts with 'biz=login&key=1.'): POST /frs takes"},
      {"{\"cmd\":\"acquire\"}", "the body is not XML (it starts with '{\"cmd\":\"acquire\"'): "},
      {"\n  hello", "the body is not XML (it starts with 'hello'): "},
      {"\xEF\xBB\xBF\xff'x", "the body is not XML (it starts with '\?\?x'): "},
      {" \xEF\xBB\xBF<request/>", "the body is not XML (it starts with '\?\?\?<request/>'): "},
      {"\xEF\xBB\xBF<request cmd=\"acquire\" biz=\"a\"/>", "cmd=\"acquire\" needs a key attribute"},
      {"  <request cmd=\"acquire\" biz=\"a\" key=\"k\"/>x", "the body holds text outside its root element"},
  };
  for (const auto& [text, said] : cases) {
    XmlRequestDecoder d;
    std::string body = text;
    Decoded r = DecodeText(d, body);
    EXPECT_FALSE(r.ok) << text;
    EXPECT_EQ(r.err.status, 400) << text;
    EXPECT_EQ(r.err.msg.rfind(said, 0), 0u) << text << ": " << r.err.msg;
  }
}

// merge's own attributes before its cmd, or on another cmd: said so, not
// called unknown (protocol.md: "both required, after cmd").
TEST(Protocol, MergeAttributesNameTheirPlace) {
  for (const auto& [text, msg] : std::vector<
           std::pair<std::string,
                     std::string>>{{"<request receipt=\"r7\" cmd=\"merge\" node=\"{}\"/>",
                                    "attribute \"receipt\" comes after cmd=\"merge\" (its own attributes follow it)"},
                                   {"<request cmd=\"query\" biz=\"a\" key=\"k\" node=\"{}\"/>",
                                    "attribute \"node\" is cmd=\"merge\"'s only"}}) {
    XmlRequestDecoder d;
    std::string buf = text;
    Decoded r = DecodeText(d, buf);
    EXPECT_FALSE(r.ok) << text;
    EXPECT_EQ(r.err.status, 400);
    EXPECT_EQ(r.err.msg, msg);
  }
  XmlRequestDecoder d;
  std::string ok = "<request cmd=\"merge\" receipt=\"r7\" node=\"{}\"/>";
  EXPECT_TRUE(DecodeText(d, ok).ok);
}

TEST(Protocol, KeyOf255BytesIsFineAnd256IsNot) {
  XmlRequestDecoder d;
  std::string ok = "<request cmd=\"acquire\" biz=\"a\" key=\"" + std::string(255, 'k') + "\"/>";
  EXPECT_TRUE(DecodeText(d, ok).ok);
  std::string bad = "<request cmd=\"acquire\" biz=\"a\" key=\"" + std::string(256, 'k') + "\"/>";
  EXPECT_FALSE(DecodeText(d, bad).ok);
}

TEST(Protocol, BatchLimit) {
  XmlRequestDecoder d;
  std::string body = "<batch>";
  for (int i = 0; i < 3; ++i) body += "<request cmd=\"acquire\" biz=\"a\" key=\"k\"/>";
  body += "</batch>";
  std::string copy = body;
  EXPECT_TRUE(DecodeText(d, copy, 3).ok);
  Decoded r = DecodeText(d, body, 2);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.err.msg, "batch member 3: a batch holds at most 2 members (<limits batch> in srv.xml)");
}

// A stats member with a biz was told "takes no biz attribute"; removing it
// only then led to the reason: stats is never batched.
TEST(Protocol, AStatsMemberOfABatchIsRefusedAsSuchWhateverItsAttributes) {
  XmlRequestDecoder d;
  for (const char* member : {"<request cmd=\"stats\" biz=\"a\" key=\"k\"/>", "<request cmd=\"stats\"/>"}) {
    std::string body = std::string("<batch><request cmd=\"acquire\" biz=\"a\" key=\"k\"/>") + member + "</batch>";
    Decoded r = DecodeText(d, body);
    EXPECT_FALSE(r.ok) << member;
    EXPECT_EQ(r.err.msg, "batch member 2: cmd=\"stats\" cannot be part of a batch") << member;
  }
}

TEST(Protocol, DecodesQueryStrings) {
  std::string biz, key, id;
  WireRequest r;
  ProtocolError err;
  ASSERT_TRUE(DecodeQuery("biz=login&key=user%3A42+x&n=2", Cmd::kAcquire, &biz, &key, &id, &r, &err)) << err.msg;
  EXPECT_EQ(r.biz, "login");
  EXPECT_EQ(r.key, "user:42 x");
  EXPECT_EQ(r.n, 2);
  EXPECT_FALSE(DecodeQuery("biz=login", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_FALSE(DecodeQuery("biz=login&key=k&x=1", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.msg.rfind("unknown query parameter \"x\"", 0), 0u) << err.msg;
  // Another request's parameter is named as one, not as unknown.
  EXPECT_FALSE(DecodeQuery("biz=login&key=k&reserve=5", Cmd::kQuery, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.msg.rfind("query parameter \"reserve\" is not one this request takes: ", 0), 0u) << err.msg;
  EXPECT_NE(err.msg.find("reserve on /acquire"), std::string::npos) << err.msg;
  EXPECT_FALSE(DecodeQuery("biz=login&key=k%2", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_FALSE(DecodeQuery("biz=login&key=k%0a", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_FALSE(DecodeQuery("biz=login&key=k&n=0", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.status, 400);
}

// Values with nothing to decode are views of the query itself; the others
// are decoded into the buffers. Empty pairs are skipped, repeats refused.
TEST(Protocol, DecodesQueryStringsInPlaceOrIntoBuffers) {
  std::string biz, key, id;
  WireRequest r;
  ProtocolError err;
  const std::string_view q = "&&biz=login&key=u1&n=3&route=r%41&";
  ASSERT_TRUE(DecodeQuery(q, Cmd::kQuery, &biz, &key, &id, &r, &err)) << err.msg;
  EXPECT_EQ(r.cmd, Cmd::kQuery);
  EXPECT_EQ(r.biz, "login");
  EXPECT_EQ(r.key, "u1");
  EXPECT_EQ(r.route_key, "u1");
  EXPECT_EQ(r.route, "r%41");
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.key.data(), q.data() + 16);  // not copied
  ASSERT_TRUE(DecodeQuery("key=a+b%2Bc&biz=lo%67in&n=%32", Cmd::kAcquire, &biz, &key, &id, &r, &err)) << err.msg;
  EXPECT_EQ(r.biz, "login");
  EXPECT_EQ(r.key, "a b+c");
  EXPECT_EQ(r.route_key, "a+b%2Bc");
  EXPECT_EQ(r.n, 2);
  EXPECT_FALSE(DecodeQuery("biz=login&key=k&key=j", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.msg, "query parameter \"key\" appears twice");
  EXPECT_FALSE(DecodeQuery("biz=&key=k", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.msg, "the query needs biz=NAME");
  EXPECT_FALSE(DecodeQuery("biz=login&key", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.msg, "bad key: key is empty");
  EXPECT_FALSE(DecodeQuery("=x&biz=login&key=k", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_FALSE(DecodeQuery("biz=login&key=k&n=%", Cmd::kAcquire, &biz, &key, &id, &r, &err));
  EXPECT_EQ(err.msg, "query parameter \"n\" has a bad %-escape");
  // A key the XML protocol could not name makes no node through a GET form.
  for (const char* q : {"biz=login&key=a%EF%BF%BE", "biz=login&key=%EF%BF%BF"}) {
    EXPECT_FALSE(DecodeQuery(q, Cmd::kAcquire, &biz, &key, &id, &r, &err)) << q;
    EXPECT_EQ(err.msg.rfind("bad key: key holds U+FFFE or U+FFFF at byte ", 0), 0u) << err.msg;
  }
  ASSERT_TRUE(DecodeQuery("biz=login&key=%EF%BF%BD", Cmd::kAcquire, &biz, &key, &id, &r, &err)) << err.msg;  // U+FFFD
  // n in decimal: leading zeros as many as sent, the bound on its value.
  for (const auto& [q, n] :
       std::vector<std::pair<std::string, int64_t>>{{"biz=login&key=k&n=0005", 5},
                                                    {"biz=login&key=k&n=00000000002", 2},
                                                    {"biz=login&key=k&n=02147483647", 2147483647}}) {
    ASSERT_TRUE(DecodeQuery(q, Cmd::kAcquire, &biz, &key, &id, &r, &err)) << q << ": " << err.msg;
    EXPECT_EQ(r.n, n) << q;
  }
  for (const char* q :
       {"biz=login&key=k&n=02147483648", "biz=login&key=k&n=00", "biz=login&key=k&n=0-5", "biz=login&key=k&n=0%2B5"})
    EXPECT_FALSE(DecodeQuery(q, Cmd::kAcquire, &biz, &key, &id, &r, &err)) << q;
}

// n, reserve and count: decimal digits only, 0..2^31-1, every byte judged
// (the digit loop must refuse what std::from_chars also refused).
TEST(Protocol, ParseCountTakesDecimalDigitsAndNothingElse) {
  int64_t v = -1;
  for (const auto& [text, want] : std::vector<std::pair<std::string, int64_t>>{{"0", 0},
                                                                               {"7", 7},
                                                                               {"000", 0},
                                                                               {"0009", 9},
                                                                               {"2147483647", 2147483647},
                                                                               {"0000000002147483647", 2147483647}}) {
    ASSERT_TRUE(ParseCount(text, &v)) << text;
    EXPECT_EQ(v, want) << text;
  }
  v = 42;
  for (const char* text : {"", "+5", "-5", " 5", "5 ", "5x", "x5", "0x10", "1e3", "2147483648", "4294967296",
                           "9999999999", "99999999999", "1/", "1:",
                           "\xff"
                           "1",
                           "1.0"}) {
    EXPECT_FALSE(ParseCount(text, &v)) << text;
    EXPECT_EQ(v, 42) << text << ": nothing written";
  }
}

TEST(Protocol, EncodesTheContractFormatExactly) {
  Decision d;
  d.allowed = true;
  d.count = 3;
  d.limit = 5;
  d.remaining = 2;
  d.reset = 1763790000;
  d.nrules = 1;
  d.rules[0] = RuleResult{Algo::kFixed, 60, 3, 5, 2, 1763790000, 0, 0, true};
  std::string out;
  AppendDecision(Cmd::kAcquire, d, &out);
  EXPECT_EQ(out,
            "<response code=\"0\" allowed=\"1\" count=\"3\" limit=\"5\" remaining=\"2\" reset=\"1763790000\" "
            "retry_after=\"0\">\n"
            "  <rule algo=\"fixed\" interval=\"60\" count=\"3\" limit=\"5\" remaining=\"2\" reset=\"1763790000\" "
            "allowed=\"1\"/>\n"
            "</response>\n");
  out.clear();
  d.shadow = true;
  d.nrules = 0;
  AppendDecision(Cmd::kGet, d, &out);
  EXPECT_NE(out.find("retry_after=\"0\" shadow=\"1\" found=\"0\"/>"), std::string::npos) << out;
}

TEST(Protocol, EncodesErrorsEscaped) {
  std::string out;
  AppendError(404, "unknown biz \"a<b\"", &out);
  EXPECT_EQ(out, "<response code=\"404\" msg=\"unknown biz &quot;a&lt;b&quot;\"/>\n");
}

// Three leniencies of pugixml's path, each a 400 now as docs/protocol.md
// promises for malformed XML: &#X41; (XML's hex reference is &#x only;
// pugixml counted on the literal text), a raw '<' in an attribute value,
// and a declaration of an encoding other than the UTF-8 the body is read as.
TEST(Protocol, WhatXmlForbidsAndPugixmlTakesIs400) {
  const std::pair<const char*, const char*> bad[] = {
      {R"(<request cmd="acquire" biz="login" key="alice&#X41;"/>)", "bad character reference &#X41;"},
      {R"(<request cmd="acquire" biz="login" key="a<b"/>)", "a '<' inside an attribute value at byte 41"},
      {R"(<batch><request cmd="acquire" biz="login" key='x<y'/></batch>)", "a '<' inside an attribute value"},
      {R"(<?xml version="1.0" encoding="UTF-16"?><request cmd="acquire" biz="login" key="a"/>)",
       "the XML declaration says encoding=\"UTF-16\"; frsd reads UTF-8 only"},
      {R"(<?xml version='1.0' encoding = 'ISO-8859-1' ?><request cmd="acquire" biz="login" key="a"/>)",
       "encoding=\"ISO-8859-1\""},
  };
  for (const auto& [text, why] : bad) {
    XmlRequestDecoder d;
    std::string body = text;
    Decoded r = DecodeText(d, body);
    EXPECT_FALSE(r.ok) << text;
    EXPECT_EQ(r.err.status, 400) << text;
    EXPECT_NE(r.err.msg.find(why), std::string::npos) << text << ": " << r.err.msg;
  }
  // Still fine: the same characters where XML allows them.
  const std::pair<const char*, const char*> good[] = {
      {R"(<?xml version="1.0" encoding="utf-8"?><request cmd="get" biz="1" key="a&#x41;&lt;"/>)", "aA<"},
      {R"(<!-- a < b --><request cmd="get" biz="1" key="k&gt;"/>)", "k>"},
      {R"(<?xml version="1.0"?><request cmd="get" biz="1" key='say "hi"'/>)", "say \"hi\""},
      {R"(<!DOCTYPE r [<!ENTITY e "<b/>">]><request cmd="get" biz="1" key="k"/>)", "k"},
      {R"(<request cmd="get" biz="1" key="a>b"/>)", "a>b"},
  };
  for (const auto& [text, key] : good) {
    XmlRequestDecoder d;
    std::string body = text;
    Decoded r = DecodeText(d, body);
    ASSERT_TRUE(r.ok) << text << ": " << r.err.msg;
    EXPECT_EQ(r.reqs[0].key, key) << text;
  }
}

// Any bytes echoed into an answer (here a route) leave it well-formed XML:
// a byte outside a character XML allows becomes '?' (every such byte:
// tests/base/xml_escape_test.cc).
TEST(Protocol, EscapedTextIsWellFormedWhateverItHeld) {
  std::string out;
  AppendMisrouted(std::string_view("r\xff\x80&<"), "127.0.0.1:1", &out);
  EXPECT_EQ(out,
            "<response code=\"421\" msg=\"route &quot;r??&amp;&lt;&quot; belongs to shard 127.0.0.1:1; send it "
            "there (this shard changes nothing)\" owner=\"127.0.0.1:1\"/>\n");
}

}  // namespace
}  // namespace frs::server

namespace frs::server {
namespace {

TEST(Protocol, LeaseCommandsTakeALeaseAndOnlyThey) {
  for (bool fast : {true, false}) {
    XmlRequestDecoder d(fast);
    std::string body = R"(<request cmd="release" biz="llm" key="u42" lease="00000001f3a09c5e7b21d4c8"/>)";
    Decoded r = DecodeText(d, body);
    ASSERT_TRUE(r.ok) << r.err.msg;
    EXPECT_EQ(r.reqs[0].cmd, Cmd::kRelease);
    EXPECT_EQ(r.reqs[0].lease, "00000001f3a09c5e7b21d4c8");
    EXPECT_EQ(r.reqs[0].ToEngine().lease, "00000001f3a09c5e7b21d4c8");
    body =
        R"(<batch><request cmd="renew" biz="llm" key="u42" lease="x"/><request cmd="acquire" biz="llm" key="u42"/></batch>)";
    r = DecodeText(d, body);
    ASSERT_TRUE(r.ok) << r.err.msg;
    EXPECT_EQ(r.reqs[0].cmd, Cmd::kRenew);
  }
  ExpectRefusedWith400(R"(<request cmd="release" biz="llm" key="u42"/>)");
  ExpectRefusedWith400(R"(<request cmd="renew" biz="llm" key="u42" lease="a" n="2"/>)");
  ExpectRefusedWith400(R"(<request cmd="acquire" biz="llm" key="u42" lease="00000001f3a09c5e7b21d4c8"/>)");
  ExpectRefusedWith400(R"(<request cmd="release" biz="llm" key="u42" lease="a" lease="b"/>)");

  std::string biz, key, id;
  WireRequest w;
  ProtocolError err;
  ASSERT_TRUE(DecodeQuery("biz=llm&key=u42&lease=00000001f3a09c5e7b21d4c8", Cmd::kRelease, &biz, &key, &id, &w, &err))
      << err.msg;
  EXPECT_EQ(w.lease, "00000001f3a09c5e7b21d4c8");
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42", Cmd::kRelease, &biz, &key, &id, &w, &err));
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&lease=a&n=2", Cmd::kRenew, &biz, &key, &id, &w, &err));
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&lease=a", Cmd::kAcquire, &biz, &key, &id, &w, &err));
  // Percent-decoded as every value but route.
  ASSERT_TRUE(
      DecodeQuery("biz=llm&key=u42&lease=%30000000%31f3a09c5e7b21d4c8", Cmd::kRelease, &biz, &key, &id, &w, &err))
      << err.msg;
  EXPECT_EQ(w.lease, "00000001f3a09c5e7b21d4c8");
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&lease=%3", Cmd::kRelease, &biz, &key, &id, &w, &err));
  EXPECT_NE(err.msg.find("\"lease\" has a bad %-escape"), std::string::npos) << err.msg;
}

TEST(Protocol, AGrantedLeaseIsAnswered) {
  Decision d;
  d.nrules = 1;
  d.rules[0].algo = Algo::kConcurrency;
  d.lease_serial = 1;
  d.lease_mac = 0xf3a09c5e7b21d4c8ull;
  d.lease_expires = 1795305721;
  std::string out;
  AppendDecision(Cmd::kAcquire, d, &out);
  EXPECT_NE(out.find(" lease=\"00000001f3a09c5e7b21d4c8\" expires=\"1795305721\""), std::string::npos) << out;
  EXPECT_NE(out.find("<rule algo=\"concurrency\""), std::string::npos) << out;
  Decision rel;
  rel.released = true;
  out.clear();
  AppendDecision(Cmd::kRelease, rel, &out);
  EXPECT_NE(out.find(" released=\"1\""), std::string::npos) << out;
}

TEST(Protocol, ReserveAndSettleTakeTheirAttributesAndOnlyThey) {
  for (bool fast : {true, false}) {
    XmlRequestDecoder d(fast);
    std::string body = R"(<request cmd="acquire" biz="llm" key="u42" n="4000" reserve="600"/>)";
    Decoded r = DecodeText(d, body);
    ASSERT_TRUE(r.ok) << r.err.msg;
    EXPECT_EQ(r.reqs[0].ToEngine().reserve, 600);
    EXPECT_EQ(r.reqs[0].ToEngine().n, 4000);
    std::string settle = R"(<request cmd="settle" biz="llm" key="u42" reservation="00000001f3a09c5e7b21d4c8" n="0"/>)";
    r = DecodeText(d, settle);
    ASSERT_TRUE(r.ok) << r.err.msg;
    EXPECT_EQ(r.reqs[0].cmd, Cmd::kSettle);
    EXPECT_EQ(r.reqs[0].ToEngine().reservation, "00000001f3a09c5e7b21d4c8");
    EXPECT_EQ(r.reqs[0].ToEngine().n, 0);
    std::string batch = R"(<batch><request cmd="acquire" biz="a" key="u" n="5" reserve="9"/>)"
                        R"(<request cmd="settle" biz="a" key="u" reservation="x" n="1730"/></batch>)";
    r = DecodeText(d, batch);
    ASSERT_TRUE(r.ok) << r.err.msg;
    EXPECT_EQ(r.reqs[1].n, 1730);
  }
  ExpectRefusedWith400(R"(<request cmd="settle" biz="llm" key="u42" n="5"/>)");
  {
    // A lease's attribute on a settle is named as what it does not take.
    XmlRequestDecoder d;
    std::string body = R"(<request cmd="settle" biz="llm" key="u42" lease="00000001f3a09c5e7b21d4c8" n="5"/>)";
    Decoded r = DecodeText(d, body);
    ASSERT_FALSE(r.ok);
    EXPECT_NE(r.err.msg.find("cmd=\"settle\" takes no lease attribute"), std::string::npos) << r.err.msg;
  }
  ExpectRefusedWith400(R"(<request cmd="settle" biz="llm" key="u42" reservation="a"/>)");
  ExpectRefusedWith400(R"(<request cmd="settle" biz="llm" key="u42" reservation="a" n="9223372036854775808"/>)");
  ExpectRefusedWith400(R"(<request cmd="settle" biz="llm" key="u42" reservation="a" n="-1"/>)");
  ExpectRefusedWith400(R"(<request cmd="settle" biz="llm" key="u42" reservation="a" reservation="b" n="1"/>)");
  ExpectRefusedWith400(R"(<request cmd="query" biz="llm" key="u42" reserve="60"/>)");
  ExpectRefusedWith400(R"(<request cmd="acquire" biz="llm" key="u42" reserve="0"/>)");
  ExpectRefusedWith400(R"(<request cmd="acquire" biz="llm" key="u42" reserve="65535"/>)");
  ExpectRefusedWith400(R"(<request cmd="acquire" biz="llm" key="u42" reservation="00000001f3a09c5e7b21d4c8"/>)");
  ExpectRefusedWith400(R"(<request cmd="acquire" biz="llm" key="u42" n="0" reserve="5"/>)");

  std::string biz, key, id;
  WireRequest w;
  ProtocolError err;
  ASSERT_TRUE(DecodeQuery("biz=llm&key=u42&reservation=00000001f3a09c5e7b21d4c8&n=1730", Cmd::kSettle, &biz, &key, &id,
                          &w, &err))
      << err.msg;
  EXPECT_EQ(w.reservation, "00000001f3a09c5e7b21d4c8");
  EXPECT_EQ(w.n, 1730);
  ASSERT_TRUE(DecodeQuery("biz=llm&key=u42&n=4000&reserve=600", Cmd::kAcquire, &biz, &key, &id, &w, &err)) << err.msg;
  EXPECT_EQ(w.reserve, 600);
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&reservation=a", Cmd::kSettle, &biz, &key, &id, &w, &err));  // no n
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&n=5", Cmd::kSettle, &biz, &key, &id, &w, &err));            // no id
  EXPECT_FALSE(
      DecodeQuery("biz=llm&key=u42&reservation=a&n=9223372036854775808", Cmd::kSettle, &biz, &key, &id, &w, &err));
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&reserve=600", Cmd::kQuery, &biz, &key, &id, &w, &err));
  EXPECT_FALSE(DecodeQuery("biz=llm&key=u42&reserve=0", Cmd::kAcquire, &biz, &key, &id, &w, &err));
  // Percent-decoded as every value but route.
  ASSERT_TRUE(DecodeQuery("biz=llm&key=u42&n=4000&reserve=%36%30", Cmd::kAcquire, &biz, &key, &id, &w, &err))
      << err.msg;
  EXPECT_EQ(w.reserve, 60);
  ASSERT_TRUE(DecodeQuery("biz=llm&key=u42&reservation=%300000001f3a09c5e7b21d4c%38&n=1", Cmd::kSettle, &biz, &key, &id,
                          &w, &err))
      << err.msg;
  EXPECT_EQ(w.reservation, "00000001f3a09c5e7b21d4c8");
}

TEST(Protocol, AReservationAndASettleAreAnswered) {
  Decision d;
  d.nrules = 1;
  d.res_serial = 2;
  d.res_mac = 0xf3a09c5e7b21d4c8ull;
  d.res_expires = 1795305721;
  std::string out;
  AppendDecision(Cmd::kAcquire, d, &out);
  EXPECT_NE(out.find(" reservation=\"00000002f3a09c5e7b21d4c8\" expires=\"1795305721\""), std::string::npos) << out;
  d.lease_serial = 1;  // a lease beside it: expires is the lease's
  d.lease_expires = 1795305611;
  out.clear();
  AppendDecision(Cmd::kAcquire, d, &out);
  EXPECT_NE(out.find(" expires=\"1795305611\""), std::string::npos) << out;
  EXPECT_NE(out.find(" reservation_expires=\"1795305721\""), std::string::npos) << out;
  // In a biz with a concurrency rule, with no lease granted (a shadow
  // acquire past max): the same name.
  d.lease_serial = 0;
  d.nrules = 2;
  d.rules[1].algo = Algo::kConcurrency;
  out.clear();
  AppendDecision(Cmd::kAcquire, d, &out);
  EXPECT_NE(out.find(" reservation_expires=\"1795305721\""), std::string::npos) << out;
  EXPECT_EQ(out.find(" expires="), std::string::npos) << out;
  Decision s;
  s.settled = true;
  s.res_returned = 2270;
  out.clear();
  AppendDecision(Cmd::kSettle, s, &out);
  EXPECT_NE(out.find(" settled=\"1\" returned=\"2270\" overrun=\"0\""), std::string::npos) << out;
  Decision full;
  full.allowed = false;
  full.reservations_full = true;
  out.clear();
  AppendDecision(Cmd::kAcquire, full, &out);
  EXPECT_NE(out.find(" reservations_full=\"1\""), std::string::npos) << out;
}

}  // namespace
}  // namespace frs::server
